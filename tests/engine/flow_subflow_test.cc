// SubFlows and Flow retries through the whole engine (docs/flow-rules.md,
// "SubFlows" and "Flow retry"; docs/api.md, "WaitForFlow"): a parent's WaitFor
// returns SubFlow conditions, the engine dispatches the children's tasks, and
// the parent's Execute gets the children's results; WaitForFlow follows a
// Flow retry to the run that ends it. MemoryObjectStore + LogWriter + Engine
// with a ManualClock, and a fake Worker stream that answers by hand.
#include <gtest/gtest.h>

#include <future>
#include <map>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace dex {
namespace {

using namespace dex::testing;

// Parent: Fan waits (its WaitFor returns the SubFlow conditions), then
// Execute decides. Child: one Execute-only Step, Work.
flow::FlowDeclaration parent_declaration() {
  flow::FlowDeclaration d;
  d.set_flow_type("Parent");
  d.set_start_step_type("Fan");
  auto* fan = d.add_steps();
  fan->set_step_type("Fan");
  fan->set_has_wait_for(true);
  return d;
}

flow::FlowDeclaration child_declaration() {
  flow::FlowDeclaration d;
  d.set_flow_type("Child");
  d.set_start_step_type("Work");
  d.add_steps()->set_step_type("Work");
  return d;
}

flow::Condition sub_flow(const std::string& input, const std::string& id = "",
                         const std::string& type = "Child") {
  flow::Condition c;
  c.set_condition_id(id);
  c.mutable_sub_flow()->set_flow_type(type);
  c.mutable_sub_flow()->mutable_input()->set_data(input);
  return c;
}

ResultAck wait(Engine& e, Engine::WorkerHandle w, const flow::FlowTask& task, flow::WaitKind kind,
               std::vector<flow::Condition> conditions) {
  flow::FlowTaskResult r;
  r.set_task_id(task.task_id());
  r.mutable_wait()->set_kind(kind);
  for (auto& c : conditions) *r.mutable_wait()->add_conditions() = std::move(c);
  return answer(e, w, r);
}

flow::RetryPolicy one_retry_after_1s() {
  flow::RetryPolicy p;
  p.set_initial_interval_ms(1'000);
  p.set_backoff_coefficient(2);
  p.set_maximum_attempts(2);
  return p;
}

std::map<flow::HistoryKind, int> event_counts(Engine& e, const std::string& flow_id,
                                              const std::string& run_id = "") {
  auto events = e.history(whole_history(flow_id, run_id));
  EXPECT_TRUE(events.is_ok()) << events.status().to_string();
  std::map<flow::HistoryKind, int> out;
  if (events.is_ok())
    for (const auto& ev : events->events()) ++out[ev.kind()];
  return out;
}

class FlowSubFlowTest : public OneWorkerTest {
 protected:
  // Waits on a thread for `flow_id` (run_id "": the latest) to close.
  std::future<StatusOr<flow::WaitForFlowResponse>> wait_for(Engine& e, const std::string& flow_id,
                                                            const std::string& run_id = "") {
    flow::WaitForFlowRequest r;
    r.mutable_flow()->set_flow_id(flow_id);
    r.mutable_flow()->set_run_id(run_id);
    r.set_timeout_ms(60'000);
    return std::async(std::launch::async, [&e, r] { return e.wait_for_flow(r, nullptr); });
  }
};

TEST_F(FlowSubFlowTest, AnAllOfOfTwoSubFlowsStartsBothChildrenAndExecuteGetsTheirResults) {
  Engine& e = open_with_worker({parent_declaration(), child_declaration()});
  const std::string run = start(e, "p1", "in", "Parent");
  auto wait_for = worker_->next();
  ASSERT_TRUE(wait_for);
  ASSERT_EQ(wait_for->method(), flow::WAIT_FOR);
  ASSERT_TRUE(wait(e, handle_, *wait_for, flow::ALL_OF, {sub_flow("c0", "a"), sub_flow("c1", "b")})
                  .accepted());
  // Both children's start Steps are handed out, under their derived IDs and
  // the parent's run ID.
  std::map<std::string, flow::FlowTask> children;
  for (int i = 0; i < 2; ++i) {
    auto t = worker_->next();
    ASSERT_TRUE(t) << "child " << i;
    EXPECT_EQ(t->flow_type(), "Child");
    EXPECT_EQ(t->run_id(), run);
    children[t->flow_id()] = *t;
  }
  ASSERT_EQ(children.count("p1/Fan-1/0"), 1u);
  ASSERT_EQ(children.count("p1/Fan-1/1"), 1u);
  EXPECT_EQ(children["p1/Fan-1/0"].input().data(), "c0");
  EXPECT_EQ(children["p1/Fan-1/1"].input().data(), "c1");
  // GetFlowState shows the children the parent waits on; DescribeFlow of a
  // child, its parent.
  auto fan = active_step(e, "p1", "Fan-1");
  ASSERT_TRUE(fan);
  ASSERT_EQ(fan->conditions_size(), 2);
  EXPECT_EQ(fan->conditions(1).child_flow_id(), "p1/Fan-1/1");
  EXPECT_EQ(fan->conditions(1).child_run_id(), run);
  auto child = e.describe_flow(flow_ref("p1/Fan-1/0"));
  ASSERT_TRUE(child.is_ok()) << child.status().to_string();
  ASSERT_EQ(child->parents_size(), 1);
  EXPECT_EQ(child->parents(0).flow_id(), "p1");
  EXPECT_EQ(child->parents(0).run_id(), run);
  EXPECT_EQ(child->parents(0).step_execution_id(), "Fan-1");
  EXPECT_EQ(child->parents(0).condition_index(), 0u);
  EXPECT_EQ(child->flow_attempt(), 1u);

  ASSERT_TRUE(decide(e, handle_, children["p1/Fan-1/0"], complete("out0")).accepted());
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(200))) << "AllOf waits for the second child";
  ASSERT_TRUE(decide(e, handle_, children["p1/Fan-1/1"], complete("out1")).accepted());
  auto execute = worker_->next();
  ASSERT_TRUE(execute);
  EXPECT_EQ(execute->flow_id(), "p1");
  EXPECT_EQ(execute->method(), flow::EXECUTE);
  ASSERT_EQ(execute->conditions_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const auto& c = execute->conditions(i);
    EXPECT_TRUE(c.fired()) << i;
    ASSERT_TRUE(c.has_sub_flow()) << i;
    EXPECT_EQ(c.sub_flow().flow_id(), "p1/Fan-1/" + std::to_string(i));
    EXPECT_EQ(c.sub_flow().run_id(), run);
    EXPECT_EQ(c.sub_flow().status(), flow::FLOW_COMPLETED);
    ASSERT_EQ(c.sub_flow().outputs_size(), 1) << i;
    EXPECT_EQ(c.sub_flow().outputs(0).output().data(), "out" + std::to_string(i));
    EXPECT_EQ(c.sub_flow().outputs(0).step_execution_id(), "Work-1");
  }
  EXPECT_EQ(execute->conditions(1).condition_id(), "b");
  ASSERT_TRUE(decide(e, handle_, *execute, complete("sum")).accepted());
  EXPECT_EQ(wait_closed(e, "p1").status(), flow::FLOW_COMPLETED);
  auto counts = event_counts(e, "p1");
  EXPECT_EQ(counts[flow::SUB_FLOW_STARTED], 2);
  EXPECT_EQ(counts[flow::SUB_FLOW_CLOSED], 2);
}

TEST_F(FlowSubFlowTest, AnAnyOfWonByATimerLeavesTheChildRunningAndReportsItRunning) {
  Engine& e = open_with_worker({parent_declaration(), child_declaration()});
  const std::string run = start(e, "p1", "in", "Parent");
  auto wait_for = worker_->next();
  ASSERT_TRUE(wait_for);
  flow::Condition timer;
  timer.mutable_timer()->set_duration_ms(1'000);
  ASSERT_TRUE(wait(e, handle_, *wait_for, flow::ANY_OF, {sub_flow("slow"), timer}).accepted());
  auto child_task = worker_->next();
  ASSERT_TRUE(child_task);
  EXPECT_EQ(child_task->flow_id(), "p1/Fan-1/0");
  clock_.advance(seconds(1));
  auto execute = worker_->next();
  ASSERT_TRUE(execute);
  ASSERT_EQ(execute->conditions_size(), 2);
  EXPECT_FALSE(execute->conditions(0).fired());
  EXPECT_TRUE(execute->conditions(1).fired());
  ASSERT_TRUE(execute->conditions(0).has_sub_flow());
  EXPECT_EQ(execute->conditions(0).sub_flow().flow_id(), "p1/Fan-1/0");
  EXPECT_EQ(execute->conditions(0).sub_flow().status(), flow::FLOW_RUNNING);
  ASSERT_TRUE(decide(e, handle_, *execute, complete("timed")).accepted());
  EXPECT_EQ(wait_closed(e, "p1").status(), flow::FLOW_COMPLETED);
  // The parent closed; its child still runs and completes on its own.
  EXPECT_EQ(status_of(e, "p1/Fan-1/0"), flow::FLOW_RUNNING);
  ASSERT_TRUE(decide(e, handle_, *child_task, complete("late")).accepted());
  EXPECT_EQ(wait_closed(e, "p1/Fan-1/0").status(), flow::FLOW_COMPLETED);
  EXPECT_EQ(event_counts(e, "p1")[flow::SUB_FLOW_CLOSED], 0);
}

TEST_F(FlowSubFlowTest, AnUndeclaredChildTypeFailsTheWaitForAttemptNamingIt) {
  Engine& e = open_with_worker({parent_declaration(), child_declaration()});
  start(e, "p1", "in", "Parent");
  auto wait_for = worker_->next();
  ASSERT_TRUE(wait_for);
  // Refused (the attempt counts as FAILED with the reason), and no child starts.
  const ResultAck ack = wait(e, handle_, *wait_for, flow::ALL_OF, {sub_flow("x", "", "Ghost")});
  EXPECT_FALSE(ack.accepted());
  EXPECT_NE(ack.reason().find("Ghost"), std::string::npos) << ack.reason();
  EXPECT_FALSE(e.describe_flow(flow_ref("p1/Fan-1/0")).is_ok()) << "no child started";
  auto fan = active_step(e, "p1", "Fan-1");
  ASSERT_TRUE(fan);
  EXPECT_EQ(fan->phase(), flow::PHASE_WAIT_FOR);
  EXPECT_EQ(fan->last_failure().outcome(), flow::ATTEMPT_FAILED);
  EXPECT_NE(fan->last_failure().error().find("Ghost"), std::string::npos)
      << fan->last_failure().error();
}

TEST_F(FlowSubFlowTest, AChildThatFailsAndIsRetriedMeetsTheWaitWithItsLastRun) {
  Engine& e = open_with_worker({parent_declaration(), child_declaration()});
  const std::string run = start(e, "p1", "in", "Parent");
  auto wait_for = worker_->next();
  ASSERT_TRUE(wait_for);
  flow::Condition c = sub_flow("c0");
  *c.mutable_sub_flow()->mutable_options()->mutable_retry_policy() = one_retry_after_1s();
  ASSERT_TRUE(wait(e, handle_, *wait_for, flow::ALL_OF, {c}).accepted());
  auto first = worker_->next();
  ASSERT_TRUE(first);
  // The child's first run fails (non-retryable: no attempt retry, the Flow fails).
  ASSERT_TRUE(fail_task(e, handle_, *first, "broken", true).accepted());
  auto failed = e.describe_flow(flow_ref("p1/Fan-1/0"));
  ASSERT_TRUE(failed.is_ok());
  EXPECT_EQ(failed->status(), flow::FLOW_FAILED);
  EXPECT_FALSE(failed->next_run_id().empty());
  EXPECT_NE(failed->retry_unix_ms(), 0);
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(200)))
      << "the parent waits for the retry, not the failed run";
  clock_.advance(seconds(1));
  auto second = worker_->next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->flow_id(), "p1/Fan-1/0");
  EXPECT_EQ(second->run_id(), failed->next_run_id());
  ASSERT_TRUE(decide(e, handle_, *second, complete("ok")).accepted());
  auto execute = worker_->next();
  ASSERT_TRUE(execute);
  ASSERT_EQ(execute->conditions_size(), 1);
  const auto& r = execute->conditions(0).sub_flow();
  EXPECT_EQ(r.run_id(), second->run_id());
  EXPECT_EQ(r.status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(r.outputs_size(), 1);
  EXPECT_EQ(r.outputs(0).output().data(), "ok");
  // The retry's run carries the parent over.
  auto retried = e.describe_flow(flow_ref("p1/Fan-1/0"));
  ASSERT_TRUE(retried.is_ok());
  EXPECT_EQ(retried->flow_attempt(), 2u);
  EXPECT_EQ(retried->previous_run_id(), run);
  ASSERT_EQ(retried->parents_size(), 1);
  EXPECT_EQ(retried->parents(0).flow_id(), "p1");
}

