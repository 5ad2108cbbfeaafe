// The Flow's timeout handler through the whole engine (docs/flow-rules.md,
// "Timeout handler"): MemoryObjectStore + LogWriter + Engine with a
// ManualClock, and a fake Worker stream that answers FlowTasks by hand.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace dex {
namespace {

using namespace dex::testing;

constexpr int64_t kTimeoutMs = 5'000;

// Order with an Attribute "status" and a timeout handler that reads it.
flow::FlowDeclaration handled_declaration() {
  flow::FlowDeclaration d = order_declaration();
  auto* status = d.add_attributes();
  status->set_key("status");
  status->set_type(flow::ATTRIBUTE_STRING);
  d.set_has_timeout_handler(true);
  d.mutable_on_timeout()->add_attribute_reads("status");
  return d;
}

flow::Attribute status(const std::string& value) {
  flow::Attribute a;
  a.set_key("status");
  a.mutable_value()->set_string_value(value);
  return a;
}

std::vector<flow::HistoryKind> history_kinds(Engine& e, const std::string& flow_id) {
  auto events = e.history(whole_history(flow_id));
  EXPECT_TRUE(events.is_ok());
  std::vector<flow::HistoryKind> out;
  if (events.is_ok())
    for (const auto& ev : events->events()) out.push_back(ev.kind());
  return out;
}

bool has(const std::vector<flow::HistoryKind>& kinds, flow::HistoryKind kind) {
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

class FlowTimeoutHandlerTest : public OneWorkerTest {
 protected:
  // Starts `flow_id` with a 5 s timeout under HANDLER and the initial status "busy".
  void start_handled(Engine& e, const std::string& flow_id) {
    flow::StartFlowRequest r;
    r.set_flow_id(flow_id);
    r.set_flow_type("Order");
    r.mutable_input()->set_data("order-7");
    r.mutable_options()->set_timeout_ms(kTimeoutMs);
    r.mutable_options()->set_timeout_policy(flow::TIMEOUT_HANDLER);
    *r.mutable_options()->add_initial_attributes() = status("busy");
    auto out = e.start_flow(r);
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  }
};

TEST_F(FlowTimeoutHandlerTest, TheHandlerReachesAWorkerAndItsForceFailClosesTheRunFailed) {
  Engine& e = open_with_worker(handled_declaration());
  start_handled(e, "f1");
  auto step = worker_->next();
  ASSERT_TRUE(step);
  EXPECT_EQ(step->step_execution_id(), "Start-1");  // left running: the Step is slow
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(200)));
  clock_.advance(milliseconds(kTimeoutMs));
  auto handler = worker_->next();
  ASSERT_TRUE(handler) << "the timeout handler's task reached the Worker";
  EXPECT_EQ(handler->method(), flow::ON_TIMEOUT);
  EXPECT_EQ(handler->step_execution_id(), "timeout");
  EXPECT_EQ(handler->step_type(), "");
  EXPECT_EQ(handler->attempt(), 1u);
  EXPECT_EQ(handler->input().data(), "order-7");
  EXPECT_EQ(handler->attempt_timeout_ms(), 60'000);
  ASSERT_EQ(handler->attributes_size(), 1);
  EXPECT_EQ(handler->attributes(0).value().string_value(), "busy");
  EXPECT_EQ(status_of(e, "f1"), flow::FLOW_RUNNING);
  auto state = e.flow_state(flow_ref("f1"));
  ASSERT_TRUE(state.is_ok());
  EXPECT_EQ(state->timeout_handler().method(), flow::ON_TIMEOUT);
  EXPECT_EQ(state->timeout_handler().task_state(), flow::TASK_RUNNING);
  EXPECT_EQ(state->timeout_handler().worker_id(), "w1");
  ASSERT_EQ(state->active_size(), 1) << "the Step keeps running while the handler runs";
  // The handler records why, then fails the run with an application reason.
  flow::FlowTaskResult r;
  r.set_task_id(handler->task_id());
  r.mutable_decision()->set_force_fail("processing deadline reached");
  *r.add_attribute_writes() = status("timed out");
  ASSERT_TRUE(answer(e, handle_, r).accepted());
  const flow::FlowDescription closed = wait_closed(e, "f1");
  EXPECT_EQ(closed.status(), flow::FLOW_FAILED);
  EXPECT_EQ(closed.close_reason(), "processing deadline reached");
  flow::GetAttributesRequest get;
  get.mutable_flow()->set_flow_id("f1");
  auto attributes = e.get_attributes(get);
  ASSERT_TRUE(attributes.is_ok());
  ASSERT_EQ(attributes->attributes_size(), 1);
  EXPECT_EQ(attributes->attributes(0).value().string_value(), "timed out");
  const auto kinds = history_kinds(e, "f1");
  EXPECT_TRUE(has(kinds, flow::TIMEOUT_HANDLER_STARTED));
  EXPECT_TRUE(has(kinds, flow::TIMEOUT_HANDLER_COMPLETED));
  // The Step's late result, and a repeat of the handler's, change nothing.
  EXPECT_FALSE(decide(e, handle_, *step, complete("late")).accepted());
  EXPECT_FALSE(answer(e, handle_, r).accepted());
  EXPECT_EQ(status_of(e, "f1"), flow::FLOW_FAILED);
}

TEST_F(FlowTimeoutHandlerTest, AHandlerThatFailsAndTimesOutEndsTheRunTimedOut) {
  flow::FlowDeclaration d = handled_declaration();
  auto* o = d.mutable_on_timeout()->mutable_options();
  o->set_attempt_timeout_ms(2'000);
  o->mutable_retry()->set_maximum_attempts(2);  // from 1 s
  Engine& e = open_with_worker(d);
  start_handled(e, "f1");
  ASSERT_TRUE(worker_->next());
  clock_.advance(milliseconds(kTimeoutMs));
  auto first = worker_->next();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->method(), flow::ON_TIMEOUT);
  EXPECT_EQ(first->attempt_timeout_ms(), 2'000);
  ASSERT_TRUE(fail_task(e, handle_, *first, "the ledger is down").accepted());
  auto state = e.flow_state(flow_ref("f1"));
  ASSERT_TRUE(state.is_ok());
  EXPECT_EQ(state->timeout_handler().task_state(), flow::TASK_BACKOFF);
  EXPECT_EQ(state->timeout_handler().last_failure().error(), "the ledger is down");
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(200))) << "the retry waits its backoff";
  clock_.advance(seconds(1));
  auto second = worker_->next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->method(), flow::ON_TIMEOUT);
  EXPECT_EQ(second->attempt(), 2u);
  // Never answered: the engine times the attempt out, and no attempt is left.
  clock_.advance(seconds(2));
  const flow::FlowDescription closed = wait_closed(e, "f1");
  EXPECT_EQ(closed.status(), flow::FLOW_TIMED_OUT);
  EXPECT_EQ(closed.close_reason(),
            "the flow timeout of 5000 ms passed and its timeout handler failed after 2 attempts: "
            "the attempt timeout of 2s passed");
  EXPECT_TRUE(has(history_kinds(e, "f1"), flow::TIMEOUT_HANDLER_FAILED));
  flow::FlowTaskResult late;
  late.set_task_id(second->task_id());
  late.mutable_decision()->set_force_fail("too late");
  EXPECT_FALSE(answer(e, handle_, late).accepted());
}

TEST_F(FlowTimeoutHandlerTest, AResultOfAnotherKindFailsTheHandlerAttempt) {
  Engine& e = open_with_worker(handled_declaration());
  start_handled(e, "f1");
  ASSERT_TRUE(worker_->next());
  clock_.advance(milliseconds(kTimeoutMs));
  auto handler = worker_->next();
  ASSERT_TRUE(handler);
  flow::FlowTaskResult wait;
  wait.set_task_id(handler->task_id());
  wait.mutable_wait()->set_kind(flow::SKIP);
  EXPECT_TRUE(answer(e, handle_, wait).accepted()) << "accepted as a FAILED attempt";
  auto state = e.flow_state(flow_ref("f1"));
  ASSERT_TRUE(state.is_ok());
  EXPECT_EQ(state->timeout_handler().task_state(), flow::TASK_BACKOFF);
  EXPECT_NE(state->timeout_handler().last_failure().error().find("another kind"), std::string::npos)
      << state->timeout_handler().last_failure().error();
}

}  // namespace
}  // namespace dex
