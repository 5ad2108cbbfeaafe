// The fault-injecting wrapper: seeded replay, what each fault does to the inner
// store, delays and timeouts on an injected clock, outages, and the rates.
#include "objstore/faulty_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "objstore/memory_store.h"

namespace dex::objstore_test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

bool operator==(const FaultyObjectStore::Injected& a, const FaultyObjectStore::Injected& b) {
  return a.delays == b.delays && a.transients == b.transients && a.permanents == b.permanents &&
         a.lost_answers == b.lost_answers && a.timeouts == b.timeouts &&
         a.late_landings == b.late_landings && a.outages == b.outages;
}

std::vector<std::string> keys_of(ObjectStore& store) {
  auto keys = list_all(store, "");
  EXPECT_TRUE(keys.is_ok());
  return keys.is_ok() ? keys.value() : std::vector<std::string>{};
}

FaultPlan busy_plan() {
  FaultPlan plan;
  plan.delay_probability = 0.2;
  plan.delay_max = milliseconds(2);
  plan.transient_probability = 0.15;
  plan.permanent_probability = 0.05;
  plan.lost_answer_probability = 0.1;
  plan.late_landing_probability = 0.5;
  return plan;
}

// A fixed mixed workload; returns one line per call: what the caller saw.
std::vector<std::string> run_workload(FaultyObjectStore& store) {
  std::vector<std::string> trace;
  RequestOptions options;
  options.timeout = milliseconds(1);  // some delays exceed it
  std::string etag;
  for (int i = 0; i < 400; ++i) {
    const std::string key = fmt::format("k/{}", i % 7);
    Status s;
    switch (i % 5) {
      case 0:
        s = store.put(key, fmt::format("v{}", i), PutCondition::create(), options).status();
        break;
      case 1: {
        auto got = store.get(key, options);
        s = got.status();
        if (got.is_ok()) etag = got->etag;
        break;
      }
      case 2:
        s = store.put(key, fmt::format("r{}", i), PutCondition::replace(etag), options).status();
        break;
      case 3:
        s = i % 2 ? store.remove(key, options)
                  : store.put(key, "o", PutCondition::overwrite(), options).status();
        break;
      case 4:
        s = store.list("k/", "", 3, options).status();
        break;
    }
    trace.push_back(s.to_string());
  }
  return trace;
}

TEST(FaultyStore, SameSeedReplaysTheSameFaultsAndOutcomes) {
  MemoryObjectStore inner_a, inner_b, inner_c;
  FaultyObjectStore a(inner_a, SystemClock::instance(), 42, busy_plan());
  FaultyObjectStore b(inner_b, SystemClock::instance(), 42, busy_plan());
  FaultyObjectStore c(inner_c, SystemClock::instance(), 43, busy_plan());
  const auto trace_a = run_workload(a);
  const auto trace_b = run_workload(b);
  const auto trace_c = run_workload(c);
  EXPECT_EQ(trace_a, trace_b);
  EXPECT_TRUE(a.injected() == b.injected());
  EXPECT_EQ(keys_of(inner_a), keys_of(inner_b));
  EXPECT_NE(trace_a, trace_c) << "another seed should give other faults";
  // The workload did meet every kind of fault.
  const auto n = a.injected();
  EXPECT_GT(n.delays, 0u);
  EXPECT_GT(n.transients, 0u);
  EXPECT_GT(n.permanents, 0u);
  EXPECT_GT(n.lost_answers, 0u);
  EXPECT_GT(n.timeouts, 0u);
  EXPECT_GT(n.late_landings, 0u);
}

TEST(FaultyStore, ChangingThePlanDoesNotShiftLaterDraws) {
  // Every call draws the same count of numbers, so a call made under another
  // plan leaves the following calls' fate unchanged.
  MemoryObjectStore inner_a, inner_b;
  FaultPlan plan;
  plan.transient_probability = 0.5;
  FaultyObjectStore a(inner_a, SystemClock::instance(), 9, plan);
  FaultyObjectStore b(inner_b, SystemClock::instance(), 9, FaultPlan{});
  (void)a.get("x");
  (void)b.get("x");  // no faults possible, but the same draws are consumed
  b.set_plan(plan);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a.get("x").status().code(), b.get("x").status().code()) << i;
  }
}

