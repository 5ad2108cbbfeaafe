// Attributes, lock keys and RPCs through the whole engine (docs/api.md,
// "Attributes" and "RPCs"): MemoryObjectStore + LogWriter + Engine with a
// ManualClock, and fake Worker streams that answer FlowTasks by hand.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;

flow::AttributeValue str(const std::string& s) {
  flow::AttributeValue v;
  v.set_string_value(s);
  return v;
}

flow::Attribute attr(const std::string& key, flow::AttributeValue value,
                     const std::string& instance = "") {
  flow::Attribute a;
  a.set_key(key);
  a.set_instance_key(instance);
  *a.mutable_value() = std::move(value);
  return a;
}

flow::Attribute count(const std::string& instance, int64_t n) {
  flow::AttributeValue v;
  v.set_int64_value(n);
  return attr("counts", v, instance);
}

// Order, plus a persistence schema (status: string, counts: an int64 map),
// RPCs "describe" (no lock) and "debit" (lock "balance"), and an Execute of
// "Next" that takes the lock "balance".
flow::FlowDeclaration account_declaration() {
  flow::FlowDeclaration d = order_declaration();
  auto* status = d.add_attributes();
  status->set_key("status");
  status->set_type(flow::ATTRIBUTE_STRING);
  auto* counts = d.add_attributes();
  counts->set_key("counts");
  counts->set_type(flow::ATTRIBUTE_INT64);
  counts->set_is_map(true);
  for (auto& s : *d.mutable_steps()) {
    s.add_attribute_reads("status");
    s.add_attribute_reads("counts");
  }
  execute_options(d, "Next").add_lock_keys("balance");
  auto* describe = d.add_rpcs();
  describe->set_name("describe");
  describe->add_attribute_reads("status");
  auto* debit = d.add_rpcs();
  debit->set_name("debit");
  debit->add_lock_keys("balance");
  return d;
}

std::map<std::string, std::string> attributes_of(const flow::FlowTask& task) {
  std::map<std::string, std::string> out;
  for (const auto& a : task.attributes())
    out[a.key() + (a.instance_key().empty() ? "" : "[" + a.instance_key() + "]")] =
        a.value().ShortDebugString();
  return out;
}

flow::InvokeRpcRequest rpc_request(const std::string& flow_id, const std::string& name,
                                   const std::string& request_id = "", int64_t timeout_ms = 0) {
  flow::InvokeRpcRequest r;
  r.mutable_flow()->set_flow_id(flow_id);
  r.set_name(name);
  r.mutable_input()->set_data(name + "-input");
  r.set_request_id(request_id);
  r.set_timeout_ms(timeout_ms);
  return r;
}

ResultAck rpc_answer(Engine& e, Engine::WorkerHandle w, const flow::FlowTask& task,
                     const std::string& output, std::vector<flow::Attribute> writes = {}) {
  flow::FlowTaskResult r;
  r.set_task_id(task.task_id());
  r.mutable_rpc()->mutable_output()->set_data(output);
  for (auto& a : writes) *r.add_attribute_writes() = std::move(a);
  return answer(e, w, r);
}

class FlowRpcTest : public OneWorkerTest {
 protected:
  std::future<StatusOr<flow::InvokeRpcResponse>> invoke(Engine& e, flow::InvokeRpcRequest r) {
    return std::async(std::launch::async,
                      [&e, r] { return e.invoke_rpc(r, [] { return false; }); });
  }
  StatusOr<flow::GetAttributesResponse> get(Engine& e, const std::string& flow_id) {
    flow::GetAttributesRequest r;
    r.mutable_flow()->set_flow_id(flow_id);
    return e.get_attributes(r);
  }
};

