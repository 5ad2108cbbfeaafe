// dex Flows through the whole engine (docs/flow-rules.md, "The flow engine"):
// MemoryObjectStore + LogWriter + Engine with a ManualClock, and fake Worker
// streams that declare a Flow type and answer FlowTasks by hand.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <map>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "log/log_format.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;

// Forwards to another store; while held, every put waits for release().
class HoldingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  StatusOr<std::string> put(std::string_view key, std::string_view body, const PutCondition& c,
                            const RequestOptions& o = {}) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !held_; });
    }
    return inner_.put(key, body, c, o);
  }
  std::string describe() const override { return "holding"; }
  void hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;  // guarded by mu_
};

// Forwards to another store; the log's batches (the puts of slot objects) wait
// for a permit once closed: each allow() lets one more through, in the order
// the one writer makes them (one write in flight).
class GatedLogStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  StatusOr<std::string> put(std::string_view key, std::string_view body, const PutCondition& c,
                            const RequestOptions& o = {}) override {
    if (parse_slot_key(kNode, key).is_ok()) {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !closed_ || permits_ > 0; });
      if (closed_) --permits_;
      --waiting_;
    }
    return inner_.put(key, body, c, o);
  }
  std::string describe() const override { return "gated"; }
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  void allow_one() {
    std::lock_guard<std::mutex> lock(mu_);
    ++permits_;
    cv_.notify_all();
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = false;
    cv_.notify_all();
  }
  // Waits (bounded) until a batch waits for its permit.
  bool batch_waiting() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;  // guarded by mu_
  int permits_ = 0;      // guarded by mu_
  int waiting_ = 0;      // guarded by mu_
};

class FlowEngineTest : public OneWorkerTest {
 protected:
  ~FlowEngineTest() override { process_.reset(); }  // before the stores it may use

  // Starts the process on `store` (in front of store_) and connects worker_ to
  // it as Worker "w1" hosting `declaration`; its engine.
  Engine& open_with_worker_on(ObjectStore& store, const flow::FlowDeclaration& declaration) {
    process_ = start_process(store, 1, dir_.sub("local"));
    handle_ = connect_flows(*process_->engine, worker_, "w1", declaration);
    return *process_->engine;
  }

  // On held_ with Next's Execute ASYNC: f1 starts, and its Start-1 decides (in
  // `decided`) to go on to Next while the log is held. Next-1's attempt reaches
  // worker_ (`next`) before the record that started it is durable.
  void send_next_while_held(std::future<ResultAck>& decided, std::optional<flow::FlowTask>& next) {
    flow::FlowDeclaration d = order_declaration();
    execute_options(d, "Next").set_durability(flow::ASYNC);
    Engine& e = open_with_worker_on(held_, d);
    start(e, "f1");
    auto first = worker_->next();
    ASSERT_TRUE(first);
    held_.hold();
    decided = std::async(std::launch::async,
                         [&e, w = handle_, t = *first] { return decide(e, w, t, go_to("Next")); });
    next = worker_->next();
    ASSERT_TRUE(next) << "the ASYNC attempt was sent while its start was being written";
  }

  // On gated_ with `d` (an Order) declared: f1's Start-1 goes on to both Wait
  // and Next, whose first tasks reach worker_; they are put in `tasks` by step
  // execution ID.
  void start_wait_and_next(const flow::FlowDeclaration& d,
                           std::map<std::string, flow::FlowTask>& tasks) {
    Engine& e = open_with_worker_on(gated_, d);
    start(e, "f1");
    auto first = worker_->next();
    ASSERT_TRUE(first);
    flow::StepDecision both = go_to("Wait");
    *both.mutable_go_to()->add_movements() = go_to("Next").go_to().movements(0);
    ASSERT_TRUE(decide(e, handle_, *first, both).accepted());
    for (int i = 0; i < 2; ++i) {
      auto t = worker_->next();
      ASSERT_TRUE(t);
      tasks[t->step_execution_id()] = *t;
    }
    ASSERT_TRUE(tasks.contains("Wait-1") && tasks.contains("Next-1"));
  }

  // After start_wait_and_next, the log gated: Wait-1's wait (the approval, or
  // a Timer a day away) is being written when Next-1 ends publishing `message`
  // to the approval (`approve`, acked in `approved`): speculated before the
  // wait is stored, its record assigns nothing. Then the wait applies, and the
  // approval's batch waits for a permit.
  void approve_while_the_wait_is_written(std::map<std::string, flow::FlowTask>& tasks,
                                         const std::string& message, flow::FlowTaskResult& approve,
                                         std::future<ResultAck>& approved) {
    Engine& e = *process_->engine;
    gated_.close();
    flow::FlowTaskResult wait;
    wait.set_task_id(tasks["Wait-1"].task_id());
    wait.mutable_wait()->set_kind(flow::ANY_OF);
    auto* c = wait.mutable_wait()->add_conditions()->mutable_channel();
    c->set_channel("approval");
    c->set_match(flow::FOR_ONE);
    wait.mutable_wait()->add_conditions()->mutable_timer()->set_duration_ms(24LL * 3600 * 1000);
    auto waited = e.complete_task(handle_, wait);
    ASSERT_TRUE(gated_.batch_waiting());
    approve.set_task_id(tasks["Next-1"].task_id());
    approve.mutable_decision()->mutable_dead_end();
    auto* pub = approve.add_publishes();
    pub->set_channel("approval");
    pub->add_messages()->set_data(message);
    approved = e.complete_task(handle_, approve);
    gated_.allow_one();  // the wait applies; the approval's batch waits
    ASSERT_EQ(waited.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ASSERT_TRUE(waited.get().accepted());
    ASSERT_TRUE(gated_.batch_waiting());
  }

  HoldingStore held_{store_};
  GatedLogStore gated_{store_};
};

TEST_F(FlowEngineTest, AStartOfATypeNoWorkerDeclaredIsRefusedNamingIt) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  flow::StartFlowRequest r;
  r.set_flow_id("f");
  r.set_flow_type("Order");
  auto out = p->engine->start_flow(r);
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Flow type 'Order' was never declared by a Worker");
}

