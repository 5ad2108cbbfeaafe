// The deterministic state machine (docs/engine.md, "Apply rules", "Retries",
// "Timers", "Recovery"): one test per rule, each applying hand-written batches.
#include "engine/state_machine.h"

#include <gtest/gtest.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <limits>

#include <vector>

#include "engine_test_util.h"

namespace dex {
namespace {

using namespace dex::testing;

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
  RecordResult one(proto::LogRecord record) {
    auto out = apply({std::move(record)});
    EXPECT_EQ(out.results.size(), 1u);
    return out.results.at(0);
  }
  Flow flow(const std::string& id) {
    auto f = sm_->flow(id);
    EXPECT_TRUE(f.is_ok() && f->has_value()) << id;
    return f->value().flow();
  }
  const Step& step(const Flow& f, const std::string& name) { return step_of(f, name); }
  std::map<std::string, std::string> dump() { return sm_->dump().value(); }
  StateMachine& sm() { return *sm_; }
  const std::vector<proto::LogBatch>& log() const { return log_; }

 private:
  std::unique_ptr<StateMachine> sm_;
  std::vector<proto::LogBatch> log_;
  uint64_t next_slot_ = 1;  // slot 0 is the first EpochStart, not applied here
};

TEST(StateMachine, StartFlowIsIdempotentOnTheFlowId) {
  TempDir dir;
  Harness h(dir.sub("db"));
  EXPECT_EQ(h.one(register_type(must_parse(kThreeSteps))).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.one(register_type(must_parse(kThreeSteps))).kind, ApplyKind::kUnchanged);
  auto out = h.apply({start_flow("f1", "three", R"({"x":1})", 1000)});
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].kind, ApplyKind::kApplied);
  ASSERT_EQ(out.effects.ready.size(), 1u);
  EXPECT_EQ(out.effects.ready[0].step, "a");
  Flow f = h.flow("f1");
  EXPECT_EQ(f.status(), FLOW_STATUS_RUNNING);
  EXPECT_EQ(f.created_at_ms(), 1000);
  EXPECT_EQ(h.step(f, "a").status(), STEP_STATUS_READY);
  EXPECT_EQ(h.step(f, "b").status(), STEP_STATUS_PENDING);
  auto before = h.dump();
  auto again = h.one(start_flow("f1", "three", R"({"other":2})", 2000));
  EXPECT_EQ(again.kind, ApplyKind::kUnchanged);
  EXPECT_NE(again.message.find("already existed"), std::string::npos);
  EXPECT_EQ(h.flow("f1").input(), R"({"x":1})");
  EXPECT_EQ(h.one(start_flow("f2", "nope", "{}", 1)).kind, ApplyKind::kRejected);
  auto after = h.dump();
  after.erase("m/last_applied");
  before.erase("m/last_applied");
  EXPECT_EQ(after, before);
}

TEST(StateMachine, FlowKeepsItsCopyOfTheType) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse("name: t\nsteps: [{name: a, taskQueue: q}]")));
  h.one(start_flow("f1", "t", "{}", 1));
  h.one(register_type(must_parse("name: t\nsteps: [{name: z, taskQueue: q}]")));
  h.one(start_flow("f2", "t", "{}", 2));
  EXPECT_EQ(h.flow("f1").steps(0).name(), "a");
  EXPECT_EQ(h.flow("f2").steps(0).name(), "z");
}

// Runs a three-step flow where b fails once: the whole life of a flow.
void run_three_steps(Harness& h) {
  h.one(register_type(must_parse(kThreeSteps)));
  h.one(start_flow("f1", "three", R"({"n":1})", 1000));
  EXPECT_EQ(h.one(attempt_started("f1", "a", 1, "t1", 1100)).kind, ApplyKind::kApplied);
  auto out = h.apply({attempt_ended("f1", "a", "t1", ATTEMPT_OUTCOME_COMPLETED, R"("A")", 1200)});
  ASSERT_EQ(out.effects.ready.size(), 1u);
  EXPECT_EQ(out.effects.ready[0].step, "b");
  h.one(attempt_started("f1", "b", 1, "t2", 1300));
  out = h.apply({attempt_ended("f1", "b", "t2", ATTEMPT_OUTCOME_FAILED, "boom", 1400)});
  ASSERT_EQ(out.effects.timers_set.size(), 1u);
  EXPECT_EQ(out.effects.timers_set[0], 2400);  // 1400 + 1 s
  EXPECT_EQ(h.one(timer_fired("f1", "b", 2400, 2401)).kind, ApplyKind::kApplied);
  h.one(attempt_started("f1", "b", 2, "t3", 2500));
  h.one(attempt_ended("f1", "b", "t3", ATTEMPT_OUTCOME_COMPLETED, R"("B")", 2600));
  h.one(attempt_started("f1", "c", 1, "t4", 2700));
  out = h.apply({attempt_ended("f1", "c", "t4", ATTEMPT_OUTCOME_COMPLETED, R"("C")", 2800)});
  ASSERT_EQ(out.effects.flows_ended.size(), 1u);
}