TEST_F(FlowRpcTest, AStepReadsItsAttributesFromItsTaskAndWritesThemWithItsDecision) {
  Engine& e = open_with_worker(account_declaration());
  flow::StartFlowRequest start;
  start.set_flow_id("acct");
  start.set_flow_type("Order");
  *start.mutable_options()->add_initial_attributes() = attr("status", str("new"));
  *start.mutable_options()->add_initial_attributes() = count("a", 1);
  ASSERT_TRUE(e.start_flow(start).is_ok());
  auto first = worker_->next();
  ASSERT_TRUE(first);
  EXPECT_EQ(attributes_of(*first),
            (std::map<std::string, std::string>{{"counts[a]", "int64_value: 1"},
                                                {"status", "string_value: \"new\""}}));
  flow::FlowTaskResult r;
  r.set_task_id(first->task_id());
  *r.mutable_decision() = go_to("Next");
  *r.add_attribute_writes() = attr("status", str("paid"));
  *r.add_attribute_writes() = count("b", 7);  // a new instance; "a" is not rewritten
  ASSERT_TRUE(answer(e, handle_, r).accepted());
  auto next = worker_->next();
  ASSERT_TRUE(next);
  EXPECT_EQ(attributes_of(*next),
            (std::map<std::string, std::string>{{"counts[a]", "int64_value: 1"},
                                                {"counts[b]", "int64_value: 7"},
                                                {"status", "string_value: \"paid\""}}));
  // A write without a value deletes.
  flow::FlowTaskResult done;
  done.set_task_id(next->task_id());
  *done.mutable_decision() = complete("ok");
  flow::Attribute del;
  del.set_key("counts");
  del.set_instance_key("a");
  *done.add_attribute_writes() = del;
  ASSERT_TRUE(answer(e, handle_, done).accepted());
  EXPECT_EQ(wait_closed(e, "acct").status(), flow::FLOW_COMPLETED);
  // GetAttributes answers after the run closed.
  auto got = get(e, "acct");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got->status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(got->attributes_size(), 2);
  EXPECT_EQ(got->attributes(0).key(), "counts");
  EXPECT_EQ(got->attributes(0).instance_key(), "b");
  EXPECT_EQ(got->attributes(1).value().string_value(), "paid");
  // The history records each result's writes.
  auto events = e.history(whole_history("acct"));
  ASSERT_TRUE(events.is_ok());
  std::map<flow::HistoryKind, int> writes;
  for (const auto& ev : events->events()) writes[ev.kind()] += ev.attribute_writes_size();
  EXPECT_EQ(writes[flow::FLOW_STARTED], 2) << "the initial values";
  EXPECT_EQ(writes[flow::EXECUTE_COMPLETED], 3);
}

TEST_F(FlowRpcTest, SetAttributesWakesAWaiterAndIsRefusedForBadInputOrAClosedRun) {
  Engine& e = open_with_worker(account_declaration());
  start(e, "acct");
  ASSERT_TRUE(worker_->next());
  flow::WaitForAttributeRequest wait;
  wait.mutable_flow()->set_flow_id("acct");
  wait.set_key("status");
  *wait.mutable_value() = str("ready");
  wait.set_timeout_ms(20'000);
  auto waiter = std::async(std::launch::async,
                           [&] { return e.wait_for_attribute(wait, [] { return false; }); });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  flow::SetAttributesRequest set;
  set.mutable_flow()->set_flow_id("acct");
  *set.add_writes() = attr("status", str("ready"));
  auto s = e.set_attributes(set);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto matched = waiter.get();
  ASSERT_TRUE(matched.is_ok());
  EXPECT_TRUE(matched->matched());
  EXPECT_EQ(matched->current().string_value(), "ready");
  // An undeclared key, or a value of the wrong type: refused naming the key,
  // and nothing of the call is written.
  flow::SetAttributesRequest bad;
  bad.mutable_flow()->set_flow_id("acct");
  *bad.add_writes() = attr("status", str("half"));
  *bad.add_writes() = attr("colour", str("red"));
  auto refused = e.set_attributes(bad);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("colour"), std::string::npos)
      << refused.status().message();
  flow::SetAttributesRequest wrong_type;
  wrong_type.mutable_flow()->set_flow_id("acct");
  *wrong_type.add_writes() = count("a", 1);
  wrong_type.mutable_writes(0)->mutable_value()->set_bool_value(true);
  auto typed = e.set_attributes(wrong_type);
  ASSERT_FALSE(typed.is_ok());
  EXPECT_EQ(typed.status().code(), Code::kInvalidArgument);
  EXPECT_NE(typed.status().message().find("counts"), std::string::npos);
  auto now = get(e, "acct");
  ASSERT_TRUE(now.is_ok());
  ASSERT_EQ(now->attributes_size(), 1);
  EXPECT_EQ(now->attributes(0).value().string_value(), "ready");
  // A closed run's Attributes no longer change.
  flow::StopFlowRequest stop;
  stop.set_flow_id("acct");
  ASSERT_TRUE(e.stop_flow(stop).is_ok());
  auto closed = e.set_attributes(set);
  ASSERT_FALSE(closed.is_ok());
  EXPECT_EQ(closed.status().code(), Code::kPreconditionFailed);
}

