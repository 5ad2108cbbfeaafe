// Continue-as-new through the whole engine (docs/flow-rules.md,
// "Continue-as-new"; docs/api.md, WaitForFlow, WaitForStepCompletion and
// WaitForAttribute): the waits that name a run which continued follow its
// chain to the run it goes on as.
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <optional>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace dex {
namespace {

using namespace dex::testing;

class FlowContinueAsNewTest : public OneWorkerTest {
 protected:
  static flow::FlowRef run_ref(const std::string& flow_id, const std::string& run_id) {
    flow::FlowRef ref = flow_ref(flow_id);
    ref.set_run_id(run_id);
    return ref;
  }
  // Answers `wait`'s value, advancing the manual clock while it waits (a
  // long poll that finds nothing waits for its deadline).
  template <typename T>
  T settle(std::function<T()> wait) {
    auto f = std::async(std::launch::async, std::move(wait));
    while (f.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready)
      clock_.advance(milliseconds(2));
    return f.get();
  }
  // Starts `flow_id` and decides its start Step GoTo "Next", continuing as
  // new: Next-1 is queued, no attempt runs, so the run continues at once and
  // carries Next-1. Answers the first run; `next` gets Next-1's task.
  std::string start_and_continue(Engine& e, const std::string& flow_id,
                                 std::optional<flow::FlowTask>& next) {
    const std::string first_run = start(e, flow_id);
    auto first = worker_->next();
    EXPECT_TRUE(first);
    if (!first) return first_run;
    flow::StepDecision d = go_to("Next");
    d.set_continue_as_new(true);
    EXPECT_TRUE(decide(e, handle_, *first, d).accepted());
    next = worker_->next();
    EXPECT_TRUE(next);
    return first_run;
  }
  // One bounded WaitForFlow on `run_id` (1 ms).
  flow::WaitForFlowResponse wait_run(Engine& e, const std::string& flow_id,
                                     const std::string& run_id) {
    flow::WaitForFlowRequest r;
    *r.mutable_flow() = run_ref(flow_id, run_id);
    r.set_timeout_ms(1);
    auto out =
        settle<StatusOr<flow::WaitForFlowResponse>>([&] { return e.wait_for_flow(r, nullptr); });
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    return out.is_ok() ? *out : flow::WaitForFlowResponse();
  }
  flow::WaitForStepCompletionResponse wait_step(Engine& e, const std::string& flow_id,
                                                const std::string& run_id,
                                                const std::string& exec) {
    flow::WaitForStepCompletionRequest r;
    *r.mutable_flow() = run_ref(flow_id, run_id);
    r.set_step_execution_id(exec);
    r.set_timeout_ms(1);
    auto out = settle<StatusOr<flow::WaitForStepCompletionResponse>>(
        [&] { return e.wait_for_step(r, nullptr); });
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    return out.is_ok() ? *out : flow::WaitForStepCompletionResponse();
  }
};

TEST_F(FlowContinueAsNewTest, WaitsOnTheFirstRunFollowTheChainToItsEnd) {
  Engine& e = open_with_worker();
  std::optional<flow::FlowTask> next;
  const std::string first_run = start_and_continue(e, "c1", next);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->step_execution_id(), "Next-1");
  const std::string second_run = next->run_id();
  EXPECT_EQ(second_run, first_run + ".c1");

  auto old = e.describe_flow(run_ref("c1", first_run));
  ASSERT_TRUE(old.is_ok()) << old.status().to_string();
  EXPECT_EQ(old->status(), flow::FLOW_CONTINUED_AS_NEW);
  EXPECT_EQ(old->next_run_id(), second_run);
  auto now = e.describe_flow(flow_ref("c1"));
  ASSERT_TRUE(now.is_ok());
  EXPECT_EQ(now->run_id(), second_run);
  EXPECT_EQ(now->continued_from_run_id(), first_run);

  // The first run closed, but its chain goes on: not closed yet.
  auto pending = wait_run(e, "c1", first_run);
  EXPECT_FALSE(pending.closed());
  EXPECT_EQ(pending.flow().run_id(), second_run);
  EXPECT_EQ(pending.flow().status(), flow::FLOW_RUNNING);
  // Next-1, CANCELED in the first run, is waited for in the second.
  auto step = wait_step(e, "c1", first_run, "Next-1");
  EXPECT_FALSE(step.completed()) << flow::Phase_Name(step.phase());
  EXPECT_NE(step.phase(), flow::PHASE_CANCELED);

  // A client asks the second run to continue while Next-1's attempt runs:
  // pending until the attempt ends.
  flow::TriggerContinueAsNewRequest ask;
  *ask.mutable_flow() = run_ref("c1", second_run);
  ask.set_reason("test");
  ask.set_request_id("can-1");
  auto asked = e.continue_as_new(ask);
  ASSERT_TRUE(asked.is_ok()) << asked.status().to_string();
  EXPECT_TRUE(asked->new_run_id().empty());
  EXPECT_FALSE(asked->already_done());

  // Next-1 goes to Next again: the second run continues as the third, which
  // carries Next-2; Next-1 itself is DONE in the second run.
  ASSERT_TRUE(decide(e, handle_, *next, go_to("Next")).accepted());
  const std::string third_run = first_run + ".c2";
  ASSERT_TRUE(eventually([&] {
    auto d = e.describe_flow(flow_ref("c1"));
    return d.is_ok() && d->run_id() == third_run;
  }));
  auto done = wait_step(e, "c1", first_run, "Next-1");
  EXPECT_TRUE(done.completed());
  EXPECT_EQ(done.phase(), flow::PHASE_DONE);
  auto last = worker_->next();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->run_id(), third_run);
  EXPECT_EQ(last->step_execution_id(), "Next-2");
  EXPECT_FALSE(wait_step(e, "c1", first_run, "Next-2").completed());
  EXPECT_FALSE(wait_step(e, "c1", second_run, "Next-2").completed());

  ASSERT_TRUE(decide(e, handle_, *last, complete("finished")).accepted());
  const flow::FlowDescription closed_latest = wait_closed(e, "c1");
  EXPECT_EQ(closed_latest.run_id(), third_run);
  auto closed = wait_run(e, "c1", first_run);
  ASSERT_TRUE(closed.closed());
  EXPECT_EQ(closed.flow().run_id(), third_run);
  EXPECT_EQ(closed.flow().status(), flow::FLOW_COMPLETED);
  EXPECT_EQ(closed.flow().continued_from_run_id(), second_run);
  auto ended = wait_step(e, "c1", first_run, "Next-2");
  EXPECT_TRUE(ended.completed());
  EXPECT_EQ(ended.phase(), flow::PHASE_DONE);
  // A run of the chain that did not continue is answered itself: the last.
  EXPECT_EQ(wait_run(e, "c1", third_run).flow().run_id(), third_run);
}

