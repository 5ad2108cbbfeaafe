// Attribute Store sync through a whole engine (docs/attribute-store.md), over
// a table kept in memory (the real PostgreSQL and MariaDB tables have their
// own tests, tests/attrstore, and the end-to-end tests run both): synced
// writes reach the table in log order; a failed try is retried until it
// lands, never skipped; a field that does not fit is left out and counted; a
// newer epoch's watermark fences the process; no transaction begins without a
// lease that outlasts it; the local store drops what the table holds.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "attrstore/attribute_table.h"
#include "engine_test_util.h"
#include "log/log_reader.h"
#include "sync_tables.h"

namespace dex::testing {
namespace {

using attrstore::CommitOutcome;
using attrstore::CommitResult;

// A table in memory with the AttributeTable contract: columns "status"
// (text(8)) and "total" (bigint); the watermark fences older epochs.
class MemoryTable final : public attrstore::AttributeTable {
 public:
  MemoryTable()
      : schema_(table_of({string_column("status", 8), int_column("total", INT64_MIN, INT64_MAX)})) {
  }
  const attrstore::TableSchema& schema() const override { return schema_; }
  Status refresh_schema() override { return Status::ok(); }
  Status ping() override { return Status::ok(); }
  StatusOr<CommitResult> claim(uint64_t epoch, std::string_view process, Duration) override {
    std::lock_guard<std::mutex> lock(mu);
    if (watermark.epoch > epoch) return CommitResult{CommitOutcome::kFenced, watermark};
    watermark.epoch = epoch;
    watermark.process = std::string(process);
    return CommitResult{CommitOutcome::kCommitted, watermark};
  }
  StatusOr<CommitResult> commit(uint64_t epoch, std::string_view process, uint64_t after_slot,
                                uint64_t through_slot, const std::vector<attrstore::RowWrite>& rows,
                                Duration budget) override {
    if (hold_commits) {  // the test lets this commit go on
      std::unique_lock<std::mutex> held(hold_mu);
      commit_waiting = true;
      hold_cv.notify_all();
      hold_cv.wait(held, [&] { return !hold_commits; });
    }
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_GT(through_slot, after_slot) << "the watermark only moves forward";
    EXPECT_EQ(budget, milliseconds(2500)) << "a quarter of the 10 s lease";
    ++tries;
    if (fail_next > 0) {
      --fail_next;
      return Status::transient("the database is restarting");
    }
    if (watermark.epoch > epoch) return CommitResult{CommitOutcome::kFenced, watermark};
    if (watermark.slot != after_slot) return CommitResult{CommitOutcome::kMoved, watermark};
    for (const auto& r : rows) {
      if (r.delete_row) {
        table.erase(r.flow_id);
        continue;
      }
      for (const auto& f : r.fields) table[r.flow_id][f.column] = f.value;
    }
    watermark = {epoch, through_slot, std::string(process)};
    history.push_back(through_slot);
    return CommitResult{CommitOutcome::kCommitted, watermark};
  }
  StatusOr<std::optional<attrstore::Watermark>> read_watermark() override {
    std::lock_guard<std::mutex> lock(mu);
    return std::optional<attrstore::Watermark>(watermark);
  }
  std::string describe_target() const override { return "memory.orders"; }
  void set_test_hooks(attrstore::TableTestHooks) override {}

  std::optional<std::string> text(const std::string& flow_id, const std::string& column) {
    std::lock_guard<std::mutex> lock(mu);
    auto row = table.find(flow_id);
    if (row == table.end()) return std::nullopt;
    auto f = row->second.find(column);
    if (f == row->second.end() || !f->second) return std::nullopt;
    return f->second->has_string_value() ? f->second->string_value()
                                         : std::to_string(f->second->int64_value());
  }
  uint64_t slot() {
    std::lock_guard<std::mutex> lock(mu);
    return watermark.slot;
  }

  void release_commits() {
    std::lock_guard<std::mutex> held(hold_mu);
    hold_commits = false;
    hold_cv.notify_all();
  }
  bool wait_for_a_held_commit() {
    std::unique_lock<std::mutex> held(hold_mu);
    return hold_cv.wait_for(held, std::chrono::seconds(10), [&] { return commit_waiting; });
  }

  std::mutex hold_mu;
  std::condition_variable hold_cv;
  bool hold_commits = false;    // guarded by hold_mu
  bool commit_waiting = false;  // guarded by hold_mu

  std::mutex mu;
  attrstore::TableSchema schema_;
  std::map<std::string, std::map<std::string, std::optional<flow::AttributeValue>>> table;
  attrstore::Watermark watermark;
  std::vector<uint64_t> history;  // each commit's watermark
  int fail_next = 0;
  int tries = 0;
};

// The memory store, whose log writes wait while `hold` is set (a PUT that
// never returns: the log cannot answer the records behind it).
class HoldingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  StatusOr<std::string> put(std::string_view key, std::string_view body, const PutCondition& c,
                            const RequestOptions& o = {}) override {
    if (key.find("/log/") != std::string_view::npos) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !hold_; });
    }
    return inner_.put(key, body, c, o);
  }
  void hold(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = on;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;  // guarded by mu_
};

