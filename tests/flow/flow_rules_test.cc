// The flow rules record by record (docs/flow-rules.md): each test applies
// records to an in-memory state and reads what they did. check_state runs
// after every record (Harness::apply).
#include <gtest/gtest.h>

#include "flow/declaration.h"
#include "flow_test_util.h"

namespace dex::flow {
namespace {

using namespace dex::flow::testing;

// T: Start (Execute only) -> Next (Execute only) / Wait (WaitFor) / Charge
// (retries, recovery to Refund) / Refund; Channels "approval" and map "inbox".
FlowDeclaration declaration() {
  FlowDeclaration d;
  d.set_flow_type("T");
  d.set_start_step_type("Start");
  *d.add_steps() = step_decl("Start");
  *d.add_steps() = step_decl("Next");
  *d.add_steps() = step_decl("Wait", true);
  auto charge = step_decl("Charge");
  auto* exec = charge.mutable_options()->mutable_execute();
  exec->set_failure_policy(PROCEED_TO_STEP);
  exec->set_recovery_step_type("Refund");
  exec->mutable_retry()->set_initial_interval_ms(1'000);
  exec->mutable_retry()->set_backoff_coefficient(2);
  exec->mutable_retry()->set_maximum_attempts(3);
  *d.add_steps() = charge;
  *d.add_steps() = step_decl("Refund");
  d.add_channels()->set_name("approval");
  auto* map = d.add_channels();
  map->set_name("inbox");
  map->set_is_map(true);
  return d;
}

class FlowRules : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(h.declare(declaration()).kind, ApplyKind::kApplied); }
  Harness h;
};

TEST_F(FlowRules, AnExecuteOnlyChainCompletesWithEveryGracefulOutput) {
  ASSERT_EQ(h.start("f").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Start-1").input().data(), "in");
  ASSERT_EQ(h.execute("f", "Start-1", go_to({go("Next", "a"), go("Next", "b")})).kind,
            ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Next-2").input().data(), "b");
  EXPECT_EQ(h.step("f", "Next-2").parent_execution_id(), "Start-1");
  ASSERT_EQ(h.execute("f", "Next-1", graceful("one")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_RUNNING) << "Next-2 is still active";
  ASSERT_EQ(h.execute("f", "Next-2", graceful("two")).kind, ApplyKind::kApplied);
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_COMPLETED);
  ASSERT_EQ(run->outputs_size(), 2);
  EXPECT_EQ(run->outputs(0).step_execution_id(), "Next-1");
  EXPECT_EQ(run->outputs(1).output().data(), "two");
  std::vector<HistoryKind> kinds;
  for (const auto& e : h.history("f")) kinds.push_back(e.kind());
  EXPECT_EQ(kinds, (std::vector<HistoryKind>{FLOW_STARTED, EXECUTE_COMPLETED, EXECUTE_COMPLETED,
                                             EXECUTE_COMPLETED, FLOW_CLOSED}));
}

TEST_F(FlowRules, NSequentialStepsTakeNPlusOneRecords) {
  constexpr int kSteps = 5;  // Start, then four Next
  const size_t before = h.records;
  FlowRecord start = h.start_record("f", "r1", "T");
  start.set_at_unix_ms(h.now);
  auto* a = start.add_assignments();
  a->mutable_task()->set_flow_id("f");
  a->mutable_task()->set_run_id("r1");
  a->mutable_task()->set_step_execution_id("Start-1");
  a->mutable_task()->set_method(EXECUTE);
  a->mutable_task()->set_attempt(1);
  a->set_task_id("t1");
  a->set_worker_id("w");
  ASSERT_EQ(h.apply(start).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.effects.started.size(), 1u) << "the first attempt started with the run";
  std::string exec = "Start-1", task = "t1";
  for (int i = 1; i <= kSteps; ++i) {
    FlowRecord r = h.result_record("f", exec, task);
    const std::string next = "Next-" + std::to_string(i);
    *r.mutable_method_result()->mutable_decision() =
        i < kSteps ? go_to({go("Next")}) : graceful("end");
    if (i < kSteps) {  // the next Step's first attempt rides in the same record
      r.set_at_unix_ms(h.now);
      auto* n = r.add_assignments();
      n->mutable_task()->set_flow_id("f");
      n->mutable_task()->set_run_id("r1");
      n->mutable_task()->set_step_execution_id(next);
      n->mutable_task()->set_method(EXECUTE);
      n->mutable_task()->set_attempt(1);
      n->set_task_id("t" + std::to_string(i + 1));
      n->set_worker_id("w");
    }
    ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied) << exec;
    exec = next;
    task = "t" + std::to_string(i + 1);
  }
  EXPECT_EQ(h.run("f")->status(), FLOW_COMPLETED);
  EXPECT_EQ(h.records - before, static_cast<size_t>(kSteps + 1));
}

TEST_F(FlowRules, AWaitTakesMessagesPublishedBeforeItInFifoOrder) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait"), go("Wait")}));
  ASSERT_EQ(h.publish("f", "approval", {"m1", "m2", "m3"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.wait_for("f", "Wait-2", wait_of(ANY_OF, {channel("approval", FOR_ONE)})).kind,
            ApplyKind::kApplied);
  auto w2 = h.step("f", "Wait-2");
  EXPECT_EQ(w2.phase(), PHASE_EXECUTE) << "met at once by a message that came first";
  ASSERT_EQ(w2.conditions(0).messages_size(), 1);
  EXPECT_EQ(w2.conditions(0).messages(0).data(), "m1");
  h.wait_for("f", "Wait-1", wait_of(ANY_OF, {channel("approval", FOR_N, 2)}));
  auto w1 = h.step("f", "Wait-1");
  ASSERT_EQ(w1.conditions(0).messages_size(), 2);
  EXPECT_EQ(w1.conditions(0).messages(0).data(), "m2");
  EXPECT_EQ(w1.conditions(0).messages(1).data(), "m3");
  EXPECT_TRUE(h.kv.scan(keys::kMessagePrefix).empty()) << "every message was taken once";
}

TEST_F(FlowRules, TheFirstToWaitIsMatchedFirst) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait"), go("Wait")}));
  h.wait_for("f", "Wait-2", wait_of(ANY_OF, {channel("approval", FOR_ONE)}));
  h.wait_for("f", "Wait-1", wait_of(ANY_OF, {channel("approval", FOR_ONE)}));
  h.publish("f", "approval", {"only"});
  EXPECT_EQ(h.step("f", "Wait-2").phase(), PHASE_EXECUTE);
  EXPECT_EQ(h.step("f", "Wait-1").phase(), PHASE_WAITING);
  h.publish("f", "approval", {"second"});
  EXPECT_EQ(h.step("f", "Wait-1").conditions(0).messages(0).data(), "second");
}

TEST_F(FlowRules, ATimerThatWinsAnAnyOfLeavesTheChannelsMessagesQueued) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait")}));
  h.wait_for("f", "Wait-1",
             wait_of(ANY_OF, {channel("approval", FOR_ONE), timer_after(24 * 3600 * 1000)}));
  EXPECT_EQ(h.next_timer_at(), h.now + 24 * 3600 * 1000);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  auto w = h.step("f", "Wait-1");
  EXPECT_EQ(w.phase(), PHASE_EXECUTE);
  EXPECT_FALSE(w.conditions(0).satisfied());
  EXPECT_TRUE(w.conditions(1).satisfied());
  h.publish("f", "approval", {"late"});
  EXPECT_EQ(h.kv.scan(keys::kMessagePrefix).size(), 1u)
      << "no wait takes it: the message stays queued";
}

TEST_F(FlowRules, AllOfWaitsForEveryConditionAndAnyCombinationForOneGroup) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait"), go("Wait")}));
  h.wait_for("f", "Wait-1", wait_of(ALL_OF, {channel("approval", FOR_ONE), timer_after(1'000)}));
  h.publish("f", "approval", {"a"});
  EXPECT_EQ(h.step("f", "Wait-1").phase(), PHASE_WAITING) << "the Timer has not fired";
  EXPECT_EQ(h.kv.scan(keys::kMessagePrefix).size(), 1u)
      << "nothing is taken before the whole wait is met";
  h.fire_next_timer();
  EXPECT_EQ(h.step("f", "Wait-1").phase(), PHASE_EXECUTE);

  Wait combo = wait_of(ANY_COMBINATION_OF,
                       {channel("inbox", FOR_ONE, 0, 0, "x"),
                        channel("approval", FOR_ONE, 0, 0, "y"), timer_after(5'000, "z")});
  combo.mutable_conditions(0)->mutable_channel()->set_instance_key("k1");
  combo.add_combinations()->add_condition_ids("x");
  combo.mutable_combinations(0)->add_condition_ids("y");
  combo.add_combinations()->add_condition_ids("z");
  h.wait_for("f", "Wait-2", combo);
  h.publish("f", "inbox", {"i"}, "k1");
  EXPECT_EQ(h.step("f", "Wait-2").phase(), PHASE_WAITING) << "group x+y needs approval too";
  h.publish("f", "approval", {"b"});
  auto w = h.step("f", "Wait-2");
  EXPECT_EQ(w.phase(), PHASE_EXECUTE);
  EXPECT_TRUE(w.conditions(0).satisfied() && w.conditions(1).satisfied());
  EXPECT_FALSE(w.conditions(2).satisfied());
  EXPECT_FALSE(h.next_timer_at().has_value()) << "the unfired Timer is gone";
}

TEST_F(FlowRules, RetriesBackOffThenTheFailurePolicyStartsTheRecoveryStep) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Charge", "order-7")}));
  const int64_t t0 = h.now;
  h.fail("f", "Charge-1", "card declined");
  auto c = h.step("f", "Charge-1");
  EXPECT_EQ(c.method().state(), TASK_BACKOFF);
  EXPECT_EQ(c.method().attempt(), 2u);
  EXPECT_EQ(c.method().retry_at_ms(), t0 + 1'000);
  EXPECT_EQ(c.method().last_failure().error(), "card declined");
  h.fire_next_timer();
  h.fail("f", "Charge-1", "card declined", ATTEMPT_TIMED_OUT);
  EXPECT_EQ(h.step("f", "Charge-1").method().retry_at_ms(), h.now + 2'000);
  h.fire_next_timer();
  h.fail("f", "Charge-1", "still declined");
  EXPECT_EQ(h.step("f", "Charge-1").phase(), PHASE_FAILED);
  auto refund = h.step("f", "Refund-1");
  EXPECT_EQ(refund.input().data(), "order-7");
  EXPECT_EQ(refund.recovery_error(), "still declined");
  EXPECT_EQ(refund.parent_execution_id(), "Charge-1");
  EXPECT_EQ(h.run("f")->status(), FLOW_RUNNING);
}

// A Worker's RetryAfter replaces the backoff; the policy's attempts still
// bound the retries; a timeout (not FAILED) and a bad value fall back or clamp.
TEST_F(FlowRules, AWorkersRetryAfterReplacesTheBackoffWithinThePolicysAttempts) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Charge", "order-7")}));
  auto failed = [&](int64_t retry_after_ms, AttemptOutcome outcome = ATTEMPT_FAILED) {
    const std::string task = h.assign("f", "Charge-1");
    FlowRecord r = h.result_record("f", "Charge-1", task);
    r.mutable_method_result()->set_outcome(outcome);
    r.mutable_method_result()->set_error("rate limited");
    r.mutable_method_result()->set_retry_after_ms(retry_after_ms);
    return h.apply(r);
  };
  ASSERT_EQ(failed(45'000).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Charge-1").method().retry_at_ms(), h.now + 45'000)
      << "not the policy's 1 s";
  h.fire_next_timer();
  ASSERT_EQ(failed(45'000, ATTEMPT_TIMED_OUT).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Charge-1").method().retry_at_ms(), h.now + 2'000)
      << "only a FAILED attempt's RetryAfter counts";
  h.fire_next_timer();
  ASSERT_EQ(failed(45'000).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Charge-1").phase(), PHASE_FAILED) << "3 attempts, whatever it asked";
  EXPECT_EQ(h.step("f", "Refund-1").recovery_error(), "rate limited");

  h.start("g");
  h.execute("g", "Start-1", go_to({go("Charge", "order-8")}));
  const std::string task = h.assign("g", "Charge-1");
  FlowRecord r = h.result_record("g", "Charge-1", task);
  r.mutable_method_result()->set_outcome(ATTEMPT_FAILED);
  r.mutable_method_result()->set_retry_after_ms(kRetryAfterMaxMs * 10);
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("g", "Charge-1").method().retry_at_ms(), h.now + kRetryAfterMaxMs);
}

TEST_F(FlowRules, ExhaustedRetriesFailTheFlowNamingTheStep) {
  h.start("f");
  for (int i = 0; i < 3; ++i) {
    h.fail("f", "Start-1", "boom");
    if (i < 2) h.fire_next_timer();
  }
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_FAILED);
  EXPECT_EQ(run->close_reason(), "Start-1 Execute failed after 3 attempts: boom");
}

TEST_F(FlowRules, ANonRetryableFailureEndsAtOnce) {
  h.start("f");
  const std::string task = h.assign("f", "Start-1");
  FlowRecord r = h.result_record("f", "Start-1", task);
  r.mutable_method_result()->set_outcome(ATTEMPT_FAILED);
  r.mutable_method_result()->set_non_retryable(true);
  h.apply(r);
  EXPECT_EQ(h.run("f")->status(), FLOW_FAILED);
}

TEST_F(FlowRules, AWaitForThatFailsForGoodCanProceedToExecute) {
  FlowDeclaration d = declaration();
  auto* wf = d.mutable_steps(2)->mutable_options()->mutable_wait_for();
  wf->set_failure_policy(PROCEED_TO_EXECUTE);
  wf->mutable_retry()->set_maximum_attempts(1);
  ASSERT_EQ(h.declare(d).kind, ApplyKind::kApplied);
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait")}));
  h.fail("f", "Wait-1", "no inbox");
  auto w = h.step("f", "Wait-1");
  EXPECT_EQ(w.phase(), PHASE_EXECUTE);
  EXPECT_TRUE(w.wait_for_failed());
  EXPECT_EQ(w.recovery_error(), "no inbox");
  EXPECT_EQ(w.method().method(), EXECUTE);
  EXPECT_EQ(w.method().attempt(), 1u);
}

TEST_F(FlowRules, RecoveryEndsReceivedAttemptsAndKeepsQueuedOnes) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Next"), go("Next")}));
  const std::string running = h.assign("f", "Next-1");
  Effects fx;
  KvFlowTxn txn(h.kv);
  recover_attempts(txn, h.now, fx);
  ASSERT_TRUE(check_state(h.kv).is_ok());
  auto n1 = h.step("f", "Next-1");
  EXPECT_EQ(n1.method().state(), TASK_BACKOFF) << "NOT_COMPLETED consumes a retry";
  EXPECT_EQ(n1.method().attempt(), 2u);
  EXPECT_EQ(n1.method().last_failure().outcome(), ATTEMPT_NOT_COMPLETED);
  auto n2 = h.step("f", "Next-2");
  EXPECT_EQ(n2.method().state(), TASK_QUEUED) << "never handed out: no failure";
  EXPECT_EQ(n2.method().attempt(), 1u);
  ASSERT_EQ(fx.ended.size(), 1u);
  EXPECT_EQ(fx.ended[0].task_id, running);
  // The old Worker's result is stale.
  FlowRecord late;
  auto* m = late.mutable_method_result();
  m->mutable_task()->set_flow_id("f");
  m->mutable_task()->set_run_id("r1");
  m->mutable_task()->set_step_execution_id("Next-1");
  m->mutable_task()->set_method(EXECUTE);
  m->mutable_task()->set_attempt(1);
  m->set_task_id(running);
  m->set_outcome(ATTEMPT_COMPLETED);
  *m->mutable_decision() = graceful("x");
  EXPECT_EQ(h.apply(late).kind, ApplyKind::kStale);
}

TEST_F(FlowRules, AWithdrawnAttemptIsQueuedAgainWithTheSameNumber) {
  h.start("f");
  const std::string task = h.assign("f", "Start-1");
  FlowRecord r;
  *r.mutable_attempt_withdrawn()->mutable_task() = h.ref("f", "Start-1");
  r.mutable_attempt_withdrawn()->set_task_id(task);
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  auto s = h.step("f", "Start-1");
  EXPECT_EQ(s.method().state(), TASK_QUEUED);
  EXPECT_EQ(s.method().attempt(), 1u);
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kStale);
}

TEST_F(FlowRules, InvalidResultsAreRejectedNamingTheProblemAndChangeNothing) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait")}));
  const std::string task = h.assign("f", "Wait-1");
  const auto before = h.kv.data();
  auto expect_rejected = [&](const Wait& wait, const std::string& words) {
    FlowRecord r = h.result_record("f", "Wait-1", task);
    *r.mutable_method_result()->mutable_wait() = wait;
    ApplyResult result = h.apply(r);
    EXPECT_EQ(result.kind, ApplyKind::kRejected);
    EXPECT_EQ(result.code, RefusalCode::kInvalidArgument);
    EXPECT_NE(result.message.find(words), std::string::npos) << result.message;
    EXPECT_EQ(h.kv.data(), before);
  };
  expect_rejected(wait_of(ANY_OF, {}), "no conditions");
  expect_rejected(wait_of(ANY_COMBINATION_OF, {timer_after(5)}), "conditionId");
  expect_rejected(wait_of(ANY_OF, {channel("nope", FOR_ONE)}), "'nope'");
  expect_rejected(wait_of(ANY_OF, {channel("inbox", FOR_ONE)}), "instanceKey");
  expect_rejected(wait_of(ANY_OF, {channel("approval", FOR_N)}), "n >= 1");

  FlowRecord skip = h.result_record("f", "Wait-1", task);
  skip.mutable_method_result()->mutable_wait()->set_kind(SKIP);
  ASSERT_EQ(h.apply(skip).kind, ApplyKind::kApplied);
  const std::string exec_task = h.assign("f", "Wait-1");
  const auto before_decision = h.kv.data();
  FlowRecord r = h.result_record("f", "Wait-1", exec_task);
  *r.mutable_method_result()->mutable_decision() = go_to({go("Undeclared")});
  ApplyResult result = h.apply(r);
  EXPECT_EQ(result.kind, ApplyKind::kRejected);
  EXPECT_NE(result.message.find("Step type 'Undeclared'"), std::string::npos) << result.message;
  EXPECT_EQ(h.kv.data(), before_decision);
}

TEST_F(FlowRules, DeadEndKeepsTheRunAliveAndForceCompleteCancelsTheRest) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Next"), go("Next"), go("Wait")}));
  StepDecision dead;
  dead.mutable_dead_end();
  h.execute("f", "Next-1", dead);
  EXPECT_EQ(h.run("f")->status(), FLOW_RUNNING);
  const std::string running = h.assign("f", "Wait-1");
  StepDecision force;
  force.mutable_force_complete()->set_data("now");
  h.execute("f", "Next-2", force);
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_COMPLETED);
  EXPECT_EQ(run->active_size(), 0);
  EXPECT_EQ(h.step("f", "Wait-1").phase(), PHASE_CANCELED);
  bool told = false;
  for (const auto& e : h.effects.ended) told |= e.task_id == running;
  EXPECT_TRUE(told) << "the Worker of a canceled running attempt is told";
}

TEST_F(FlowRules, ARunWithNoActiveStepAndNoGracefulCompleteKeepsRunning) {
  h.start("f");
  StepDecision dead;
  dead.mutable_dead_end();
  h.execute("f", "Start-1", dead);
  EXPECT_EQ(h.run("f")->status(), FLOW_RUNNING);
  EXPECT_EQ(h.run("f")->active_size(), 0);
}

TEST_F(FlowRules, DecisionsCancelSiblingsOrStepsByType) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Next"), go("Next"), go("Wait")}));
  StepDecision winner = go_to({go("Refund")});
  winner.set_cancel_siblings(true);
  h.execute("f", "Next-1", winner);
  EXPECT_EQ(h.step("f", "Next-2").phase(), PHASE_CANCELED);
  EXPECT_EQ(h.step("f", "Wait-1").phase(), PHASE_CANCELED);
  EXPECT_EQ(h.step("f", "Refund-1").phase(), PHASE_EXECUTE) << "the decision's own movement";

  h.start("g");
  h.execute("g", "Start-1", go_to({go("Next"), go("Wait")}));
  StepDecision by_type;
  by_type.mutable_dead_end();
  by_type.add_cancel_step_types("Wait");
  h.execute("g", "Next-1", by_type);
  EXPECT_EQ(h.step("g", "Wait-1").phase(), PHASE_CANCELED);
}

TEST_F(FlowRules, ForceCompleteIfChannelsEmptyChecksAtomically) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Next"), go("Next")}));
  h.publish("f", "inbox", {"x"}, "k9");
  StepDecision d;
  auto* c = d.mutable_force_complete_if_channels_empty();
  auto* ref = c->add_channels();
  ref->set_channel("inbox");
  ref->set_all_instances(true);
  c->mutable_output()->set_data("done");
  *c->add_otherwise() = go("Wait");
  h.execute("f", "Next-1", d);
  EXPECT_EQ(h.run("f")->status(), FLOW_RUNNING);
  EXPECT_EQ(h.step("f", "Wait-1").phase(), PHASE_WAIT_FOR) << "a message was queued";
  Wait take = wait_of(ANY_OF, {channel("inbox", FOR_ONE)});
  take.mutable_conditions(0)->mutable_channel()->set_instance_key("k9");
  h.wait_for("f", "Wait-1", take);
  h.execute("f", "Next-2", d);
  EXPECT_EQ(h.run("f")->status(), FLOW_COMPLETED);
}

TEST_F(FlowRules, StartsFollowTheIdReusePolicyAndRequestIds) {
  StartOptions options;
  options.set_request_id("req-1");
  ASSERT_EQ(h.start("f", "r1", "T", options).kind, ApplyKind::kApplied);
  ApplyResult again = h.start("f", "r2", "T", options);
  EXPECT_EQ(again.kind, ApplyKind::kRejected);
  EXPECT_EQ(again.code, RefusalCode::kAlreadyExists);
  options.set_ignore_already_started(true);
  again = h.start("f", "r2", "T", options);
  EXPECT_EQ(again.kind, ApplyKind::kUnchanged);
  EXPECT_EQ(again.run_id, "r1");
  options.set_request_id("req-2");
  EXPECT_EQ(h.start("f", "r2", "T", options).kind, ApplyKind::kRejected);

  options.set_id_reuse_policy(TERMINATE_IF_RUNNING);
  ASSERT_EQ(h.start("f", "r3", "T", options).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r1")->status(), FLOW_TERMINATED);
  EXPECT_EQ(h.run("f", "r3")->status(), FLOW_RUNNING);

  h.execute("f", "Start-1", graceful("ok"), "r3");
  options.set_ignore_already_started(false);
  options.set_id_reuse_policy(ALLOW_IF_PREVIOUS_FAILED);
  EXPECT_EQ(h.start("f", "r4", "T", options).code, RefusalCode::kAlreadyExists)
      << "the last run completed";
  options.set_id_reuse_policy(ALLOW_IF_NO_RUNNING);
  EXPECT_EQ(h.start("f", "r4", "T", options).kind, ApplyKind::kApplied);
  StopFlow stop;
  stop.set_flow_id("f");
  FlowRecord r;
  *r.mutable_stop_flow() = stop;
  h.apply(r);
  options.set_id_reuse_policy(DISALLOW);
  EXPECT_EQ(h.start("f", "r5", "T", options).code, RefusalCode::kAlreadyExists);
}

// A start acknowledged by a process that then failed is repeated by the client
// with the same request ID; the run may have closed meanwhile. The repeat must
// answer that run, not start a second one (found by the chaos harness).
TEST_F(FlowRules, ARepeatedStartRequestAnswersItsRunAfterTheRunClosed) {
  StartOptions options;
  options.set_request_id("req-1");
  options.set_ignore_already_started(true);
  ASSERT_EQ(h.start("f", "r1", "T", options).kind, ApplyKind::kApplied);
  h.execute("f", "Start-1", graceful("ok"), "r1");
  ASSERT_EQ(h.run("f", "r1")->status(), FLOW_COMPLETED);
  for (IdReusePolicy policy : {ID_REUSE_POLICY_UNSPECIFIED, ALLOW_IF_NO_RUNNING,
                               ALLOW_IF_PREVIOUS_FAILED, DISALLOW, TERMINATE_IF_RUNNING}) {
    options.set_id_reuse_policy(policy);
    ApplyResult again = h.start("f", "r2", "T", options);
    EXPECT_EQ(again.kind, ApplyKind::kUnchanged) << IdReusePolicy_Name(policy);
    EXPECT_EQ(again.run_id, "r1") << IdReusePolicy_Name(policy);
  }
  EXPECT_FALSE(h.run("f", "r2").has_value());
  // Another request is a new start, which the policy judges.
  options.set_request_id("req-2");
  options.set_id_reuse_policy(ALLOW_IF_NO_RUNNING);
  EXPECT_EQ(h.start("f", "r2", "T", options).kind, ApplyKind::kApplied);
}

TEST_F(FlowRules, AnUndeclaredFlowTypeIsRefusedNamingIt) {
  ApplyResult r = h.start("f", "r1", "Nope");
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_EQ(r.message, "Flow type 'Nope' was never declared by a Worker");
}

TEST_F(FlowRules, FlowTimeoutsAndStartDelays) {
  StartOptions fail;
  fail.set_timeout_ms(10'000);
  h.start("a", "r1", "T", fail);
  StartOptions cancel = fail;
  cancel.set_timeout_policy(TIMEOUT_CANCEL);
  h.start("b", "r1", "T", cancel);
  StartOptions delayed;
  delayed.set_start_delay_ms(3'000);
  h.start("c", "r1", "T", delayed);
  EXPECT_EQ(h.run("c")->active_size(), 0) << "the start Step waits for the delay";
  h.fire_next_timer();
  EXPECT_EQ(h.run("c")->active_size(), 1);
  h.fire_next_timer();
  h.fire_next_timer();
  EXPECT_EQ(h.run("a")->status(), FLOW_TIMED_OUT);
  EXPECT_EQ(h.run("b")->status(), FLOW_CANCELED);
}

TEST_F(FlowRules, StopFlowModesAndPublishingToAClosedRun) {
  for (auto [mode, status] :
       std::vector<std::pair<StopMode, FlowStatus>>{{STOP_MODE_UNSPECIFIED, FLOW_CANCELED},
                                                    {STOP_TERMINATE, FLOW_TERMINATED},
                                                    {STOP_FAIL, FLOW_FAILED}}) {
    const std::string id = "f" + std::to_string(static_cast<int>(mode));
    h.start(id);
    FlowRecord r;
    r.mutable_stop_flow()->set_flow_id(id);
    r.mutable_stop_flow()->set_mode(mode);
    r.mutable_stop_flow()->set_reason("operator");
    ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
    EXPECT_EQ(h.run(id)->status(), status);
    EXPECT_EQ(h.apply(r).code, RefusalCode::kFailedPrecondition) << "already closed";
    ApplyResult p = h.publish(id, "approval", {"x"});
    EXPECT_EQ(p.code, RefusalCode::kFailedPrecondition);
    EXPECT_NE(p.message.find("RUNNING"), std::string::npos) << p.message;
  }
}

TEST_F(FlowRules, ARepeatedPublishRequestChangesNothing) {
  h.start("f");
  FlowRecord r;
  auto* p = r.mutable_publish();
  p->set_flow_id("f");
  p->set_request_id("req-1");
  p->mutable_publish()->set_channel("approval");
  *p->mutable_publish()->add_messages() = payload("yes");
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  const auto before = h.kv.data();
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kUnchanged);
  EXPECT_EQ(h.kv.data(), before);
  EXPECT_EQ(h.kv.scan(keys::kMessagePrefix).size(), 1u);
  // A retry after the run closed (its answer lost in a failover) is still the
  // same request: unchanged, not refused as a publish to a closed run.
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);
  const auto closed = h.kv.data();
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kUnchanged);
  EXPECT_EQ(h.kv.data(), closed);
  p->set_request_id("req-2");
  EXPECT_EQ(h.apply(r).code, RefusalCode::kFailedPrecondition) << "a new request to a closed run";
}

TEST_F(FlowRules, SkipTimerFiresItMarkedSkipped) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait")}));
  h.wait_for("f", "Wait-1",
             wait_of(ANY_OF, {channel("approval", FOR_ONE), timer_after(60'000, "remind")}));
  FlowRecord r;
  r.mutable_skip_timer()->set_flow_id("f");
  r.mutable_skip_timer()->set_step_execution_id("Wait-1");
  r.mutable_skip_timer()->set_condition_index(0);
  EXPECT_EQ(h.apply(r).code, RefusalCode::kNotFound) << "condition 0 is a Channel";
  r.mutable_skip_timer()->set_condition_id("remind");
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  auto w = h.step("f", "Wait-1");
  EXPECT_EQ(w.phase(), PHASE_EXECUTE);
  EXPECT_TRUE(w.conditions(1).skipped());
  EXPECT_FALSE(h.next_timer_at().has_value());
  EXPECT_EQ(h.apply(r).code, RefusalCode::kFailedPrecondition) << "no longer waiting";
  r.mutable_skip_timer()->set_request_id("skip-1");
  EXPECT_EQ(h.apply(r).code, RefusalCode::kFailedPrecondition) << "a new request ID";
}

TEST_F(FlowRules, ARepeatedSkipTimerRequestIsAnsweredAsItsFirstTry) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait")}));
  h.wait_for("f", "Wait-1", wait_of(ANY_OF, {timer_after(60'000, "remind")}));
  FlowRecord r;
  r.mutable_skip_timer()->set_flow_id("f");
  r.mutable_skip_timer()->set_step_execution_id("Wait-1");
  r.mutable_skip_timer()->set_condition_id("remind");
  r.mutable_skip_timer()->set_request_id("skip-1");
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  const auto after_first = h.kv.data();
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kUnchanged) << "not 'no longer waiting'";
  EXPECT_EQ(h.kv.data(), after_first) << "a repeat changes nothing";
}

TEST_F(FlowRules, AChangedDeclarationIsANewVersionAndRunsKeepTheirs) {
  h.start("old");
  EXPECT_EQ(h.declare(declaration()).kind, ApplyKind::kUnchanged);
  FlowDeclaration v2 = declaration();
  *v2.add_steps() = step_decl("Audit");
  ASSERT_EQ(h.declare(v2).kind, ApplyKind::kApplied);
  h.start("new");
  EXPECT_EQ(h.run("old")->declaration_version(), 1u);
  EXPECT_EQ(h.run("new")->declaration_version(), 2u);
  EXPECT_EQ(h.execute("old", "Start-1", go_to({go("Audit")})).kind, ApplyKind::kRejected);
  EXPECT_EQ(h.execute("new", "Start-1", go_to({go("Audit")})).kind, ApplyKind::kApplied);
}

TEST_F(FlowRules, LocalsPassFromWaitForToExecute) {
  h.start("f");
  h.execute("f", "Start-1", go_to({go("Wait")}));
  const std::string task = h.assign("f", "Wait-1");
  FlowRecord r = h.result_record("f", "Wait-1", task);
  r.mutable_method_result()->mutable_wait()->set_kind(SKIP);
  r.mutable_method_result()->mutable_locals()->set_data("{\"seen\":1}");
  h.apply(r);
  EXPECT_EQ(h.step("f", "Wait-1").locals().data(), "{\"seen\":1}");
}

TEST(FlowDeclarations, RefusalsNameTheField) {
  FlowDeclaration d;
  d.set_flow_type("T");
  d.set_start_step_type("Missing");
  EXPECT_EQ(validate_declaration(d).message(),
            "Flow type 'T': the start Step type 'Missing' is not declared");
  d.clear_start_step_type();
  *d.add_steps() = step_decl("A");
  *d.add_steps() = step_decl("A");
  EXPECT_EQ(validate_declaration(d).message(), "Flow type 'T' declares Step type 'A' twice");
  d.mutable_steps()->RemoveLast();
  d.mutable_steps(0)->mutable_options()->mutable_execute()->set_failure_policy(PROCEED_TO_STEP);
  d.mutable_steps(0)->mutable_options()->mutable_execute()->set_recovery_step_type("B");
  EXPECT_NE(validate_declaration(d).message().find("recoveryStepType 'B' is not a declared"),
            std::string::npos);
}

TEST(FlowDeclarations, DefaultsAreFilledIn) {
  MethodOptions m = method_with_defaults({});
  EXPECT_EQ(m.attempt_timeout_ms(), kAttemptTimeoutDefaultMs);
  EXPECT_EQ(m.retry().maximum_attempts(), kRetryMaximumAttemptsDefault);
  EXPECT_EQ(m.retry().maximum_interval_ms(), 100'000);
  EXPECT_EQ(m.durability(), SYNC);
  MethodOptions unlimited;
  unlimited.mutable_retry()->set_maximum_attempts(0);
  EXPECT_EQ(method_with_defaults(unlimited).retry().maximum_attempts(), 0u) << "0: no limit";
}

// ------------------------------------------------- Attributes, locks, RPCs

// A: Start (reads status and tags) -> Locked / Locked2 / WaitLocked / Next;
// Attributes of every type, AttributeMap "tags"; RPCs "get" (reads status)
// and "bump" (lock key "acct").
FlowDeclaration attr_declaration() {
  FlowDeclaration d;
  d.set_flow_type("A");
  d.set_start_step_type("Start");
  for (auto [key, type] : {std::pair{"status", ATTRIBUTE_STRING},
                           {"count", ATTRIBUTE_INT64},
                           {"score", ATTRIBUTE_DOUBLE},
                           {"flag", ATTRIBUTE_BOOL},
                           {"due", ATTRIBUTE_DATETIME},
                           {"doc", ATTRIBUTE_JSON},
                           {"blob", ATTRIBUTE_BYTES}}) {
    auto* a = d.add_attributes();
    a->set_key(key);
    a->set_type(type);
  }
  auto* tags = d.add_attributes();
  tags->set_key("tags");
  tags->set_type(ATTRIBUTE_STRING);
  tags->set_is_map(true);
  auto start = step_decl("Start");
  start.add_attribute_reads("status");
  start.add_attribute_reads("tags");
  *d.add_steps() = start;
  auto locked = step_decl("Locked");
  locked.mutable_options()->mutable_execute()->add_lock_keys("acct");
  locked.mutable_options()->mutable_execute()->mutable_retry()->set_initial_interval_ms(1'000);
  locked.mutable_options()->mutable_execute()->mutable_retry()->set_maximum_attempts(2);
  *d.add_steps() = locked;
  auto locked2 = step_decl("Locked2");
  locked2.mutable_options()->mutable_execute()->add_lock_keys("acct");
  locked2.mutable_options()->mutable_execute()->add_lock_keys("other");
  *d.add_steps() = locked2;
  auto wait_locked = step_decl("WaitLocked", true);
  wait_locked.mutable_options()->mutable_wait_for()->add_lock_keys("other");
  *d.add_steps() = wait_locked;
  *d.add_steps() = step_decl("Next");
  auto* get = d.add_rpcs();
  get->set_name("get");
  get->add_attribute_reads("status");
  auto* bump = d.add_rpcs();
  bump->set_name("bump");
  bump->add_lock_keys("acct");
  return d;
}

class FlowAttributes : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(h.declare(attr_declaration()).kind, ApplyKind::kApplied); }
  // Starts "f" with Start-1's Execute deciding `decision`.
  void start_and_go(const StepDecision& decision) {
    ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
    ASSERT_EQ(h.execute("f", "Start-1", decision).kind, ApplyKind::kApplied);
  }
  std::vector<HistoryKind> kinds(const std::string& flow_id) {
    std::vector<HistoryKind> out;
    for (const auto& e : h.history(flow_id)) out.push_back(e.kind());
    return out;
  }
  size_t count(const std::string& flow_id, HistoryKind kind) {
    size_t n = 0;
    for (const auto& e : h.history(flow_id)) n += e.kind() == kind;
    return n;
  }
  Harness h;
};

TEST_F(FlowAttributes, DeclarationsRefuseBadAttributesRpcsAndLockKeys) {
  auto refused = [&](FlowDeclaration d, const std::string& needle) {
    auto r = h.declare(d);
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << needle;
    EXPECT_EQ(r.code, RefusalCode::kInvalidArgument) << needle;
    EXPECT_NE(r.message.find(needle), std::string::npos) << r.message;
  };
  auto d = attr_declaration();
  d.mutable_steps(0)->add_attribute_reads("nope");
  refused(d, "reads Attribute 'nope', which Flow type 'A' does not declare");
  d = attr_declaration();
  *d.add_attributes() = d.attributes(0);
  refused(d, "declares Attribute 'status' twice");
  d = attr_declaration();
  d.mutable_attributes(1)->set_type(ATTRIBUTE_TYPE_UNSPECIFIED);
  refused(d, "Attribute 'count' without a known type");
  d = attr_declaration();
  d.mutable_attributes(1)->set_key(std::string("a\nb"));
  refused(d, "attributes[1].key contains a control character");
  d = attr_declaration();
  *d.add_rpcs() = d.rpcs(0);
  refused(d, "declares RPC 'get' twice");
  d = attr_declaration();
  d.mutable_rpcs(0)->add_attribute_reads("missing");
  refused(d, "RPC 'get' reads Attribute 'missing'");
  d = attr_declaration();
  d.mutable_rpcs(1)->add_lock_keys("");
  refused(d, "RPC 'bump' lockKeys[1] is empty");
  d = attr_declaration();
  for (int i = 0; i < 17; ++i)
    d.mutable_steps(1)->mutable_options()->mutable_execute()->add_lock_keys("k" +
                                                                            std::to_string(i));
  refused(d, "execute.lockKeys has more than 16 keys");
  d = attr_declaration();
  d.mutable_steps(1)->mutable_options()->mutable_execute()->add_lock_keys("acct");
  refused(d, "names 'acct' twice");
  d = attr_declaration();
  for (int i = 0; i < 1'001; ++i) {
    auto* a = d.add_attributes();
    a->set_key("x" + std::to_string(i));
    a->set_type(ATTRIBUTE_INT64);
  }
  refused(d, "more than 1000 Attributes");
  EXPECT_EQ(h.declare(attr_declaration()).kind, ApplyKind::kUnchanged) << "nothing was stored";
}

TEST_F(FlowAttributes, InitialAttributesAreWrittenWithTheStart) {
  StartOptions o;
  *o.add_initial_attributes() = attr("status", "new");
  *o.add_initial_attributes() = attr("tags", "red", "color");
  *o.add_initial_attributes() = attr_json("doc", R"({"a": [1, 2]})");
  *o.add_initial_attributes() = attr_delete("count");  // nothing to delete: no-op
  ASSERT_EQ(h.start("f", "r1", "A", o).kind, ApplyKind::kApplied);
  auto all = h.attributes("f");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].key(), "doc");
  EXPECT_EQ(all[1].value().string_value(), "new");
  EXPECT_EQ(all[2].instance_key(), "color");
  EXPECT_EQ(h.run("f")->attribute_count(), 3u);
  EXPECT_EQ(h.run("f")->options().initial_attributes_size(), 0) << "not kept in the run";
  EXPECT_EQ(h.effects.attributes_changed, (std::vector<RunKey>{{"f", "r1"}}));
  auto events = h.history("f");
  ASSERT_EQ(events[0].kind(), FLOW_STARTED);
  EXPECT_EQ(events[0].attribute_writes_size(), 4);
  // The start Step's task carries what it reads: status and every tags instance.
  KvFlowTxn txn(h.kv);
  auto carried = task_attributes(txn, h.ref("f", "Start-1"));
  ASSERT_EQ(carried.size(), 2u);
  EXPECT_EQ(carried[0].key(), "status");
  EXPECT_EQ(carried[1].key(), "tags");
  EXPECT_EQ(carried[1].value().string_value(), "red");
}

TEST_F(FlowAttributes, ABadInitialAttributeRefusesTheStartAndWritesNothing) {
  auto refused = [&](Attribute a, const std::string& needle) {
    StartOptions o;
    *o.add_initial_attributes() = attr("status", "fine");
    *o.add_initial_attributes() = a;
    auto r = h.start("g", "r1", "A", o);
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << needle;
    EXPECT_EQ(r.code, RefusalCode::kInvalidArgument) << needle;
    EXPECT_NE(r.message.find(needle), std::string::npos) << r.message;
    EXPECT_FALSE(h.run("g").has_value());
    EXPECT_TRUE(h.attributes("g").empty());
  };
  refused(attr("nope", "x"), "Attribute 'nope', which Flow type 'A' does not declare");
  refused(attr_int("status", 3),
          "writes a INT64 value to Attribute 'status', which is declared STRING");
  refused(attr("tags", "x"), "instanceKey of AttributeMap 'tags' is empty");
  refused(attr("status", "x", "i"), "'status' is an Attribute, not an AttributeMap");
  // Any one JSON value is fine (tests/flow/attribute_json_test.cc); text that
  // does not parse is not.
  refused(attr_json("doc", "{nope"), "not valid JSON");
  Attribute big;
  big.set_key("blob");
  big.mutable_value()->set_bytes_value(std::string(kPayloadBytesMax + 1, 'x'));
  refused(big, "the limit is");
  // A blob reference stands for a string, JSON or bytes value with nothing inline.
  Attribute both = attr("status", "inline");
  both.mutable_value()->mutable_blob()->set_key("nodes/n/blobs/s/x");
  refused(both, "has a blob reference beside a value held inline");
  Attribute counted = attr_int("count", 3);
  counted.mutable_value()->mutable_blob()->set_key("nodes/n/blobs/s/x");
  refused(counted, "has a blob reference beside a value held inline");
}

TEST_F(FlowAttributes, ABlobReferenceStandsForALongValueOfItsType) {
  // The engine wrote the blob and checked the JSON (docs/engine.md, "Large
  // values"); the rules keep the reference as the value.
  StartOptions o;
  Attribute doc = attr_json("doc", "");
  doc.mutable_value()->mutable_blob()->set_key("nodes/n/blobs/s/x");
  doc.mutable_value()->mutable_blob()->set_size_bytes(kPayloadBytesMax * 5);
  *o.add_initial_attributes() = doc;
  ASSERT_EQ(h.start("g", "r1", "A", o).kind, ApplyKind::kApplied);
  auto stored = h.attributes("g");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_TRUE(stored[0].value().has_json_value());
  EXPECT_EQ(stored[0].value().blob().size_bytes(), kPayloadBytesMax * 5);
}

TEST_F(FlowAttributes, ResultWritesApplyInOrderAndAreRecorded) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  const std::string task = h.assign("f", "Start-1");
  FlowRecord r = h.result_record("f", "Start-1", task);
  auto* m = r.mutable_method_result();
  *m->mutable_decision() = go_to({go("Next")});
  *m->add_attribute_writes() = attr("status", "a");
  *m->add_attribute_writes() = attr("tags", "1", "x");
  *m->add_attribute_writes() = attr("tags", "2", "y");
  *m->add_attribute_writes() = attr("status", "b");
  *m->add_attribute_writes() = attr_delete("tags", "x");
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.effects.attributes_changed, (std::vector<RunKey>{{"f", "r1"}}));
  auto all = h.attributes("f");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].value().string_value(), "b") << "the later write wins";
  EXPECT_EQ(all[1].instance_key(), "y");
  EXPECT_EQ(h.run("f")->attribute_count(), 2u);
  auto events = h.history("f");
  ASSERT_EQ(events[1].kind(), EXECUTE_COMPLETED);
  EXPECT_EQ(events[1].attribute_writes_size(), 5);
}

TEST_F(FlowAttributes, ABadResultWriteIsRejectedAndChangesNothing) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  const std::string task = h.assign("f", "Start-1");
  FlowRecord r = h.result_record("f", "Start-1", task);
  *r.mutable_method_result()->mutable_decision() = go_to({go("Next")});
  *r.mutable_method_result()->add_attribute_writes() = attr("status", "ok");
  *r.mutable_method_result()->add_attribute_writes() = attr_int("flag", 1);
  auto result = h.apply(r);
  EXPECT_EQ(result.kind, ApplyKind::kRejected);
  EXPECT_EQ(result.code, RefusalCode::kInvalidArgument);
  EXPECT_NE(result.message.find("attributeWrites[1] writes a INT64 value to Attribute 'flag'"),
            std::string::npos)
      << result.message;
  EXPECT_TRUE(h.attributes("f").empty());
  EXPECT_EQ(h.step("f", "Start-1").method().state(), TASK_RUNNING);
  // A failed attempt's writes never apply.
  r.mutable_method_result()->set_outcome(ATTEMPT_FAILED);
  r.mutable_method_result()->set_error("boom");
  r.mutable_method_result()->clear_decision();
  r.mutable_method_result()->mutable_attribute_writes()->RemoveLast();
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_TRUE(h.attributes("f").empty());
  EXPECT_TRUE(h.effects.attributes_changed.empty());
}

