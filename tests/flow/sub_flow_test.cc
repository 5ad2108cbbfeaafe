// SubFlows, the Flow retry policy and the flow timeout's HANDLER policy
// (docs/flow-rules.md): each test applies records to an in-memory state and
// reads what they did. check_state runs after every record (Harness::apply).
#include <gtest/gtest.h>

#include "flow_test_util.h"

namespace dex::flow {
namespace {

using namespace dex::flow::testing;

// P (flow_test_util.h) waits on C: Work (Execute only), with an Attribute "a"
// and a timeout handler.
FlowDeclaration child_declaration() {
  FlowDeclaration d;
  d.set_flow_type("C");
  d.set_start_step_type("Work");
  *d.add_steps() = step_decl("Work");
  auto* a = d.add_attributes();
  a->set_key("a");
  a->set_type(ATTRIBUTE_STRING);
  d.set_has_timeout_handler(true);
  return d;
}

Condition sub_flow(const std::string& input = "x",
                   SubFlowReusePolicy policy = SUB_FLOW_REUSE_POLICY_UNSPECIFIED,
                   StartOptions options = {}) {
  Condition c;
  c.mutable_sub_flow()->set_flow_type("C");
  c.mutable_sub_flow()->mutable_input()->set_data(input);
  *c.mutable_sub_flow()->mutable_options() = options;
  c.mutable_sub_flow()->set_reuse_policy(policy);
  return c;
}

std::vector<HistoryKind> kinds(const std::vector<HistoryEvent>& events) {
  std::vector<HistoryKind> out;
  for (const auto& e : events) out.push_back(e.kind());
  return out;
}

bool has_kind(const std::vector<HistoryEvent>& events, HistoryKind kind) {
  for (const auto& e : events)
    if (e.kind() == kind) return true;
  return false;
}

class SubFlows : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(h.declare(parent_declaration()).kind, ApplyKind::kApplied);
    ASSERT_EQ(h.declare(child_declaration()).kind, ApplyKind::kApplied);
  }

  // Starts run `run_id` of parent `flow` and records Wait-1's wait.
  ApplyResult parent_waits(const std::string& flow, const std::string& run_id, const Wait& wait) {
    EXPECT_EQ(h.start(flow, run_id, "P").kind, ApplyKind::kApplied);
    EXPECT_EQ(h.execute(flow, "Start-1", go_to({go("Wait")}), run_id).kind, ApplyKind::kApplied);
    return h.wait_for(flow, "Wait-1", wait, run_id);
  }

  ApplyResult stop(const std::string& flow, StopMode mode = STOP_CANCEL) {
    FlowRecord r;
    r.mutable_stop_flow()->set_flow_id(flow);
    r.mutable_stop_flow()->set_mode(mode);
    r.mutable_stop_flow()->set_at_unix_ms(h.now);
    return h.apply(r);
  }

  // The condition results of Wait-1's WAIT_COMPLETED event.
  std::vector<ConditionResult> met(const std::string& flow, const std::string& run_id = "r1") {
    for (const auto& e : h.history(flow, run_id))
      if (e.kind() == WAIT_COMPLETED) return {e.conditions().begin(), e.conditions().end()};
    ADD_FAILURE() << "no WAIT_COMPLETED in " << flow;
    return {};
  }

  Harness h;
};