TEST_F(FlowRpcTest, AnRpcRunsOnAWorkerAndAnswersOnceItsWritesAreCommitted) {
  Engine& e = open_with_worker(account_declaration());
  const std::string run_id = start(e, "acct");
  ASSERT_TRUE(worker_->next());  // the start Step's Execute, left running
  auto call = invoke(e, rpc_request("acct", "describe", "req-1"));
  auto task = worker_->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->method(), flow::RPC);
  EXPECT_EQ(task->rpc_name(), "describe");
  EXPECT_EQ(task->input().data(), "describe-input");
  EXPECT_EQ(task->run_id(), run_id);
  EXPECT_EQ(call.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ASSERT_TRUE(rpc_answer(e, handle_, *task, "status is new", {attr("status", str("described"))})
                  .accepted());
  auto out = call.get();
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ(out->output().data(), "status is new");
  EXPECT_EQ(out->run_id(), run_id);
  auto attrs = get(e, "acct");
  ASSERT_TRUE(attrs.is_ok());
  ASSERT_EQ(attrs->attributes_size(), 1);
  EXPECT_EQ(attrs->attributes(0).value().string_value(), "described");
  // A retry with the same request ID answers the committed output; the
  // handler does not run again.
  auto again = e.invoke_rpc(rpc_request("acct", "describe", "req-1"), [] { return false; });
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again->output().data(), "status is new");
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(200)));
}

TEST_F(FlowRpcTest, RpcErrorsNameTheirCause) {
  Engine& e = open_with_worker(account_declaration());
  start(e, "acct");
  ASSERT_TRUE(worker_->next());
  auto undeclared = e.invoke_rpc(rpc_request("acct", "refund"), [] { return false; });
  ASSERT_FALSE(undeclared.is_ok());
  EXPECT_EQ(undeclared.status().code(), Code::kInvalidArgument);
  EXPECT_NE(undeclared.status().message().find("refund"), std::string::npos);
  auto too_long = e.invoke_rpc(rpc_request("acct", "describe", "", 60'001), [] { return false; });
  EXPECT_EQ(too_long.status().code(), Code::kInvalidArgument);
  // The handler's failure reaches the caller with its message.
  auto failing = invoke(e, rpc_request("acct", "describe"));
  auto task = worker_->next();
  ASSERT_TRUE(task);
  ASSERT_TRUE(fail_task(e, handle_, *task, "no such customer").accepted());
  auto failed = failing.get();
  ASSERT_FALSE(failed.is_ok());
  EXPECT_EQ(failed.status().code(), Code::kPreconditionFailed);
  EXPECT_NE(failed.status().message().find("no such customer"), std::string::npos)
      << failed.status().message();
  // No answer before the timeout: DEADLINE_EXCEEDED, and a late answer is stale.
  auto slow = invoke(e, rpc_request("acct", "describe", "", 2'000));
  auto slow_task = worker_->next();
  ASSERT_TRUE(slow_task);
  clock_.advance(seconds(3));
  ASSERT_EQ(slow.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto timed_out = slow.get();
  EXPECT_EQ(timed_out.status().code(), Code::kDeadlineExceeded) << timed_out.status().to_string();
  EXPECT_FALSE(rpc_answer(e, handle_, *slow_task, "late").accepted());
  // A closed run takes no RPC.
  flow::StopFlowRequest stop;
  stop.set_flow_id("acct");
  ASSERT_TRUE(e.stop_flow(stop).is_ok());
  auto closed = e.invoke_rpc(rpc_request("acct", "describe"), [] { return false; });
  ASSERT_FALSE(closed.is_ok());
  EXPECT_EQ(closed.status().code(), Code::kPreconditionFailed);
  EXPECT_NE(closed.status().message().find("acct"), std::string::npos);
}

TEST_F(FlowRpcTest, AnRpcWaitsForTheLockAStepAttemptHolds) {
  Engine& e = open_with_worker(account_declaration());
  start(e, "acct");
  auto first = worker_->next();
  ASSERT_TRUE(first);
  ASSERT_TRUE(decide(e, handle_, *first, go_to("Next")).accepted());
  auto holder = worker_->next();  // Next's Execute holds "balance"
  ASSERT_TRUE(holder);
  auto debit = invoke(e, rpc_request("acct", "debit"));
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(300))) << "handed out under a held lock";
  ASSERT_TRUE(decide(e, handle_, *holder, complete("done-with-balance")).accepted());
  // The run completed: the queued RPC ends with it, and is never handed out.
  auto out = debit.get();
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), Code::kPreconditionFailed) << out.status().to_string();
}

TEST_F(FlowRpcTest, AnRpcReleasesItsLockToAWaitingStep) {
  Engine& e = open_with_worker(account_declaration());
  start(e, "acct");
  auto first = worker_->next();
  ASSERT_TRUE(first);
  auto debit = invoke(e, rpc_request("acct", "debit"));
  auto rpc = worker_->next();
  ASSERT_TRUE(rpc);
  EXPECT_EQ(rpc->method(), flow::RPC);
  ASSERT_TRUE(decide(e, handle_, *first, go_to("Next")).accepted());
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(300))) << "Next ran under the RPC's lock";
  auto next_state = active_step(e, "acct", "Next-1");
  ASSERT_TRUE(next_state);
  EXPECT_EQ(next_state->task_state(), flow::TASK_LOCKED);
  ASSERT_TRUE(rpc_answer(e, handle_, *rpc, "debited").accepted());
  ASSERT_TRUE(debit.get().is_ok());
  auto next = worker_->next();
  ASSERT_TRUE(next) << "the lock's release hands Next out";
  EXPECT_EQ(next->step_execution_id(), "Next-1");
}