TEST_F(FlowAttributes, SetAttributesOnARunningRunAllOrNothing) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  auto r = h.set_attributes("f", {attr("status", "x"), attr_int("count", 7)});
  ASSERT_EQ(r.kind, ApplyKind::kApplied) << r.message;
  EXPECT_EQ(r.run_id, "r1") << "an empty run ID is the latest run";
  EXPECT_EQ(h.effects.attributes_changed, (std::vector<RunKey>{{"f", "r1"}}));
  EXPECT_EQ(h.history("f").back().kind(), ATTRIBUTES_SET);
  EXPECT_EQ(h.history("f").back().attribute_writes_size(), 2);
  r = h.set_attributes("f", {attr("status", "y"), attr("nope", "z")});
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("writes[1] writes Attribute 'nope'"), std::string::npos) << r.message;
  EXPECT_EQ(h.attributes("f", "status")[0].value().string_value(), "x") << "nothing applied";
  r = h.set_attributes("nobody", {attr("status", "y")});
  EXPECT_EQ(r.code, RefusalCode::kNotFound);
  r = h.set_attributes("f", {attr("status", "y")}, "r9");
  EXPECT_EQ(r.code, RefusalCode::kNotFound);
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  stop.mutable_stop_flow()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);
  r = h.set_attributes("f", {attr("status", "y")});
  EXPECT_EQ(r.code, RefusalCode::kFailedPrecondition);
  EXPECT_EQ(r.message,
            "Flow 'f' run 'r1' is CANCELED; Attributes are set only while the run is RUNNING");
}

