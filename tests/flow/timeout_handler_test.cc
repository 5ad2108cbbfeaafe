// The Flow's timeout handler (docs/flow-rules.md, "Timeout handler"): timeout
// policy HANDLER runs the declared handler once when the flow timeout fires;
// its decision applies like an Execute's; a handler that fails for good ends
// the run TIMED_OUT.
#include <gtest/gtest.h>

#include "flow/declaration.h"
#include "flow_test_util.h"

namespace dex::flow {
namespace {

using namespace dex::flow::testing;

constexpr int64_t kTimeoutMs = 5'000;

// T: Work (the start Step), Cleanup, Wait (WaitFor); Attributes status and
// note; Channel c; a timeout handler that reads status.
FlowDeclaration handled() {
  FlowDeclaration d;
  d.set_flow_type("T");
  d.set_start_step_type("Work");
  *d.add_steps() = step_decl("Work");
  *d.add_steps() = step_decl("Cleanup");
  *d.add_steps() = step_decl("Wait", true);
  for (const char* key : {"status", "note"}) {
    auto* a = d.add_attributes();
    a->set_key(key);
    a->set_type(ATTRIBUTE_STRING);
  }
  d.add_channels()->set_name("c");
  d.set_has_timeout_handler(true);
  d.mutable_on_timeout()->add_attribute_reads("status");
  return d;
}

StartOptions handler_policy() {
  StartOptions o;
  o.set_timeout_ms(kTimeoutMs);
  o.set_timeout_policy(TIMEOUT_HANDLER);
  return o;
}

std::vector<HistoryKind> kinds(const std::vector<HistoryEvent>& events) {
  std::vector<HistoryKind> out;
  for (const auto& e : events)
    if (e.kind() != LOCKS_ACQUIRED && e.kind() != LOCKS_RELEASED) out.push_back(e.kind());
  return out;
}

class TimeoutHandler : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(h.declare(handled()).kind, ApplyKind::kApplied); }

  // Starts "f" under HANDLER with Work-1 running; fires the flow timeout.
  void start_and_time_out(StartOptions options = handler_policy()) {
    ASSERT_EQ(h.start("f", "r1", "T", options).kind, ApplyKind::kApplied);
    work_task = h.assign("f", "Work-1");
    ASSERT_EQ(h.next_timer_at(), h.now + kTimeoutMs);
    ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  }

  TaskRef handler_ref(const std::string& run_id = "r1") {
    TaskRef r;
    r.set_flow_id("f");
    r.set_run_id(run_id);
    r.set_step_execution_id("timeout");
    r.set_method(ON_TIMEOUT);
    r.set_attempt(h.run("f", run_id)->timeout_handler().attempt());
    return r;
  }

  // Hands the handler's queued attempt to a Worker; its task ID.
  std::string assign_handler(const std::string& run_id = "r1") {
    FlowRecord r;
    r.set_at_unix_ms(h.now);
    auto* a = r.add_assignments();
    *a->mutable_task() = handler_ref(run_id);
    a->set_task_id("e1." + std::to_string(++h.tasks));
    a->set_worker_id("w1");
    h.apply(r);
    EXPECT_EQ(h.effects.started.size(), 1u) << "the handler was not queued";
    return a->task_id();
  }

  FlowRecord handler_result(const std::string& task_id, const StepDecision& decision,
                            const std::string& run_id = "r1") {
    FlowRecord r;
    auto* m = r.mutable_method_result();
    *m->mutable_task() = handler_ref(run_id);
    m->set_task_id(task_id);
    m->set_outcome(ATTEMPT_COMPLETED);
    *m->mutable_decision() = decision;
    m->set_at_unix_ms(h.now);
    return r;
  }

  FlowRecord handler_failure(const std::string& task_id, const std::string& error,
                             bool non_retryable = false, AttemptOutcome outcome = ATTEMPT_FAILED) {
    FlowRecord r = handler_result(task_id, {});
    r.mutable_method_result()->clear_decision();
    r.mutable_method_result()->set_outcome(outcome);
    r.mutable_method_result()->set_error(error);
    r.mutable_method_result()->set_non_retryable(non_retryable);
    return r;
  }

  Harness h;
  std::string work_task;
};