TEST(FaultyStore, TransientAndPermanentFaultsChangeNothing) {
  MemoryObjectStore inner;
  FaultPlan plan;
  plan.transient_probability = 1;
  FaultyObjectStore store(inner, SystemClock::instance(), 1, plan);
  EXPECT_TRUE(store.put("k", "v", PutCondition::create()).status().is_transient());
  EXPECT_TRUE(store.get("k").status().is_transient());
  EXPECT_TRUE(store.list("").status().is_transient());
  plan.transient_probability = 0;
  plan.permanent_probability = 1;
  store.set_plan(plan);
  EXPECT_TRUE(store.put("k", "v", PutCondition::overwrite()).status().is_permanent());
  ASSERT_TRUE(inner.put("present", "v", PutCondition::create()).is_ok());
  EXPECT_TRUE(store.remove("present").is_permanent());
  EXPECT_TRUE(inner.get("k").status().is_not_found());
  EXPECT_TRUE(inner.get("present").is_ok());
  EXPECT_EQ(store.injected().transients, 3u);
  EXPECT_EQ(store.injected().permanents, 2u);
}

TEST(FaultyStore, LostAnswerAppliesTheWriteThenAnswersTransient) {
  MemoryObjectStore inner;
  FaultPlan plan;
  plan.lost_answer_probability = 1;
  FaultyObjectStore store(inner, SystemClock::instance(), 1, plan);
  auto put = store.put("k", "landed", PutCondition::create());
  EXPECT_TRUE(put.status().is_transient());
  EXPECT_THAT(put.status().message(), HasSubstr("response lost"));
  EXPECT_EQ(inner.get("k")->body, "landed");
  // A lost answer only affects writes: reads answer normally.
  auto got = store.get("k");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got->body, "landed");
  EXPECT_TRUE(store.list("").is_ok());
  auto removed = store.remove("k");
  EXPECT_TRUE(removed.is_transient());
  EXPECT_THAT(removed.message(), HasSubstr("response lost"));
  EXPECT_TRUE(inner.get("k").status().is_not_found());
  EXPECT_EQ(store.injected().lost_answers, 2u);
}

// Runs `call` on another thread and advances `clock` in small steps until it
// returns. Returns how far the clock moved.
template <typename Call>
Duration advance_until_done(ManualClock& clock, Call&& call, bool* returned_before_advance) {
  std::atomic<bool> done{false};
  std::thread worker([&] {
    call();
    done = true;
  });
  std::this_thread::sleep_for(milliseconds(30));  // real time; the manual clock stands still
  *returned_before_advance = done.load();
  const TimePoint start = clock.now();
  for (int step = 0; step < 100'000 && !done.load(); ++step) {
    clock.advance(milliseconds(100));
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  worker.join();
  return clock.now() - start;
}

TEST(FaultyStore, ADelayLongerThanTheTimeoutAnswersTransientAtTheTimeout) {
  MemoryObjectStore inner;
  ManualClock clock;
  FaultPlan plan;
  plan.delay_probability = 1;
  plan.delay_max = std::chrono::hours(1);
  plan.late_landing_probability = 0;
  FaultyObjectStore store(inner, clock, 7, plan);
  RequestOptions options;
  options.timeout = seconds(2);

  std::optional<StatusOr<std::string>> result;
  bool early = true;
  Duration waited = advance_until_done(
      clock, [&] { result = store.put("k", "v", PutCondition::create(), options); }, &early);
  EXPECT_FALSE(early) << "the call must wait on the injected clock";
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->status().is_transient()) << result->status().to_string();
  EXPECT_THAT(result->status().message(), HasSubstr("timed out after 2000 ms"));
  EXPECT_GE(waited, seconds(2));
  EXPECT_LT(waited, seconds(10)) << "waited for the delay, not the timeout";
  EXPECT_TRUE(inner.get("k").status().is_not_found()) << "late landing was off";
  EXPECT_EQ(store.injected().timeouts, 1u);

  // With late landing on, the timed-out write lands anyway.
  plan.late_landing_probability = 1;
  store.set_plan(plan);
  advance_until_done(
      clock, [&] { result = store.put("k", "late", PutCondition::create(), options); }, &early);
  EXPECT_TRUE(result->status().is_transient());
  EXPECT_EQ(inner.get("k")->body, "late");
  EXPECT_EQ(store.injected().late_landings, 1u);
}