// A client repeats a write whose answer it lost: with the same request ID the
// repeat changes nothing, so it cannot put its value back over a Step's later
// write, and a repeat after the run closed is answered as the first try was.
TEST_F(FlowAttributes, ARepeatedSetAttributesRequestChangesNothing) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr("status", "client")}, "", "q-1").kind, ApplyKind::kApplied);
  // A Step's write in between (the same record kind as any later write).
  ASSERT_EQ(h.set_attributes("f", {attr("status", "step")}).kind, ApplyKind::kApplied);
  const size_t events = h.history("f").size();
  auto again = h.set_attributes("f", {attr("status", "client")}, "", "q-1");
  EXPECT_EQ(again.kind, ApplyKind::kUnchanged) << again.message;
  EXPECT_EQ(again.run_id, "r1");
  EXPECT_EQ(h.attributes("f", "status")[0].value().string_value(), "step");
  EXPECT_EQ(h.history("f").size(), events) << "no event for a repeat";
  // Another request ID is another request.
  EXPECT_EQ(h.set_attributes("f", {attr("status", "second")}, "", "q-2").kind, ApplyKind::kApplied);
  // A publish's request ID is remembered apart: the same text is a new set.
  EXPECT_EQ(h.run("f")->write_requests_size(), 2);
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  stop.mutable_stop_flow()->set_request_id("q-1");
  stop.mutable_stop_flow()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied) << "a stop with a set's ID is a new request";
  EXPECT_EQ(h.apply(stop).kind, ApplyKind::kUnchanged) << "a repeated stop is answered as before";
  EXPECT_EQ(h.set_attributes("f", {attr("status", "late")}, "", "q-2").kind, ApplyKind::kUnchanged)
      << "a repeat after the run closed is answered as its first try was";
  EXPECT_EQ(h.set_attributes("f", {attr("status", "late")}, "", "q-3").code,
            RefusalCode::kFailedPrecondition);
}