TEST_F(TimeoutHandler, ADeclarationsHandlerOptionsAreValidated) {
  auto refused = [&](FlowDeclaration d, const std::string& what) {
    auto r = h.declare(d);
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << what;
    EXPECT_NE(r.message.find(what), std::string::npos) << r.message;
  };
  FlowDeclaration without = handled();
  without.set_has_timeout_handler(false);
  refused(without, "onTimeout options but hasTimeoutHandler is false");
  FlowDeclaration locked = handled();
  locked.mutable_on_timeout()->mutable_options()->add_lock_keys("k");
  refused(locked, "takes no lock keys");
  FlowDeclaration policy = handled();
  policy.mutable_on_timeout()->mutable_options()->set_failure_policy(PROCEED_TO_STEP);
  refused(policy, "ends the run TIMED_OUT");
  FlowDeclaration reads = handled();
  reads.mutable_on_timeout()->add_attribute_reads("nope");
  refused(reads, "reads Attribute 'nope'");
  FlowDeclaration timeout = handled();
  timeout.mutable_on_timeout()->mutable_options()->set_attempt_timeout_ms(-1);
  refused(timeout, "onTimeout.options.attemptTimeoutMs");
  // Stored with a method's defaults, but no failure policy, and no durability
  // unless declared (the run's FlowConfig default applies).
  KvFlowTxn txn(h.kv);
  const MethodOptions o = txn.declaration("T", 0)->declaration().on_timeout().options();
  EXPECT_EQ(o.attempt_timeout_ms(), kAttemptTimeoutDefaultMs);
  EXPECT_EQ(o.retry().maximum_attempts(), kRetryMaximumAttemptsDefault);
  EXPECT_EQ(o.durability(), DURABILITY_UNSPECIFIED);
  EXPECT_EQ(timeout_handler_options(txn.declaration("T", 0)->declaration()).durability(), SYNC);
  EXPECT_EQ(o.failure_policy(), FAILURE_POLICY_UNSPECIFIED);
}

TEST_F(TimeoutHandler, HandlerPolicyNeedsADeclaredHandler) {
  FlowDeclaration plain = handled();
  plain.set_flow_type("Plain");
  plain.set_has_timeout_handler(false);
  plain.clear_on_timeout();
  ASSERT_EQ(h.declare(plain).kind, ApplyKind::kApplied);
  auto r = h.start("p", "r1", "Plain", handler_policy());
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_EQ(r.code, RefusalCode::kInvalidArgument);
  EXPECT_NE(r.message.find("Flow type 'Plain' declares none"), std::string::npos) << r.message;
  EXPECT_EQ(h.start("f", "r1", "T", handler_policy()).kind, ApplyKind::kApplied);
}

TEST_F(TimeoutHandler, TheTimeoutQueuesTheHandlerOnceWhileStepsKeepRunning) {
  start_and_time_out();
  ASSERT_EQ(h.effects.queued.size(), 1u);
  EXPECT_EQ(h.effects.queued[0].task.method(), ON_TIMEOUT);
  EXPECT_EQ(h.effects.queued[0].task.step_execution_id(), "timeout");
  EXPECT_EQ(h.effects.queued[0].task.attempt(), 1u);
  EXPECT_EQ(h.effects.queued[0].durability, SYNC);
  EXPECT_TRUE(h.effects.ended.empty()) << "Work-1 keeps running";
  EXPECT_TRUE(h.effects.closed.empty());
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_RUNNING);
  EXPECT_TRUE(run->timeout_handled());
  EXPECT_EQ(run->timeout_handler().state(), TASK_QUEUED);
  EXPECT_EQ(h.step("f", "Work-1").method().state(), TASK_RUNNING);
  EXPECT_EQ(h.history("f").back().kind(), TIMEOUT_HANDLER_STARTED);
  EXPECT_EQ(h.history("f").back().reason(), "the flow timeout of 5000 ms passed");
  EXPECT_FALSE(h.next_timer_at().has_value()) << "no flow timeout any more";
  // The same timer again: the run times out once.
  FlowRecord again;
  auto* t = again.mutable_timer_fired();
  t->mutable_key()->set_flow_id("f");
  t->mutable_key()->set_run_id("r1");
  t->mutable_key()->set_kind(FLOW_TIMEOUT);
  t->set_fire_at_ms(h.now);
  t->set_at_unix_ms(h.now);
  EXPECT_EQ(h.apply(again).kind, ApplyKind::kStale);
  // A Step's result still applies while the handler waits for a Worker.
  FlowRecord go = h.result_record("f", "Work-1", work_task);
  *go.mutable_method_result()->mutable_decision() = go_to({testing::go("Cleanup")});
  EXPECT_EQ(h.apply(go).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->timeout_handler().state(), TASK_QUEUED);
}

