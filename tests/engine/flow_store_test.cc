// The flow rules over the local RocksDB store (docs/flow-rules.md): flow
// records in log batches apply with the batch, atomically, with the same
// results as in memory; an EpochStart's recovery ends their running attempts;
// a replay into a fresh store gives the same store.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "engine/rocks_kv.h"
#include "engine/state_machine.h"
#include "engine_test_util.h"
#include "flow/kv_txn.h"
#include "flow/state_check.h"

namespace dex {
namespace {

using namespace dex::testing;

proto::LogRecord flow_record(flow::FlowRecord r) {
  proto::LogRecord out;
  *out.mutable_flow() = std::move(r);
  return out;
}

proto::LogRecord declare() {
  flow::FlowRecord r;
  auto* d = r.mutable_declare_flows()->add_declarations();
  d->set_flow_type("T");
  d->set_start_step_type("A");
  d->add_steps()->set_step_type("A");
  d->add_steps()->set_step_type("B");
  return flow_record(r);
}

proto::LogRecord start(const std::string& flow_id, bool assign) {
  flow::FlowRecord r;
  r.set_proposal_id(7);
  auto* s = r.mutable_start_flow();
  s->set_flow_id(flow_id);
  s->set_run_id("r1");
  s->set_flow_type("T");
  s->set_at_unix_ms(1'000);
  if (assign) {
    auto* a = r.add_assignments();
    a->mutable_task()->set_flow_id(flow_id);
    a->mutable_task()->set_run_id("r1");
    a->mutable_task()->set_step_execution_id("A-1");
    a->mutable_task()->set_method(flow::EXECUTE);
    a->mutable_task()->set_attempt(1);
    a->set_task_id("e1.1");
    a->set_worker_id("w");
  }
  return flow_record(r);
}

proto::LogBatch batch(uint64_t slot, std::vector<proto::LogRecord> records) {
  proto::LogBatch b;
  b.set_slot(slot);
  for (auto& r : records) *b.add_records() = std::move(r);
  return b;
}

std::optional<flow::StepExecution> step(StateMachine& sm, const std::string& flow_id,
                                        const std::string& exec) {
  auto view = sm.flow_view();
  flow::KvFlowTxn txn(*view);
  auto s = txn.step(flow_id, "r1", exec);
  EXPECT_TRUE(view->status().is_ok());
  return s;
}

TEST(FlowStore, FlowRecordsApplyWithTheirBatchAndReplayToTheSameStore) {
  TempDir dir;
  auto sm = StateMachine::open(dir.sub("a")).value();
  std::vector<proto::LogBatch> log = {batch(1, {declare()}),
                                      batch(2, {start("f", true), start("g", false)})};
  for (const auto& b : log) {
    auto out = sm->apply(Slot(b.slot()), b);
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    for (const auto& r : out->flow_results)
      EXPECT_EQ(r.result.kind, flow::ApplyKind::kApplied) << r.result.message;
    if (b.slot() == 2) {
      ASSERT_EQ(out->flow_results.size(), 2u);
      EXPECT_EQ(out->flow_results[0].proposal_id, 7u);
      EXPECT_EQ(out->flow_effects.started.size(), 1u);
      EXPECT_EQ(out->flow_effects.queued.size(), 2u);
    }
  }
  EXPECT_EQ(step(*sm, "f", "A-1")->method().state(), flow::TASK_RUNNING);
  EXPECT_EQ(step(*sm, "g", "A-1")->method().state(), flow::TASK_QUEUED);
  auto view = sm->flow_view();
  EXPECT_TRUE(flow::check_state(*view).is_ok());
  // A slot applied again changes nothing.
  auto again = sm->apply(Slot(2), log[1]);
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->skipped);

  auto rebuilt = StateMachine::open(dir.sub("b")).value();
  for (const auto& b : log) ASSERT_TRUE(rebuilt->apply(Slot(b.slot()), b).is_ok());
  EXPECT_EQ(rebuilt->dump().value(), sm->dump().value());
}

TEST(FlowStore, AnEpochStartEndsRunningAttemptsAndKeepsQueuedOnes) {
  TempDir dir;
  auto sm = StateMachine::open(dir.sub("a")).value();
  ASSERT_TRUE(
      sm->apply(Slot(1), batch(1, {declare(), start("f", true), start("g", false)})).is_ok());
  proto::LogRecord epoch;
  epoch.mutable_epoch_start()->set_holder_process_id("p2");
  epoch.mutable_epoch_start()->set_at_unix_ms(5'000);
  auto out = sm->apply(Slot(2), batch(2, {epoch}));
  ASSERT_TRUE(out.is_ok());
  ASSERT_EQ(out->flow_effects.ended.size(), 1u);
  EXPECT_EQ(out->flow_effects.ended[0].task_id, "e1.1");
  auto f = step(*sm, "f", "A-1");
  EXPECT_EQ(f->method().state(), flow::TASK_BACKOFF);
  EXPECT_EQ(f->method().attempt(), 2u);
  EXPECT_EQ(f->method().last_failure().outcome(), flow::ATTEMPT_NOT_COMPLETED);
  EXPECT_EQ(step(*sm, "g", "A-1")->method().state(), flow::TASK_QUEUED);
  auto view = sm->flow_view();
  EXPECT_TRUE(flow::check_state(*view).is_ok());
}

TEST(FlowStore, ARefusedFlowRecordWritesNothingButTheSlot) {
  TempDir dir;
  auto sm = StateMachine::open(dir.sub("a")).value();
  ASSERT_TRUE(sm->apply(Slot(1), batch(1, {declare()})).is_ok());
  auto before = sm->dump().value();
  flow::FlowRecord bad;
  bad.mutable_start_flow()->set_flow_id("f");
  bad.mutable_start_flow()->set_run_id("r1");
  bad.mutable_start_flow()->set_flow_type("Nope");
  auto out = sm->apply(Slot(2), batch(2, {flow_record(bad)}));
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(out->flow_results.at(0).result.kind, flow::ApplyKind::kRejected);
  auto after = sm->dump().value();
  after.erase("m/last_applied");
  before.erase("m/last_applied");
  EXPECT_EQ(after, before);
}

// RocksKv's scans return exactly the live keys under the prefix, merged with
// the overlay's writes, whatever lies around them: deleted keys after an empty
// prefix (which an unbounded iterator would walk) and a prefix ending in 0xff.
TEST(FlowStore, RocksKvScansStopAtThePrefixBound) {
  TempDir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.sub("kv").string(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  {
    rocksdb::WriteBatch batch;
    for (int i = 0; i < 1000; ++i) batch.Put("~w/" + std::to_string(i), "x");
    batch.Put("~a/1", "a1");
    batch.Put("~a/2", "a2");
    batch.Put(std::string("~\xff\xff") + "k", "ff");
    batch.Put("~b", "after");
    ASSERT_TRUE(db->Write(rocksdb::WriteOptions(), &batch).ok());
    rocksdb::WriteBatch del;
    for (int i = 0; i < 1000; ++i) del.Delete("~w/" + std::to_string(i));
    ASSERT_TRUE(db->Write(rocksdb::WriteOptions(), &del).ok());
  }
  auto kv = RocksKv::overlay(*db);
  EXPECT_TRUE(kv->scan("~t/").empty());  // empty, deleted keys after it
  EXPECT_TRUE(kv->scan("~w/").empty());  // only deleted keys under it
  kv->put("~a/3", "a3");
  kv->del("~a/1");
  EXPECT_EQ(kv->scan("~a/"),
            (std::vector<std::pair<std::string, std::string>>{{"~a/2", "a2"}, {"~a/3", "a3"}}));
  EXPECT_EQ(kv->scan_first("~a/", 1, "").size(), 1u);
  EXPECT_EQ(kv->scan(std::string("~\xff\xff")).size(), 1u);
  EXPECT_EQ(kv->scan("~").size(), 4u);  // ~a/2, ~a/3, ~b, ~\xff\xffk: nothing deleted
  EXPECT_TRUE(kv->status().is_ok());
}

// scan_first with an overlay holding deletes and puts under the prefix gives the
// first live keys in order, reading only as many stored keys as it needs
// (the trim of a long Attribute Store backlog depends on it): checked against
// the whole merged scan for every limit and start.
TEST(FlowStore, RocksKvScanFirstMergesTheOverlaysDeletesAndPutsAtAnyLimit) {
  TempDir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.sub("kv").string(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteBatch batch;
  for (int i = 10; i < 60; ++i) batch.Put("~y/s|" + std::to_string(i), "v");
  ASSERT_TRUE(db->Write(rocksdb::WriteOptions(), &batch).ok());
  auto kv = RocksKv::overlay(*db);
  for (int i = 10; i < 20; ++i) kv->del("~y/s|" + std::to_string(i));  // the first ten go
  kv->del("~y/s|33");
  kv->put("~y/s|25x", "new");
  kv->put("~y/s|99", "new");
  const auto all = kv->scan("~y/s|");
  ASSERT_EQ(all.size(), 50u - 11u + 2u);
  for (size_t limit = 1; limit <= all.size() + 2; ++limit) {
    for (const std::string from : {"", "~y/s|15", "~y/s|33", "~y/s|5"}) {
      std::vector<std::pair<std::string, std::string>> want;
      for (const auto& kvp : all) {
        if (want.size() < limit && kvp.first >= from) want.push_back(kvp);
      }
      EXPECT_EQ(kv->scan_first("~y/s|", limit, from), want) << limit << " from " << from;
    }
  }
}

}  // namespace
}  // namespace dex