TEST_F(FlowAttributes, ARunRemembersItsLast256WriteRequestsAndRefusesLongIDs) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  for (size_t i = 0; i < kWriteRequestsRemembered + 1; ++i)
    ASSERT_EQ(h.set_attributes("f", {attr("status", "v")}, "", "q-" + std::to_string(i)).kind,
              ApplyKind::kApplied);
  EXPECT_EQ(static_cast<size_t>(h.run("f")->write_requests_size()), kWriteRequestsRemembered);
  EXPECT_EQ(h.set_attributes("f", {attr("status", "v")}, "", "q-0").kind, ApplyKind::kApplied)
      << "the oldest was forgotten";
  EXPECT_EQ(h.set_attributes("f", {attr("status", "v")}, "", "q-256").kind, ApplyKind::kUnchanged);
  auto long_id = h.set_attributes("f", {attr("status", "v")}, "", std::string(256, 'x'));
  EXPECT_EQ(long_id.code, RefusalCode::kInvalidArgument);
  EXPECT_EQ(long_id.message, "requestId is longer than 255 bytes");
}

TEST_F(FlowAttributes, ARunStoresAtMostTenThousandAttributeInstances) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  FlowRecord r;
  auto* s = r.mutable_set_attributes();
  s->set_flow_id("f");
  s->set_at_unix_ms(h.now);
  for (size_t i = 0; i + 1 < kAttributesMax; ++i)
    *s->add_writes() = attr("tags", "v", "i" + std::to_string(i));
  *s->add_writes() = attr("status", "s");
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->attribute_count(), kAttributesMax);
  EXPECT_EQ(h.set_attributes("f", {attr("status", "overwrite")}).kind, ApplyKind::kApplied)
      << "an overwrite adds no instance";
  auto full = h.set_attributes("f", {attr("tags", "v", "one-more")});
  EXPECT_EQ(full.kind, ApplyKind::kRejected);
  EXPECT_NE(full.message.find("more than 10000 Attribute instances"), std::string::npos)
      << full.message;
  EXPECT_EQ(h.set_attributes("f", {attr_delete("tags", "i0"), attr("tags", "v", "one-more")}).kind,
            ApplyKind::kApplied)
      << "a delete first makes room";
  EXPECT_EQ(h.run("f")->attribute_count(), kAttributesMax);
}