TEST_F(TimeoutHandler, ItsForceFailClosesTheRunFailedWithItsReasonAndItsWrites) {
  start_and_time_out();
  const std::string task = assign_handler();
  EXPECT_EQ(h.run("f")->timeout_handler().state(), TASK_RUNNING);
  StepDecision fail;
  fail.set_force_fail("processing deadline reached");
  FlowRecord r = handler_result(task, fail);
  *r.mutable_method_result()->add_attribute_writes() = attr("status", "timed out");
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_FAILED);
  EXPECT_EQ(run->close_reason(), "processing deadline reached");
  EXPECT_EQ(run->timeout_handler().state(), TASK_STATE_UNSPECIFIED);
  ASSERT_EQ(h.attributes("f", "status").size(), 1u);
  EXPECT_EQ(h.attributes("f", "status")[0].value().string_value(), "timed out");
  // Work-1 was still running: its Worker is told; the handler's own task ended COMPLETED.
  ASSERT_EQ(h.effects.ended.size(), 2u);
  EXPECT_EQ(h.effects.ended[0].task.method(), ON_TIMEOUT);
  EXPECT_EQ(h.effects.ended[0].outcome, ATTEMPT_COMPLETED);
  EXPECT_EQ(h.effects.ended[1].task.step_execution_id(), "Work-1");
  EXPECT_EQ(h.effects.ended[1].outcome, ATTEMPT_NOT_COMPLETED);
  const auto events = h.history("f");
  EXPECT_EQ(kinds(events), (std::vector<HistoryKind>{FLOW_STARTED, TIMEOUT_HANDLER_STARTED,
                                                     TIMEOUT_HANDLER_COMPLETED, FLOW_CLOSED}));
  EXPECT_EQ(events[2].decision().force_fail(), "processing deadline reached");
  EXPECT_EQ(events[2].attribute_writes_size(), 1);
  EXPECT_EQ(events[2].attempt(), 1u);
  // Late results: the Step's and a repeat of the handler's.
  FlowRecord late = h.result_record("f", "Work-1", work_task);
  *late.mutable_method_result()->mutable_decision() = graceful("late");
  EXPECT_EQ(h.apply(late).kind, ApplyKind::kStale);
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kStale);
}

TEST_F(TimeoutHandler, ItsGoToStartsStepsItParentsAndCancelSiblingsCancelsEveryActiveStep) {
  start_and_time_out();
  const std::string task = assign_handler();
  StepDecision d = go_to({testing::go("Cleanup", "why")});
  d.set_cancel_siblings(true);
  ASSERT_EQ(h.apply(handler_result(task, d)).kind, ApplyKind::kApplied);
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_RUNNING);
  EXPECT_EQ(h.step("f", "Work-1").phase(), PHASE_CANCELED);
  const StepExecution cleanup = h.step("f", "Cleanup-1");
  EXPECT_EQ(cleanup.parent_execution_id(), "timeout");
  EXPECT_EQ(cleanup.input().data(), "why");
  EXPECT_FALSE(h.next_timer_at().has_value()) << "the run has no timeout any more";
  // The run completes by its Steps as usual; the output names the decider.
  ASSERT_EQ(h.execute("f", "Cleanup-1", graceful("cleaned")).kind, ApplyKind::kApplied);
  run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_COMPLETED);
  ASSERT_EQ(run->outputs_size(), 1);
  EXPECT_EQ(run->outputs(0).step_execution_id(), "Cleanup-1");
}

TEST_F(TimeoutHandler, ItsGracefulCompleteWaitsForTheActiveSteps) {
  start_and_time_out();
  const std::string task = assign_handler();
  ASSERT_EQ(h.apply(handler_result(task, graceful("by handler"))).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_RUNNING) << "Work-1 is still active";
  FlowRecord end = h.result_record("f", "Work-1", work_task);
  end.mutable_method_result()->mutable_decision()->mutable_dead_end();
  ASSERT_EQ(h.apply(end).kind, ApplyKind::kApplied);
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_COMPLETED);
  ASSERT_EQ(run->outputs_size(), 1);
  EXPECT_EQ(run->outputs(0).step_execution_id(), "timeout");
  EXPECT_EQ(run->outputs(0).step_type(), "");
  EXPECT_EQ(run->outputs(0).output().data(), "by handler");
}

