// LabelLimit: the first N distinct values of a type label keep their own
// series, later ones are "other" (docs/metrics.md, "Flows, Steps and RPCs by type").
#include "metrics/label_limit.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "metrics/metrics.h"

namespace dex {
namespace {

// The setting's bounds and default (src/config) are the metrics' own.
static_assert(kMetricsTypeLabelsMaxLimit == LabelLimit::kDistinctMaxLimit);
static_assert(kMetricsTypeLabelsMaxDefault == Metrics::kTypeLabelsMaxDefault);

TEST(LabelLimit, TheFirstNDistinctValuesAreThemselvesAndLaterOnesOther) {
  LabelLimit limit(2);
  EXPECT_EQ(limit.label("Order"), "Order");
  EXPECT_EQ(limit.label("Order"), "Order") << "a repeat takes no second place";
  EXPECT_EQ(limit.label("Signup"), "Signup");
  EXPECT_EQ(limit.label("Quotes"), "other");
  EXPECT_EQ(limit.label("Refund"), "other");
  EXPECT_EQ(limit.admitted(), 2u);
  // An admitted value stays admitted: its series never moves to "other".
  EXPECT_EQ(limit.label("Order"), "Order");
  EXPECT_EQ(limit.label("Signup"), "Signup");
  EXPECT_EQ(limit.label("Quotes"), "other") << "refused once, refused for good";
}

TEST(LabelLimit, ZeroReportsEveryValueAsOther) {
  LabelLimit limit(0);
  EXPECT_EQ(limit.label("Order"), "other");
  EXPECT_EQ(limit.admitted(), 0u);
}

TEST(LabelLimit, NoTypeIsPassedThroughAndTakesNoPlace) {
  LabelLimit limit(1);
  EXPECT_EQ(limit.label(""), "");
  EXPECT_EQ(limit.label("Order"), "Order");
  EXPECT_EQ(limit.label(""), "");
  EXPECT_EQ(limit.admitted(), 1u);
}

TEST(LabelLimit, ATypeNamedOtherTakesAPlaceAndSharesTheOverflowSeries) {
  LabelLimit limit(1);
  EXPECT_EQ(limit.label("other"), "other");
  EXPECT_EQ(limit.admitted(), 1u);
  EXPECT_EQ(limit.label("Order"), "other");
}

TEST(LabelLimit, ConcurrentCallersNeverAdmitMoreThanTheLimit) {
  constexpr size_t kLimit = 10;
  LabelLimit limit(kLimit);
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> labels(4);
  for (size_t t = 0; t < labels.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) labels[t].push_back(limit.label("type-" + std::to_string(i)));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(limit.admitted(), kLimit);
  // Every thread saw the same answer for every value, and so does a later caller.
  for (size_t t = 0; t < labels.size(); ++t) {
    for (int i = 0; i < 100; ++i) {
      const std::string name = "type-" + std::to_string(i);
      EXPECT_EQ(labels[t][i], limit.label(name)) << name;
      EXPECT_TRUE(labels[t][i] == "other" || labels[t][i] == name);
    }
  }
}

TEST(LabelLimitDeathTest, ALimitAboveTheMaximumIsABug) {
  EXPECT_DEATH(LabelLimit(LabelLimit::kDistinctMaxLimit + 1), "validated");
}

}  // namespace
}  // namespace dex