TEST_F(FlowAttributes, LockKeysQueueWaitersInOrderAndReleaseOnEveryEnd) {
  start_and_go(go_to({go("Locked"), go("Locked"), go("Locked2"), go("WaitLocked")}));
  EXPECT_EQ(h.step("f", "Locked-1").method().state(), TASK_QUEUED);
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_LOCKED) << "acct is held";
  EXPECT_EQ(h.step("f", "Locked2-1").method().state(), TASK_LOCKED);
  EXPECT_EQ(h.step("f", "WaitLocked-1").method().state(), TASK_LOCKED)
      << "'other' is wanted by the earlier waiter Locked2-1";
  ASSERT_EQ(h.run("f")->lock_waiters_size(), 3);
  // Locked-1 completes: Locked-2 (the first waiter) gets acct.
  ASSERT_EQ(h.execute("f", "Locked-1", go_to({go("Next")})).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_QUEUED);
  EXPECT_EQ(h.step("f", "Locked2-1").method().state(), TASK_LOCKED);
  bool queued = false;
  for (const auto& q : h.effects.queued) queued |= q.task.step_execution_id() == "Locked-2";
  EXPECT_TRUE(queued) << "the waiter is queued in the apply that released the key";
  // Locked-2 fails and backs off: its key goes to Locked2-1, then WaitLocked-1 waits on.
  ASSERT_EQ(h.fail("f", "Locked-2", "boom").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_BACKOFF);
  EXPECT_EQ(h.step("f", "Locked2-1").method().state(), TASK_QUEUED);
  EXPECT_EQ(h.step("f", "WaitLocked-1").method().state(), TASK_LOCKED);
  // The retry re-acquires: it waits behind Locked2-1.
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_LOCKED);
  EXPECT_EQ(h.step("f", "Locked-2").method().attempt(), 2u);
  // A withdrawn attempt keeps its keys.
  const std::string task = h.assign("f", "Locked2-1");
  FlowRecord w;
  *w.mutable_attempt_withdrawn()->mutable_task() = h.ref("f", "Locked2-1");
  w.mutable_attempt_withdrawn()->set_task_id(task);
  ASSERT_EQ(h.apply(w).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Locked2-1").method().state(), TASK_QUEUED);
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_LOCKED);
  ASSERT_EQ(h.execute("f", "Locked2-1", go_to({go("Next")})).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_QUEUED);
  EXPECT_EQ(h.step("f", "WaitLocked-1").method().state(), TASK_QUEUED);
  auto events = h.history("f");
  std::vector<std::string> acquired;
  for (const auto& e : events) {
    if (e.kind() != LOCKS_ACQUIRED) continue;
    acquired.push_back(e.step_execution_id() + "#" + std::to_string(e.attempt()));
    EXPECT_EQ(e.method(), e.step_execution_id() == "WaitLocked-1" ? WAIT_FOR : EXECUTE);
  }
  EXPECT_EQ(acquired, (std::vector<std::string>{"Locked-1#1", "Locked-2#1", "Locked2-1#1",
                                                "WaitLocked-1#1", "Locked-2#2"}))
      << "WaitLocked-1 waited first";
  EXPECT_EQ(count("f", LOCKS_RELEASED), 3u);
  // Closing the run releases every key and drops every waiter.
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  stop.mutable_stop_flow()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->locks_size(), 0);
  EXPECT_EQ(h.run("f")->lock_waiters_size(), 0);
}