TEST_F(TimeoutHandler, AFailingHandlerRetriesByItsPolicyThenTheRunEndsTimedOut) {
  start_and_time_out();
  std::string task = assign_handler();
  ASSERT_EQ(h.apply(handler_failure(task, "db down")).kind, ApplyKind::kApplied);
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_RUNNING);
  EXPECT_EQ(run->timeout_handler().state(), TASK_BACKOFF);
  EXPECT_EQ(run->timeout_handler().attempt(), 2u);
  EXPECT_EQ(run->timeout_handler().last_failure().error(), "db down");
  EXPECT_EQ(h.next_timer_at(), h.now + 1'000) << "the default first backoff";
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  ASSERT_EQ(h.effects.queued.size(), 1u);
  EXPECT_EQ(h.effects.queued[0].task.attempt(), 2u);
  task = assign_handler();
  ASSERT_EQ(h.apply(handler_failure(task, "db down", false, ATTEMPT_TIMED_OUT)).kind,
            ApplyKind::kApplied);
  EXPECT_EQ(h.next_timer_at(), h.now + 2'000);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  task = assign_handler();
  ASSERT_EQ(h.apply(handler_failure(task, "still down")).kind, ApplyKind::kApplied);
  run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_TIMED_OUT);
  EXPECT_EQ(run->close_reason(),
            "the flow timeout of 5000 ms passed and its timeout handler failed after 3 "
            "attempts: still down");
  const auto events = h.history("f");
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2].kind(), TIMEOUT_HANDLER_FAILED);
  EXPECT_EQ(events[events.size() - 2].attempt(), 3u);
  EXPECT_EQ(events[events.size() - 2].error(), "still down");
  EXPECT_EQ(h.step("f", "Work-1").phase(), PHASE_CANCELED);
}

TEST_F(TimeoutHandler, ANonRetryableFailureEndsTheRunAtOnceAndItsFlowRetryGetsAFreshTimeout) {
  StartOptions o = handler_policy();
  o.mutable_retry_policy()->set_initial_interval_ms(1'000);
  o.mutable_retry_policy()->set_maximum_attempts(2);
  start_and_time_out(o);
  const std::string task = assign_handler();
  ASSERT_EQ(h.apply(handler_failure(task, "bug", true)).kind, ApplyKind::kApplied);
  auto run = h.run("f");
  EXPECT_EQ(run->status(), FLOW_TIMED_OUT);
  EXPECT_NE(run->close_reason().find("failed after 1 attempt: bug"), std::string::npos)
      << run->close_reason();
  ASSERT_EQ(run->next_run_id(), "r1.2");
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // the Flow retry
  auto retry = h.run("f", "r1.2");
  ASSERT_TRUE(retry);
  EXPECT_FALSE(retry->timeout_handled());
  EXPECT_EQ(h.next_timer_at(), h.now + kTimeoutMs) << "a fresh timeout budget";
  (void)h.assign("f", "Work-1", "r1.2");
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r1.2")->timeout_handler().state(), TASK_QUEUED);
  // The handler's ForceFail fails the last run: no runs left.
  const std::string second = assign_handler("r1.2");
  StepDecision fail;
  fail.set_force_fail("gave up");
  ASSERT_EQ(h.apply(handler_result(second, fail, "r1.2")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r1.2")->status(), FLOW_FAILED);
  EXPECT_TRUE(h.run("f", "r1.2")->next_run_id().empty());
}

TEST_F(TimeoutHandler, AStepThatClosesTheRunFirstEndsTheHandlerAndItsResultIsStale) {
  start_and_time_out();
  const std::string task = assign_handler();
  StepDecision done;
  done.mutable_force_complete()->set_data("in time after all");
  FlowRecord r = h.result_record("f", "Work-1", work_task);
  *r.mutable_method_result()->mutable_decision() = done;
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_COMPLETED);
  ASSERT_EQ(h.effects.ended.size(), 2u);
  EXPECT_EQ(h.effects.ended[1].task.method(), ON_TIMEOUT);
  EXPECT_EQ(h.effects.ended[1].task_id, task);
  EXPECT_EQ(h.effects.ended[1].outcome, ATTEMPT_NOT_COMPLETED);
  StepDecision fail;
  fail.set_force_fail("too late");
  EXPECT_EQ(h.apply(handler_result(task, fail)).kind, ApplyKind::kStale);
  EXPECT_EQ(h.run("f")->status(), FLOW_COMPLETED);
}

TEST_F(TimeoutHandler, AStopEndsAQueuedOrBackingOffHandler) {
  start_and_time_out();
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  stop.mutable_stop_flow()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);  // check_state: nothing left queued
  EXPECT_EQ(h.run("f")->status(), FLOW_CANCELED);
  EXPECT_EQ(h.run("f")->timeout_handler().state(), TASK_STATE_UNSPECIFIED);
  ASSERT_EQ(h.start("g", "r1", "T", handler_policy()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  FlowRecord assign;
  assign.set_at_unix_ms(h.now);
  auto* a = assign.add_assignments();
  *a->mutable_task() = handler_ref();
  a->mutable_task()->set_flow_id("g");
  a->set_task_id("g1");
  a->set_worker_id("w1");
  h.apply(assign);
  FlowRecord failed = handler_failure("g1", "x");
  failed.mutable_method_result()->mutable_task()->set_flow_id("g");
  ASSERT_EQ(h.apply(failed).kind, ApplyKind::kApplied);
  stop.mutable_stop_flow()->set_flow_id("g");
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);  // check_state: no retry timer left
  EXPECT_FALSE(h.next_timer_at().has_value());
}

TEST_F(TimeoutHandler, AWithdrawnAttemptIsQueuedAgainAndRecoveryConsumesARetry) {
  start_and_time_out();
  std::string task = assign_handler();
  FlowRecord w;
  *w.mutable_attempt_withdrawn()->mutable_task() = handler_ref();
  w.mutable_attempt_withdrawn()->set_task_id(task);
  w.mutable_attempt_withdrawn()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(w).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->timeout_handler().state(), TASK_QUEUED);
  EXPECT_EQ(h.run("f")->timeout_handler().attempt(), 1u) << "the same number";
  EXPECT_EQ(h.apply(w).kind, ApplyKind::kStale);
  task = assign_handler();
  Effects fx;
  {
    KvFlowTxn txn(h.kv);
    recover_attempts(txn, h.now, fx);
  }
  ASSERT_TRUE(check_state(h.kv).is_ok());
  auto run = h.run("f");
  EXPECT_EQ(run->timeout_handler().state(), TASK_BACKOFF);
  EXPECT_EQ(run->timeout_handler().attempt(), 2u);
  EXPECT_EQ(run->timeout_handler().last_failure().outcome(), ATTEMPT_NOT_COMPLETED);
  StepDecision fail;
  fail.set_force_fail("late");
  EXPECT_EQ(h.apply(handler_result(task, fail)).kind, ApplyKind::kStale)
      << "the old process's task";
}

TEST_F(TimeoutHandler, AnInvalidDecisionIsRefusedAndChangesNothing) {
  start_and_time_out();
  const std::string task = assign_handler();
  const auto before = h.kv.data();
  auto r = h.apply(handler_result(task, go_to({testing::go("Undeclared")})));
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("'Undeclared'"), std::string::npos) << r.message;
  FlowRecord wait = handler_result(task, {});
  wait.mutable_method_result()->clear_decision();
  *wait.mutable_method_result()->mutable_wait() = wait_of(ANY_OF, {timer_after(10)});
  r = h.apply(wait);
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_EQ(r.message, "the timeout handler returns a decision, not a wait");
  FlowRecord bad_write = handler_result(task, graceful("x"));
  *bad_write.mutable_method_result()->add_attribute_writes() = attr_int("status", 1);
  EXPECT_EQ(h.apply(bad_write).kind, ApplyKind::kRejected);
  EXPECT_EQ(h.kv.data(), before);
}

