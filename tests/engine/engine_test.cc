// The Engine end to end, in one process: MemoryObjectStore + LogWriter +
// ManualClock (the wall clock is derived from it) + fake Worker streams that
// host dex Flows (docs/engine.md). Crash tests drop an engine and its writer
// without a clean close and start a new writer of a higher epoch and a new
// engine, on the same local store and on a fresh one (rebuilt from the log).
#include "engine/engine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "engine/state_machine.h"
#include "engine_test_util.h"
#include "log/log.h"
#include "objstore/memory_store.h"
#include "snapshot/snapshot.h"

namespace dex {
namespace {

using namespace dex::testing;

// Forwards to a MemoryObjectStore; a test can hold log writes: after `allow`
// more puts, a put waits until crash() and then fails permanently (never written).
class GateStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  StatusOr<std::string> put(std::string_view key, std::string_view body, const PutCondition& c,
                            const RequestOptions& o = {}) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (allow_ == 0) {
        ++held_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return crashed_; });
        return Status::permanent("the process crashed before this write");
      }
      if (allow_ > 0) --allow_;
    }
    return inner_.put(key, body, c, o);
  }
  std::string describe() const override { return "gate"; }

  void allow(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    allow_ = n;
  }
  bool wait_held() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_ > 0; });
  }
  void crash() {
    std::lock_guard<std::mutex> lock(mu_);
    crashed_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int allow_ = -1;  // -1: unlimited
  int held_ = 0;
  bool crashed_ = false;
};

class EngineTest : public OneWorkerTest {
 protected:
  // Advances the clock 100 ms at a time until `f` is ready: what it waits for
  // is noticed on the engine's housekeeping clock. Bounded (1000 steps).
  template <typename T>
  void advance_until_ready(std::future<T>& f) {
    for (int i = 0;
         i < 1000 && f.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready; ++i) {
      clock_.advance(milliseconds(100));
    }
  }

  // Answers every task `respond` gives a decision for (nullopt: fails it with
  // "transient"), advancing the clock when idle, until every run of `flows`
  // closed.
  void drive(
      Engine& e, FlowWorker& worker, Engine::WorkerHandle w, const std::vector<std::string>& flows,
      const std::function<std::optional<flow::StepDecision>(const flow::FlowTask&)>& respond) {
    for (int i = 0; i < 2000; ++i) {
      auto task = worker.next(std::chrono::milliseconds(20));
      if (task) {
        auto decision = respond(*task);
        ResultAck ack =
            decision ? decide(e, w, *task, *decision) : fail_task(e, w, *task, "transient");
        EXPECT_TRUE(ack.accepted()) << ack.reason();
        continue;
      }
      bool all_closed = true;
      for (const auto& id : flows) {
        if (status_of(e, id) == flow::FLOW_RUNNING) all_closed = false;
      }
      if (all_closed) return;
      clock_.advance(milliseconds(500));
    }
    ADD_FAILURE() << "the runs did not close";
  }

  // For an open that is to be refused: a writer of `epoch` on `store`
  // (process "p<epoch>", always leased, not opened yet) and the options of an
  // engine over `local` with that writer's hook, but with neither a process
  // id nor a wall clock (unlike start_process).
  struct BareProcess {
    std::shared_ptr<EngineLogHook> hook = std::make_shared<EngineLogHook>();
    std::unique_ptr<LogWriter> writer;
    EngineOptions options;
  };
  std::unique_ptr<BareProcess> bare_process(ObjectStore& store, uint64_t epoch,
                                            const std::filesystem::path& local) {
    auto p = std::make_unique<BareProcess>();
    LogWriterOptions wo;
    wo.node_id = kNode;
    wo.process_id = ProcessId("p" + std::to_string(epoch));
    wo.epoch = Epoch(epoch);
    wo.on_durable = p->hook->on_durable();
    p->writer = std::make_unique<LogWriter>(
        store, clock_, wo, [] { return true; }, [](const Status&) {});
    p->options.node_id = kNode;
    p->options.epoch = Epoch(epoch);
    p->options.local_store_path = local;
    p->options.log_hook = p->hook;
    return p;
  }
};

