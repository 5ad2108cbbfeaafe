// Continue-as-new (docs/flow-rules.md, "Continue-as-new"): a run goes on as
// a new run of its Flow ID with its Attributes, Channel messages, active
// executions, Timers and flow timeout deadline, once no attempt of it runs;
// asked by a decision, a client or the FlowConfig thresholds. check_state
// (journal folds included) runs after every record (Harness::apply).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flow_test_util.h"

namespace dex::flow::testing {
namespace {

// L: Start -> Loop (Execute only, retried after 5 s) and Wait (WaitFor);
// Channel "events"; Attribute "count" (int).
FlowDeclaration looping(FlowConfig config = {}) {
  FlowDeclaration d;
  d.set_flow_type("L");
  d.set_start_step_type("Start");
  *d.add_steps() = step_decl("Start");
  auto loop = step_decl("Loop");
  auto* retry = loop.mutable_options()->mutable_execute()->mutable_retry();
  retry->set_initial_interval_ms(5'000);
  retry->set_maximum_attempts(5);
  *d.add_steps() = loop;
  *d.add_steps() = step_decl("Wait", true);
  d.add_channels()->set_name("events");
  auto* count = d.add_attributes();
  count->set_key("count");
  count->set_type(ATTRIBUTE_INT64);
  *d.mutable_config() = config;
  return d;
}

StepDecision loop_again(bool continue_as_new) {
  StepDecision d = go_to({go("Loop", "next")});
  d.set_continue_as_new(continue_as_new);
  return d;
}

class ContinueAsNew : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(h.declare(looping()).kind, ApplyKind::kApplied); }

  ApplyResult trigger(const std::string& run_id, const std::string& request_id = "",
                      const std::string& flow_id = "f") {
    FlowRecord r;
    auto* c = r.mutable_continue_as_new();
    c->set_flow_id(flow_id);
    c->set_run_id(run_id);
    c->set_reason("rotate");
    c->set_request_id(request_id);
    c->set_at_unix_ms(h.now);
    return h.apply(r);
  }

  std::vector<HistoryKind> kinds(const std::string& run_id) {
    std::vector<HistoryKind> out;
    for (const auto& e : h.history("f", run_id)) out.push_back(e.kind());
    return out;
  }

  // Start writes count=1 and goes to Loop.
  void start_loop() {
    ASSERT_EQ(h.start("f", "r1", "L").kind, ApplyKind::kApplied);
    const std::string task = h.assign("f", "Start-1");
    FlowRecord r = h.result_record("f", "Start-1", task);
    *r.mutable_method_result()->add_attribute_writes() = attr_int("count", 1);
    *r.mutable_method_result()->mutable_decision() = go_to({go("Loop", "first")});
    ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  }

  Harness h;
};

TEST_F(ContinueAsNew, AStepDecisionContinuesTheRunWithItsStateAndBothRunsLinked) {
  start_loop();
  ASSERT_EQ(h.publish("f", "events", {"e1", "e2"}).kind, ApplyKind::kApplied);
  h.now += 1'000;
  ASSERT_EQ(h.execute("f", "Loop-1", loop_again(true)).kind, ApplyKind::kApplied);

  auto old = h.run("f", "r1");
  EXPECT_EQ(old->status(), FLOW_CONTINUED_AS_NEW);
  EXPECT_EQ(old->next_run_id(), "r1.c1");
  EXPECT_EQ(kinds("r1").back(), FLOW_CLOSED);
  EXPECT_EQ(kinds("r1")[kinds("r1").size() - 2], CONTINUE_AS_NEW_REQUESTED);

  auto run = h.run("f", "r1.c1");
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status(), FLOW_RUNNING);
  EXPECT_EQ(run->continued_from_run_id(), "r1");
  EXPECT_EQ(run->continued_runs(), 1u);
  EXPECT_TRUE(run->continue_as_new_pending().empty());
  EXPECT_EQ(run->start_ms(), h.now);
  KvFlowTxn txn(h.kv);
  EXPECT_EQ(txn.flow_id("f")->run_id(), "r1.c1");
  EXPECT_EQ(txn.flow_id("f")->runs(), 2u);
  EXPECT_EQ(txn.attribute("f", "r1.c1", "count", "")->int64_value(), 1);
  EXPECT_EQ(txn.queue({"f", "r1.c1", "events", ""})->next_seq() -
                txn.queue({"f", "r1.c1", "events", ""})->first_seq(),
            2u);
  // Only the active execution comes along; the ended ones stay in r1.
  EXPECT_FALSE(txn.step("f", "r1.c1", "Start-1").has_value());
  EXPECT_FALSE(txn.step("f", "r1.c1", "Loop-1").has_value());
  const StepExecution loop = h.step("f", "Loop-2", "r1.c1");
  EXPECT_EQ(loop.method().state(), TASK_QUEUED);
  EXPECT_EQ(loop.input().data(), "next");
  EXPECT_EQ(h.step("f", "Loop-2").phase(), PHASE_CANCELED);
  const auto started = h.history("f", "r1.c1");
  ASSERT_FALSE(started.empty());
  EXPECT_EQ(started[0].kind(), FLOW_STARTED);
  EXPECT_EQ(started[0].continued_from_run_id(), "r1");