TEST_F(FlowSubFlowTest, WaitForFlowWithoutARunFollowsAFlowRetryToTheRunThatEndsIt) {
  Engine& e = open_with_worker();
  flow::StartFlowRequest start;
  start.set_flow_id("f1");
  start.set_flow_type("Order");
  start.mutable_input()->set_data("in");
  *start.mutable_options()->mutable_retry_policy() = one_retry_after_1s();
  auto started = e.start_flow(start);
  ASSERT_TRUE(started.is_ok()) << started.status().to_string();
  const std::string first_run = started->run_id();
  auto latest = wait_for(e, "f1");
  auto first = worker_->next();
  ASSERT_TRUE(first);
  ASSERT_TRUE(fail_task(e, handle_, *first, "first run breaks", true).accepted());
  // The first run, named, closed FAILED with a retry to follow.
  auto named = wait_for(e, "f1", first_run).get();
  ASSERT_TRUE(named.is_ok()) << named.status().to_string();
  EXPECT_TRUE(named->closed());
  EXPECT_EQ(named->flow().status(), flow::FLOW_FAILED);
  EXPECT_EQ(named->flow().next_run_id(), first_run + ".2");
  EXPECT_EQ(latest.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "no run named: the wait goes on through the pending retry";
  clock_.advance(seconds(1));
  auto second = worker_->next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->run_id(), first_run + ".2");
  ASSERT_TRUE(decide(e, handle_, *second, complete("done")).accepted());
  ASSERT_EQ(latest.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto closed = latest.get();
  ASSERT_TRUE(closed.is_ok()) << closed.status().to_string();
  EXPECT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_COMPLETED);
  EXPECT_EQ(closed->flow().run_id(), first_run + ".2");
  EXPECT_EQ(closed->flow().runs(), 2u);
  EXPECT_EQ(closed->flow().flow_attempt(), 2u);
  EXPECT_EQ(closed->flow().previous_run_id(), first_run);
  EXPECT_EQ(closed->flow().retry_unix_ms(), 0);
  // The first run now names its started retry, with nothing pending.
  flow::FlowRef ref = flow_ref("f1");
  ref.set_run_id(first_run);
  auto described = e.describe_flow(ref);
  ASSERT_TRUE(described.is_ok());
  EXPECT_EQ(described->next_run_id(), first_run + ".2");
  EXPECT_EQ(described->retry_unix_ms(), 0);
}

TEST_F(FlowSubFlowTest, WaitForFlowEndsAtAFailedRunWhoseRetriesAreUsedUp) {
  Engine& e = open_with_worker();
  flow::StartFlowRequest start;
  start.set_flow_id("f1");
  start.set_flow_type("Order");
  *start.mutable_options()->mutable_retry_policy() = one_retry_after_1s();
  ASSERT_TRUE(e.start_flow(start).is_ok());
  auto latest = wait_for(e, "f1");
  ASSERT_TRUE(fail_task(e, handle_, *worker_->next(), "one", true).accepted());
  clock_.advance(seconds(1));
  auto second = worker_->next();
  ASSERT_TRUE(second);
  ASSERT_TRUE(fail_task(e, handle_, *second, "two", true).accepted());
  ASSERT_EQ(latest.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto closed = latest.get();
  ASSERT_TRUE(closed.is_ok());
  EXPECT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_FAILED);
  EXPECT_EQ(closed->flow().run_id(), second->run_id());
  EXPECT_TRUE(closed->flow().next_run_id().empty());
}

}  // namespace
}  // namespace dex