TEST_F(EngineTest, StaleResultIsRefusedAndChangesNothing) {
  Engine& e = open_with_worker();
  start(e, "f");
  auto task = worker_->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->attempt(), 1u);
  ASSERT_TRUE(decide(e, handle_, *task, complete("first")).accepted());
  const uint64_t slots = process_->writer->next_slot().value;
  auto events = e.history(whole_history("f"));
  ASSERT_TRUE(events.is_ok());
  // The same result again (a Worker re-sending after a reconnect), another
  // decision, a failure: each refused as stale.
  ResultAck again = decide(e, handle_, *task, complete("second"));
  EXPECT_FALSE(again.accepted());
  EXPECT_NE(again.reason().find("stale"), std::string::npos) << again.reason();
  EXPECT_FALSE(decide(e, handle_, *task, go_to("Next")).accepted());
  EXPECT_FALSE(fail_task(e, handle_, *task, "late failure").accepted());
  auto d = e.describe_flow(flow_ref("f"));
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(d->outputs_size(), 1);
  EXPECT_EQ(d->outputs(0).output().data(), "first");
  EXPECT_EQ(process_->writer->next_slot().value, slots) << "a stale result was appended to the log";
  auto after = e.history(whole_history("f"));
  ASSERT_TRUE(after.is_ok());
  EXPECT_EQ(after->DebugString(), events->DebugString());
  // The ended attempt's heartbeat asks the Worker to stop.
  TaskHeartbeat hb;
  hb.set_task_id(task->task_id());
  EXPECT_TRUE(e.heartbeat(handle_, hb).cancel_requested());
}