  // Execution IDs go on from where the chain is: the next Loop is Loop-3.
  ASSERT_EQ(h.execute("f", "Loop-2", loop_again(false), "r1.c1").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Loop-3", "r1.c1").phase(), PHASE_EXECUTE);
  // And it continues again, to r1.c2.
  ASSERT_EQ(h.execute("f", "Loop-3", loop_again(true), "r1.c1").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r1.c1")->next_run_id(), "r1.c2");
  EXPECT_EQ(h.run("f", "r1.c2")->continued_runs(), 2u);
  ASSERT_EQ(h.execute("f", "Loop-4", graceful("done"), "r1.c2").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r1.c2")->status(), FLOW_COMPLETED);
}

TEST_F(ContinueAsNew, AWaitKeepsItsTimerDueTimeAndItsChannelMessagesAndIsMetInTheNewRun) {
  start_loop();
  ASSERT_EQ(h.execute("f", "Loop-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  Condition timer = timer_after(3'600'000);
  Condition events = channel("events", FOR_N, 4);
  ASSERT_EQ(h.wait_for("f", "Wait-1", wait_of(ANY_OF, {timer, events})).kind, ApplyKind::kApplied);
  const int64_t due = h.step("f", "Wait-1").conditions(0).timer_at_ms();
  // Two of the four messages the wait needs are queued.
  ASSERT_EQ(h.publish("f", "events", {"a", "b"}).kind, ApplyKind::kApplied);
  h.now += 600'000;
  ASSERT_EQ(trigger("r1").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.run("f")->status(), FLOW_CONTINUED_AS_NEW);

  const StepExecution w = h.step("f", "Wait-1", "r1.c1");
  EXPECT_EQ(w.phase(), PHASE_WAITING);
  EXPECT_EQ(w.conditions(0).timer_at_ms(), due) << "a Timer keeps its absolute due time";
  EXPECT_EQ(h.next_timer_at(), due);
  // Two more messages meet the wait in the new run, with all four.
  ASSERT_EQ(h.publish("f", "events", {"c", "d"}).kind, ApplyKind::kApplied);
  const StepExecution met = h.step("f", "Wait-1", "r1.c1");
  EXPECT_EQ(met.phase(), PHASE_EXECUTE);
  ASSERT_EQ(met.conditions(1).messages_size(), 4);
  EXPECT_EQ(met.conditions(1).messages(0).data(), "a");
  EXPECT_EQ(met.conditions(1).messages(3).data(), "d");
}

TEST_F(ContinueAsNew, AClientTriggerWaitsForTheRunningAttemptAndARepeatChangesNothing) {
  start_loop();
  const std::string task = h.assign("f", "Loop-1");
  ASSERT_EQ(trigger("r1", "req-1").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_RUNNING) << "an attempt runs: the run waits for it";
  EXPECT_EQ(h.run("f")->continue_as_new_pending(), "a client asked: rotate");
  EXPECT_EQ(trigger("r1", "req-1").kind, ApplyKind::kUnchanged);
  EXPECT_EQ(trigger("r1", "req-2").kind, ApplyKind::kUnchanged) << "one is pending already";

  // The attempt's decision applies in the old run, then the run continues.
  FlowRecord r = h.result_record("f", "Loop-1", task);
  *r.mutable_method_result()->mutable_decision() = loop_again(false);
  *r.mutable_method_result()->add_attribute_writes() = attr_int("count", 2);
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_CONTINUED_AS_NEW);
  KvFlowTxn txn(h.kv);
  EXPECT_EQ(txn.attribute("f", "r1.c1", "count", "")->int64_value(), 2);
  EXPECT_EQ(h.step("f", "Loop-2", "r1.c1").method().state(), TASK_QUEUED);
  // A repeat of the request that continued r1 answers the run it made.
  const ApplyResult again = trigger("r1", "req-1");
  EXPECT_EQ(again.kind, ApplyKind::kUnchanged);
  EXPECT_EQ(again.run_id, "r1.c1");
}

TEST_F(ContinueAsNew, ARunWaitingForAnAttemptContinuesWhenTheAttemptFailsIntoARetry) {
  // A failure that is retried writes no history event, yet leaves nothing of
  // the run running: the pending continue-as-new happens in that record (the
  // simulation found the run left pending until some later event).
  start_loop();
  const std::string task = h.assign("f", "Loop-1");
  ASSERT_EQ(trigger("r1", "req-1").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.run("f", "r1")->status(), FLOW_RUNNING);
  FlowRecord r = h.result_record("f", "Loop-1", task);
  r.mutable_method_result()->set_outcome(ATTEMPT_FAILED);
  r.mutable_method_result()->set_error("flaky");
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r1")->status(), FLOW_CONTINUED_AS_NEW);
  const MethodState carried = h.step("f", "Loop-1", "r1.c1").method();
  EXPECT_EQ(carried.state(), TASK_BACKOFF);
  EXPECT_EQ(carried.attempt(), 2u);
  EXPECT_EQ(carried.last_failure().error(), "flaky");
}

TEST_F(ContinueAsNew, ARunWaitingForAnAttemptContinuesWhenRecoveryEndsTheAttempt) {
  start_loop();
  h.assign("f", "Loop-1");
  ASSERT_EQ(trigger("r1", "req-1").kind, ApplyKind::kApplied);
  {
    KvFlowTxn txn(h.kv);
    Effects fx;
    recover_attempts(txn, h.now, fx);
  }
  EXPECT_EQ(h.run("f", "r1")->status(), FLOW_CONTINUED_AS_NEW);
  EXPECT_EQ(h.step("f", "Loop-1", "r1.c1").method().state(), TASK_BACKOFF);
}

TEST_F(ContinueAsNew, AnAttemptInBackoffKeepsItsNumberAndRetryTime) {
  start_loop();
  ASSERT_EQ(h.fail("f", "Loop-1", "flaky").kind, ApplyKind::kApplied);
  const MethodState before = h.step("f", "Loop-1").method();
  ASSERT_EQ(before.state(), TASK_BACKOFF);
  ASSERT_EQ(trigger("r1").kind, ApplyKind::kApplied);
  const MethodState after = h.step("f", "Loop-1", "r1.c1").method();
  EXPECT_EQ(after.state(), TASK_BACKOFF);
  EXPECT_EQ(after.attempt(), 2u);
  EXPECT_EQ(after.retry_at_ms(), before.retry_at_ms());
  EXPECT_EQ(after.last_failure().error(), "flaky");
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Loop-1", "r1.c1").method().state(), TASK_QUEUED);
}

TEST_F(ContinueAsNew, TheFlowTimeoutKeepsItsAbsoluteDeadline) {
  StartOptions options;
  options.set_timeout_ms(3'600'000);
  const int64_t deadline = h.now + 3'600'000;
  ASSERT_EQ(h.start("f", "r1", "L", options).kind, ApplyKind::kApplied);
  h.now += 1'000'000;
  ASSERT_EQ(trigger("r1").kind, ApplyKind::kApplied);
  auto run = h.run("f", "r1.c1");
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->start_ms() + run->options().timeout_ms(), deadline);
  EXPECT_EQ(h.next_timer_at(), deadline);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r1.c1")->status(), FLOW_TIMED_OUT);
}

TEST_F(ContinueAsNew, TheHistoryThresholdOfTheFlowConfigContinuesALoopOnItsOwn) {
  FlowConfig config;
  config.set_continue_as_new_after_events(10);
  ASSERT_EQ(h.declare(looping(config)).kind, ApplyKind::kApplied);
  start_loop();
  std::string run = "r1";
  uint32_t continued = 0;
  // Bounded: 40 Loop executions.
  for (uint32_t n = 1; n <= 40; ++n) {
    const std::string exec = "Loop-" + std::to_string(n);
    ASSERT_EQ(h.execute("f", exec, loop_again(false), run).kind, ApplyKind::kApplied) << exec;
    if (h.run("f", run)->status() == FLOW_CONTINUED_AS_NEW) {
      run = h.run("f", run)->next_run_id();
      ++continued;
      EXPECT_LE(h.history("f", run).size(), 2u) << "the new history starts short";
    }
    EXPECT_LE(h.history("f", run).size(), 12u) << "no run's history grows past the threshold";
  }
  EXPECT_GE(continued, 3u);  // one event per Loop: about every 9 Loops
  const auto reason = h.history("f", run)[0].reason();
  EXPECT_NE(reason.find("10 events"), std::string::npos) << reason;
  // A start may set its own threshold.
  StartOptions options;
  options.mutable_config()->set_continue_as_new_after_events(1'000);
  ASSERT_EQ(h.start("g", "r1", "L", options).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("g")->config().continue_as_new_after_events(), 1'000u);
}

TEST_F(ContinueAsNew, RefusalsNameWhatIsWrongAndChangeNothing) {
  start_loop();
  EXPECT_EQ(trigger("").code, RefusalCode::kInvalidArgument);
  EXPECT_EQ(trigger("nope").code, RefusalCode::kNotFound);
  EXPECT_EQ(trigger("r1", "", "missing").code, RefusalCode::kNotFound);
  ASSERT_EQ(h.execute("f", "Loop-1", graceful("done")).kind, ApplyKind::kApplied);
  const ApplyResult closed = trigger("r1");
  EXPECT_EQ(closed.code, RefusalCode::kFailedPrecondition);
  EXPECT_NE(closed.message.find("COMPLETED"), std::string::npos) << closed.message;
  EXPECT_EQ(h.run("f")->status(), FLOW_COMPLETED);
}

TEST_F(ContinueAsNew, ASubFlowChildAndItsParentEachContinueAndTheWaitIsStillMet) {
  ASSERT_EQ(h.declare(parent_declaration()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("p", "r1", "P").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("p", "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  Condition child;
  child.mutable_sub_flow()->set_flow_type("L");
  child.mutable_sub_flow()->mutable_input()->set_data("x");
  ASSERT_EQ(h.wait_for("p", "Wait-1", wait_of(ALL_OF, {child})).kind, ApplyKind::kApplied);
  const std::string child_id = h.step("p", "Wait-1").conditions(0).child_flow_id();
  KvFlowTxn txn(h.kv);
  const std::string child_run = txn.flow_id(child_id)->run_id();

  // The child continues: the parent's wait names its new run.
  ASSERT_EQ(trigger(child_run, "", child_id).kind, ApplyKind::kApplied);
  const std::string child_next = h.run(child_id, child_run)->next_run_id();
  EXPECT_EQ(h.step("p", "Wait-1").conditions(0).child_run_id(), child_next);
  EXPECT_EQ(h.run("p")->status(), FLOW_RUNNING) << "a continued child has not ended";
  // The parent continues: the child reports to the parent's new run.
  FlowRecord r;
  auto* c = r.mutable_continue_as_new();
  c->set_flow_id("p");
  c->set_run_id("r1");
  c->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run(child_id, child_next)->parents(0).run_id(), "r1.c1");
  // The child completes: the parent's new run's wait is met.
  ASSERT_EQ(h.execute(child_id, "Start-1", graceful("child done"), child_next).kind,
            ApplyKind::kApplied);
  const StepExecution w = h.step("p", "Wait-1", "r1.c1");
  EXPECT_EQ(w.phase(), PHASE_EXECUTE);
  EXPECT_EQ(w.conditions(0).sub_flow().status(), FLOW_COMPLETED);
}

}  // namespace
}  // namespace dex::flow::testing