TEST_F(FlowEngineTest, ASequentialFlowRunsWithOneLogBatchPerStep) {
  Engine& e = open_with_worker();
  const uint64_t before = process_->writer->next_slot().value;
  const std::string run_id = start(e, "f1", "order-7");
  auto task = worker_->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->step_execution_id(), "Start-1");
  EXPECT_EQ(task->method(), flow::EXECUTE);
  EXPECT_EQ(task->input().data(), "order-7");
  EXPECT_EQ(task->run_id(), run_id);
  EXPECT_EQ(task->attempt(), 1u);
  ASSERT_TRUE(decide(e, handle_, *task, go_to("Next")).accepted());
  auto next = worker_->next();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->step_execution_id(), "Next-1");
  EXPECT_EQ(next->scheduled_by(), "Start-1");
  EXPECT_EQ(next->input().data(), "Next-input");
  ASSERT_TRUE(decide(e, handle_, *next, go_to("Next")).accepted());
  auto last = worker_->next();
  ASSERT_TRUE(last);
  ASSERT_TRUE(decide(e, handle_, *last, complete("shipped")).accepted());
  auto d = wait_closed(e, "f1");
  EXPECT_EQ(d.status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(d.outputs_size(), 1);
  EXPECT_EQ(d.outputs(0).output().data(), "shipped");
  // Three Steps: the start and one record per Step, each its own batch.
  EXPECT_EQ(process_->writer->next_slot().value - before, 4u);
  // A second copy of a result is refused as stale and changes nothing.
  ResultAck again = decide(e, handle_, *last, complete("again"));
  EXPECT_FALSE(again.accepted());
  EXPECT_NE(again.reason().find("stale"), std::string::npos) << again.reason();
}

TEST_F(FlowEngineTest, AWaitMetByAPublishHandsExecuteTheMessage) {
  Engine& e = open_with_worker();
  start(e, "f1");
  ASSERT_TRUE(decide(e, handle_, *worker_->next(), go_to("Wait")).accepted());
  auto wait_for = worker_->next();
  ASSERT_TRUE(wait_for);
  EXPECT_EQ(wait_for->method(), flow::WAIT_FOR);
  flow::FlowTaskResult r;
  r.set_task_id(wait_for->task_id());
  auto* wait = r.mutable_wait();
  wait->set_kind(flow::ANY_OF);
  auto* c = wait->add_conditions()->mutable_channel();
  c->set_channel("approval");
  c->set_match(flow::FOR_ONE);
  wait->add_conditions()->mutable_timer()->set_duration_ms(24LL * 3600 * 1000);
  r.mutable_locals()->set_data("seen");
  ASSERT_TRUE(answer(e, handle_, r).accepted());
  // The state shows the waiting execution and its conditions.
  auto state = e.flow_state(flow_ref("f1"));
  ASSERT_TRUE(state.is_ok());
  ASSERT_EQ(state->active_size(), 1);
  EXPECT_EQ(state->active(0).phase(), flow::PHASE_WAITING);
  EXPECT_EQ(state->workers_size(), 1);
  flow::PublishToChannelRequest pub;
  pub.set_flow_id("f1");
  pub.set_channel("approval");
  pub.add_messages()->set_data("approved by Ann");
  pub.set_request_id("pub-1");
  ASSERT_TRUE(e.publish(pub).is_ok());
  // A retry with the same request ID (its answer lost) is answered OK and
  // appends nothing: the wait takes exactly one message.
  ASSERT_TRUE(e.publish(pub).is_ok());
  auto execute = worker_->next();
  ASSERT_TRUE(execute);
  EXPECT_EQ(execute->method(), flow::EXECUTE);
  EXPECT_EQ(execute->locals().data(), "seen");
  ASSERT_EQ(execute->conditions_size(), 2);
  EXPECT_TRUE(execute->conditions(0).fired());
  ASSERT_EQ(execute->conditions(0).messages_size(), 1);
  EXPECT_EQ(execute->conditions(0).messages(0).data(), "approved by Ann");
  EXPECT_FALSE(execute->conditions(1).fired());
  EXPECT_TRUE(execute->conditions(1).condition().has_timer());
  auto events = e.history(whole_history("f1"));
  ASSERT_TRUE(events.is_ok());
  int published = 0;
  for (const auto& event : events->events()) published += event.kind() == flow::CHANNEL_PUBLISHED;
  EXPECT_EQ(published, 1);
}