TEST_F(EngineTest, HeartbeatTimeoutEndsTheAttemptTimedOutAndItIsRetried) {
  flow::FlowDeclaration d = order_declaration();
  auto& options = execute_options(d, "Start");
  options.set_heartbeat_timeout_ms(2'000);
  options.set_attempt_timeout_ms(10'000);
  options.mutable_retry()->set_initial_interval_ms(1'000);
  Engine& e = open_with_worker(d);
  start(e, "f");
  auto task = worker_->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->heartbeat_timeout_ms(), 2'000);
  EXPECT_EQ(task->attempt_timeout_ms(), 10'000);
  TaskHeartbeat hb;
  hb.set_task_id(task->task_id());
  clock_.advance(milliseconds(1500));
  EXPECT_FALSE(e.heartbeat(handle_, hb).cancel_requested());  // in time: the deadline moves
  clock_.advance(milliseconds(1500));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(active_step(e, "f", "Start-1")->task_state(), flow::TASK_RUNNING);
  clock_.advance(milliseconds(600));  // 2.1 s after the heartbeat
  ASSERT_TRUE(eventually([&] {
    auto s = active_step(e, "f", "Start-1");
    return s && s->task_state() == flow::TASK_BACKOFF;
  }));
  auto s = active_step(e, "f", "Start-1");
  EXPECT_EQ(s->attempt(), 2u);
  EXPECT_EQ(s->last_failure().attempt(), 1u);
  EXPECT_EQ(s->last_failure().outcome(), flow::ATTEMPT_TIMED_OUT);
  EXPECT_NE(s->last_failure().error().find("heartbeat"), std::string::npos)
      << s->last_failure().error();
  EXPECT_TRUE(e.heartbeat(handle_, hb).cancel_requested());
  EXPECT_FALSE(decide(e, handle_, *task, complete("late")).accepted());  // too late: stale
  clock_.advance(milliseconds(1000));
  auto retry = worker_->next();
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->attempt(), 2u);
  // The attempt timeout: 10 s without a result, heartbeats or not.
  for (int i = 0; i < 6; ++i) {
    TaskHeartbeat hb2;
    hb2.set_task_id(retry->task_id());
    EXPECT_FALSE(e.heartbeat(handle_, hb2).cancel_requested()) << i;
    clock_.advance(milliseconds(1800));
  }
  ASSERT_TRUE(eventually([&] {
    auto s2 = active_step(e, "f", "Start-1");
    return s2 && s2->last_failure().attempt() == 2u;
  }));
  s = active_step(e, "f", "Start-1");
  EXPECT_EQ(s->last_failure().outcome(), flow::ATTEMPT_TIMED_OUT);
  EXPECT_NE(s->last_failure().error().find("attempt timeout"), std::string::npos)
      << s->last_failure().error();
}

TEST_F(EngineTest, StopEndsTheRunAndTheWorkerLearnsOnItsHeartbeat) {
  Engine& e = open_with_worker();
  start(e, "f");
  auto task = worker_->next();
  ASSERT_TRUE(task);
  // A waiter wakes when the run closes.
  auto waited = std::async(std::launch::async, [&] {
    flow::WaitForFlowRequest r;
    r.mutable_flow()->set_flow_id("f");
    r.set_timeout_ms(60'000);
    return e.wait_for_flow(r, nullptr);
  });
  flow::StopFlowRequest stop;
  stop.set_flow_id("f");
  stop.set_reason("the customer withdrew");
  ASSERT_TRUE(e.stop_flow(stop).is_ok());
  auto closed = waited.get();
  ASSERT_TRUE(closed.is_ok()) << closed.status().to_string();
  EXPECT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_CANCELED);
  TaskHeartbeat hb;
  hb.set_task_id(task->task_id());
  EXPECT_TRUE(e.heartbeat(handle_, hb).cancel_requested());
  EXPECT_FALSE(decide(e, handle_, *task, complete("late")).accepted());
  // A wait that ends at its timeout says closed = false.
  start(e, "g");
  auto timed = std::async(std::launch::async, [&] {
    flow::WaitForFlowRequest r;
    r.mutable_flow()->set_flow_id("g");
    r.set_timeout_ms(1'000);
    return e.wait_for_flow(r, nullptr);
  });
  advance_until_ready(timed);
  auto open = timed.get();
  ASSERT_TRUE(open.is_ok());
  EXPECT_FALSE(open->closed());
  EXPECT_EQ(open->flow().status(), flow::FLOW_RUNNING);
  // A stopped engine answers Stopped.
  e.stop();
  EXPECT_EQ(e.describe_flow(flow_ref("f")).status().code(), Code::kStopped);
  flow::StartFlowRequest again;
  again.set_flow_id("h");
  again.set_flow_type("Order");
  EXPECT_EQ(e.start_flow(again).status().code(), Code::kStopped);
  flow::WaitForFlowRequest wait;
  wait.mutable_flow()->set_flow_id("g");
  EXPECT_EQ(e.wait_for_flow(wait, nullptr).status().code(), Code::kStopped);
}

TEST_F(EngineTest, IdleWorkerStreamsArePinged) {
  open_with_worker();
  const int before = worker_->pings.load();
  clock_.advance(seconds(11));
  EXPECT_TRUE(eventually([&] { return worker_->pings.load() > before; }));
}

TEST_F(EngineTest, TaskTheWorkerNeverReceivedRunsAgainWithTheSameNumber) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  // One attempt only: a failure would fail the run.
  flow::FlowDeclaration sync = order_declaration();
  sync.set_flow_type("Sync");
  execute_options(sync, "Start").mutable_retry()->set_maximum_attempts(1);
  flow::FlowDeclaration async = sync;
  async.set_flow_type("Async");
  execute_options(async, "Start").set_durability(flow::ASYNC);
  // Declared, then started while no Worker is connected: both wait queued.
  auto declarer = connect_flows(e, std::make_shared<FlowWorker>(), "declarer", {sync, async});
  e.disconnect_worker(declarer);
  start(e, "s", "in", "Sync");
  start(e, "a", "in", "Async");
  auto dead_sync = std::make_shared<FlowWorker>();
  auto dead_async = std::make_shared<FlowWorker>();
  dead_sync->alive = false;
  dead_async->alive = false;
  auto h1 = connect_flows(e, dead_sync, "dead-1", sync);
  auto h2 = connect_flows(e, dead_async, "dead-2", async);
  // Each attempt was sent to a dead stream: withdrawn, not failed.
  ASSERT_TRUE(eventually([&] {
    auto s = active_step(e, "s", "Start-1");
    auto a = active_step(e, "a", "Start-1");
    return dead_sync->sends.load() == 1 && dead_async->sends.load() == 1 && s && a &&
           s->task_state() == flow::TASK_QUEUED && a->task_state() == flow::TASK_QUEUED;
  }));
  for (const char* id : {"s", "a"}) {
    auto step = active_step(e, id, "Start-1");
    EXPECT_EQ(step->attempt(), 1u) << id;
    EXPECT_EQ(step->last_failure().attempt(), 0u) << id << " has a failed attempt";
  }
  e.disconnect_worker(h1);
  e.disconnect_worker(h2);
  auto live = std::make_shared<FlowWorker>();
  auto w = connect_flows(e, live, "live", {sync, async});
  std::set<std::string> seen;
  for (int i = 0; i < 2; ++i) {
    auto task = live->next();
    ASSERT_TRUE(task);
    EXPECT_EQ(task->attempt(), 1u);
    seen.insert(task->flow_type());
    // Handed to "live" (an ASYNC attempt is sent while its assignment is written).
    ASSERT_TRUE(eventually([&] {
      auto step = active_step(e, task->flow_id(), "Start-1");
      return step && step->worker_id() == "live";
    })) << task->DebugString();
    EXPECT_TRUE(decide(e, w, *task, complete("done")).accepted());
  }
  EXPECT_EQ(seen, (std::set<std::string>{"Sync", "Async"}));
  EXPECT_FALSE(live->next(std::chrono::milliseconds(200))) << "an attempt was sent twice";
  EXPECT_EQ(wait_closed(e, "s").status(), flow::FLOW_COMPLETED);
  EXPECT_EQ(wait_closed(e, "a").status(), flow::FLOW_COMPLETED);
}

// A send to a stream that is gone withdraws the attempt: it is queued again
// once (not once per cached copy), the dead stream's slot is freed, and a
// drain has nothing left to wait for.
TEST_F(EngineTest, AWithdrawnAttemptIsHandedOutOnceAndNoLongerCountsAsRunning) {
  for (flow::Durability durability : {flow::SYNC, flow::ASYNC}) {
    SCOPED_TRACE(flow::Durability_Name(durability));
    MemoryObjectStore store;
    auto p = start_process(store, 1, dir_.sub("local-" + flow::Durability_Name(durability)));
    Engine& e = *p->engine;
    flow::FlowDeclaration d = order_declaration();
    execute_options(d, "Start").set_durability(durability);
    auto dead = std::make_shared<FlowWorker>();
    dead->alive = false;
    connect_flows(e, dead, "dead", d);  // connected before the start: it is assigned
    start(e, "f1");
    ASSERT_TRUE(eventually([&] {
      auto step = active_step(e, "f1", "Start-1");
      return dead->sends.load() == 1 && step && step->task_state() == flow::TASK_QUEUED &&
             e.attempts_running() == 0;
    })) << "attempts_running "
        << e.attempts_running();
    auto live = std::make_shared<FlowWorker>();
    connect_flows(e, live, "live", d);
    auto task = live->next();
    ASSERT_TRUE(task);
    EXPECT_EQ(task->attempt(), 1u);
    EXPECT_FALSE(live->next(std::chrono::milliseconds(300))) << "handed out twice";
    EXPECT_EQ(live->sends.load(), 1);
    EXPECT_EQ(dead->sends.load(), 1) << "a stream whose send failed gets nothing more";
  }
}

TEST_F(EngineTest, NoTaskIsHandedOutOnceTheLeaseIsNoLongerValid) {
  // SYNC attempts are sent once their record applied; ASYNC ones while it is
  // written: neither may reach a Worker once the lease is no longer valid.
  for (flow::Durability durability : {flow::SYNC, flow::ASYNC}) {
    SCOPED_TRACE(flow::Durability_Name(durability));
    MemoryObjectStore store;
    auto p = start_process(store, 1, dir_.sub("local-" + flow::Durability_Name(durability)));
    Engine& e = *p->engine;
    auto worker = std::make_shared<FlowWorker>();
    flow::FlowDeclaration d = order_declaration();
    execute_options(d, "Start").set_durability(durability);
    connect_flows(e, worker, "w1", d);
    // Control: while the lease is valid, the attempt is handed out.
    start(e, "f0");
    ASSERT_TRUE(worker->next());
    p->lease = false;  // frozen past the lease; the keeper has not noticed yet
    flow::StartFlowRequest r;
    r.set_flow_id("f1");
    r.set_flow_type("Order");
    auto refused = std::async(std::launch::async, [&] { return e.start_flow(r); });
    // The engine notices the stopped log writer on its housekeeping clock.
    advance_until_ready(refused);
    EXPECT_FALSE(refused.get().is_ok()) << "its record cannot be acknowledged";
    EXPECT_FALSE(worker->next(std::chrono::milliseconds(300)).has_value())
        << "an attempt was handed out without a valid lease";
    EXPECT_EQ(worker->sends.load(), 1);
  }
}

// Spec (Step down): stop handing out new Step tasks; drain running attempts
// while accepting heartbeats and final output.
TEST_F(EngineTest, DrainHandsOutNothingNewButAcceptsResultsOfRunningAttempts) {
  Engine& e = open_with_worker(order_declaration(), /*capacity=*/2);
  start(e, "f1");
  start(e, "f2");
  auto t1 = worker_->next();
  auto t2 = worker_->next();
  ASSERT_TRUE(t1 && t2);
  ASSERT_TRUE(eventually([&] { return e.attempts_running() == 2; }));
  e.begin_drain();
  start(e, "f3");  // accepted, but its Step is not handed out
  TaskHeartbeat hb;
  hb.set_task_id(t1->task_id());
  EXPECT_FALSE(e.heartbeat(handle_, hb).cancel_requested());
  // Results are accepted; what they start is not handed out either.
  EXPECT_TRUE(decide(e, handle_, *t1, go_to("Next")).accepted());
  EXPECT_TRUE(decide(e, handle_, *t2, complete("done")).accepted());
  EXPECT_TRUE(eventually([&] { return e.attempts_running() == 0; }));
  clock_.advance(seconds(5));
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(300)))
      << "a task was handed out while draining";
  EXPECT_EQ(active_step(e, "f3", "Start-1")->task_state(), flow::TASK_QUEUED);
  EXPECT_EQ(active_step(e, "f1", "Next-1")->task_state(), flow::TASK_QUEUED);
  EXPECT_EQ(status_of(e, "f2"), flow::FLOW_COMPLETED);
}

TEST_F(EngineTest, LocalStoreAheadOfTheLogIsRefusedAsCorruption) {
  MemoryObjectStore store;
  {
    auto p = start_process(store, 1, dir_.sub("local"));
    connect_flows(*p->engine, std::make_shared<FlowWorker>());  // a declaration: slot 1
    start(*p->engine, "f");
    p->engine->stop();
  }
  MemoryObjectStore other;  // another node's (empty) log
  auto p2 = bare_process(other, 2, dir_.sub("local"));
  ASSERT_TRUE(p2->writer->open().is_ok());
  auto engine = Engine::open(p2->options, other, *p2->writer, clock_);
  ASSERT_FALSE(engine.is_ok());
  EXPECT_EQ(engine.status().code(), Code::kCorruption);
  EXPECT_NE(engine.status().message().find("ahead of the node's log"), std::string::npos)
      << engine.status().message();
  p2->options.log_hook = nullptr;
  EXPECT_EQ(Engine::open(p2->options, other, *p2->writer, clock_).status().code(),
            Code::kInvalidArgument);
}

// The crash test (docs/engine.md, "Recovery"). `fresh_store`: the new process
// rebuilds its local store from the log instead of reusing the old one.
class EngineCrashTest : public EngineTest {
 public:
  void run(bool fresh_store);
};

// Crash: A -> B (ASYNC) -> C, each Execute tried up to 5 times, 1 s apart.
flow::FlowDeclaration crash_declaration() {
  flow::FlowDeclaration d;
  d.set_flow_type("Crash");
  d.set_start_step_type("A");
  for (const char* type : {"A", "B", "C"}) {
    auto* step = d.add_steps();
    step->set_step_type(type);
    auto* retry = step->mutable_options()->mutable_execute()->mutable_retry();
    retry->set_maximum_attempts(5);
    retry->set_initial_interval_ms(1'000);
  }
  execute_options(d, "B").set_durability(flow::ASYNC);
  return d;
}

void EngineCrashTest::run(bool fresh_store) {
  MemoryObjectStore memory;
  GateStore store(memory);
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back("f" + std::to_string(i));
  auto next_of = [](const flow::FlowTask& t) {
    return t.step_type() == "A"   ? go_to("B")
           : t.step_type() == "B" ? go_to("C")
                                  : complete(t.flow_id() + " done");
  };
  auto p1 = start_process(store, 1, dir_.sub("local1"));
  Engine& e1 = *p1->engine;
  auto w1 = std::make_shared<FlowWorker>();
  auto h1 = connect_flows(e1, w1, "w1", crash_declaration(), 100);
  for (const auto& id : ids) start(e1, id, id, "Crash");
  std::map<std::string, flow::FlowTask> held;  // "<flow>/<Step type>" -> what the old Worker holds
  auto take = [&](FlowWorker& w, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      auto task = w.next();
      ASSERT_TRUE(task);
      held[task->flow_id() + "/" + task->step_type()] = *task;
    }
  };
  take(*w1, 10);  // every A (SYNC: durable before sent)
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(decide(e1, h1, held.at(ids[i] + "/A"), go_to("B")).accepted());
  }
  take(*w1, 5);  // B of f0..f4: ASYNC, assigned in the records of A's results
  EXPECT_TRUE(decide(e1, h1, held.at("f0/B"), go_to("C")).accepted());
  EXPECT_TRUE(decide(e1, h1, held.at("f1/B"), go_to("C")).accepted());
  take(*w1, 2);  // C of f0, f1
  EXPECT_TRUE(decide(e1, h1, held.at("f0/C"), complete("f0 done")).accepted());
  ASSERT_EQ(status_of(e1, "f0"), flow::FLOW_COMPLETED);
  // f5's B-1 is queued while no stream of the Worker is connected; its
  // stream comes back, and B-1 is sent while its assignment is being written —
  // and that write never lands.
  e1.disconnect_worker(h1);
  EXPECT_TRUE(decide(e1, h1, held.at("f5/A"), go_to("B")).accepted());
  ASSERT_EQ(active_step(e1, "f5", "B-1")->task_state(), flow::TASK_QUEUED);
  store.allow(1);  // the stream's declaration is written, the assignment after it is not
  auto w1b = std::make_shared<FlowWorker>();
  connect_flows(e1, w1b, "w1", crash_declaration(), 100);
  take(*w1b, 1);
  ASSERT_TRUE(held.count("f5/B"));
  ASSERT_TRUE(store.wait_held());
  const std::string lost_async_task = held.at("f5/B").task_id();
  EXPECT_EQ(held.at("f5/B").attempt(), 1u);

  // Crash: nothing more reaches the log; the engine and writer are dropped.
  p1->lease = false;
  store.crash();
  p1->engine.reset();
  p1->writer.reset();
  store.allow(-1);

  clock_.advance(seconds(5));
  const int64_t takeover_ms = wall_ms();
  const auto local = fresh_store ? dir_.sub("local2") : dir_.sub("local1");
  auto p2 = start_process(store, 2, local);
  ASSERT_TRUE(p2->engine);
  Engine& e2 = *p2->engine;
  // Recovery: attempts a Worker had received end NOT_COMPLETED and consume a retry.
  auto a6 = active_step(e2, "f6", "A-1");
  ASSERT_TRUE(a6);
  EXPECT_EQ(a6->task_state(), flow::TASK_BACKOFF);
  EXPECT_EQ(a6->attempt(), 2u);
  EXPECT_EQ(a6->last_failure().attempt(), 1u);
  EXPECT_EQ(a6->last_failure().outcome(), flow::ATTEMPT_NOT_COMPLETED);
  EXPECT_EQ(a6->last_failure().at_ms(), takeover_ms);
  // The ASYNC assignment that never became durable: queued, nothing consumed.
  auto b5 = active_step(e2, "f5", "B-1");
  ASSERT_TRUE(b5);
  EXPECT_EQ(b5->task_state(), flow::TASK_QUEUED);
  EXPECT_EQ(b5->attempt(), 1u);
  EXPECT_EQ(b5->last_failure().attempt(), 0u);
  EXPECT_EQ(status_of(e2, "f0"), flow::FLOW_COMPLETED);
  // The old Worker re-sends results on its new stream: all stale now.
  auto w2 = std::make_shared<FlowWorker>();
  auto h2 = connect_flows(e2, w2, "w2", crash_declaration(), 100);
  EXPECT_FALSE(decide(e2, h2, held.at("f2/B"), go_to("C")).accepted());
  EXPECT_FALSE(decide(e2, h2, held.at("f5/B"), go_to("C")).accepted());

  drive(e2, *w2, h2, ids, [&](const flow::FlowTask& task) -> std::optional<flow::StepDecision> {
    if (task.flow_id() == "f5" && task.step_type() == "B") {
      EXPECT_EQ(task.attempt(), 1u);  // the same number
      EXPECT_NE(task.task_id(), lost_async_task);
    }
    return next_of(task);
  });
  for (const auto& id : ids) EXPECT_EQ(status_of(e2, id), flow::FLOW_COMPLETED) << id;

  // No Step's result was recorded twice: replay the whole log into a fresh
  // store, list the attempts that ended, and compare the states.
  p2->engine->stop();
  auto live = StateMachine::open(local);
  ASSERT_TRUE(live.is_ok());
  auto rebuilt = StateMachine::open(dir_.sub("rebuilt"));
  ASSERT_TRUE(rebuilt.is_ok());
  LogReader reader(memory, kNode, kFirstSlot);
  std::map<std::string, std::vector<std::pair<uint32_t, flow::AttemptOutcome>>> ended;
  Status read = reader.read_to_end([&](const LogEntry& entry) {
    auto out = rebuilt.value()->apply(entry.slot, entry.batch);
    if (!out.is_ok()) return out.status();
    for (const auto& e : out->flow_effects.ended) {
      ended[e.task.flow_id() + "/" + e.task.step_execution_id()].emplace_back(e.task.attempt(),
                                                                              e.outcome);
    }
    return Status::ok();
  });
  ASSERT_TRUE(read.is_ok()) << read.to_string();
  EXPECT_EQ(ended.size(), 30u);
  for (const auto& [key, attempts] : ended) {
    // Numbered 1..n, exactly one COMPLETED, the last; the others interrupted.
    for (size_t i = 0; i < attempts.size(); ++i) {
      EXPECT_EQ(attempts[i].first, i + 1) << key;
      EXPECT_EQ(attempts[i].second,
                i + 1 == attempts.size() ? flow::ATTEMPT_COMPLETED : flow::ATTEMPT_NOT_COMPLETED)
          << key << " attempt " << i + 1;
    }
  }
  // f5's B ran once, with number 1; f6's A is attempt 2 after the lost one.
  EXPECT_EQ(ended["f5/B-1"].size(), 1u);
  EXPECT_EQ(ended["f6/A-1"].size(), 2u);
  EXPECT_EQ(ended["f0/A-1"].size(), 1u);  // finished before
  EXPECT_EQ(rebuilt.value()->dump().value(), live.value()->dump().value());
}

