// MeteredObjectStore: every request counted by operation and outcome, answers
// and describe() forwarded unchanged (docs/metrics.md).
#include "metrics/metered_store.h"

#include <gtest/gtest.h>

#include "log/log_writer.h"
#include "metrics_test_util.h"
#include "objstore/faulty_store.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using testing::request_series;
using testing::series_value;

double requests(const Metrics& m, const std::string& op, const std::string& outcome) {
  auto v = series_value(m.render(), request_series(op, outcome));
  EXPECT_TRUE(v.has_value()) << op << "/" << outcome;
  return v.value_or(-1);
}

TEST(MeteredObjectStore, CountsEveryOperationByOutcomeAndForwardsAnswersUnchanged) {
  MemoryObjectStore memory;
  Metrics m;
  MeteredObjectStore store(memory, m);
  EXPECT_EQ(store.describe(), memory.describe());

  auto created = store.put("a/1", "one", PutCondition::create());
  ASSERT_TRUE(created.is_ok());
  EXPECT_EQ(created.value(), etag_of("one"));
  auto again = store.put("a/1", "two", PutCondition::create());
  EXPECT_TRUE(again.status().is_precondition_failed());
  auto replaced = store.put("a/1", "two", PutCondition::replace(created.value()));
  ASSERT_TRUE(replaced.is_ok());
  EXPECT_TRUE(
      store.put("a/1", "x", PutCondition::replace("\"stale\"")).status().is_precondition_failed());
  EXPECT_TRUE(store.put("a/2", "2", PutCondition::overwrite()).is_ok());
  EXPECT_TRUE(store.put("../bad", "x", PutCondition::overwrite()).status().is_permanent());

  auto got = store.get("a/1");
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->body, "two");
  EXPECT_EQ(got->etag, replaced.value());
  EXPECT_TRUE(store.get("a/missing").status().is_not_found());

  auto listed = store.list("a/", {}, 1);
  ASSERT_TRUE(listed.is_ok());
  EXPECT_EQ(listed->keys, std::vector<std::string>{"a/1"});
  EXPECT_TRUE(listed->truncated);
  auto all = list_all(store, "a/", 100, 1);  // pages of one key: one request per page
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(all->size(), 2u);

  EXPECT_TRUE(store.remove("a/2").is_ok());
  EXPECT_TRUE(store.remove("a/2").is_ok());  // idempotent, as S3
  EXPECT_EQ(memory.get("a/2").status().code(), Code::kNotFound);

  EXPECT_EQ(requests(m, "put", "ok"), 3);
  EXPECT_EQ(requests(m, "put", "precondition_failed"), 2);
  EXPECT_EQ(requests(m, "put", "permanent"), 1);
  EXPECT_EQ(requests(m, "get", "ok"), 1);
  EXPECT_EQ(requests(m, "get", "not_found"), 1);
  EXPECT_GE(requests(m, "list", "ok"), 3);  // 1 + at least 2 pages
  EXPECT_EQ(requests(m, "list", "ok"), static_cast<double>(memory.counts().lists));
  EXPECT_EQ(requests(m, "remove", "ok"), 2);
  // Every request timed once; gets and removes match what the inner store saw.
  const MemoryObjectStore::Counts inner = memory.counts();
  const std::string text = m.render();
  EXPECT_EQ(series_value(text, "dexzd_object_store_request_seconds_count{operation=\"put\"}"), 6);
  EXPECT_EQ(series_value(text, "dexzd_object_store_request_seconds_count{operation=\"get\"}"),
            static_cast<double>(inner.gets - 1));  // the test's own memory.get above
  EXPECT_EQ(series_value(text, "dexzd_object_store_request_seconds_count{operation=\"remove\"}"),
            static_cast<double>(inner.removes));
}