flow::FlowDeclaration synced_declaration() {
  flow::FlowDeclaration d = order_declaration();
  d.set_attribute_store("reporting");
  for (auto [key, type, sync] : {std::tuple{"status", flow::ATTRIBUTE_STRING, true},
                                 {"total", flow::ATTRIBUTE_INT64, true},
                                 {"secret", flow::ATTRIBUTE_STRING, false}}) {
    auto* a = d.add_attributes();
    a->set_key(key);
    a->set_type(type);
    a->set_sync(sync);
  }
  return d;
}

flow::Attribute text(const std::string& key, const std::string& value) {
  flow::Attribute a;
  a.set_key(key);
  a.mutable_value()->set_string_value(value);
  return a;
}
flow::Attribute number(const std::string& key, int64_t value) {
  flow::Attribute a;
  a.set_key(key);
  a.mutable_value()->set_int64_value(value);
  return a;
}

class AttributeSyncTest : public EngineProcessTest {
 protected:
  Engine& open(uint64_t epoch = 1) {
    process_ = std::make_unique<EngineProcess>();
    open_process(*process_, holding_, epoch, dir_.sub("local"), [this](EngineOptions& eo) {
      attrstore::StoreSettings s;
      s.name = "reporting";
      s.table_name = "orders";
      eo.attribute_stores.push_back({s, &table_});
      eo.attribute_store_settings.sync_batch_size = 3;
      eo.attribute_sync_budget = milliseconds(2500);
      eo.lease_remaining = [this] { return lease_left_.load(); };
      eo.on_attribute_sync = [this](const AttributeSyncReport& r) {
        std::lock_guard<std::mutex> lock(reports_mu_);
        last_report_ = r;
      };
    });
    connect_flows(*process_->engine, worker_, "w1", synced_declaration());
    return *process_->engine;
  }
  void set(Engine& e, const std::string& flow_id, std::vector<flow::Attribute> writes) {
    flow::SetAttributesRequest r;
    r.mutable_flow()->set_flow_id(flow_id);
    for (auto& w : writes) *r.add_writes() = std::move(w);
    auto s = e.set_attributes(r);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  }
  AttributeSyncReport report() {
    std::lock_guard<std::mutex> lock(reports_mu_);
    return last_report_;
  }

  // Declared before process_: the engine's sync thread uses them until it stops.
  MemoryObjectStore store_;
  HoldingStore holding_{store_};
  MemoryTable table_;
  std::atomic<Duration> lease_left_{seconds(10)};
  std::mutex reports_mu_;
  AttributeSyncReport last_report_;
  std::shared_ptr<FlowWorker> worker_ = std::make_shared<FlowWorker>();
  std::unique_ptr<EngineProcess> process_;
};

TEST_F(AttributeSyncTest, SyncedWritesReachTheTableInLogOrder) {
  Engine& e = open();
  for (int i = 0; i < 5; ++i) {
    flow::StartFlowRequest start;
    start.set_flow_id("o" + std::to_string(i));
    start.set_flow_type("Order");
    *start.mutable_options()->add_initial_attributes() = text("status", "new");
    *start.mutable_options()->add_initial_attributes() = text("secret", "not synced");
    ASSERT_TRUE(e.start_flow(start).is_ok());
  }
  for (int i = 0; i < 5; ++i) set(e, "o1", {number("total", i)});
  set(e, "o2", {text("status", "paid"), number("total", 42)});
  ASSERT_TRUE(eventually([&] { return table_.text("o1", "total") == "4"; }));
  ASSERT_TRUE(eventually([&] { return table_.text("o2", "status") == "paid"; }));
  EXPECT_EQ(table_.text("o2", "total"), "42");
  EXPECT_EQ(table_.text("o0", "status"), "new");
  EXPECT_EQ(table_.text("o0", "secret"), std::nullopt) << "an Attribute that does not sync";
  // Batches of 3 rows: more than one transaction, each moving the watermark up.
  std::lock_guard<std::mutex> lock(table_.mu);
  EXPECT_GE(table_.history.size(), 3u);
  EXPECT_TRUE(std::is_sorted(table_.history.begin(), table_.history.end()));
  EXPECT_EQ(table_.watermark.epoch, 1u);
  EXPECT_EQ(table_.watermark.process, "p1");
}

TEST_F(AttributeSyncTest, AFailedTryIsRetriedUntilItLandsAndNothingIsSkipped) {
  Engine& e = open();
  table_.fail_next = 3;
  start(e, "o1");
  set(e, "o1", {text("status", "a")});
  set(e, "o1", {text("status", "b")});
  ASSERT_TRUE(eventually([&] { return report().failures >= 1; }));
  EXPECT_EQ(report().state, "retrying");
  EXPECT_EQ(report().last_error.find("the database is restarting") != std::string::npos, true)
      << report().last_error;
  // The backoff runs on the engine's clock: 100 ms, 200 ms, 400 ms.
  ASSERT_TRUE(eventually([&] {
    clock_.advance(milliseconds(20));
    return table_.text("o1", "status") == "b";
  }));
  EXPECT_GE(table_.tries, 4);
  ASSERT_TRUE(eventually([&] { return report().state == "idle"; }));
  EXPECT_EQ(report().lag_slots, 0u);
  EXPECT_TRUE(report().last_error.empty());
}

