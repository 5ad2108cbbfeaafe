// `dexcli flow time-travel --to`: every point form read and written back, bad
// points named with the forms, and a batch's request IDs the same for the same
// run and point in every process, different otherwise.
#include <gtest/gtest.h>

#include "cli/time_travel_point.h"

namespace dex::cli {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;  // 2027-01-15T08:00:00Z

TEST(TimeTravelPoint, EveryFormReadsAndWritesBack) {
  for (const char* text : {"beginning", "step-type:Charge", "first-step-type:Charge",
                           "step:Charge-2", "time:2027-01-15T07:00:00.000Z"}) {
    auto p = parse_point(text, kNow);
    ASSERT_TRUE(p.is_ok()) << text << ": " << p.status().message();
    EXPECT_EQ(point_text(*p), text);
  }
  auto latest = parse_point("step-type:Charge", kNow);
  EXPECT_EQ(latest->kind(), flow::TIME_TRAVEL_LATEST_OF_STEP_TYPE);
  EXPECT_EQ(latest->step_type(), "Charge");
  EXPECT_EQ(parse_point("time:30m", kNow)->event_time_ms(), kNow - 30 * 60'000);
  EXPECT_EQ(parse_point("time:1799999000000", kNow)->event_time_ms(), 1'799'999'000'000);
  EXPECT_EQ(parse_point("step:Charge-2", kNow)->step_execution_id(), "Charge-2");
}

TEST(TimeTravelPoint, ABadPointIsNamedWithTheForms) {
  for (const char* text : {"", "now", "step-type:", "when:2027", "time:yesterday"}) {
    auto p = parse_point(text, kNow);
    ASSERT_FALSE(p.is_ok()) << text;
    EXPECT_NE(p.status().message().find("--to '" + std::string(text) + "'"), std::string::npos)
        << p.status().message();
    EXPECT_NE(p.status().message().find("step-type:<StepType>"), std::string::npos);
  }
}

TEST(TimeTravelPoint, ABatchsRequestIdDependsOnlyOnTheRunAndThePoint) {
  const auto charge = *parse_point("step-type:Charge", kNow);
  const auto begin = *parse_point("beginning", kNow);
  const std::string id = batch_request_id("r-1", charge);
  EXPECT_EQ(id, batch_request_id("r-1", *parse_point("step-type:Charge", kNow + 5)));
  EXPECT_EQ(id.rfind("tt-r-1-", 0), 0u) << id;
  EXPECT_EQ(id.size(), std::string("tt-r-1-").size() + 16);
  EXPECT_NE(id, batch_request_id("r-2", charge));
  EXPECT_NE(id, batch_request_id("r-1", begin));
  // Fixed across builds and processes: a batch run again must derive the same IDs.
  EXPECT_EQ(batch_request_id("r-1", begin), "tt-r-1-" + std::string("74c029529a8814f8"));
}

}  // namespace
}  // namespace dex::cli