TEST(MeteredObjectStore, InjectedFaultsAreCountedAsTransientAndPermanent) {
  MemoryObjectStore memory;
  ManualClock clock;
  FaultyObjectStore faulty(memory, clock, 7);
  Metrics m;
  MeteredObjectStore store(faulty, m, clock);
  EXPECT_EQ(store.describe(), faulty.describe());

  faulty.set_outage(Status::transient("503 Slow Down"));
  EXPECT_TRUE(store.get("k").status().is_transient());
  EXPECT_TRUE(store.put("k", "v", PutCondition::overwrite()).status().is_transient());
  EXPECT_TRUE(store.list("").status().is_transient());
  faulty.set_outage(Status::permanent("403 AccessDenied"));
  EXPECT_TRUE(store.remove("k").is_permanent());
  EXPECT_TRUE(store.get("k").status().is_permanent());
  faulty.set_outage(std::nullopt);
  FaultPlan plan;
  plan.transient_probability = 1;
  faulty.set_plan(plan);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(store.get("k").status().is_transient());
  faulty.set_plan(FaultPlan{});
  EXPECT_TRUE(store.put("k", "v", PutCondition::create()).is_ok());

  EXPECT_EQ(requests(m, "get", "transient"), 6);
  EXPECT_EQ(requests(m, "put", "transient"), 1);
  EXPECT_EQ(requests(m, "list", "transient"), 1);
  EXPECT_EQ(requests(m, "remove", "permanent"), 1);
  EXPECT_EQ(requests(m, "get", "permanent"), 1);
  EXPECT_EQ(requests(m, "put", "ok"), 1);
  EXPECT_EQ(requests(m, "get", "ok"), 0);
}

TEST(MeteredObjectStore, LatencyIsTimedOnTheGivenClock) {
  MemoryObjectStore memory;
  ManualClock clock;
  FaultPlan plan;
  plan.delay_probability = 1;
  plan.delay_max = milliseconds(400);
  FaultyObjectStore faulty(memory, clock, 11, plan);
  Metrics m;
  MeteredObjectStore store(faulty, m, clock);
  // The faulty store waits its delay on the ManualClock: move it along.
  std::atomic<bool> done{false};
  std::thread driver([&] {
    while (!done) {
      clock.advance(milliseconds(5));
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  for (int i = 0; i < 5; ++i) (void)store.get("k");
  done = true;
  driver.join();
  const std::string text = m.render();
  auto count = series_value(text, "dexzd_object_store_request_seconds_count{operation=\"get\"}");
  auto sum = series_value(text, "dexzd_object_store_request_seconds_sum{operation=\"get\"}");
  ASSERT_TRUE(count && sum);
  EXPECT_EQ(*count, 5);
  EXPECT_GT(*sum, 0);  // the delays were timed
  EXPECT_EQ(faulty.injected().delays, 5u);
}

// The wiring the server does: the log writer over a metered store, its batch
// hook feeding Metrics::log_append.
TEST(MeteredObjectStore, LogWriterOverAMeteredStoreFeedsLogAndRequestMetrics) {
  MemoryObjectStore memory;
  Metrics m;
  MeteredObjectStore store(memory, m);
  LogWriterOptions options;
  options.node_id = NodeId("n1");
  options.process_id = ProcessId("p1");
  options.epoch = Epoch(1);
  options.jitter_seed = 1;
  options.on_batch_written = [&m](Duration latency, size_t records) {
    m.log_append(latency, records);
  };
  LogWriter writer(
      store, SystemClock::instance(), options, [] { return true; }, [](const Status&) {});
  ASSERT_TRUE(writer.open().is_ok());
  std::vector<std::future<StatusOr<Slot>>> appended;
  for (int i = 0; i < 20; ++i) {
    proto::LogRecord r;
    r.set_opaque(std::to_string(i));
    appended.push_back(writer.append(std::move(r)));
  }
  for (auto& f : appended) ASSERT_TRUE(f.get().is_ok());
  ASSERT_TRUE(writer.close().is_ok());
  const std::string text = m.render();
  EXPECT_EQ(series_value(text, "dexzd_log_records_total"), 20);
  EXPECT_EQ(series_value(text, "dexzd_log_batches_total"),
            static_cast<double>(writer.stats().batches));
  EXPECT_EQ(series_value(text, "dexzd_log_append_seconds_count"),
            static_cast<double>(writer.stats().batches));
  // Every batch and the EpochStart: one create each.
  EXPECT_EQ(series_value(text, request_series("put", "ok")),
            static_cast<double>(writer.stats().batches + 1));
}

}  // namespace
}  // namespace dex