TEST_F(SubFlows, TheWaitStartsTheChildInTheSameRecordAndIsMetWhenItCloses) {
  ASSERT_EQ(parent_waits("p", "r1", wait_of(ALL_OF, {sub_flow("x")})).kind, ApplyKind::kApplied);
  // The child: derived Flow ID and run ID, its start Step queued by the same record.
  auto child = h.run("p/Wait-1/0", "r1");
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(child->status(), FLOW_RUNNING);
  EXPECT_EQ(child->flow_type(), "C");
  EXPECT_EQ(child->input().data(), "x");
  EXPECT_EQ(child->options().request_id(), "subflow:r1/Wait-1/0");
  ASSERT_EQ(child->parents_size(), 1);
  EXPECT_EQ(child->parents(0).flow_id(), "p");
  EXPECT_EQ(child->parents(0).step_execution_id(), "Wait-1");
  EXPECT_EQ(child->parents(0).condition_index(), 0u);
  ASSERT_EQ(h.effects.queued.size(), 1u);
  EXPECT_EQ(h.effects.queued[0].flow_type, "C");
  EXPECT_EQ(h.effects.queued[0].task.step_execution_id(), "Work-1");
  auto wait = h.step("p", "Wait-1");
  EXPECT_EQ(wait.phase(), PHASE_WAITING);
  EXPECT_EQ(wait.conditions(0).child_flow_id(), "p/Wait-1/0");
  EXPECT_EQ(wait.conditions(0).child_run_id(), "r1");
  EXPECT_TRUE(has_kind(h.history("p"), SUB_FLOW_STARTED));

  // The child completes: the same record meets the parent's wait.
  ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", graceful("out")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("p/Wait-1/0")->status(), FLOW_COMPLETED);
  wait = h.step("p", "Wait-1");
  EXPECT_EQ(wait.phase(), PHASE_EXECUTE);
  EXPECT_EQ(wait.method().state(), TASK_QUEUED);
  auto results = met("p");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].fired());
  EXPECT_EQ(results[0].sub_flow().flow_id(), "p/Wait-1/0");
  EXPECT_EQ(results[0].sub_flow().run_id(), "r1");
  EXPECT_EQ(results[0].sub_flow().status(), FLOW_COMPLETED);
  ASSERT_EQ(results[0].sub_flow().outputs_size(), 1);
  EXPECT_EQ(results[0].sub_flow().outputs(0).output().data(), "out");
  EXPECT_TRUE(has_kind(h.history("p"), SUB_FLOW_CLOSED));
}

TEST_F(SubFlows, AnyEndMeetsTheConditionAndTheResultCarriesTheReason) {
  ASSERT_EQ(parent_waits("p", "r1", wait_of(ALL_OF, {sub_flow(), sub_flow("y")})).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", force_fail("no stock")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("p", "Wait-1").phase(), PHASE_WAITING) << "AllOf waits for the second child";
  ASSERT_EQ(stop("p/Wait-1/1", STOP_TERMINATE).kind, ApplyKind::kApplied);
  auto results = met("p");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].sub_flow().status(), FLOW_FAILED);
  EXPECT_EQ(results[0].sub_flow().close_reason(), "no stock");
  EXPECT_EQ(results[1].sub_flow().status(), FLOW_TERMINATED);
  EXPECT_EQ(results[1].sub_flow().flow_id(), "p/Wait-1/1");
}