TEST(FaultyStore, ADelayWithinTheTimeoutWaitsThenAnswers) {
  MemoryObjectStore inner;
  ManualClock clock;
  FaultPlan plan;
  plan.delay_probability = 1;
  plan.delay_max = seconds(5);
  FaultyObjectStore store(inner, clock, 3, plan);
  std::optional<StatusOr<std::string>> result;
  bool early = true;
  Duration waited = advance_until_done(
      clock, [&] { result = store.put("k", "v", PutCondition::create()); }, &early);
  EXPECT_FALSE(early);
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->is_ok()) << result->status().to_string();
  EXPECT_LE(waited, seconds(6));
  EXPECT_EQ(inner.get("k")->body, "v");
  EXPECT_EQ(store.injected().delays, 1u);
  EXPECT_EQ(store.injected().timeouts, 0u);
}

TEST(FaultyStore, OutageFailsEveryCallUntilCleared) {
  MemoryObjectStore inner;
  FaultyObjectStore store(inner, SystemClock::instance(), 1);
  store.set_outage(Status::transient("connection refused"));
  auto put = store.put("k", "v", PutCondition::create());
  EXPECT_TRUE(put.status().is_transient());
  EXPECT_EQ(put.status().message(), "connection refused");
  EXPECT_TRUE(store.get("k").status().is_transient());
  EXPECT_TRUE(store.remove("k").is_transient());
  EXPECT_TRUE(store.list("").status().is_transient());
  EXPECT_THAT(keys_of(inner), IsEmpty());
  store.set_outage(Status::permanent("access denied"));
  EXPECT_TRUE(store.get("k").status().is_permanent());
  EXPECT_EQ(store.injected().outages, 5u);
  store.set_outage(std::nullopt);
  EXPECT_TRUE(store.put("k", "v", PutCondition::create()).is_ok());
  EXPECT_EQ(store.get("k")->body, "v");
  EXPECT_THAT(store.describe(), HasSubstr("memory"));
}

TEST(FaultyStore, FaultRatesFollowThePlan) {
  MemoryObjectStore inner;
  FaultPlan plan;
  plan.transient_probability = 0.2;
  plan.permanent_probability = 0.1;
  plan.lost_answer_probability = 0.05;
  FaultyObjectStore store(inner, SystemClock::instance(), 2024, plan);
  constexpr int kCalls = 20'000;
  int transient = 0, permanent = 0, lost = 0, ok = 0;
  for (int i = 0; i < kCalls; ++i) {
    auto r = store.put("k", fmt::format("{}", i), PutCondition::overwrite());
    if (r.is_ok()) {
      ++ok;
    } else if (r.status().is_permanent()) {
      ++permanent;
    } else if (r.status().message().find("response lost") != std::string::npos) {
      ++lost;
    } else if (r.status().is_transient()) {
      ++transient;
    }
  }
  // 5 standard deviations of a binomial with p <= 0.2 over 20,000 calls is < 1.5%.
  auto near = [](int count, double p) { return std::abs(count / double(kCalls) - p) < 0.015; };
  EXPECT_TRUE(near(transient, 0.2)) << transient;
  EXPECT_TRUE(near(permanent, 0.1)) << permanent;
  EXPECT_TRUE(near(lost, 0.05)) << lost;
  EXPECT_TRUE(near(ok, 0.65)) << ok;
  EXPECT_EQ(store.injected().transients, static_cast<uint64_t>(transient));
  EXPECT_EQ(store.injected().lost_answers, static_cast<uint64_t>(lost));
}

}  // namespace
}  // namespace dex::objstore_test