TEST_F(FlowRpcTest, ATakeoverEndsAReceivedRpcNotCompletedAndCommitsNothingOfIt) {
  MemoryObjectStore store;
  const auto local = dir_.sub("local");
  auto p1 = start_process(store, 1, local);
  auto worker = std::make_shared<FlowWorker>();
  auto w1 = connect_flows(*p1->engine, worker, "w1", account_declaration());
  start(*p1->engine, "acct");
  ASSERT_TRUE(worker->next());
  auto call = invoke(*p1->engine, rpc_request("acct", "describe", "req-9"));
  auto received = worker->next();
  ASSERT_TRUE(received);
  p1->engine->stop();
  (void)p1->writer->close();
  auto lost = call.get();
  ASSERT_FALSE(lost.is_ok());
  EXPECT_EQ(lost.status().code(), Code::kStopped);  // UNAVAILABLE to the client
  auto p2 = start_process(store, 2, local);
  auto worker2 = std::make_shared<FlowWorker>();
  auto w2 = connect_flows(*p2->engine, worker2, "w2", account_declaration());
  // The Worker's late answer is stale: none of its writes appear.
  EXPECT_FALSE(
      rpc_answer(*p2->engine, w2, *received, "late", {attr("status", str("late"))}).accepted());
  auto attrs = get(*p2->engine, "acct");
  ASSERT_TRUE(attrs.is_ok());
  EXPECT_EQ(attrs->attributes_size(), 0);
  // The client's retry with the same request ID runs the handler anew.
  auto retry = invoke(*p2->engine, rpc_request("acct", "describe", "req-9"));
  std::optional<flow::FlowTask> task;
  for (int i = 0; i < 3 && !(task && task->method() == flow::RPC); ++i) task = worker2->next();
  ASSERT_TRUE(task && task->method() == flow::RPC);
  ASSERT_TRUE(rpc_answer(*p2->engine, w2, *task, "fresh").accepted());
  auto out = retry.get();
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ(out->output().data(), "fresh");
  (void)w1;
}

}  // namespace
}  // namespace dex