TEST_F(FlowAttributes, AMovementsOverrideCanBringLockKeys) {
  StepMovement m = go("Next");
  m.mutable_options()->mutable_execute()->add_lock_keys("acct");
  start_and_go(go_to({go("Locked"), m}));
  EXPECT_EQ(h.step("f", "Next-1").method().state(), TASK_LOCKED);
  m.mutable_options()->mutable_execute()->add_lock_keys(std::string(300, 'k'));
  ASSERT_EQ(h.start("g", "r1", "A").kind, ApplyKind::kApplied);
  const std::string task = h.assign("g", "Start-1");
  FlowRecord r = h.result_record("g", "Start-1", task);
  *r.mutable_method_result()->mutable_decision() = go_to({m});
  auto result = h.apply(r);
  EXPECT_EQ(result.kind, ApplyKind::kRejected);
  EXPECT_NE(result.message.find("lockKeys[1] is longer than 255 bytes"), std::string::npos)
      << result.message;
}

TEST_F(FlowAttributes, AnRpcRunsOnceWritesAttributesAndStartsSteps) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  h.set_attributes("f", {attr("status", "s0")});
  auto r = h.invoke("f", "req:1", "get", 5'000);
  ASSERT_EQ(r.kind, ApplyKind::kApplied) << r.message;
  EXPECT_EQ(r.run_id, "r1");
  ASSERT_EQ(h.effects.queued.size(), 1u);
  EXPECT_EQ(h.effects.queued[0].task.step_execution_id(), "req:1");
  EXPECT_EQ(h.effects.queued[0].task.method(), RPC);
  EXPECT_EQ(h.effects.queued[0].task.attempt(), 1u);
  EXPECT_EQ(h.effects.queued[0].durability, ASYNC);
  EXPECT_EQ(h.effects.timers_set, std::vector<int64_t>{h.now + 5'000});
  EXPECT_EQ(h.invoke("f", "req:1", "get").kind, ApplyKind::kUnchanged) << "a repeat waits";
  {
    KvFlowTxn txn(h.kv);
    auto carried = task_attributes(txn, Harness::rpc_ref("f", "req:1"));
    ASSERT_EQ(carried.size(), 1u);
    EXPECT_EQ(carried[0].value().string_value(), "s0");
  }
  const std::string task = h.assign_rpc("f", "req:1");
  EXPECT_EQ(h.rpc("f", "req:1")->method().state(), TASK_RUNNING);
  FlowRecord result = h.rpc_result_record("f", "req:1", task);
  auto* m = result.mutable_method_result();
  m->mutable_rpc()->mutable_output()->set_data("out");
  *m->mutable_rpc()->add_next_steps() = go("Next", "from-rpc");
  *m->add_attribute_writes() = attr("status", "s1");
  ASSERT_EQ(h.apply(result).kind, ApplyKind::kApplied);
  auto x = h.rpc("f", "req:1");
  EXPECT_TRUE(x->done());
  EXPECT_EQ(x->outcome(), ATTEMPT_COMPLETED);
  EXPECT_EQ(x->output().data(), "out");
  EXPECT_EQ(h.effects.rpcs_done, (std::vector<RunItem>{{{"f", "r1"}, "req:1"}}));
  EXPECT_EQ(h.effects.attributes_changed, (std::vector<RunKey>{{"f", "r1"}}));
  ASSERT_EQ(h.effects.ended.size(), 1u);
  EXPECT_EQ(h.effects.ended[0].task_id, task);
  EXPECT_EQ(h.step("f", "Next-1").parent_execution_id(), "rpc:get");
  EXPECT_EQ(h.step("f", "Next-1").input().data(), "from-rpc");
  EXPECT_EQ(h.attributes("f", "status")[0].value().string_value(), "s1");
  EXPECT_FALSE(h.next_timer_at().has_value()) << "the deadline timer is gone";
  auto completed = h.history("f").back();
  for (const auto& e : h.history("f"))
    if (e.kind() == RPC_COMPLETED) completed = e;
  EXPECT_EQ(completed.kind(), RPC_COMPLETED);
  EXPECT_EQ(completed.rpc_name(), "get");
  EXPECT_EQ(completed.output().data(), "out");
  EXPECT_EQ(completed.attribute_writes_size(), 1);
  EXPECT_EQ(h.invoke("f", "req:1", "get").kind, ApplyKind::kUnchanged)
      << "a completed RPC answers its output";
  EXPECT_EQ(h.apply(result).kind, ApplyKind::kStale) << "its result came already";
}

TEST_F(FlowAttributes, InvokeRpcRefusalsNameTheProblem) {
  EXPECT_EQ(h.invoke("nobody", "rpc:1", "get").code, RefusalCode::kNotFound);
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  auto r = h.invoke("f", "rpc:1", "nope");
  EXPECT_EQ(r.code, RefusalCode::kInvalidArgument);
  EXPECT_EQ(r.message, "RPC 'nope' is not declared by Flow type 'A'");
  EXPECT_EQ(h.invoke("f", "rpc:1", "get", 0).code, RefusalCode::kInvalidArgument);
  EXPECT_EQ(h.invoke("f", "rpc:1", "get", 60'001).code, RefusalCode::kInvalidArgument);
  EXPECT_EQ(h.invoke("f", "", "get").code, RefusalCode::kInvalidArgument);
  EXPECT_EQ(h.invoke("f", "req:" + std::string(kNameBytesMax, 'r'), "get").kind,
            ApplyKind::kApplied)
      << "a request ID of the longest name fits";
  EXPECT_EQ(h.invoke("f", "req:" + std::string(kNameBytesMax + 5, 'r'), "get").code,
            RefusalCode::kInvalidArgument);
  EXPECT_EQ(h.invoke("f", "req:" + std::string(kNameBytesMax, 'r') + "\x1f", "get").code,
            RefusalCode::kInvalidArgument);
  FlowRecord big =
      h.invoke_record("f", "rpc:1", "get", 1'000, std::string(kPayloadBytesMax + 1, 'x'));
  EXPECT_EQ(h.apply(big).code, RefusalCode::kInvalidArgument);
  EXPECT_FALSE(h.rpc("f", "rpc:1").has_value());
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  stop.mutable_stop_flow()->set_mode(STOP_TERMINATE);
  stop.mutable_stop_flow()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);
  r = h.invoke("f", "rpc:1", "get");
  EXPECT_EQ(r.code, RefusalCode::kFailedPrecondition);
  EXPECT_EQ(r.message,
            "Flow 'f' run 'r1' is TERMINATED; RPCs are invoked only while the run is RUNNING");
}

TEST_F(FlowAttributes, AnRpcThatFailsOrTimesOutEndsWithoutRetryAndCanRunAnew) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.invoke("f", "req:a", "get").kind, ApplyKind::kApplied);
  std::string task = h.assign_rpc("f", "req:a");
  FlowRecord stale = h.rpc_result_record("f", "req:a", "other-task");
  EXPECT_EQ(h.apply(stale).kind, ApplyKind::kStale);
  FlowRecord failed = h.rpc_result_record("f", "req:a", task);
  failed.mutable_method_result()->set_outcome(ATTEMPT_FAILED);
  failed.mutable_method_result()->set_error("handler said no");
  ASSERT_EQ(h.apply(failed).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.rpc("f", "req:a")->outcome(), ATTEMPT_FAILED);
  EXPECT_EQ(h.rpc("f", "req:a")->error(), "handler said no");
  EXPECT_EQ(h.history("f").back().kind(), RPC_FAILED);
  EXPECT_EQ(h.history("f").back().error(), "handler said no");
  EXPECT_EQ(h.effects.rpcs_done, (std::vector<RunItem>{{{"f", "r1"}, "req:a"}}));
  auto queued_rpcs = [&] {
    size_t n = 0;
    for (auto& [k, v] : h.kv.scan(keys::kTaskQueuePrefix)) {
      TaskRef ref;
      ref.ParseFromString(v);
      n += ref.method() == RPC;
    }
    return n;
  };
  EXPECT_EQ(queued_rpcs(), 0u) << "never retried";
  // The same ID again runs anew; its deadline passes while it is queued.
  h.now += 10;
  ASSERT_EQ(h.invoke("f", "req:a", "get", 250).kind, ApplyKind::kApplied);
  EXPECT_FALSE(h.rpc("f", "req:a")->done());
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  auto x = h.rpc("f", "req:a");
  EXPECT_EQ(x->outcome(), ATTEMPT_TIMED_OUT);
  EXPECT_EQ(x->error(), "the RPC's timeout of 250 ms passed before it completed");
  EXPECT_EQ(queued_rpcs(), 0u) << "dequeued";
  EXPECT_EQ(h.run("f")->rpcs_done_size(), 1);
}

TEST_F(FlowAttributes, AnRpcHoldsItsLockKeysUntilItEnds) {
  start_and_go(go_to({go("Locked")}));
  ASSERT_EQ(h.invoke("f", "rpc:1", "bump").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.rpc("f", "rpc:1")->method().state(), TASK_LOCKED);
  EXPECT_TRUE(h.effects.queued.empty());
  ASSERT_EQ(h.invoke("f", "rpc:2", "get").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.rpc("f", "rpc:2")->method().state(), TASK_QUEUED) << "no keys: queued at once";
  ASSERT_EQ(h.execute("f", "Locked-1", go_to({go("Locked")})).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.rpc("f", "rpc:1")->method().state(), TASK_QUEUED);
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_LOCKED) << "behind the RPC";
  bool rpc_queued = false;
  for (const auto& q : h.effects.queued)
    rpc_queued |= q.task.method() == RPC && q.durability == ASYNC;
  EXPECT_TRUE(rpc_queued);
  const std::string task = h.assign_rpc("f", "rpc:1");
  FlowRecord done = h.rpc_result_record("f", "rpc:1", task);
  ASSERT_EQ(h.apply(done).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_QUEUED);
}

TEST_F(FlowAttributes, RecoveryEndsEveryOpenRpcAndTheRunsCloseFailsThem) {
  start_and_go(go_to({go("Locked")}));
  const std::string step_task = h.assign("f", "Locked-1");
  ASSERT_EQ(h.invoke("f", "rpc:run", "get").kind, ApplyKind::kApplied);
  h.assign_rpc("f", "rpc:run");
  ASSERT_EQ(h.invoke("f", "rpc:queued", "get").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.invoke("f", "rpc:locked", "bump").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.rpc("f", "rpc:locked")->method().state(), TASK_LOCKED);
  {
    KvFlowTxn txn(h.kv);
    Effects fx;
    recover_attempts(txn, h.now, fx);
    EXPECT_EQ(fx.rpcs_done.size(), 3u);
    EXPECT_EQ(fx.ended.size(), 2u) << "the running step attempt and the running RPC";
  }
  ASSERT_TRUE(check_state(h.kv).is_ok()) << check_state(h.kv).message();
  for (const char* id : {"rpc:run", "rpc:queued", "rpc:locked"}) {
    auto x = h.rpc("f", id);
    EXPECT_TRUE(x->done()) << id;
    EXPECT_EQ(x->outcome(), ATTEMPT_NOT_COMPLETED) << id;
  }
  auto locked = h.step("f", "Locked-1");
  EXPECT_EQ(locked.method().last_failure().outcome(), ATTEMPT_NOT_COMPLETED);
  EXPECT_NE(locked.method().task_id(), step_task);
  // Close with an RPC open: it fails naming the status.
  ASSERT_EQ(h.invoke("f", "rpc:late", "get").kind, ApplyKind::kApplied);
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  stop.mutable_stop_flow()->set_mode(STOP_FAIL);
  stop.mutable_stop_flow()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);
  auto late = h.rpc("f", "rpc:late");
  EXPECT_EQ(late->outcome(), ATTEMPT_FAILED);
  EXPECT_EQ(late->error(), "the run closed (FAILED) before the RPC completed");
  EXPECT_EQ(h.effects.rpcs_done, (std::vector<RunItem>{{{"f", "r1"}, "rpc:late"}}));
}