TEST_F(FlowEngineTest, ATimerFiresOnTheClockAndAFailedAttemptRetries) {
  Engine& e = open_with_worker();
  start(e, "f1");
  auto first = worker_->next();
  flow::FlowTaskResult failed;
  failed.set_task_id(first->task_id());
  failed.mutable_error()->set_message("card declined");
  ASSERT_TRUE(answer(e, handle_, failed).accepted());
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(200))) << "the retry waits its backoff";
  clock_.advance(seconds(1));
  auto retry = worker_->next();
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->attempt(), 2u);
  ASSERT_TRUE(decide(e, handle_, *retry, go_to("Wait")).accepted());
  auto wait_for = worker_->next();
  flow::FlowTaskResult r;
  r.set_task_id(wait_for->task_id());
  r.mutable_wait()->set_kind(flow::ANY_OF);
  r.mutable_wait()->add_conditions()->mutable_timer()->set_duration_ms(5'000);
  ASSERT_TRUE(answer(e, handle_, r).accepted());
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(200)));
  clock_.advance(seconds(5));
  auto execute = worker_->next();
  ASSERT_TRUE(execute);
  EXPECT_TRUE(execute->conditions(0).fired());
}

TEST_F(FlowEngineTest, TheStateShowsQueuedMessagesAttributesAndTheLatestEndedExecutions) {
  flow::FlowDeclaration d = order_declaration();
  auto* votes = d.add_channels();
  votes->set_name("votes");
  votes->set_is_map(true);
  auto* total = d.add_attributes();
  total->set_key("total");
  total->set_type(flow::ATTRIBUTE_INT64);
  auto* tags = d.add_attributes();
  tags->set_key("tags");
  tags->set_type(flow::ATTRIBUTE_STRING);
  tags->set_is_map(true);
  Engine& e = open_with_worker(d);
  start(e, "f1");
  // Start-1 and Next-1..Next-104 each go to Next (the last to Wait), a
  // millisecond apart.
  auto task = worker_->next();
  for (int i = 0; i < 105; ++i) {  // bounded: 105 executions
    ASSERT_TRUE(task);
    clock_.advance(milliseconds(1));
    ASSERT_TRUE(decide(e, handle_, *task, go_to(i < 104 ? "Next" : "Wait")).accepted());
    task = worker_->next();
  }
  ASSERT_TRUE(task);
  ASSERT_EQ(task->step_execution_id(), "Wait-1");
  flow::FlowTaskResult r;
  r.set_task_id(task->task_id());
  r.mutable_wait()->set_kind(flow::ANY_OF);
  r.mutable_wait()->add_conditions()->mutable_timer()->set_duration_ms(24LL * 3600 * 1000);
  ASSERT_TRUE(answer(e, handle_, r).accepted());
  flow::PublishToChannelRequest pub;
  pub.set_flow_id("f1");
  pub.set_channel("approval");
  for (int i = 0; i < 7; ++i) pub.add_messages()->set_data("m" + std::to_string(i));
  ASSERT_TRUE(e.publish(pub).is_ok());
  pub.set_channel("votes");
  pub.set_instance_key("ann");
  pub.clear_messages();
  pub.add_messages()->set_data("yes");
  ASSERT_TRUE(e.publish(pub).is_ok());
  flow::SetAttributesRequest set;
  set.mutable_flow()->set_flow_id("f1");
  auto* w = set.add_writes();
  w->set_key("total");
  w->mutable_value()->set_int64_value(42);
  w = set.add_writes();
  w->set_key("tags");
  w->set_instance_key("b");
  w->mutable_value()->set_string_value("blue");
  w = set.add_writes();
  w->set_key("tags");
  w->set_instance_key("a");
  w->mutable_value()->set_string_value("amber");
  ASSERT_TRUE(e.set_attributes(set).is_ok());

  auto state = e.flow_state(flow_ref("f1"));
  ASSERT_TRUE(state.is_ok()) << state.status().to_string();
  // The queues that hold messages, each with its oldest five.
  ASSERT_EQ(state->queues_size(), 2) << state->ShortDebugString();
  const auto& approval = state->queues(0);
  EXPECT_EQ(approval.channel(), "approval");
  EXPECT_EQ(approval.instance_key(), "");
  EXPECT_EQ(approval.count(), 7u);
  ASSERT_EQ(approval.messages_size(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(approval.messages(i).seq(), approval.messages(0).seq() + i);
    EXPECT_EQ(approval.messages(i).message().data(), "m" + std::to_string(i));
    EXPECT_EQ(approval.messages(i).omitted_bytes(), 0u);
  }
  const auto& ann = state->queues(1);
  EXPECT_EQ(ann.channel(), "votes");
  EXPECT_EQ(ann.instance_key(), "ann");
  EXPECT_EQ(ann.count(), 1u);
  ASSERT_EQ(ann.messages_size(), 1);
  EXPECT_EQ(ann.messages(0).message().data(), "yes");
  EXPECT_EQ(state->queues_omitted(), 0u);
  // Every Attribute and AttributeMap instance, in key order.
  ASSERT_EQ(state->attributes_size(), 3);
  EXPECT_EQ(state->attributes(0).attribute().key(), "tags");
  EXPECT_EQ(state->attributes(0).attribute().instance_key(), "a");
  EXPECT_EQ(state->attributes(0).attribute().value().string_value(), "amber");
  EXPECT_EQ(state->attributes(1).attribute().instance_key(), "b");
  EXPECT_EQ(state->attributes(2).attribute().key(), "total");
  EXPECT_EQ(state->attributes(2).attribute().value().int64_value(), 42);
  // 105 ended executions; the 100 created last, newest first.
  ASSERT_EQ(state->active_size(), 1);
  EXPECT_EQ(state->ended_count(), 105u);
  ASSERT_EQ(state->ended_size(), 100);
  EXPECT_EQ(state->ended(0).step_execution_id(), "Next-104");
  EXPECT_EQ(state->ended(0).phase(), flow::PHASE_DONE);
  EXPECT_EQ(state->ended(0).scheduled_by(), "Next-103");
  EXPECT_EQ(state->ended(0).method(), flow::EXECUTE);
  EXPECT_EQ(state->ended(0).attempt(), 1u);
  EXPECT_EQ(state->ended(99).step_execution_id(), "Next-5");
  for (int i = 1; i < state->ended_size(); ++i)
    EXPECT_GT(state->ended(i - 1).created_unix_ms(), state->ended(i).created_unix_ms());

  // Stopped, the waiting execution ends CANCELED and comes first; the queued
  // messages and the Attributes stay.
  clock_.advance(milliseconds(1));
  flow::StopFlowRequest stop;
  stop.set_flow_id("f1");
  stop.set_mode(flow::STOP_CANCEL);
  ASSERT_TRUE(e.stop_flow(stop).is_ok());
  state = e.flow_state(flow_ref("f1"));
  ASSERT_TRUE(state.is_ok()) << state.status().to_string();
  EXPECT_EQ(state->active_size(), 0);
  EXPECT_EQ(state->ended_count(), 106u);
  ASSERT_EQ(state->ended_size(), 100);
  EXPECT_EQ(state->ended(0).step_execution_id(), "Wait-1");
  EXPECT_EQ(state->ended(0).phase(), flow::PHASE_CANCELED);
  EXPECT_EQ(state->ended(1).step_execution_id(), "Next-104");
  EXPECT_EQ(state->queues_size(), 2);
  EXPECT_EQ(state->attributes_size(), 3);
}

TEST_F(FlowEngineTest, AnInvalidDecisionFailsTheAttemptWithTheReason) {
  Engine& e = open_with_worker();
  start(e, "f1");
  ResultAck ack = decide(e, handle_, *worker_->next(), go_to("Undeclared"));
  EXPECT_FALSE(ack.accepted());
  EXPECT_NE(ack.reason().find("Step type 'Undeclared'"), std::string::npos) << ack.reason();
  auto state = e.flow_state(flow_ref("f1"));
  ASSERT_TRUE(state.is_ok());
  ASSERT_EQ(state->active_size(), 1);
  EXPECT_NE(state->active(0).last_failure().error().find("Undeclared"), std::string::npos);
}

TEST_F(FlowEngineTest, AnAsyncAttemptIsSentWhileItsStartIsWritten) {
  // Log writes are held: an ASYNC attempt reaches its Worker before the record
  // that started it is durable; a SYNC one would not.
  std::future<ResultAck> decided;
  std::optional<flow::FlowTask> next;
  ASSERT_NO_FATAL_FAILURE(send_next_while_held(decided, next));
  Engine& e = *process_->engine;
  EXPECT_EQ(next->step_execution_id(), "Next-1");
  EXPECT_EQ(decided.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "the record that started it is not durable yet";
  held_.release();
  ASSERT_TRUE(decided.get().accepted());
  ASSERT_TRUE(decide(e, handle_, *next, complete("async")).accepted());
  EXPECT_EQ(wait_closed(e, "f1").status(), flow::FLOW_COMPLETED);
}

// The Worker of an ASYNC task may answer before the record that started it is
// durable: its result waits until that record applied and the task was
// checked against the store (docs/flow-rules.md, "One batch per Step
// transition"), then counts, the attempt not run again.
TEST_F(FlowEngineTest, AnAsyncTasksEarlyResultWaitsForItsStartThenCounts) {
  std::future<ResultAck> decided;
  std::optional<flow::FlowTask> next;
  ASSERT_NO_FATAL_FAILURE(send_next_while_held(decided, next));
  Engine& e = *process_->engine;
  auto done = std::async(std::launch::async,
                         [&] { return decide(e, handle_, *next, complete("before its start")); });
  EXPECT_EQ(done.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "the result waits for its start";
  held_.release();
  ASSERT_TRUE(decided.get().accepted());
  EXPECT_TRUE(done.get().accepted());
  EXPECT_EQ(wait_closed(e, "f1").status(), flow::FLOW_COMPLETED);
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(100))) << "run again";
  end(process_);
}

// A record's assignment starts an attempt even when the record's own part is
// stale by the time it applies (docs/flow-rules.md, "Speculative assignments":
// the speculation may be behind records in flight). The attempt must still be
// sent, and timed out. Seen with OrderProcessing (Ship waits on the approval or
// a 1 ms reminder Timer), in this log order: Ship-515's wait; the `approve`
// RPC's result publishing the approval, speculated before that wait applied
// (so it assigned nothing); the Timer's TimerFired, speculated after the wait
// applied and before the approval did, so it carried Ship-515's Execute
// assignment. The approval met the wait, the TimerFired applied stale, and its
// assignment started the Execute attempt; the engine then forgot the attempt
// as if the record had started nothing: RUNNING on its Worker, never sent,
// never timed out, the run stuck. Here a result sent twice plays the Timer's
// part, deterministically: the second copy is speculated after the wait is
// stored and before the first copy (whose publish meets the wait) applied.
TEST_F(FlowEngineTest, AnAttemptStartedByTheAssignmentOfAStaleRecordIsSent) {
  flow::FlowDeclaration d = order_declaration();
  execute_options(d, "Wait").set_attempt_timeout_ms(10'000);
  std::map<std::string, flow::FlowTask> tasks;
  ASSERT_NO_FATAL_FAILURE(start_wait_and_next(d, tasks));
  ASSERT_EQ(tasks["Wait-1"].method(), flow::WAIT_FOR);
  Engine& e = *process_->engine;

  // Wait-1's wait is being written when Next-1 ends publishing the approval.
  flow::FlowTaskResult approve;
  std::future<ResultAck> approved;
  ASSERT_NO_FATAL_FAILURE(approve_while_the_wait_is_written(tasks, "approved", approve, approved));
  // The same result again (as after a reconnect): speculated on the stored
  // wait, its publish meets it, so its record assigns Wait-1's Execute; it
  // applies after the first copy, stale, and its assignment starts the attempt
  // the first copy queued.
  auto again = e.complete_task(handle_, approve);
  gated_.open();
  ASSERT_EQ(approved.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_TRUE(approved.get().accepted());
  ASSERT_EQ(again.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_FALSE(again.get().accepted());

  // Sent, and still this process's attempt: it times out on its Worker
  // (which never answers) and is retried. (An attempt the engine forgot was
  // either never sent, or sent with no timeout and its Worker's slot freed.)
  auto execute = worker_->next();
  ASSERT_TRUE(execute) << "Wait-1's Execute attempt never reached its Worker: "
                       << active_step(e, "f1", "Wait-1")->ShortDebugString();
  EXPECT_EQ(execute->step_execution_id(), "Wait-1");
  EXPECT_EQ(execute->method(), flow::EXECUTE);
  ASSERT_EQ(execute->conditions_size(), 2);
  EXPECT_TRUE(execute->conditions(0).fired());
  clock_.advance(seconds(10));
  ASSERT_TRUE(eventually([&] {
    auto s = active_step(e, "f1", "Wait-1");
    return s && s->has_last_failure() && s->last_failure().outcome() == flow::ATTEMPT_TIMED_OUT;
  })) << "the attempt did not time out: "
      << active_step(e, "f1", "Wait-1")->ShortDebugString();
  clock_.advance(seconds(1));  // the retry's backoff
  auto retry = worker_->next();
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->attempt(), 2u);
  ASSERT_TRUE(decide(e, handle_, *retry, complete("shipped")).accepted());
  EXPECT_EQ(wait_closed(e, "f1").status(), flow::FLOW_COMPLETED);
}

// An ASYNC task goes out built from a view that may be behind records still in
// flight (docs/flow-rules.md, "Speculative assignments"). When the record that
// starts it applies otherwise than speculated, the task's inputs disagree with
// the store: its result must never count, and the attempt runs again on what
// the store holds. Here f1's Wait-1 (ASYNC Execute) waits on the approval or
// a Timer a day away; Next-1's result publishes "A" while that wait is being
// written (speculated without the wait: it assigns nothing); then, the wait
// stored and "A"'s record not yet applied, `race` proposes a record speculated
// on the stored wait, whose assignment hands Wait-1's Execute out at once with
// what that view says. "A" applies first and meets the wait: the store takes
// "A". Checks that no message is lost: an Execute result that counts saw what
// the store took, and every other message is still queued.
class SpeculatedAsyncTaskTest : public FlowEngineTest {
 protected:
  void run(const std::function<void(Engine&)>& race, const std::string& raced) {
    flow::FlowDeclaration d = order_declaration();
    execute_options(d, "Wait").set_durability(flow::ASYNC);
    std::map<std::string, flow::FlowTask> tasks;
    ASSERT_NO_FATAL_FAILURE(start_wait_and_next(d, tasks));
    Engine& e = *process_->engine;
    // "A" is published while Wait-1's wait is written; its batch waits.
    flow::FlowTaskResult approve;
    std::future<ResultAck> approved;
    ASSERT_NO_FATAL_FAILURE(approve_while_the_wait_is_written(tasks, "A", approve, approved));
    auto raced_done = std::async(std::launch::async, [&] { race(e); });
    // ASYNC: out while its record waits behind "A"'s, as the view says.
    auto early = worker_->next();
    ASSERT_TRUE(early) << "the ASYNC Execute was not sent while its record was written";
    ASSERT_EQ(early->step_execution_id(), "Wait-1");
    ASSERT_EQ(early->method(), flow::EXECUTE);
    gated_.open();
    ASSERT_EQ(approved.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ASSERT_TRUE(approved.get().accepted());
    ASSERT_EQ(raced_done.wait_for(std::chrono::seconds(10)), std::future_status::ready);

    auto seen = [](const flow::FlowTask& t) {
      std::string out;
      for (const auto& r : t.conditions())
        for (const auto& m : r.messages()) out += m.data();
      return out;
    };
    // The store took "A": the execution's first condition fired with it.
    flow::StepDecision dead_end;
    dead_end.mutable_dead_end();
    std::optional<flow::FlowTask> counted;
    ResultAck ack = decide(e, handle_, *early, dead_end);
    if (ack.accepted()) {
      counted = early;
    } else {
      // Refused: the attempt runs again, on what the store holds.
      auto again = worker_->next();
      ASSERT_TRUE(again) << "the refused Execute was not run again: "
                         << active_step(e, "f1", "Wait-1")->ShortDebugString();
      EXPECT_EQ(again->step_execution_id(), "Wait-1");
      EXPECT_EQ(again->method(), flow::EXECUTE);
      EXPECT_EQ(again->attempt(), early->attempt()) << "a re-run consumes no retry";
      ASSERT_TRUE(decide(e, handle_, *again, dead_end).accepted());
      counted = again;
    }
    EXPECT_EQ(seen(*counted), "A")
        << "Wait-1's Execute ran on the speculated inputs (" << early->ShortDebugString()
        << ") and its result counted: the store took \"A\", which "
           "no Execute that counted saw";
    ASSERT_TRUE(counted->conditions_size() == 2 && counted->conditions(0).fired() &&
                !counted->conditions(1).fired());
    // Every other message is still queued, once.
    auto state = e.flow_state(flow_ref("f1"));
    ASSERT_TRUE(state.is_ok());
    std::string queued;
    for (const auto& q : state->queues())
      for (const auto& m : q.messages()) queued += m.message().data();
    EXPECT_EQ(queued, raced);
    EXPECT_EQ(state->flow().status(), flow::FLOW_RUNNING);
    end(process_);
  }
};

// The raced record applies as speculated (a publish always does), but on a
// state that moved: its own message "B" stays queued behind "A", which the
// wait took.
TEST_F(SpeculatedAsyncTaskTest, AnAppliedRecordWhoseViewWasBehindDoesNotHandOutItsView) {
  run(
      [](Engine& e) {
        flow::PublishToChannelRequest r;
        r.set_flow_id("f1");
        r.set_channel("approval");
        r.add_messages()->set_data("B");
        EXPECT_TRUE(e.publish(r).is_ok());
      },
      "B");
}

// The raced record is stale by the time it applies (the Timer it skips is no
// longer waited on), yet its assignment starts the Execute attempt "A" queued:
// the Worker must not be told the Timer fired.
TEST_F(SpeculatedAsyncTaskTest, AStaleRecordsAssignmentDoesNotHandOutItsView) {
  run(
      [](Engine& e) {
        flow::SkipTimerRequest r;
        r.mutable_flow()->set_flow_id("f1");
        r.set_step_execution_id("Wait-1");
        r.set_condition_index(1);
        (void)e.skip_timer(r);  // refused: the wait was met first
      },
      "");
}

// Retry timers already due when a new process starts fire in its first
// scheduler round, before any call: every one of their records must be
// applied by that process (none may become durable before the engine listens
// to the log), so every retry reaches a Worker.
TEST_F(FlowEngineTest, TimersDueWhenANewProcessStartsFireAndAreApplied) {
  constexpr int kFlows = 20;
  MemoryObjectStore store;
  const auto local = dir_.sub("local");
  auto p1 = start_process(store, 1, local);
  auto worker = std::make_shared<FlowWorker>();
  auto w1 = connect_flows(*p1->engine, worker, "w1", order_declaration(), kFlows);
  for (int i = 0; i < kFlows; ++i) start(*p1->engine, "f" + std::to_string(i));
  for (int i = 0; i < kFlows; ++i) {
    auto task = worker->next();
    ASSERT_TRUE(task);
    ASSERT_TRUE(fail_task(*p1->engine, w1, *task, "declined").accepted());  // BACKOFF, 1 s
  }
  p1->engine->stop();
  (void)p1->writer->close();
  clock_.advance(seconds(5));  // every retry is due
  auto p2 = start_process(store, 2, local);
  auto worker2 = std::make_shared<FlowWorker>();
  connect_flows(*p2->engine, worker2, "w2", order_declaration(), kFlows);
  std::set<std::string> retried;
  for (int i = 0; i < kFlows; ++i) {
    auto task = worker2->next();
    ASSERT_TRUE(task) << "only " << retried.size() << " retries reached the Worker";
    EXPECT_EQ(task->attempt(), 2u);
    retried.insert(task->flow_id());
  }
  EXPECT_EQ(retried.size(), static_cast<size_t>(kFlows));
}

TEST_F(FlowEngineTest, ANewEpochEndsReceivedAttemptsAndRunsThemAgain) {
  MemoryObjectStore store;
  const auto local = dir_.sub("local");
  auto p1 = start_process(store, 1, local);
  auto worker = std::make_shared<FlowWorker>();
  connect_flows(*p1->engine, worker);
  start(*p1->engine, "f1");
  auto received = worker->next();
  ASSERT_TRUE(received);
  p1->engine->stop();
  (void)p1->writer->close();
  // A new process takes over on the same log and local store.
  auto p2 = start_process(store, 2, local);
  auto worker2 = std::make_shared<FlowWorker>();
  auto w2 = connect_flows(*p2->engine, worker2, "w2");
  clock_.advance(seconds(2));  // the retry's backoff
  auto again = worker2->next();
  if (!again) {
    auto st = p2->engine->flow_state(flow_ref("f1"));
    ADD_FAILURE() << "now " << wall_ms() << " state "
                  << (st.is_ok() ? st->DebugString() : st.status().to_string());
  }
  ASSERT_TRUE(again);
  EXPECT_EQ(again->step_execution_id(), "Start-1");
  EXPECT_EQ(again->attempt(), 2u) << "NOT_COMPLETED consumed a retry";
  ResultAck late = decide(*p2->engine, w2, *received, complete("late"));
  EXPECT_FALSE(late.accepted()) << "the first process's task is stale";
  ASSERT_TRUE(decide(*p2->engine, w2, *again, complete("done")).accepted());
  EXPECT_EQ(wait_closed(*p2->engine, "f1").status(), flow::FLOW_COMPLETED);
}

// Workers that vanish (docs/engine.md, "Workers that vanish"): the attempts of
// a Worker whose stream ended wait for it for the reconnect grace (5 s by
// default), then end NOT_COMPLETED and are retried, instead of waiting out
// their attempt timeout (60 s).
TEST_F(FlowEngineTest, AVanishedWorkersAttemptEndsNotCompletedAfterTheGraceAndIsRetried) {
  Engine& e = open_with_worker();
  auto other = std::make_shared<FlowWorker>();
  start(e, "f1");
  auto first = worker_->next();
  ASSERT_TRUE(first);
  e.disconnect_worker(handle_);  // the Worker is killed mid-attempt
  const Engine::WorkerHandle h2 = connect_flows(e, other, "w2");
  clock_.advance(milliseconds(4900));
  EXPECT_FALSE(other->next(std::chrono::milliseconds(300))) << "still within the grace";
  EXPECT_EQ(active_step(e, "f1", "Start-1")->attempt(), 1u);
  clock_.advance(milliseconds(100));
  ASSERT_TRUE(eventually([&] {
    auto s = active_step(e, "f1", "Start-1");
    return s && s->has_last_failure() && s->last_failure().outcome() == flow::ATTEMPT_NOT_COMPLETED;
  })) << "the attempt did not end NOT_COMPLETED at the grace";
  EXPECT_EQ(active_step(e, "f1", "Start-1")->last_failure().error(),
            "Worker 'w1' went away and did not come back within 5s");
  clock_.advance(seconds(1));  // the retry's backoff (1 s by default)
  auto retry = other->next();
  ASSERT_TRUE(retry) << "the attempt was not retried on the other Worker";
  EXPECT_EQ(retry->attempt(), 2u);
  EXPECT_TRUE(decide(e, h2, *retry, go_to("Next")).accepted());
  flow::FlowTaskResult late;
  late.set_task_id(first->task_id());
  *late.mutable_decision() = go_to("Next");
  EXPECT_FALSE(answer(e, h2, late).accepted()) << "the vanished Worker's result is stale";
}

// RetryAfter: a Worker's failure names the delay before the next attempt,
// which replaces the retry policy's backoff (1 s by default).
TEST_F(FlowEngineTest, AWorkersRetryAfterDelaysTheNextAttemptInsteadOfTheBackoff) {
  Engine& e = open_with_worker();
  start(e, "f1");
  auto first = worker_->next();
  ASSERT_TRUE(first);
  flow::FlowTaskResult failed;
  failed.set_task_id(first->task_id());
  failed.mutable_error()->set_message("rate limited");
  failed.mutable_error()->set_retry_after_ms(30'000);
  ASSERT_TRUE(answer(e, handle_, failed).accepted());
  auto backoff = active_step(e, "f1", "Start-1");
  ASSERT_TRUE(backoff);
  EXPECT_EQ(backoff->retry_unix_ms(), backoff->last_failure().at_ms() + 30'000);
  clock_.advance(seconds(29));
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(300))) << "not before its RetryAfter";
  clock_.advance(seconds(1));
  auto retry = worker_->next();
  ASSERT_TRUE(retry) << "the attempt was not retried after its RetryAfter";
  EXPECT_EQ(retry->attempt(), 2u);
}

TEST_F(FlowEngineTest, AWorkerBackWithinTheGraceKeepsItsAttemptAndItsResultCounts) {
  Engine& e = open_with_worker();
  start(e, "f1");
  auto first = worker_->next();
  ASSERT_TRUE(first);
  e.disconnect_worker(handle_);  // a dropped connection
  clock_.advance(seconds(3));
  auto back = std::make_shared<FlowWorker>();
  const Engine::WorkerHandle h2 = connect_flows(e, back, "w1");  // the same Worker ID
  clock_.advance(seconds(10));                                   // far past the grace
  EXPECT_FALSE(back->next(std::chrono::milliseconds(300))) << "no retry: the attempt still runs";
  EXPECT_FALSE(active_step(e, "f1", "Start-1")->has_last_failure());
  // It re-sends its result on the new stream: accepted.
  EXPECT_TRUE(decide(e, h2, *first, go_to("Next")).accepted());
  auto next = back->next();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->step_type(), "Next");
}

// FlowConfig through the engine (docs/flow-rules.md, "FlowConfig"):
// GetFlowState shows the effective config, UpdateFlowConfig changes it (with
// the refusals' gRPC codes), and a lowered threshold continues the run once
// its running attempt ends.
TEST_F(FlowEngineTest, UpdateFlowConfigChangesTheRunsConfigAndGetFlowStateShowsIt) {
  flow::FlowDeclaration d = order_declaration();
  d.mutable_config()->set_continue_as_new_after_events(1'000);
  d.mutable_config()->set_index_active_step_types(false);
  Engine& e = open_with_worker(d);
  const std::string run_id = start(e, "f1");
  auto task = worker_->next();
  ASSERT_TRUE(task);
  auto state = e.flow_state(flow_ref("f1"));
  ASSERT_TRUE(state.is_ok()) << state.status().to_string();
  EXPECT_EQ(state->config().continue_as_new_after_events(), 1'000u);
  EXPECT_EQ(state->config().default_durability(), flow::SYNC) << "the default, written out";
  EXPECT_FALSE(state->config().index_active_step_types());
  EXPECT_TRUE(state->config().has_index_active_step_types());
  flow::SearchFlowsRequest search;
  search.set_query("ActiveStepTypes = 'Start'");
  ASSERT_EQ(e.search_flows(search)->rows_size(), 0) << "not indexed";

  flow::UpdateFlowConfigRequest u;
  u.mutable_flow()->set_flow_id("f1");
  u.mutable_flow()->set_run_id(run_id);
  u.mutable_config()->set_default_durability(flow::ASYNC);
  u.mutable_config()->set_index_active_step_types(true);
  u.set_request_id("u-1");
  auto out = e.update_flow_config(u);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_FALSE(out->already_done());
  EXPECT_TRUE(out->continued_run_id().empty());
  EXPECT_EQ(out->config().default_durability(), flow::ASYNC);
  EXPECT_TRUE(out->config().index_active_step_types());
  EXPECT_EQ(out->config().continue_as_new_after_events(), 1'000u);
  EXPECT_EQ(e.search_flows(search)->rows_size(), 1) << "indexed from the update on";
  auto again = e.update_flow_config(u);
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->already_done());
  auto history = e.history(whole_history("f1"));
  ASSERT_TRUE(history.is_ok());
  ASSERT_GE(history->events_size(), 1);
  const auto& event = history->events(history->events_size() - 1);
  EXPECT_EQ(event.kind(), flow::FLOW_CONFIG_UPDATED);
  EXPECT_EQ(event.new_config().default_durability(), flow::ASYNC);

  // Refusals keep their codes.
  flow::UpdateFlowConfigRequest store = u;
  store.clear_config();
  store.set_request_id("");
  store.mutable_config()->set_attribute_store("crm");
  auto refused = e.update_flow_config(store);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Code::kPreconditionFailed);
  EXPECT_NE(refused.status().message().find("cannot change"), std::string::npos)
      << refused.status().message();
  flow::UpdateFlowConfigRequest unknown = u;
  unknown.mutable_flow()->set_run_id("nope");
  EXPECT_EQ(e.update_flow_config(unknown).status().code(), Code::kNotFound);
  flow::UpdateFlowConfigRequest no_run = u;
  no_run.mutable_flow()->clear_run_id();
  EXPECT_EQ(e.update_flow_config(no_run).status().code(), Code::kInvalidArgument);

  // Lowered below the history's length while Start-1 runs: the run continues
  // as new when the attempt ends, with the new config and its next Step.
  flow::UpdateFlowConfigRequest lower;
  *lower.mutable_flow() = u.flow();
  lower.mutable_config()->set_continue_as_new_after_events(2);
  auto lowered = e.update_flow_config(lower);
  ASSERT_TRUE(lowered.is_ok()) << lowered.status().to_string();
  EXPECT_TRUE(lowered->continued_run_id().empty()) << "Start-1 runs";
  ASSERT_TRUE(decide(e, handle_, *task, go_to("Next")).accepted());
  auto old = e.describe_flow(u.flow());
  ASSERT_TRUE(old.is_ok());
  EXPECT_EQ(old->status(), flow::FLOW_CONTINUED_AS_NEW);
  // ASYNC: the old run's Next-1, queued and carried in the same record, may
  // have been sent before the record applied; its result would be stale.
  auto next = worker_->next();
  ASSERT_TRUE(next);
  if (next->run_id() == run_id) next = worker_->next();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->step_type(), "Next");
  EXPECT_NE(next->run_id(), run_id);
  flow::FlowRef new_run;
  new_run.set_flow_id("f1");
  new_run.set_run_id(next->run_id());
  auto continued = e.flow_state(new_run);
  ASSERT_TRUE(continued.is_ok()) << continued.status().to_string();
  EXPECT_EQ(continued->config().continue_as_new_after_events(), 2u);
  EXPECT_EQ(continued->config().default_durability(), flow::ASYNC);
}

}  // namespace
}  // namespace dex