TEST(StateMachine, ThreeStepFlowWithOneRetryCompletes) {
  TempDir dir;
  Harness h(dir.sub("db"));
  run_three_steps(h);
  Flow f = h.flow("f1");
  EXPECT_EQ(f.status(), FLOW_STATUS_COMPLETED);
  EXPECT_EQ(f.ended_at_ms(), 2800);
  const Step& b = h.step(f, "b");
  ASSERT_EQ(b.attempts_size(), 2);
  EXPECT_EQ(b.attempts(0).number(), 1u);
  EXPECT_EQ(b.attempts(0).outcome(), ATTEMPT_OUTCOME_FAILED);
  EXPECT_EQ(b.attempts(0).error(), "boom");
  EXPECT_EQ(b.attempts(1).number(), 2u);
  EXPECT_EQ(b.attempts(1).outcome(), ATTEMPT_OUTCOME_COMPLETED);
  EXPECT_EQ(b.output(), R"("B")");
  EXPECT_TRUE(h.sm().running_attempts()->empty());
  EXPECT_FALSE(h.sm().next_timer_ms()->has_value());
}

TEST(StateMachine, ReplayIsIdempotentAndARebuildYieldsTheSameState) {
  TempDir dir;
  Harness h(dir.sub("db"));
  run_three_steps(h);
  auto state = h.dump();
  // The same batches again: every slot is at or below the last applied one.
  uint64_t slot = 1;
  for (const auto& batch : h.log()) {
    auto out = h.sm().apply(Slot(slot++), batch);
    ASSERT_TRUE(out.is_ok());
    EXPECT_TRUE(out->skipped);
    EXPECT_TRUE(out->results.empty());
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

TEST(StateMachine, RetriesFollowTheExactBackoffScheduleThenFailTheFlow) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse(R"(
name: r
steps:
  - {name: a, taskQueue: q, retry: {maxAttempts: 4, initialInterval: 1s, backoffCoefficient: 2, maxInterval: 3s}}
)")));
  h.one(start_flow("f", "r", "{}", 0));
  const int64_t ends[] = {10'000, 20'000, 30'000};
  const int64_t wakes[] = {11'000, 22'000, 33'000};  // 1 s, 2 s, then 4 s capped at 3 s
  for (int i = 0; i < 3; ++i) {
    std::string task = "t" + std::to_string(i + 1);
    ASSERT_EQ(h.one(attempt_started("f", "a", i + 1, task, ends[i] - 10)).kind,
              ApplyKind::kApplied);
    auto outcome = i == 1 ? ATTEMPT_OUTCOME_TIMED_OUT : ATTEMPT_OUTCOME_FAILED;
    h.one(attempt_ended("f", "a", task, outcome, "err" + std::to_string(i), ends[i]));
    Step s = h.step(h.flow("f"), "a");
    EXPECT_EQ(s.status(), STEP_STATUS_BACKOFF);
    EXPECT_EQ(s.wake_at_ms(), wakes[i]);
    auto due = h.sm().timers(wakes[i], 10).value();
    ASSERT_EQ(due.size(), 1u);
    EXPECT_EQ(due[0].wake_at_ms, wakes[i]);
    EXPECT_TRUE(h.sm().timers(wakes[i] - 1, 10)->empty());
    // A timer that does not match the Step's wake time is stale.
    EXPECT_EQ(h.one(timer_fired("f", "a", wakes[i] - 1, wakes[i])).kind, ApplyKind::kStale);
    // An attempt cannot start during the backoff.
    EXPECT_EQ(h.one(attempt_started("f", "a", i + 2, "early", wakes[i])).kind, ApplyKind::kStale);
    EXPECT_EQ(h.one(timer_fired("f", "a", wakes[i], wakes[i])).kind, ApplyKind::kApplied);
    EXPECT_EQ(h.step(h.flow("f"), "a").status(), STEP_STATUS_READY);
  }
  h.one(attempt_started("f", "a", 4, "t4", 40'000));
  auto out = h.apply({attempt_ended("f", "a", "t4", ATTEMPT_OUTCOME_FAILED, "last", 41'000)});
  ASSERT_EQ(out.effects.flows_ended.size(), 1u);
  Flow f = h.flow("f");
  EXPECT_EQ(f.status(), FLOW_STATUS_FAILED);
  EXPECT_EQ(f.ended_at_ms(), 41'000);
  EXPECT_NE(f.error().find("step 'a' failed after 4 attempts: last"), std::string::npos)
      << f.error();
  EXPECT_EQ(h.step(f, "a").status(), STEP_STATUS_FAILED);
  EXPECT_EQ(h.step(f, "a").attempts(1).outcome(), ATTEMPT_OUTCOME_TIMED_OUT);
  EXPECT_FALSE(h.sm().next_timer_ms()->has_value());
}

TEST(StateMachine, NonRetryableFailureFailsTheFlowAtOnce) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse(kThreeSteps)));
  h.one(start_flow("f", "three", "{}", 0));
  h.one(attempt_started("f", "a", 1, "t1", 1));
  h.one(attempt_ended("f", "a", "t1", ATTEMPT_OUTCOME_FAILED, "bad card", 2, true));
  Flow f = h.flow("f");
  EXPECT_EQ(f.status(), FLOW_STATUS_FAILED);
  EXPECT_NE(f.error().find("non-retryably after 1 attempt: bad card"), std::string::npos)
      << f.error();
  EXPECT_EQ(h.step(f, "b").status(), STEP_STATUS_CANCELLED);
  EXPECT_EQ(h.step(f, "c").status(), STEP_STATUS_CANCELLED);
}

TEST(StateMachine, SleepStepIsADurableTimer) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(
      must_parse("name: s\nsteps: [{name: a, taskQueue: q}, {name: nap, sleep: 5s, after: [a]}, "
                 "{name: b, taskQueue: q, after: [nap]}]")));
  h.one(start_flow("f", "s", "{}", 0));
  h.one(attempt_started("f", "a", 1, "t1", 10));
  auto out = h.apply({attempt_ended("f", "a", "t1", ATTEMPT_OUTCOME_COMPLETED, "1", 100)});
  ASSERT_EQ(out.effects.timers_set.size(), 1u);
  EXPECT_EQ(out.effects.timers_set[0], 5100);
  EXPECT_EQ(h.step(h.flow("f"), "nap").status(), STEP_STATUS_SLEEPING);
  EXPECT_EQ(h.sm().next_timer_ms().value(), std::optional<int64_t>(5100));
  out = h.apply({timer_fired("f", "nap", 5100, 5105)});
  ASSERT_EQ(out.effects.ready.size(), 1u);
  EXPECT_EQ(out.effects.ready[0].step, "b");
  EXPECT_EQ(h.step(h.flow("f"), "nap").status(), STEP_STATUS_COMPLETED);
  EXPECT_EQ(h.step(h.flow("f"), "nap").output(), "{}");
  // Fired once only.
  EXPECT_EQ(h.one(timer_fired("f", "nap", 5100, 5106)).kind, ApplyKind::kStale);
}

TEST(StateMachine, CancelEndsTheFlowAndItsRunningAttempt) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse(kThreeSteps)));
  h.one(start_flow("f", "three", "{}", 0));
  h.one(attempt_started("f", "a", 1, "t1", 1));
  auto out = h.apply({cancel_flow("f", 50)});
  ASSERT_EQ(out.results[0].kind, ApplyKind::kApplied);
  ASSERT_EQ(out.effects.attempts_ended.size(), 1u);
  EXPECT_EQ(out.effects.attempts_ended[0].task_id, "t1");
  Flow f = h.flow("f");
  EXPECT_EQ(f.status(), FLOW_STATUS_CANCELLED);
  EXPECT_EQ(f.ended_at_ms(), 50);
  EXPECT_EQ(h.step(f, "a").status(), STEP_STATUS_CANCELLED);
  EXPECT_EQ(h.step(f, "a").attempts(0).outcome(), ATTEMPT_OUTCOME_NOT_COMPLETED);
  EXPECT_TRUE(h.sm().running_attempts()->empty());
  // The Worker's late result is stale; a second cancel changes nothing.
  EXPECT_EQ(h.one(attempt_ended("f", "a", "t1", ATTEMPT_OUTCOME_COMPLETED, "1", 60)).kind,
            ApplyKind::kStale);
  EXPECT_EQ(h.one(cancel_flow("f", 70)).kind, ApplyKind::kUnchanged);
  EXPECT_EQ(h.one(cancel_flow("ghost", 70)).kind, ApplyKind::kRejected);
  EXPECT_EQ(h.flow("f").ended_at_ms(), 50);
}

TEST(StateMachine, StaleResultsAreRefusedAndChangeNothing) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse(kThreeSteps)));
  h.one(start_flow("f", "three", "{}", 0));
  h.one(attempt_started("f", "a", 1, "t1", 1));
  h.one(attempt_ended("f", "a", "t1", ATTEMPT_OUTCOME_COMPLETED, "1", 2));
  h.one(attempt_started("f", "b", 1, "t2", 3));
  auto before = h.dump();
  // The same result twice (a Worker re-sending after a reconnect).
  auto dup = h.one(attempt_ended("f", "a", "t1", ATTEMPT_OUTCOME_COMPLETED, "2", 4));
  EXPECT_EQ(dup.kind, ApplyKind::kStale);
  EXPECT_NE(dup.message.find("t1"), std::string::npos) << dup.message;
  // A task id that is not the running attempt's.
  EXPECT_EQ(h.one(attempt_ended("f", "b", "old", ATTEMPT_OUTCOME_COMPLETED, "x", 5)).kind,
            ApplyKind::kStale);
  // A second start of a running Step, or the wrong attempt number.
  EXPECT_EQ(h.one(attempt_started("f", "b", 2, "t9", 6)).kind, ApplyKind::kStale);
  EXPECT_EQ(h.one(attempt_started("f", "c", 2, "t9", 6)).kind, ApplyKind::kStale);
  auto after = h.dump();
  before.erase("m/last_applied");
  after.erase("m/last_applied");
  EXPECT_EQ(after, before);
  EXPECT_EQ(h.step(h.flow("f"), "a").output(), "1");
}