TEST_F(FlowAttributes, ARunKeepsTheLast256DoneRpcs) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  for (size_t i = 0; i <= kRpcsDoneKept; ++i) {
    const std::string id = "rpc:" + std::to_string(i);
    ASSERT_EQ(h.invoke("f", id, "get", 1).kind, ApplyKind::kApplied);
    ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  }
  EXPECT_FALSE(h.rpc("f", "rpc:0").has_value()) << "the oldest is forgotten";
  EXPECT_TRUE(h.rpc("f", "rpc:1").has_value());
  EXPECT_EQ(static_cast<size_t>(h.run("f")->rpcs_done_size()), kRpcsDoneKept);
}

TEST_F(FlowAttributes, ACanceledWaiterLeavesTheLockQueue) {
  start_and_go(go_to({go("Locked"), go("Locked"), go("Next")}));
  ASSERT_EQ(h.step("f", "Locked-2").method().state(), TASK_LOCKED);
  StepDecision cancel;
  cancel.mutable_dead_end();
  cancel.add_cancel_step_types("Locked");
  ASSERT_EQ(h.execute("f", "Next-1", cancel).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Locked-1").phase(), PHASE_CANCELED);
  EXPECT_EQ(h.step("f", "Locked-2").phase(), PHASE_CANCELED);
  EXPECT_EQ(h.run("f")->locks_size(), 0);
  EXPECT_EQ(h.run("f")->lock_waiters_size(), 0);
  for (const auto& q : h.effects.queued)
    EXPECT_NE(q.task.step_execution_id(), "Locked-2") << "no key goes to a canceled waiter";
}

TEST_F(FlowAttributes, AnRpcResultWithABadNextStepIsRejectedAndAWithdrawnRpcKeepsItsKeys) {
  ASSERT_EQ(h.start("f", "r1", "A").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.invoke("f", "rpc:1", "bump").kind, ApplyKind::kApplied);
  std::string task = h.assign_rpc("f", "rpc:1");
  FlowRecord w;
  *w.mutable_attempt_withdrawn()->mutable_task() = Harness::rpc_ref("f", "rpc:1");
  w.mutable_attempt_withdrawn()->set_task_id(task);
  ASSERT_EQ(h.apply(w).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.rpc("f", "rpc:1")->method().state(), TASK_QUEUED);
  EXPECT_EQ(h.run("f")->locks_size(), 1) << "acct stays held";
  task = h.assign_rpc("f", "rpc:1");
  FlowRecord bad = h.rpc_result_record("f", "rpc:1", task);
  bad.mutable_method_result()->mutable_rpc()->add_next_steps()->set_step_type("Nope");
  auto r = h.apply(bad);
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("nextSteps[0] goes to Step type 'Nope'"), std::string::npos)
      << r.message;
  EXPECT_EQ(h.rpc("f", "rpc:1")->method().state(), TASK_RUNNING);
  FlowRecord wrong = h.rpc_result_record("f", "rpc:1", task);
  wrong.mutable_method_result()->mutable_decision()->mutable_dead_end();
  EXPECT_EQ(h.apply(wrong).kind, ApplyKind::kRejected) << "an RPC returns no decision";
  KvFlowTxn txn(h.kv);
  EXPECT_TRUE(task_attributes(txn, Harness::rpc_ref("f", "nope")).empty());
}

TEST_F(FlowAttributes, ARunReplacedByTerminateIfRunningGetsItsOwnInitialAttributes) {
  StartOptions o;
  *o.add_initial_attributes() = attr("status", "first");
  ASSERT_EQ(h.start("f", "r1", "A", o).kind, ApplyKind::kApplied);
  o.set_id_reuse_policy(TERMINATE_IF_RUNNING);
  o.mutable_initial_attributes(0)->mutable_value()->set_string_value("second");
  *o.add_initial_attributes() = attr_int("status", 1);
  EXPECT_EQ(h.start("f", "r2", "A", o).kind, ApplyKind::kRejected);
  EXPECT_EQ(h.run("f")->status(), FLOW_RUNNING) << "a refused start terminates nothing";
  o.mutable_initial_attributes()->RemoveLast();
  ASSERT_EQ(h.start("f", "r2", "A", o).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_TERMINATED);
  EXPECT_EQ(h.attributes("f", "status", "r1")[0].value().string_value(), "first");
  EXPECT_EQ(h.attributes("f", "status", "r2")[0].value().string_value(), "second");
  EXPECT_EQ(h.set_attributes("f", {attr("status", "third")}).run_id, "r2");
}

}  // namespace
}  // namespace dex::flow