TEST_F(SubFlows, AnAnyOfWonByATimerLeavesTheChildRunning) {
  ASSERT_EQ(parent_waits("p", "r1", wait_of(ANY_OF, {timer_after(1'000), sub_flow()})).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  auto results = met("p");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].fired());
  EXPECT_FALSE(results[1].fired());
  EXPECT_EQ(results[1].sub_flow().status(), FLOW_RUNNING) << "a RUNNING snapshot of the loser";
  EXPECT_EQ(results[1].sub_flow().run_id(), "r1");
  EXPECT_EQ(h.run("p/Wait-1/1")->status(), FLOW_RUNNING);
  // Its later end changes nothing in the parent.
  const size_t events = h.history("p").size();
  ASSERT_EQ(h.execute("p/Wait-1/1", "Work-1", graceful("late")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.history("p").size(), events);
  EXPECT_EQ(h.step("p", "Wait-1").phase(), PHASE_EXECUTE);
}

TEST_F(SubFlows, StoppingTheParentLeavesItsChildrenRunning) {
  ASSERT_EQ(parent_waits("p", "r1", wait_of(ALL_OF, {sub_flow()})).kind, ApplyKind::kApplied);
  ASSERT_EQ(stop("p").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("p")->status(), FLOW_CANCELED);
  EXPECT_EQ(h.run("p/Wait-1/0")->status(), FLOW_RUNNING);
  const size_t events = h.history("p").size();
  ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", graceful("done")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.history("p").size(), events) << "a closed parent never changes";
}

// A second run of parent "p" reaches Wait-1 again: the same derived child ID.
class SubFlowReuse : public SubFlows {
 protected:
  // The first parent run starts the child and ends (the child as `end` left it).
  void first_child(const std::string& end) {
    ASSERT_EQ(parent_waits("p", "r1", wait_of(ALL_OF, {sub_flow()})).kind, ApplyKind::kApplied);
    if (end == "completed") {
      ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", graceful("first")).kind, ApplyKind::kApplied);
    }
    if (end == "failed") {
      ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", force_fail("bad")).kind, ApplyKind::kApplied);
    }
    if (h.run("p")->status() == FLOW_RUNNING) {
      ASSERT_EQ(stop("p").kind, ApplyKind::kApplied);
    }
  }
  ApplyResult second_parent(SubFlowReusePolicy policy) {
    return parent_waits("p", "r2", wait_of(ALL_OF, {sub_flow("second", policy)}));
  }
};

TEST_F(SubFlowReuse, ByDefaultACompletedChildIsReturnedAndAFailedOneRestarted) {
  first_child("completed");
  ASSERT_EQ(second_parent(SUB_FLOW_REUSE_POLICY_UNSPECIFIED).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("p", "Wait-1", "r2").phase(), PHASE_EXECUTE) << "met at once";
  auto results = met("p", "r2");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].sub_flow().run_id(), "r1");
  EXPECT_EQ(results[0].sub_flow().outputs(0).output().data(), "first");
  EXPECT_FALSE(h.run("p/Wait-1/0", "r2").has_value());
}

TEST_F(SubFlowReuse, ByDefaultAFailedChildRestarts) {
  first_child("failed");
  ASSERT_EQ(second_parent(SUB_FLOW_RESTART_IF_PREVIOUS_EXITS_ABNORMALLY).kind, ApplyKind::kApplied);
  auto child = h.run("p/Wait-1/0", "r2");
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(child->status(), FLOW_RUNNING);
  EXPECT_EQ(child->input().data(), "second");
  EXPECT_EQ(h.step("p", "Wait-1", "r2").phase(), PHASE_WAITING);
}

TEST_F(SubFlowReuse, AttachReturnsAFailedChild) {
  first_child("failed");
  ASSERT_EQ(second_parent(SUB_FLOW_ATTACH).kind, ApplyKind::kApplied);
  auto results = met("p", "r2");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].sub_flow().status(), FLOW_FAILED);
  EXPECT_EQ(results[0].sub_flow().run_id(), "r1");
  EXPECT_FALSE(h.run("p/Wait-1/0", "r2").has_value());
}

TEST_F(SubFlowReuse, AlwaysRestartStartsAfterACompletedChild) {
  first_child("completed");
  ASSERT_EQ(second_parent(SUB_FLOW_ALWAYS_RESTART).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("p/Wait-1/0", "r2")->status(), FLOW_RUNNING);
  EXPECT_EQ(h.step("p", "Wait-1", "r2").phase(), PHASE_WAITING);
}

TEST_F(SubFlowReuse, ARunningChildIsAttachedToAndMeetsBothParents) {
  first_child("running");  // the first parent stopped; its child runs on
  ASSERT_EQ(second_parent(SUB_FLOW_REUSE_POLICY_UNSPECIFIED).kind, ApplyKind::kApplied);
  auto child = h.run("p/Wait-1/0", "r1");
  ASSERT_EQ(child->parents_size(), 2);
  EXPECT_EQ(child->parents(1).run_id(), "r2");
  EXPECT_FALSE(h.run("p/Wait-1/0", "r2").has_value());
  bool attached = false;
  for (const auto& e : h.history("p", "r2"))
    if (e.kind() == SUB_FLOW_STARTED) attached = e.attached();
  EXPECT_TRUE(attached);
  ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", graceful("shared")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("p", "Wait-1", "r2").phase(), PHASE_EXECUTE);
  EXPECT_EQ(met("p", "r2")[0].sub_flow().outputs(0).output().data(), "shared");
}

TEST_F(SubFlowReuse, AlwaysRestartTerminatesARunningChild) {
  first_child("running");
  ASSERT_EQ(second_parent(SUB_FLOW_ALWAYS_RESTART).kind, ApplyKind::kApplied);
  auto old = h.run("p/Wait-1/0", "r1");
  EXPECT_EQ(old->status(), FLOW_TERMINATED);
  EXPECT_NE(old->close_reason().find("ALWAYS_RESTART"), std::string::npos) << old->close_reason();
  EXPECT_EQ(h.run("p/Wait-1/0", "r2")->status(), FLOW_RUNNING);
  EXPECT_EQ(h.step("p", "Wait-1", "r2").phase(), PHASE_WAITING);
}

TEST_F(SubFlows, BadSubFlowConditionsAreRefusedNamingWhy) {
  auto refused = [&](const Condition& c, const std::string& flow, const std::string& words) {
    ASSERT_EQ(h.start(flow, "r1", "P").kind, ApplyKind::kApplied);
    ASSERT_EQ(h.execute(flow, "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
    auto r = h.wait_for(flow, "Wait-1", wait_of(ALL_OF, {c}));
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << words;
    EXPECT_EQ(r.code, RefusalCode::kInvalidArgument);
    EXPECT_NE(r.message.find(words), std::string::npos) << r.message;
    EXPECT_EQ(h.step(flow, "Wait-1").phase(), PHASE_WAIT_FOR) << "nothing applied";
  };
  Condition undeclared = sub_flow();
  undeclared.mutable_sub_flow()->set_flow_type("Nope");
  refused(undeclared, "a", "'Nope', which no Worker declared");
  StartOptions with_request;
  with_request.set_request_id("mine");
  refused(sub_flow("x", SUB_FLOW_ATTACH, with_request), "b", "derived request ID");
  StartOptions bad_attribute;
  *bad_attribute.add_initial_attributes() = attr("undeclared", "v");
  refused(sub_flow("x", SUB_FLOW_ATTACH, bad_attribute), "c", "undeclared");
  refused(sub_flow(), std::string(250, 'f'), "derived Flow ID");
  StartOptions handler_for_p;  // P declares no timeout handler
  Condition of_p = sub_flow();
  of_p.mutable_sub_flow()->set_flow_type("P");
  handler_for_p.set_timeout_ms(1'000);
  handler_for_p.set_timeout_policy(TIMEOUT_HANDLER);
  *of_p.mutable_sub_flow()->mutable_options() = handler_for_p;
  refused(of_p, "d", "declares none");
  EXPECT_FALSE(h.run("a/Wait-1/0").has_value());
}

// ---------------------------------------------------------------- Flow retry

TEST_F(SubFlows, AFailedRunRetriesAsANewRunAfterTheBackoff) {
  StartOptions o = retrying(2);
  *o.add_initial_attributes() = attr("a", "v");
  o.set_request_id("req");
  ASSERT_EQ(h.start("c", "r1", "C", o).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", force_fail("boom")).kind, ApplyKind::kApplied);
  auto first = h.run("c");
  EXPECT_EQ(first->status(), FLOW_FAILED);
  EXPECT_EQ(first->retry_at_ms(), h.now + 1'000);
  EXPECT_EQ(first->next_run_id(), "r1.2");
  EXPECT_EQ(h.next_timer_at(), h.now + 1'000);
  EXPECT_EQ(h.history("c").back().next_run_id(), "r1.2");

  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  auto second = h.run("c", "r1.2");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->status(), FLOW_RUNNING);
  EXPECT_EQ(second->flow_attempt(), 2u);
  EXPECT_EQ(second->previous_run_id(), "r1");
  EXPECT_EQ(second->first_run_id(), "r1");
  EXPECT_EQ(second->input().data(), "in");
  EXPECT_EQ(h.attributes("c", "a", "r1.2").size(), 1u) << "initial Attributes again";
  EXPECT_EQ(h.effects.queued.size(), 1u) << "its start Step queued";
  EXPECT_EQ(h.history("c", "r1.2").front().previous_run_id(), "r1");
  KvFlowTxn txn(h.kv);
  EXPECT_EQ(txn.flow_id("c")->run_id(), "r1.2");
  EXPECT_EQ(txn.flow_id("c")->runs(), 2u);
  // The same request still answers the latest run.
  StartOptions repeat = o;
  repeat.set_ignore_already_started(true);
  auto again = h.start("c", "r9", "C", repeat);
  EXPECT_EQ(again.kind, ApplyKind::kUnchanged);
  EXPECT_EQ(again.run_id, "r1.2");

  ASSERT_EQ(h.execute("c", "Work-1", force_fail("boom"), "r1.2").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("c", "r1.2")->retry_at_ms(), 0) << "two attempts used";
  EXPECT_FALSE(h.next_timer_at().has_value());
}

TEST_F(SubFlows, TimeoutsRetryUnderFailButNotCancelAndStopsNever) {
  StartOptions fail = retrying(3);
  fail.set_timeout_ms(5'000);
  ASSERT_EQ(h.start("t", "r1", "C", fail).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("t")->status(), FLOW_TIMED_OUT);
  EXPECT_NE(h.run("t")->retry_at_ms(), 0);

  StartOptions cancel = fail;
  cancel.set_timeout_policy(TIMEOUT_CANCEL);
  ASSERT_EQ(h.start("u", "r1", "C", cancel).kind, ApplyKind::kApplied);
  h.now += 5'000;
  FlowRecord fire;
  fire.mutable_timer_fired()->mutable_key()->set_flow_id("u");
  fire.mutable_timer_fired()->mutable_key()->set_run_id("r1");
  fire.mutable_timer_fired()->mutable_key()->set_kind(FLOW_TIMEOUT);
  fire.mutable_timer_fired()->set_fire_at_ms(h.run("u")->start_ms() + 5'000);
  fire.mutable_timer_fired()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(fire).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("u")->status(), FLOW_CANCELED);
  EXPECT_EQ(h.run("u")->retry_at_ms(), 0);

  ASSERT_EQ(h.start("v", "r1", "C", retrying(3)).kind, ApplyKind::kApplied);
  ASSERT_EQ(stop("v", STOP_FAIL).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("v")->status(), FLOW_FAILED);
  EXPECT_EQ(h.run("v")->retry_at_ms(), 0) << "a client's stop never retries";
}

TEST_F(SubFlows, AStartOverAClosedRunWaitingForItsRetryAbandonsTheRetry) {
  ASSERT_EQ(h.start("c", "r1", "C", retrying(3)).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", force_fail("boom")).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("c", "r2", "C").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_FALSE(h.run("c", "r1.2").has_value());
  KvFlowTxn txn(h.kv);
  EXPECT_EQ(txn.flow_id("c")->run_id(), "r2");
  EXPECT_FALSE(h.next_timer_at().has_value());
}

TEST_F(SubFlows, AChildThatRetriesMeetsItsParentOnlyWhenItsLastRunEnds) {
  ASSERT_EQ(
      parent_waits("p", "r1", wait_of(ALL_OF, {sub_flow("x", SUB_FLOW_ATTACH, retrying(2))})).kind,
      ApplyKind::kApplied);
  ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", force_fail("once")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("p", "Wait-1").phase(), PHASE_WAITING) << "a retry follows";
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  auto retry = h.run("p/Wait-1/0", "r1.2");
  ASSERT_TRUE(retry.has_value());
  ASSERT_EQ(retry->parents_size(), 1) << "the parent reference follows the retry";
  ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", graceful("twice"), "r1.2").kind, ApplyKind::kApplied);
  auto results = met("p");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].sub_flow().run_id(), "r1.2");
  EXPECT_EQ(results[0].sub_flow().status(), FLOW_COMPLETED);
  EXPECT_EQ(kinds(h.history("p")).back(), WAIT_COMPLETED);
}

TEST_F(SubFlows, AnAnyOfLoserBetweenItsRetryRunsIsShownRunning) {
  StartOptions slow_retry = retrying(3);
  slow_retry.mutable_retry_policy()->set_initial_interval_ms(60'000);  // after the Timer
  ASSERT_EQ(parent_waits(
                "p", "r1",
                wait_of(ANY_OF, {timer_after(1'000), sub_flow("x", SUB_FLOW_ATTACH, slow_retry)}))
                .kind,
            ApplyKind::kApplied);
  // The child's first run fails with a retry pending; then the parent's Timer wins.
  ASSERT_EQ(h.execute("p/Wait-1/1", "Work-1", force_fail("once")).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.run("p/Wait-1/1", "r1")->status(), FLOW_FAILED);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // the parent's Timer
  auto results = met("p");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].fired());
  EXPECT_FALSE(results[1].fired());
  EXPECT_EQ(results[1].sub_flow().status(), FLOW_RUNNING) << "the Flow goes on as its next run";
  EXPECT_EQ(results[1].sub_flow().run_id(), "r1");
  EXPECT_EQ(results[1].sub_flow().outputs_size(), 0);
  EXPECT_EQ(results[1].sub_flow().close_reason(), "");
}

TEST_F(SubFlows, AFlowRetryPolicyIsValidated) {
  StartOptions o;
  o.mutable_retry_policy()->set_backoff_coefficient(0.5);
  auto r = h.start("c", "r1", "C", o);
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("retryPolicy.retry.backoffCoefficient"), std::string::npos) << r.message;
  StartOptions handler;
  handler.set_timeout_ms(1'000);
  handler.set_timeout_policy(TIMEOUT_HANDLER);
  r = h.start("p", "r1", "P", handler);
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("Flow type 'P' declares none"), std::string::npos) << r.message;
  r = h.start("c", "r1", "C", handler);  // C declares a handler
  EXPECT_EQ(r.kind, ApplyKind::kApplied) << r.message;
}

}  // namespace
}  // namespace dex::flow