TEST(StateMachine, RecoveryEndsRunningAttemptsNotCompletedConsumingARetry) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse(kThreeSteps)));
  h.one(register_type(
      must_parse("name: once\nsteps: [{name: a, taskQueue: q, retry: {maxAttempts: 1}}]")));
  h.one(start_flow("f", "three", "{}", 0));
  h.one(start_flow("g", "once", "{}", 0));
  h.one(attempt_started("f", "a", 1, "t1", 10));
  h.one(attempt_started("g", "a", 1, "t2", 10));
  auto out = h.apply({epoch_start("p2", 7000)});
  EXPECT_TRUE(out.results.empty());
  EXPECT_EQ(out.effects.attempts_ended.size(), 2u);
  Flow f = h.flow("f");
  const Step& a = h.step(f, "a");
  ASSERT_EQ(a.attempts_size(), 1);
  EXPECT_EQ(a.attempts(0).outcome(), ATTEMPT_OUTCOME_NOT_COMPLETED);
  EXPECT_EQ(a.attempts(0).ended_at_ms(), 7000);
  EXPECT_NE(a.attempts(0).error().find("p2"), std::string::npos);
  EXPECT_EQ(a.status(), STEP_STATUS_BACKOFF);
  EXPECT_EQ(a.wake_at_ms(), 8000);  // 7000 + initial interval
  // The retry it consumed was the last one: the flow fails.
  EXPECT_EQ(h.flow("g").status(), FLOW_STATUS_FAILED);
  EXPECT_TRUE(h.sm().running_attempts()->empty());
  // The old Worker's result arrives later: stale.
  EXPECT_EQ(h.one(attempt_ended("f", "a", "t1", ATTEMPT_OUTCOME_COMPLETED, "1", 7100)).kind,
            ApplyKind::kStale);
  // The retry runs as attempt 2.
  h.one(timer_fired("f", "a", 8000, 8000));
  EXPECT_EQ(h.one(attempt_started("f", "a", 2, "t3", 8001)).kind, ApplyKind::kApplied);
}