TEST_F(AttributeSyncTest, AFieldThatDoesNotFitIsLeftOutAndTheOthersLand) {
  Engine& e = open();
  start(e, "o1");
  set(e, "o1", {text("status", "far too long for eight"), number("total", 7)});
  ASSERT_TRUE(eventually([&] { return table_.text("o1", "total") == "7"; }));
  EXPECT_EQ(table_.text("o1", "status"), std::nullopt);
  ASSERT_TRUE(eventually([&] { return report().misfits == 1; }));
}

TEST_F(AttributeSyncTest, ANewerEpochsWatermarkFencesThisProcess) {
  table_.watermark.epoch = 5;
  Engine& e = open(/*epoch=*/3);
  start(e, "o1");
  set(e, "o1", {text("status", "x")});
  ASSERT_TRUE(eventually([&] { return report().state == "fenced"; }));
  EXPECT_EQ(table_.text("o1", "status"), std::nullopt);
  EXPECT_EQ(table_.tries, 0) << "a fenced process never begins a write";
}

TEST_F(AttributeSyncTest, NoTransactionBeginsWithoutALeaseThatOutlastsIt) {
  lease_left_ = milliseconds(2000);  // less than the 2.5 s budget
  Engine& e = open();
  start(e, "o1");
  set(e, "o1", {text("status", "x")});
  for (int i = 0; i < 10; ++i) {
    clock_.advance(milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(table_.tries, 0);
  EXPECT_EQ(table_.text("o1", "status"), std::nullopt);
  lease_left_ = seconds(10);
  clock_.advance(milliseconds(100));
  ASSERT_TRUE(eventually([&] {
    clock_.advance(milliseconds(60));
    return table_.text("o1", "status") == "x";
  }));
}

TEST_F(AttributeSyncTest, AStartOrADeclarationNamingAnUnknownStoreIsRefused) {
  Engine& e = open();
  flow::StartFlowRequest start;
  start.set_flow_id("o1");
  start.set_flow_type("Order");
  start.mutable_options()->set_attribute_store("elsewhere");
  auto r = e.start_flow(start);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("Attribute Store \"elsewhere\""), std::string::npos)
      << r.status().message();
  auto d = synced_declaration();
  d.set_flow_type("Other");
  d.set_attribute_store("nowhere");
  WorkerHello hello;
  hello.set_worker_id("w2");
  hello.set_max_concurrent_tasks(1);
  *hello.add_flows() = d;
  auto refused = e.connect_worker(hello, std::make_shared<FlowWorker>());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(
      refused.status().message().find("Flow type \"Other\" names Attribute Store \"nowhere\""),
      std::string::npos)
      << refused.status().message();
}

TEST_F(AttributeSyncTest, TheLogIsToldWhatTheTableHoldsSoReplicasDropIt) {
  Engine& e = open();
  start(e, "o1");
  set(e, "o1", {text("status", "x")});
  ASSERT_TRUE(eventually([&] { return table_.text("o1", "status") == "x"; }));
  clock_.advance(seconds(2));  // past the trim interval
  set(e, "o1", {text("status", "y")});
  ASSERT_TRUE(eventually([&] { return table_.text("o1", "status") == "y"; }));
  // An AttributeStoreSynced record reaches the history of the log.
  ASSERT_TRUE(eventually([&] {
    clock_.advance(seconds(2));
    e.attribute_sync_reports();
    LogReader reader(store_, kNode, Slot(1));
    bool found = false;
    Status read = reader.read_to_end([&](const LogEntry& entry) {
      for (const auto& r : entry.batch.records())
        found = found || (r.has_flow() && r.flow().has_attribute_store_synced());
      return Status::ok();
    });
    EXPECT_TRUE(read.is_ok()) << read.to_string();
    return found;
  }));
}

TEST_F(AttributeSyncTest, StopEndsTheSyncEvenWhenTheLogNeverAnswersItsWatermarkRecord) {
  table_.hold_commits = true;
  Engine& e = open();
  start(e, "o1");
  set(e, "o1", {text("status", "x")});
  ASSERT_TRUE(table_.wait_for_a_held_commit());
  // The log's writes hang (object storage does not answer; the lease will be
  // lost): the record that follows the commit (AttributeStoreSynced) is never
  // answered by the log.
  holding_.hold(true);
  table_.release_commits();
  ASSERT_TRUE(eventually([&] { return table_.text("o1", "status") == "x"; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the record is proposed
  auto stopped = std::async(std::launch::async, [&] { e.stop(); });
  const bool ended = stopped.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  holding_.hold(false);  // whatever happened, let the writer go
  EXPECT_TRUE(ended) << "stop() waited for the sync, which waited for the log";
}

}  // namespace
}  // namespace dex::testing