TEST_F(FlowContinueAsNewTest, AnAttributeWaitOnTheFirstRunIsMetInTheRunItWentOnAs) {
  flow::FlowDeclaration decl = order_declaration();
  auto* status = decl.add_attributes();
  status->set_key("status");
  status->set_type(flow::ATTRIBUTE_STRING);
  Engine& e = open_with_worker(decl);
  std::optional<flow::FlowTask> next;
  const std::string first_run = start_and_continue(e, "c2", next);
  ASSERT_TRUE(next);
  ASSERT_EQ(next->run_id(), first_run + ".c1");

  // Waiting on the first run (closed CONTINUED_AS_NEW) does not answer
  // "closed, no match": it waits on in the second run.
  flow::WaitForAttributeRequest wait;
  *wait.mutable_flow() = run_ref("c2", first_run);
  wait.set_key("status");
  wait.mutable_value()->set_string_value("ready");
  wait.set_timeout_ms(20'000);
  auto waiter = std::async(std::launch::async,
                           [&] { return e.wait_for_attribute(wait, [] { return false; }); });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  flow::SetAttributesRequest set;
  set.mutable_flow()->set_flow_id("c2");
  auto* w = set.add_writes();
  w->set_key("status");
  w->mutable_value()->set_string_value("ready");
  auto s = e.set_attributes(set);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto matched = waiter.get();
  ASSERT_TRUE(matched.is_ok()) << matched.status().to_string();
  EXPECT_TRUE(matched->matched());
  EXPECT_EQ(matched->status(), flow::FLOW_RUNNING) << "the second run's status";
  EXPECT_EQ(matched->current().string_value(), "ready");
}

}  // namespace
}  // namespace dex