TEST(StateMachine, AsyncStartThatNeverBecameDurableRunsAgainWithTheSameNumber) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse(
      "name: a\nsteps: [{name: s, taskQueue: q, dispatch: ASYNC, retry: {maxAttempts: 1}}]")));
  h.one(start_flow("f", "a", "{}", 0));
  // The old holder sent attempt 1 (task "lost") to a Worker while appending its
  // AttemptStarted, and crashed before that became durable: the log has no start.
  auto out = h.apply({epoch_start("p2", 5000)});
  EXPECT_TRUE(out.effects.attempts_ended.empty());
  Flow f = h.flow("f");
  EXPECT_EQ(h.step(f, "s").status(), STEP_STATUS_READY);
  EXPECT_EQ(h.step(f, "s").attempts_size(), 0);
  auto ready = h.sm().ready_steps("q", 10, nullptr).value();
  ASSERT_EQ(ready.size(), 1u);
  // It runs again with the same number, consuming nothing (maxAttempts 1 still allows it).
  EXPECT_EQ(h.one(attempt_started("f", "s", 1, "new", 5100)).kind, ApplyKind::kApplied);
  // The old Worker's result names a task the log never started: stale.
  EXPECT_EQ(h.one(attempt_ended("f", "s", "lost", ATTEMPT_OUTCOME_COMPLETED, "1", 5200)).kind,
            ApplyKind::kStale);
  h.one(attempt_ended("f", "s", "new", ATTEMPT_OUTCOME_COMPLETED, "2", 5300));
  f = h.flow("f");
  EXPECT_EQ(f.status(), FLOW_STATUS_COMPLETED);
  ASSERT_EQ(h.step(f, "s").attempts_size(), 1);
  EXPECT_EQ(h.step(f, "s").attempts(0).number(), 1u);
  EXPECT_EQ(h.step(f, "s").output(), "2");
}