TEST_F(TimeoutHandler, ItsTaskCarriesTheAttributesItReads) {
  StartOptions o = handler_policy();
  *o.add_initial_attributes() = attr("status", "busy");
  *o.add_initial_attributes() = attr("note", "not read");
  start_and_time_out(o);
  KvFlowTxn txn(h.kv);
  const auto read = task_attributes(txn, handler_ref());
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].key(), "status");
  EXPECT_EQ(read[0].value().string_value(), "busy");
}

TEST_F(TimeoutHandler, AFlowRetryOfAVersionWithoutAHandlerTimesOut) {
  StartOptions o = handler_policy();
  o.mutable_retry_policy()->set_initial_interval_ms(1'000);
  o.mutable_retry_policy()->set_maximum_attempts(2);
  ASSERT_EQ(h.start("f", "r1", "T", o).kind, ApplyKind::kApplied);
  StepDecision fail;
  fail.set_force_fail("first run fails");
  ASSERT_EQ(h.execute("f", "Work-1", fail).kind, ApplyKind::kApplied);
  FlowDeclaration dropped = handled();  // a new version without the handler
  dropped.set_has_timeout_handler(false);
  dropped.clear_on_timeout();
  ASSERT_EQ(h.declare(dropped).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // the retry starts at version 2
  ASSERT_EQ(h.run("f", "r1.2")->declaration_version(), 2u);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // its flow timeout
  auto run = h.run("f", "r1.2");
  EXPECT_EQ(run->status(), FLOW_TIMED_OUT);
  EXPECT_NE(run->close_reason().find("has no timeout handler"), std::string::npos)
      << run->close_reason();
}

}  // namespace
}  // namespace dex::flow
