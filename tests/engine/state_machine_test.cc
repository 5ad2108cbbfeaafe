// The deterministic state machine over the local store (docs/engine.md, "The
// state machine", "Recovery"): replay is idempotent and a rebuild yields the
// same store; a record of a kind it does not know is Corruption; an EpochStart
// is the recovery. The flow rules themselves are tested in tests/flow.
#include "engine/state_machine.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/rocks_kv.h"
#include "engine_test_util.h"
#include "flow/kv_txn.h"
#include "flow/state_check.h"

namespace dex {
namespace {

using namespace dex::testing;

// T: A (the start) -> B. A's Execute is tried at most 3 times, 1 s apart.
flow::FlowDeclaration type_t() {
  flow::FlowDeclaration d;
  d.set_flow_type("T");
  d.set_start_step_type("Start");
  d.add_steps()->set_step_type("Start");
  d.add_steps()->set_step_type("B");
  auto& retry = *execute_options(d, "Start").mutable_retry();
  retry.set_maximum_attempts(3);
  retry.set_initial_interval_ms(1'000);
  return d;
}

// Applies batches to a store and remembers them, so that a test can replay the
// same log into the same or a fresh store.
class Harness {
 public:
  explicit Harness(const std::filesystem::path& path) {
    auto sm = StateMachine::open(path);
    if (!sm.is_ok()) throw std::runtime_error(sm.status().to_string());
    sm_ = std::move(sm).value();
  }
  ApplyOutcome apply(std::vector<proto::LogRecord> records) {
    proto::LogBatch batch;
    batch.set_slot(next_slot_);
    for (auto& r : records) *batch.add_records() = std::move(r);
    log_.push_back(batch);
    auto out = sm_->apply(Slot(next_slot_++), batch);
    if (!out.is_ok()) throw std::runtime_error(out.status().to_string());
    return std::move(out).value();
  }
  flow::ApplyResult one(flow::FlowRecord record) {
    auto out = apply({flow_record(std::move(record))});
    EXPECT_EQ(out.flow_results.size(), 1u);
    return out.flow_results.at(0).result;
  }
  flow::StepExecution step(const std::string& flow_id, const std::string& exec) {
    auto view = sm_->flow_view();
    flow::KvFlowTxn txn(*view);
    auto s = txn.step(flow_id, "r1", exec);
    EXPECT_TRUE(view->status().is_ok());
    EXPECT_TRUE(s.has_value()) << flow_id << "/" << exec;
    return s.value_or(flow::StepExecution());
  }
  flow::Run run(const std::string& flow_id) {
    auto view = sm_->flow_view();
    flow::KvFlowTxn txn(*view);
    auto r = txn.run(flow_id, "r1");
    EXPECT_TRUE(r.has_value()) << flow_id;
    return r.value_or(flow::Run());
  }
  // The flow rules' invariants hold over the store.
  void check() {
    auto view = sm_->flow_view();
    auto s = flow::check_state(*view);
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  std::map<std::string, std::string> dump() { return sm_->dump().value(); }
  StateMachine& sm() { return *sm_; }
  const std::vector<proto::LogBatch>& log() const { return log_; }

 private:
  std::unique_ptr<StateMachine> sm_;
  std::vector<proto::LogBatch> log_;
  uint64_t next_slot_ = 1;  // slot 0 is the first EpochStart, not applied here
};

// The dump without the store's own keys (the last applied slot, the time
// floor): what a refused record must not change.
std::map<std::string, std::string> state_of(Harness& h) {
  auto d = h.dump();
  std::erase_if(d, [](const auto& kv) { return kv.first.starts_with("m/"); });
  return d;
}

// A run of T from start to completion: Start-1 fails once, then decides B; B completes.
void run_to_completion(Harness& h) {
  ASSERT_EQ(h.apply({declare(type_t(), 10)}).flow_results.at(0).result.kind,
            flow::ApplyKind::kApplied);
  ASSERT_EQ(h.one(start_record("f", "T", 1'000, "e1.1")).kind, flow::ApplyKind::kApplied);
  flow::FlowRecord failed = decided(task_ref("f", "Start-1"), "e1.1", {}, 1'100);
  failed.mutable_method_result()->clear_decision();
  failed.mutable_method_result()->set_outcome(flow::ATTEMPT_FAILED);
  failed.mutable_method_result()->set_error("card declined");
  auto out = h.apply({flow_record(failed)});
  ASSERT_EQ(out.flow_effects.timers_set, std::vector<int64_t>{2'100});  // 1 s backoff
  flow::FlowRecord fired;
  auto* key = fired.mutable_timer_fired()->mutable_key();
  key->set_flow_id("f");
  key->set_run_id("r1");
  key->set_kind(flow::RETRY);
  key->set_step_execution_id("Start-1");
  key->set_method(flow::EXECUTE);
  fired.mutable_timer_fired()->set_fire_at_ms(2'100);
  fired.mutable_timer_fired()->set_at_unix_ms(2'100);
  fired.set_at_unix_ms(2'100);
  assign(fired, task_ref("f", "Start-1", 2), "e1.2");
  ASSERT_EQ(h.one(fired).kind, flow::ApplyKind::kApplied);
  flow::FlowRecord to_b = decided(task_ref("f", "Start-1", 2), "e1.2", go_to("B"), 2'200);
  to_b.set_at_unix_ms(2'200);
  assign(to_b, task_ref("f", "B-1"), "e1.3");
  ASSERT_EQ(h.one(to_b).kind, flow::ApplyKind::kApplied);
  out = h.apply({flow_record(decided(task_ref("f", "B-1"), "e1.3", complete("done"), 2'300))});
  ASSERT_EQ(out.flow_effects.closed.size(), 1u);
  EXPECT_EQ(out.flow_effects.closed[0].status, flow::FLOW_COMPLETED);
  h.check();
}

TEST(StateMachine, ReplayIsIdempotentAndARebuildYieldsTheSameState) {
  TempDir dir;
  Harness h(dir.sub("db"));
  run_to_completion(h);
  EXPECT_EQ(h.run("f").status(), flow::FLOW_COMPLETED);
  auto state = h.dump();
  // The same batches again: every slot is at or below the last applied one.
  uint64_t slot = 1;
  for (const auto& batch : h.log()) {
    auto out = h.sm().apply(Slot(slot++), batch);
    ASSERT_TRUE(out.is_ok());
    EXPECT_TRUE(out->skipped);
    EXPECT_TRUE(out->flow_results.empty());
    EXPECT_TRUE(out->flow_effects.ended.empty());
  }
  EXPECT_EQ(h.dump(), state);
  // From scratch, in a fresh store.
  auto fresh = StateMachine::open(dir.sub("fresh"));
  ASSERT_TRUE(fresh.is_ok());
  slot = 1;
  for (const auto& batch : h.log()) ASSERT_TRUE(fresh.value()->apply(Slot(slot++), batch).is_ok());
  EXPECT_EQ(fresh.value()->dump().value(), state);
  EXPECT_EQ(fresh.value()->last_applied().value(), std::optional<Slot>(Slot(slot - 1)));
}

TEST(StateMachine, ARecordOfAnUnknownKindIsCorruptionAndChangesNothing) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.apply({declare(type_t(), 10)});
  const auto before = h.dump();
  const auto before_state = state_of(h);
  // Records of kinds this build does not know (a log written by another
  // version): field 3 (the DAG model's engine records, removed) and field 9
  // (no kind yet). Parsed, they have no kind.
  for (const std::string& bytes :
       {std::string("\x1a\x02\x0a\x00", 4), std::string("\x4a\x02\x08\x01", 4)}) {
    proto::LogRecord unknown;
    ASSERT_TRUE(unknown.ParseFromString(bytes));
    ASSERT_EQ(unknown.kind_case(), proto::LogRecord::KIND_NOT_SET);
    proto::LogBatch batch;
    batch.set_slot(2);
    *batch.add_records() = flow_record(start_record("f", "T", 1'000));
    *batch.add_records() = unknown;
    auto out = h.sm().apply(Slot(2), batch);
    ASSERT_FALSE(out.is_ok());
    EXPECT_EQ(out.status().code(), Code::kCorruption);
    EXPECT_NE(out.status().message().find("log slot 2 record 1"), std::string::npos)
        << out.status().message();
    // Nothing of the batch was written, not even its valid start nor the slot.
    EXPECT_EQ(h.dump(), before);
    EXPECT_EQ(h.sm().last_applied().value(), std::optional<Slot>(Slot(1)));
  }
  // An opaque record (a layer above the log) is skipped: only the slot moves.
  proto::LogBatch opaque;
  opaque.set_slot(2);
  opaque.add_records()->set_opaque("not the engine's");
  auto skipped = h.sm().apply(Slot(2), opaque);
  ASSERT_TRUE(skipped.is_ok()) << skipped.status().to_string();
  EXPECT_TRUE(skipped->flow_results.empty());
  EXPECT_EQ(state_of(h), before_state);
  EXPECT_EQ(h.sm().last_applied().value(), std::optional<Slot>(Slot(2)));
}

TEST(StateMachine, StaleResultsAreRefusedAndChangeNothing) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.apply({declare(type_t(), 10)});
  h.one(start_record("f", "T", 1'000, "e1.1"));
  flow::FlowRecord to_b = decided(task_ref("f", "Start-1"), "e1.1", go_to("B"), 1'100);
  to_b.set_at_unix_ms(1'100);
  assign(to_b, task_ref("f", "B-1"), "e1.2");
  ASSERT_EQ(h.one(to_b).kind, flow::ApplyKind::kApplied);
  const auto before = state_of(h);
  // The same result twice (a Worker re-sending after a reconnect).
  auto dup = h.one(decided(task_ref("f", "Start-1"), "e1.1", go_to("B"), 1'200));
  EXPECT_EQ(dup.kind, flow::ApplyKind::kStale);
  EXPECT_NE(dup.message.find("e1.1"), std::string::npos) << dup.message;
  // A task id that is not the running attempt's.
  EXPECT_EQ(h.one(decided(task_ref("f", "B-1"), "old", complete("x"), 1'300)).kind,
            flow::ApplyKind::kStale);
  // The right task id with the wrong method.
  EXPECT_EQ(
      h.one(decided(task_ref("f", "B-1", 1, flow::WAIT_FOR), "e1.2", complete("x"), 1'300)).kind,
      flow::ApplyKind::kStale);
  // A second hand-out of an attempt that is already running is ignored.
  flow::FlowRecord again;
  again.set_at_unix_ms(1'400);
  assign(again, task_ref("f", "B-1"), "e1.9");
  h.one(again);
  EXPECT_EQ(state_of(h), before);
  EXPECT_EQ(h.step("f", "B-1").method().task_id(), "e1.2");
  h.check();
}

TEST(StateMachine, RecoveryEndsRunningAttemptsNotCompletedConsumingARetry) {
  TempDir dir;
  Harness h(dir.sub("db"));
  flow::FlowDeclaration once = type_t();
  once.set_flow_type("Once");
  execute_options(once, "Start").mutable_retry()->set_maximum_attempts(1);
  h.apply({declare(type_t(), 10), declare(once, 10)});
  h.one(start_record("f", "T", 0, "e1.1"));
  h.one(start_record("g", "Once", 0, "e1.2"));
  h.one(start_record("q", "T", 0));  // queued: no Worker had it
  auto out = h.apply({epoch_start("p2", 7'000)});
  EXPECT_TRUE(out.flow_results.empty());
  ASSERT_EQ(out.flow_effects.ended.size(), 2u);
  for (const auto& ended : out.flow_effects.ended)
    EXPECT_EQ(ended.outcome, flow::ATTEMPT_NOT_COMPLETED) << ended.task_id;
  flow::StepExecution a = h.step("f", "Start-1");
  EXPECT_EQ(a.method().state(), flow::TASK_BACKOFF);
  EXPECT_EQ(a.method().attempt(), 2u) << "the interrupted attempt consumed a retry";
  EXPECT_EQ(a.method().retry_at_ms(), 8'000);  // 7000 + the initial interval
  EXPECT_EQ(a.method().last_failure().attempt(), 1u);
  EXPECT_EQ(a.method().last_failure().outcome(), flow::ATTEMPT_NOT_COMPLETED);
  EXPECT_EQ(a.method().last_failure().at_ms(), 7'000);
  EXPECT_NE(a.method().last_failure().error().find("took over"), std::string::npos)
      << a.method().last_failure().error();
  // The retry it consumed was the last one: that run fails.
  EXPECT_EQ(h.run("g").status(), flow::FLOW_FAILED);
  // A queued attempt was never handed out: it stays queued, nothing consumed.
  EXPECT_EQ(h.step("q", "Start-1").method().state(), flow::TASK_QUEUED);
  EXPECT_EQ(h.step("q", "Start-1").method().attempt(), 1u);
  h.check();
  // The old Worker's result arrives later: stale.
  EXPECT_EQ(h.one(decided(task_ref("f", "Start-1"), "e1.1", complete("late"), 7'100)).kind,
            flow::ApplyKind::kStale);
}

TEST(StateMachine, TimesNeverGoBackInLogOrderAlsoAfterATakeoverToAProcessWhoseClockIsBehind) {
  TempDir dir;
  std::map<std::string, std::string> state;
  {
    Harness h(dir.sub("db"));
    EXPECT_EQ(h.sm().time_floor_ms().value(), 0) << "nothing applied yet";
    h.apply({declare(type_t(), 10)});
    h.one(start_record("f", "T", 5'000, "e1.1"));
    EXPECT_EQ(h.sm().time_floor_ms().value(), 5'000);
    // The next holder's clock is 2 s behind the previous one's: its recovery
    // ends the attempt at the last record's time, not at its own.
    auto out = h.apply({epoch_start("p2", 3'000)});
    ASSERT_EQ(out.flow_effects.ended.size(), 1u);
    flow::StepExecution a = h.step("f", "Start-1");
    EXPECT_EQ(a.method().last_failure().outcome(), flow::ATTEMPT_NOT_COMPLETED);
    EXPECT_EQ(a.method().last_failure().at_ms(), 5'000);
    EXPECT_EQ(a.method().retry_at_ms(), 6'000) << "the backoff runs from the floor";
    // A record that process stamps with its own clock is applied at the floor.
    flow::FlowRecord stop;
    stop.mutable_stop_flow()->set_flow_id("f");
    stop.mutable_stop_flow()->set_mode(flow::STOP_TERMINATE);
    stop.mutable_stop_flow()->set_at_unix_ms(3'100);
    ASSERT_EQ(h.one(stop).kind, flow::ApplyKind::kApplied);
    EXPECT_EQ(h.run("f").close_ms(), 5'000);
    // A later time raises the floor again.
    h.one(start_record("g", "T", 9'000));
    EXPECT_EQ(h.sm().time_floor_ms().value(), 9'000);
    h.check();
    state = h.dump();
    // The same log into a fresh store gives the same state, floor included.
    auto fresh = StateMachine::open(dir.sub("fresh"));
    ASSERT_TRUE(fresh.is_ok());
    uint64_t slot = 1;
    for (const auto& batch : h.log())
      ASSERT_TRUE(fresh.value()->apply(Slot(slot++), batch).is_ok());
    EXPECT_EQ(fresh.value()->dump().value(), state);
  }
  // The floor outlives the process.
  auto reopened = StateMachine::open(dir.sub("db"));
  ASSERT_TRUE(reopened.is_ok());
  EXPECT_EQ(reopened.value()->time_floor_ms().value(), 9'000);
}

TEST(StateMachine, AsyncStartThatNeverBecameDurableRunsAgainWithTheSameNumber) {
  TempDir dir;
  Harness h(dir.sub("db"));
  flow::FlowDeclaration d = type_t();
  execute_options(d, "Start").set_durability(flow::ASYNC);
  execute_options(d, "Start").mutable_retry()->set_maximum_attempts(1);
  h.apply({declare(d, 10)});
  // The old holder sent attempt 1 (task "lost") to a Worker while appending
  // its assignment, and crashed before that became durable: the log has the
  // start only.
  h.one(start_record("f", "T", 0));
  auto out = h.apply({epoch_start("p2", 5'000)});
  EXPECT_TRUE(out.flow_effects.ended.empty());
  EXPECT_EQ(h.step("f", "Start-1").method().state(), flow::TASK_QUEUED);
  EXPECT_EQ(h.step("f", "Start-1").method().attempt(), 1u);
  // It runs again with the same number, consuming nothing (1 attempt still allows it).
  flow::FlowRecord again;
  again.set_at_unix_ms(5'100);
  assign(again, task_ref("f", "Start-1"), "e2.1");
  out = h.apply({flow_record(again)});
  ASSERT_EQ(out.flow_effects.started.size(), 1u);
  EXPECT_EQ(out.flow_effects.started[0].task.attempt(), 1u);
  // The old Worker's result names a task the log never started: stale.
  EXPECT_EQ(h.one(decided(task_ref("f", "Start-1"), "lost", complete("1"), 5'200)).kind,
            flow::ApplyKind::kStale);
  EXPECT_EQ(h.one(decided(task_ref("f", "Start-1"), "e2.1", complete("2"), 5'300)).kind,
            flow::ApplyKind::kApplied);
  flow::Run run = h.run("f");
  EXPECT_EQ(run.status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(run.outputs_size(), 1);
  EXPECT_EQ(run.outputs(0).output().data(), "2");
  h.check();
}

}  // namespace
}  // namespace dex