TEST(StateMachine, WithdrawnAttemptReusesItsNumber) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(
      must_parse("name: t\nsteps: [{name: a, taskQueue: q, retry: {maxAttempts: 1}}]")));
  h.one(start_flow("f", "t", "{}", 0));
  h.one(attempt_started("f", "a", 1, "t1", 1));
  auto out = h.apply({attempt_withdrawn("f", "a", "t1", 2)});
  EXPECT_EQ(out.results[0].kind, ApplyKind::kApplied);
  ASSERT_EQ(out.effects.ready.size(), 1u);
  Flow f = h.flow("f");
  EXPECT_EQ(h.step(f, "a").status(), STEP_STATUS_READY);
  EXPECT_EQ(h.step(f, "a").attempts_size(), 0);
  EXPECT_EQ(h.one(attempt_withdrawn("f", "a", "t1", 3)).kind, ApplyKind::kStale);
  EXPECT_EQ(h.one(attempt_started("f", "a", 1, "t2", 4)).kind, ApplyKind::kApplied);
}

TEST(StateMachine, ReadyQueuesAreFifoPerTaskQueue) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(
      must_parse("name: t\nsteps: [{name: a, taskQueue: q1}, {name: b, taskQueue: q2}]")));
  for (int i = 0; i < 5; ++i) h.one(start_flow("f" + std::to_string(4 - i), "t", "{}", i));
  auto q1 = h.sm().ready_steps("q1", 10, nullptr).value();
  ASSERT_EQ(q1.size(), 5u);
  EXPECT_EQ(q1[0].flow_id, "f4");  // started first
  EXPECT_EQ(q1[4].flow_id, "f0");
  auto skipped = h.sm().ready_steps(
      "q1", 2, [](const std::string& f, const std::string&) { return f == "f4"; });
  ASSERT_EQ(skipped->size(), 2u);
  EXPECT_EQ(skipped->at(0).flow_id, "f3");
  EXPECT_EQ(h.sm().ready_steps("q2", 10, nullptr)->size(), 5u);
  EXPECT_TRUE(h.sm().ready_steps("q", 10, nullptr)->empty());  // a prefix of another queue
}

