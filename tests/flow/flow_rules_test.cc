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

}  // namespace
}  // namespace dex::flow