TEST_F(EngineCrashTest, EveryStartedFlowCompletesAfterACrashOnTheSameLocalStore) { run(false); }

TEST_F(EngineCrashTest, EveryStartedFlowCompletesAfterACrashOnAFreshLocalStore) { run(true); }

// ------------------------------------------------ snapshots and restore

// docs/engine.md, "Times in log order": the next active process's clock is a
// minute behind the previous holder's, and the run's history still never goes
// back in time.
TEST_F(EngineTest, AfterATakeoverToAClockThatIsBehindTheHistoryNeverGoesBackInTime) {
  MemoryObjectStore store;
  auto ahead = std::make_unique<EngineProcess>();
  open_process(*ahead, store, 1, dir_.sub("local1"), [this](EngineOptions& eo) {
    eo.now_unix_ms = [this] { return wall_ms() + 60'000; };
  });
  ASSERT_TRUE(ahead->engine);
  // Declared through a Worker that leaves: the start's task waits in the queue.
  ahead->engine->disconnect_worker(connect_flows(*ahead->engine, std::make_shared<FlowWorker>()));
  start(*ahead->engine, "f");
  const int64_t started_ms = wall_ms() + 60'000;
  end(ahead);

  clock_.advance(seconds(1));
  auto behind = start_process(store, 2, dir_.sub("local2"));
  ASSERT_TRUE(behind->engine);
  Engine& e = *behind->engine;
  auto worker = std::make_shared<FlowWorker>();
  auto w = connect_flows(e, worker);
  auto task = worker->next();
  ASSERT_TRUE(task);
  EXPECT_TRUE(decide(e, w, *task, go_to("Next")).accepted());
  task = worker->next();
  ASSERT_TRUE(task);
  EXPECT_TRUE(decide(e, w, *task, complete("done")).accepted());
  const auto closed = wait_closed(e, "f");
  EXPECT_EQ(closed.status(), flow::FLOW_COMPLETED);

  auto history = e.history(whole_history("f"));
  ASSERT_TRUE(history.is_ok()) << history.status().to_string();
  ASSERT_GE(history->events_size(), 4);
  EXPECT_EQ(history->events(0).at_ms(), started_ms);
  int64_t last_ms = 0;
  for (const auto& ev : history->events()) {  // bounded by the run's events
    EXPECT_GE(ev.at_ms(), last_ms) << flow::HistoryKind_Name(ev.kind()) << " #" << ev.seq();
    last_ms = ev.at_ms();
  }
  EXPECT_GE(last_ms, started_ms);
  end(behind);
}

class EngineRestoreTest : public EngineTest {
 protected:
  // The state of `local` against one rebuilt from the whole log of `store`.
  void expect_matches_full_replay(ObjectStore& store, const std::filesystem::path& local) {
    auto live = StateMachine::open(local);
    ASSERT_TRUE(live.is_ok()) << live.status().to_string();
    auto rebuilt = StateMachine::open(dir_.sub("rebuilt"));
    ASSERT_TRUE(rebuilt.is_ok());
    LogReader reader(store, kNode, kFirstSlot);
    Status read = reader.read_to_end([&](const LogEntry& entry) {
      auto out = rebuilt.value()->apply(entry.slot, entry.batch);
      return out.is_ok() ? Status::ok() : out.status();
    });
    ASSERT_TRUE(read.is_ok()) << read.to_string();
    EXPECT_EQ(rebuilt.value()->dump().value(), live.value()->dump().value());
  }
  static bool described(Engine& e, const std::string& flow_id) {
    auto d = e.describe_flow(flow_ref(flow_id));
    EXPECT_TRUE(d.is_ok()) << flow_id << ": " << d.status().to_string();
    return d.is_ok();
  }
};

TEST_F(EngineRestoreTest, DeletedLocalStoreIsRestoredFromTheNewestSnapshotAndMatchesAFullReplay) {
  MemoryObjectStore store;
  auto p1 = start_process(store, 1, dir_.sub("local"));
  auto w = std::make_shared<FlowWorker>();
  auto h = connect_flows(*p1->engine, w, "w1", order_declaration(), 100);
  for (int i = 0; i < 20; ++i) start(*p1->engine, "f" + std::to_string(i));
  for (int i = 0; i < 10; ++i) {
    auto task = w->next();
    ASSERT_TRUE(task);
    EXPECT_TRUE(decide(*p1->engine, h, *task, complete("done")).accepted());
  }
  auto first = p1->engine->snapshot_now();
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  for (int i = 20; i < 25; ++i) start(*p1->engine, "f" + std::to_string(i));
  auto second = p1->engine->snapshot_now();
  ASSERT_TRUE(second.is_ok());
  EXPECT_GT(second->slot, first->slot);
  for (int i = 25; i < 30; ++i) start(*p1->engine, "f" + std::to_string(i));
  end(p1);

  std::filesystem::remove_all(dir_.sub("local"));
  auto p2 = start_process(store, 2, dir_.sub("local"));
  ASSERT_TRUE(p2->engine);
  EXPECT_NE(p2->engine->local_store_report().find(
                fmt::format("restored the snapshot at log slot {}", second->slot.value)),
            std::string::npos)
      << p2->engine->local_store_report();
  EXPECT_NE(p2->engine->local_store_report().find("is missing"), std::string::npos);
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(described(*p2->engine, "f" + std::to_string(i)));
  EXPECT_EQ(status_of(*p2->engine, "f0"), flow::FLOW_COMPLETED);
  end(p2);
  expect_matches_full_replay(store, dir_.sub("local"));
}

TEST_F(EngineRestoreTest, CorruptLocalStoreIsKeptAsideAndRestored) {
  MemoryObjectStore store;
  auto p1 = start_process(store, 1, dir_.sub("local"));
  connect_flows(*p1->engine, std::make_shared<FlowWorker>());
  for (int i = 0; i < 5; ++i) start(*p1->engine, "f" + std::to_string(i));
  ASSERT_TRUE(p1->engine->snapshot_now().is_ok());
  start(*p1->engine, "after-snapshot");
  end(p1);
  // A torn CURRENT file: RocksDB refuses to open the store.
  std::ofstream(dir_.sub("local") / "CURRENT", std::ios::trunc) << "MANIFEST-garbage";

  auto p2 = start_process(store, 2, dir_.sub("local"));
  ASSERT_TRUE(p2->engine);
  EXPECT_NE(p2->engine->local_store_report().find("is corrupt"), std::string::npos)
      << p2->engine->local_store_report();
  EXPECT_TRUE(std::filesystem::exists(dir_.sub("local.corrupt") / "CURRENT"));
  EXPECT_TRUE(described(*p2->engine, "f4"));
  EXPECT_TRUE(described(*p2->engine, "after-snapshot"));
  end(p2);
  expect_matches_full_replay(store, dir_.sub("local"));
}

TEST_F(EngineRestoreTest, LocalStoreBehindTheCollectedLogIsRestoredAndWithoutSnapshotsRefused) {
  MemoryObjectStore store;
  auto p1 = start_process(store, 1, dir_.sub("local"));
  // The declaration (slot 1): later processes start runs without a Worker.
  connect_flows(*p1->engine, std::make_shared<FlowWorker>());
  end(p1);
  std::filesystem::copy(dir_.sub("local"), dir_.sub("stale"));
  std::filesystem::copy(dir_.sub("local"), dir_.sub("stale2"));

  auto p2 = start_process(store, 2, dir_.sub("local"));
  for (int i = 0; i < 1100; ++i) start(*p2->engine, "f" + std::to_string(i));
  // Within the epoch's first 10 minutes its EpochStart pins the log.
  ASSERT_TRUE(p2->engine->snapshot_now().is_ok());
  EXPECT_EQ(find_log_bounds(store, kNode)->first, p2->writer->epoch_start_slot());
  EXPECT_EQ(p2->engine->snapshot_stats().log_slots_collected, 2u);  // epoch 1's slots
  clock_.advance(kEpochSettleTime);
  start(*p2->engine, "last");
  auto snap = p2->engine->snapshot_now();
  ASSERT_TRUE(snap.is_ok()) << snap.status().to_string();
  // Collected behind the snapshot, but 1000 slots stay below the log end.
  const Slot end_slot = p2->writer->next_slot();
  auto bounds = find_log_bounds(store, kNode);
  EXPECT_EQ(bounds->first.value, end_slot.value - kGcKeepSlotsMin);
  EXPECT_GT(bounds->first.value, 2u);
  end(p2);
  // A fenced writer's late retry re-created slot 2, far below the GC point
  // (docs/log.md, "GC safety"): it must not make the stale copy look current.
  proto::LogBatch stray;
  stray.set_node_id(kNode.value);
  stray.set_epoch(1);
  stray.set_slot(2);
  stray.set_writer_process_id("p1");
  stray.set_write_id("late-retry");
  ASSERT_TRUE(
      store.put(slot_key(kNode, Slot(2)), encode_batch(stray), PutCondition::create()).is_ok());

  // The stale copy applied slot 1 only; the log now starts far above it.
  auto p3 = start_process(store, 3, dir_.sub("stale"));
  ASSERT_TRUE(p3->engine);
  EXPECT_NE(p3->engine->local_store_report().find("but the log now starts at slot"),
            std::string::npos)
      << p3->engine->local_store_report();
  EXPECT_TRUE(described(*p3->engine, "f0"));
  EXPECT_TRUE(described(*p3->engine, "last"));
  end(p3);

  // Without any snapshot the gap cannot be bridged: a clear error, nothing changed.
  auto manifests = list_all(store, snapshot_manifest_prefix(kNode));
  ASSERT_TRUE(manifests.is_ok());
  for (const auto& key : manifests.value()) {
    ASSERT_TRUE(store.remove(key).is_ok());
  }
  auto p4 = bare_process(store, 4, dir_.sub("stale2"));
  ASSERT_TRUE(p4->writer->open().is_ok());
  auto refused = Engine::open(p4->options, store, *p4->writer, clock_);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Code::kCorruption);
  EXPECT_NE(refused.status().message().find("no snapshot can replace it"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(std::filesystem::exists(dir_.sub("stale2") / "CURRENT"));  // left as it was
  EXPECT_FALSE(std::filesystem::exists(dir_.sub("stale2.corrupt")));
}

}  // namespace
}  // namespace dex