TEST(StateMachine, ScansThatSkipDeletedEntriesStillSeeEveryLiveOne) {
  // The ready-queue and timer scans start past entries they saw deleted; an
  // insert below that point (a new flow's Step, an earlier timer) must still be found.
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse("name: t\nsteps: [{name: a, taskQueue: q}]")));
  h.one(register_type(must_parse("name: s\nsteps: [{name: z, sleep: 1h}]")));
  h.one(register_type(must_parse("name: s2\nsteps: [{name: z, sleep: 1s}]")));
  for (int i = 0; i < 6; ++i) h.one(start_flow("f" + std::to_string(i), "t", "{}", i));
  ASSERT_EQ(h.sm().ready_steps("q", 10, nullptr)->size(), 6u);
  h.one(cancel_flow("f0", 10));
  h.one(cancel_flow("f1", 10));
  auto ready = h.sm().ready_steps("q", 10, nullptr).value();
  ASSERT_EQ(ready.size(), 4u);
  EXPECT_EQ(ready[0].flow_id, "f2");
  h.one(start_flow("g", "t", "{}", 20));
  ready = h.sm().ready_steps("q", 10, nullptr).value();
  ASSERT_EQ(ready.size(), 5u);
  EXPECT_EQ(ready[4].flow_id, "g");

  h.one(start_flow("late", "s", "{}", 1000));  // timer at 1000 + 1 h
  auto timers = h.sm().timers(std::numeric_limits<int64_t>::max(), 10).value();
  ASSERT_EQ(timers.size(), 1u);
  h.one(start_flow("soon", "s2", "{}", 2000));  // timer at 3000: below the scan's start
  timers = h.sm().timers(std::numeric_limits<int64_t>::max(), 10).value();
  ASSERT_EQ(timers.size(), 2u);
  EXPECT_EQ(timers[0].flow_id, "soon");
  EXPECT_EQ(h.sm().next_timer_ms().value(), std::optional<int64_t>(3000));
}

TEST(StateMachine, AScanOfAnEmptiedQueueStepsOverNoDeletedEntryAndStillSeesANewOne) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse("name: t\nsteps: [{name: a, taskQueue: q}]")));
  h.one(register_type(must_parse("name: u\nsteps: [{name: a, taskQueue: r}]")));
  for (int i = 0; i < 50; ++i) h.one(start_flow("f" + std::to_string(i), "t", "{}", i));
  // Queue "r" follows "q" in key order; its entries are deleted too.
  for (int i = 0; i < 50; ++i) h.one(start_flow("g" + std::to_string(i), "u", "{}", i));
  ASSERT_EQ(h.sm().ready_steps("q", 100, nullptr)->size(), 50u);
  for (int i = 0; i < 50; ++i) h.one(cancel_flow("f" + std::to_string(i), 100));
  for (int i = 0; i < 50; ++i) h.one(cancel_flow("g" + std::to_string(i), 100));
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  EXPECT_TRUE(h.sm().ready_steps("q", 100, nullptr)->empty());
  // The first scan of the emptied queue steps over its own deleted entries
  // (at most the 50 of "q", never those of "r" after it) ...
  EXPECT_LE(rocksdb::get_perf_context()->internal_delete_skipped_count, 50u);
  rocksdb::get_perf_context()->Reset();
  EXPECT_TRUE(h.sm().ready_steps("q", 100, nullptr)->empty());
  // ... and the next one over none.
  EXPECT_EQ(rocksdb::get_perf_context()->internal_delete_skipped_count, 0u);
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  h.one(start_flow("new", "t", "{}", 200));
  auto ready = h.sm().ready_steps("q", 100, nullptr).value();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].flow_id, "new");
}

TEST(StateMachine, ListFlowsFiltersByStatusAndPages) {
  TempDir dir;
  Harness h(dir.sub("db"));
  h.one(register_type(must_parse("name: t\nsteps: [{name: a, taskQueue: q}]")));
  for (int i = 0; i < 7; ++i) h.one(start_flow("f" + std::to_string(i), "t", "{}", i));
  h.one(cancel_flow("f2", 10));
  h.one(cancel_flow("f5", 10));
  auto all = h.sm().list_flows(FLOW_STATUS_UNSPECIFIED, 3, "").value();
  ASSERT_EQ(all.flows_size(), 3);
  EXPECT_EQ(all.flows(0).flow_id(), "f0");
  EXPECT_EQ(all.next_page_token(), "f2");
  auto next = h.sm().list_flows(FLOW_STATUS_UNSPECIFIED, 3, all.next_page_token()).value();
  EXPECT_EQ(next.flows(0).flow_id(), "f3");
  auto running = h.sm().list_flows(FLOW_STATUS_RUNNING, 100, "").value();
  EXPECT_EQ(running.flows_size(), 5);
  EXPECT_TRUE(running.next_page_token().empty());
  auto cancelled = h.sm().list_flows(FLOW_STATUS_CANCELLED, 1, "").value();
  ASSERT_EQ(cancelled.flows_size(), 1);
  EXPECT_EQ(cancelled.flows(0).flow_id(), "f2");
  auto last = h.sm().list_flows(FLOW_STATUS_CANCELLED, 1, cancelled.next_page_token()).value();
  ASSERT_EQ(last.flows_size(), 1);
  EXPECT_EQ(last.flows(0).flow_id(), "f5");
}

}  // namespace
}  // namespace dex
