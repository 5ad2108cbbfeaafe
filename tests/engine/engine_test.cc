// The Engine end to end, in one process: MemoryObjectStore + LogWriter +
// ManualClock (the wall clock is derived from it) + fake Worker streams
// (docs/engine.md). Crash tests drop an engine and its writer without a clean
// close and start a new writer of a higher epoch and a new engine, on the same
// local store and on a fresh one (rebuilt from the log).
#include "engine/engine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "engine/state_machine.h"
#include "engine_test_util.h"
#include "log/log.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;
using json = nlohmann::json;

// Forwards to a MemoryObjectStore; a test can hold log writes: after `allow`
// more puts, a put waits until crash() and then fails permanently (never written).
class GateStore final : public ObjectStore {
 public:
  explicit GateStore(ObjectStore& inner) : inner_(inner) {}
  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& o = {}) override {
    return inner_.get(key, o);
  }
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
  Status remove(std::string_view key, const RequestOptions& o = {}) override {
    return inner_.remove(key, o);
  }
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax, const RequestOptions& o = {}) override {
    return inner_.list(prefix, start_after, max_keys, o);
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
  ObjectStore& inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  int allow_ = -1;  // -1: unlimited
  int held_ = 0;
  bool crashed_ = false;
};

class EngineTest : public EngineProcessTest {
 protected:
  static ResultAck complete(Engine& engine, Engine::WorkerHandle w, const StepTask& task,
                            const std::string& output) {
    TaskResult r;
    r.set_task_id(task.task_id());
    r.set_output(output);
    auto f = engine.complete_task(w, r);
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  }
  static ResultAck fail(Engine& engine, Engine::WorkerHandle w, const StepTask& task,
                        const std::string& message, bool non_retryable = false) {
    TaskResult r;
    r.set_task_id(task.task_id());
    r.mutable_failure()->set_message(message);
    r.mutable_failure()->set_non_retryable(non_retryable);
    auto f = engine.complete_task(w, r);
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  }

  static void register_type(Engine& engine, const std::string& definition) {
    RegisterFlowTypeRequest req;
    req.set_definition(definition);
    auto r = engine.register_flow_type(req);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  }
  static Flow start(Engine& engine, const std::string& type, const std::string& id,
                    const std::string& input = "{}") {
    StartFlowRequest req;
    req.set_flow_type(type);
    req.set_flow_id(id);
    req.set_input(input);
    auto r = engine.start_flow(req);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? r->flow() : Flow();
  }
  // Waits (real time, bounded) until `done` holds.
  static bool eventually(const std::function<bool()>& done) {
    for (int i = 0; i < 2000; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  }

  // Answers every task `respond` gives an output for (nullopt: fail it once
  // with "transient"), advancing the clock when idle, until `flows` all ended.
  void drive(Engine& engine, FakeWorker& worker, Engine::WorkerHandle w,
             const std::vector<std::string>& flows,
             const std::function<std::optional<std::string>(const StepTask&)>& respond) {
    for (int i = 0; i < 2000; ++i) {
      auto task = worker.next(std::chrono::milliseconds(20));
      if (task) {
        auto out = respond(*task);
        ResultAck ack =
            out ? complete(engine, w, *task, *out) : fail(engine, w, *task, "transient");
        EXPECT_TRUE(ack.accepted()) << ack.reason();
        continue;
      }
      bool all_ended = true;
      for (const auto& id : flows) {
        auto f = engine.get_flow(id);
        if (!f.is_ok() || f->status() == FLOW_STATUS_RUNNING) all_ended = false;
      }
      if (all_ended) return;
      clock_.advance(milliseconds(500));
    }
    ADD_FAILURE() << "flows did not end";
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

TEST_F(EngineTest, ThreeStepFlowWithOneFailureRetriedCompletes) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  register_type(e, kThreeSteps);
  auto worker = std::make_shared<FakeWorker>();
  auto w = connect(e, worker);
  Flow started = start(e, "three", "f1", R"({"n": 1})");
  EXPECT_EQ(started.status(), FLOW_STATUS_RUNNING);
  std::map<std::string, json> inputs;
  drive(e, *worker, w, {"f1"}, [&](const StepTask& t) -> std::optional<std::string> {
    EXPECT_EQ(t.flow_id(), "f1");
    EXPECT_EQ(t.flow_type(), "three");
    inputs[t.step() + std::to_string(t.attempt())] = json::parse(t.input());
    if (t.step() == "b" && t.attempt() == 1) return std::nullopt;
    return json{{"from", t.step()}}.dump();
  });
  auto f = e.get_flow("f1");
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->status(), FLOW_STATUS_COMPLETED);
  const Step& b = step_of(f.value(), "b");
  ASSERT_EQ(b.attempts_size(), 2);
  EXPECT_EQ(b.attempts(0).outcome(), ATTEMPT_OUTCOME_FAILED);
  EXPECT_EQ(b.attempts(0).error(), "transient");
  EXPECT_EQ(b.attempts(1).number(), 2u);
  EXPECT_EQ(b.attempts(1).outcome(), ATTEMPT_OUTCOME_COMPLETED);
  // The retry waited its backoff of 1 s on the durable timer.
  EXPECT_GE(b.attempts(1).started_at_ms() - b.attempts(0).ended_at_ms(), 1000);
  // Step input: the flow input plus the outputs of the Step's dependencies.
  EXPECT_EQ(inputs["a1"], (json{{"flow", {{"n", 1}}}, {"steps", json::object()}}));
  EXPECT_EQ(inputs["c1"]["steps"]["a"], (json{{"from", "a"}}));
  EXPECT_EQ(inputs["c1"]["steps"]["b"], (json{{"from", "b"}}));
  EXPECT_EQ(inputs["c1"]["flow"], (json{{"n", 1}}));
  // wait_flow answers at once for an ended flow.
  auto waited = e.wait_flow("f1", clock_.now(), nullptr);
  ASSERT_TRUE(waited.is_ok());
  EXPECT_TRUE(waited->ended());
  EXPECT_EQ(waited->flow().status(), FLOW_STATUS_COMPLETED);
}

TEST_F(EngineTest, StartIsIdempotentAndBadRequestsNameTheProblem) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  register_type(e, kThreeSteps);
  auto bad = [&](StartFlowRequest req, const std::string& words) {
    auto r = e.start_flow(req);
    ASSERT_FALSE(r.is_ok()) << words;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  StartFlowRequest req;
  req.set_flow_type("three");
  req.set_flow_id("x");
  req.set_input(R"({"v": 1})");
  auto first = e.start_flow(req);
  ASSERT_TRUE(first.is_ok());
  EXPECT_FALSE(first->already_existed());
  req.set_input(R"({"v": 2})");
  auto second = e.start_flow(req);
  ASSERT_TRUE(second.is_ok());
  EXPECT_TRUE(second->already_existed());
  EXPECT_EQ(second->flow().input(), R"({"v": 1})");
  StartFlowRequest r;
  bad(r, "flow_type is empty");
  r.set_flow_type("nope");
  bad(r, "unknown flow type 'nope'");
  r.set_flow_type("three");
  r.set_input("{not json");
  bad(r, "input is not valid JSON");
  r.set_input(std::string(kFlowInputBytesMax + 1, ' '));
  bad(r, "over the limit");
  r.set_input("{}");
  r.set_flow_id(std::string(kFlowIdBytesMax + 1, 'x'));
  bad(r, "flow_id is 257 bytes");
  // A generated flow id when none is given.
  r.clear_flow_id();
  auto generated = e.start_flow(r);
  ASSERT_TRUE(generated.is_ok());
  EXPECT_FALSE(generated->flow().flow_id().empty());
  EXPECT_EQ(generated->flow().input(), "{}");

  EXPECT_EQ(e.get_flow("ghost").status().code(), Code::kNotFound);
  CancelFlowRequest cancel;
  cancel.set_flow_id("ghost");
  EXPECT_EQ(e.cancel_flow(cancel).status().code(), Code::kNotFound);
  EXPECT_EQ(e.get_flow_type("ghost").status().code(), Code::kNotFound);
  RegisterFlowTypeRequest cyclic;
  cyclic.set_definition(
      "name: c\nsteps: [{name: a, taskQueue: q, after: [b]}, {name: b, taskQueue: q, after: [a]}]");
  auto refused = e.register_flow_type(cyclic);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("cycle"), std::string::npos);
  EXPECT_EQ(e.register_flow_type(RegisterFlowTypeRequest()).status().code(),
            Code::kInvalidArgument);
  RegisterFlowTypeRequest same;
  same.set_definition(kThreeSteps);
  auto unchanged = e.register_flow_type(same);
  ASSERT_TRUE(unchanged.is_ok());
  EXPECT_FALSE(unchanged->changed());
  EXPECT_EQ(e.list_flow_types()->flow_types_size(), 1);
  ListFlowsRequest list;
  list.set_page_size(5000);
  EXPECT_EQ(e.list_flows(list).status().code(), Code::kInvalidArgument);
  list.set_page_size(1);
  auto page = e.list_flows(list);
  ASSERT_TRUE(page.is_ok());
  EXPECT_EQ(page->flows_size(), 1);
  EXPECT_FALSE(page->next_page_token().empty());

  p->engine->stop();
  EXPECT_EQ(e.get_flow("x").status().code(), Code::kStopped);
  EXPECT_EQ(e.start_flow(req).status().code(), Code::kStopped);
  EXPECT_EQ(e.wait_flow("x", clock_.now() + seconds(10), nullptr).status().code(), Code::kStopped);
}

TEST_F(EngineTest, StaleResultIsRefusedAndChangesNothing) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  register_type(e, "name: one\nsteps: [{name: a, taskQueue: q}]");
  auto worker = std::make_shared<FakeWorker>();
  auto w = connect(e, worker);
  start(e, "one", "f");
  auto task = worker->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->attempt(), 1u);
  EXPECT_TRUE(complete(e, w, *task, R"("first")").accepted());
  ResultAck again = complete(e, w, *task, R"("second")");
  EXPECT_FALSE(again.accepted());
  EXPECT_NE(again.reason().find("stale"), std::string::npos) << again.reason();
  EXPECT_EQ(step_of(e.get_flow("f").value(), "a").output(), R"("first")");
  // The ended attempt's heartbeat asks the Worker to stop.
  TaskHeartbeat hb;
  hb.set_task_id(task->task_id());
  EXPECT_TRUE(e.heartbeat(w, hb).cancel_requested());
}

TEST_F(EngineTest, HeartbeatTimeoutEndsTheAttemptTimedOutAndItIsRetried) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  register_type(e,
                "name: hb\nsteps: [{name: a, taskQueue: q, heartbeatTimeout: 2s, "
                "startToCloseTimeout: 10s, retry: {initialInterval: 1s}}]");
  auto worker = std::make_shared<FakeWorker>();
  auto w = connect(e, worker);
  start(e, "hb", "f");
  auto task = worker->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->heartbeat_timeout_ms(), 2000);
  TaskHeartbeat hb;
  hb.set_task_id(task->task_id());
  clock_.advance(milliseconds(1500));
  EXPECT_FALSE(e.heartbeat(w, hb).cancel_requested());  // in time: the deadline moves
  clock_.advance(milliseconds(1500));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(step_of(e.get_flow("f").value(), "a").status(), STEP_STATUS_RUNNING);
  clock_.advance(milliseconds(600));  // 2.1 s after the heartbeat
  ASSERT_TRUE(eventually([&] {
    return step_of(e.get_flow("f").value(), "a").status() == STEP_STATUS_BACKOFF;
  })) << e.get_flow("f")->DebugString();
  Step a = step_of(e.get_flow("f").value(), "a");
  EXPECT_EQ(a.attempts(0).outcome(), ATTEMPT_OUTCOME_TIMED_OUT);
  EXPECT_NE(a.attempts(0).error().find("heartbeat"), std::string::npos);
  EXPECT_TRUE(e.heartbeat(w, hb).cancel_requested());
  EXPECT_FALSE(complete(e, w, *task, "1").accepted());  // too late: stale
  clock_.advance(milliseconds(1000));
  auto retry = worker->next();
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->attempt(), 2u);
  // Start-to-close: 10 s without an answer, heartbeats or not.
  for (int i = 0; i < 6; ++i) {
    TaskHeartbeat hb2;
    hb2.set_task_id(retry->task_id());
    EXPECT_FALSE(e.heartbeat(w, hb2).cancel_requested());
    clock_.advance(milliseconds(1800));
  }
  ASSERT_TRUE(eventually([&] {
    Step s = step_of(e.get_flow("f").value(), "a");
    return s.attempts_size() == 2 && s.attempts(1).outcome() == ATTEMPT_OUTCOME_TIMED_OUT;
  }));
  EXPECT_NE(step_of(e.get_flow("f").value(), "a").attempts(1).error().find("start-to-close"),
            std::string::npos);
}

TEST_F(EngineTest, CancelEndsTheFlowAndTheWorkerLearnsOnItsHeartbeat) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  register_type(e, "name: one\nsteps: [{name: a, taskQueue: q}]");
  auto worker = std::make_shared<FakeWorker>();
  auto w = connect(e, worker);
  start(e, "one", "f");
  auto task = worker->next();
  ASSERT_TRUE(task);
  // A waiter wakes when the flow ends.
  std::thread waiter([&] {
    auto r = e.wait_flow("f", clock_.now() + seconds(3600), nullptr);
    EXPECT_TRUE(r.is_ok());
    EXPECT_TRUE(r->ended());
    EXPECT_EQ(r->flow().status(), FLOW_STATUS_CANCELLED);
  });
  CancelFlowRequest cancel;
  cancel.set_flow_id("f");
  auto r = e.cancel_flow(cancel);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->flow().status(), FLOW_STATUS_CANCELLED);
  waiter.join();
  TaskHeartbeat hb;
  hb.set_task_id(task->task_id());
  EXPECT_TRUE(e.heartbeat(w, hb).cancel_requested());
  EXPECT_FALSE(complete(e, w, *task, "1").accepted());
  // A wait that times out says ended = false.
  start(e, "one", "g");
  auto timed = e.wait_flow("g", clock_.now(), nullptr);
  ASSERT_TRUE(timed.is_ok());
  EXPECT_FALSE(timed->ended());
}

TEST_F(EngineTest, SleepStepFiresOnTheWallClock) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  register_type(e,
                "name: nap\nsteps: [{name: s, sleep: 30s}, {name: a, taskQueue: q, after: [s]}]");
  auto worker = std::make_shared<FakeWorker>();
  connect(e, worker);
  start(e, "nap", "f");
  EXPECT_FALSE(worker->next(std::chrono::milliseconds(100)));
  clock_.advance(seconds(29));
  EXPECT_FALSE(worker->next(std::chrono::milliseconds(100)));
  clock_.advance(seconds(1));
  auto task = worker->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->step(), "a");
  EXPECT_EQ(json::parse(task->input())["steps"]["s"], json::object());
}

TEST_F(EngineTest, TaskTheWorkerNeverReceivedRunsAgainWithTheSameNumber) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  register_type(e,
                "name: t\nsteps: [{name: a, taskQueue: q, retry: {maxAttempts: 1}}, "
                "{name: b, taskQueue: q, dispatch: ASYNC, retry: {maxAttempts: 1}}]");
  auto dead = std::make_shared<FakeWorker>();
  dead->alive = false;
  auto wd = connect(e, dead, 10, "dead");
  start(e, "t", "f");
  // Both tasks were sent to a dead stream: withdrawn, not failed (maxAttempts 1).
  ASSERT_TRUE(eventually([&] {
    Flow f = e.get_flow("f").value();
    return step_of(f, "a").status() == STEP_STATUS_READY &&
           step_of(f, "b").status() == STEP_STATUS_READY;
  }));
  e.disconnect_worker(wd);
  auto live = std::make_shared<FakeWorker>();
  auto w = connect(e, live, 10, "live");
  std::set<std::string> seen;
  for (int i = 0; i < 2; ++i) {
    auto task = live->next();
    ASSERT_TRUE(task);
    EXPECT_EQ(task->attempt(), 1u);
    seen.insert(task->step());
    EXPECT_TRUE(complete(e, w, *task, "1").accepted());
  }
  EXPECT_EQ(seen, (std::set<std::string>{"a", "b"}));
  Flow f = e.get_flow("f").value();
  EXPECT_EQ(f.status(), FLOW_STATUS_COMPLETED);
  EXPECT_EQ(step_of(f, "a").attempts_size(), 1);
  EXPECT_EQ(step_of(f, "a").attempts(0).worker_id(), "live");
}

TEST_F(EngineTest, NoTaskIsHandedOutOnceTheLeaseIsNoLongerValid) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  register_type(*p->engine, "name: a\nsteps: [{name: s, taskQueue: q, dispatch: ASYNC}]\n");
  start(*p->engine, "a", "f1");
  p->lease = false;  // frozen past the lease; the keeper has not noticed yet
  auto worker = std::make_shared<FakeWorker>();
  connect(*p->engine, worker);
  EXPECT_FALSE(worker->next(std::chrono::milliseconds(300)).has_value());
  p->lease = true;  // control: the same Worker gets the task while the lease is valid
  auto other = std::make_shared<FakeWorker>();
  connect(*p->engine, other, 100, "w2");
  EXPECT_TRUE(worker->next().has_value() || other->next().has_value());
}

// Spec (Step down): stop handing out new Step tasks; drain running attempts
// while accepting heartbeats and final output.
TEST_F(EngineTest, DrainHandsOutNothingNewButAcceptsResultsOfRunningAttempts) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  Engine& e = *p->engine;
  register_type(e, kThreeSteps);
  auto w = std::make_shared<FakeWorker>();
  auto h = connect(e, w, /*capacity=*/2);
  start(e, "three", "f1");
  start(e, "three", "f2");
  auto t1 = w->next();
  auto t2 = w->next();
  ASSERT_TRUE(t1 && t2);
  ASSERT_TRUE(eventually([&] { return e.attempts_running() == 2; }));
  e.begin_drain();
  start(e, "three", "f3");  // accepted, but its Step is not handed out
  TaskHeartbeat hb;
  hb.set_task_id(t1->task_id());
  EXPECT_FALSE(e.heartbeat(h, hb).cancel_requested());
  EXPECT_TRUE(complete(e, h, *t1, "1").accepted());
  EXPECT_TRUE(complete(e, h, *t2, "1").accepted());
  EXPECT_TRUE(eventually([&] { return e.attempts_running() == 0; }));
  clock_.advance(seconds(5));
  EXPECT_FALSE(w->next(std::chrono::milliseconds(300))) << "a task was handed out while draining";
  EXPECT_EQ(step_of(e.get_flow("f3").value(), "a").status(), STEP_STATUS_READY);
}

TEST_F(EngineTest, IdleWorkerStreamsArePinged) {
  MemoryObjectStore store;
  auto p = start_process(store, 1, dir_.sub("local"));
  auto worker = std::make_shared<FakeWorker>();
  connect(*p->engine, worker);
  clock_.advance(seconds(11));
  EXPECT_TRUE(eventually([&] { return worker->pings.load() >= 1; }));
}

TEST_F(EngineTest, LocalStoreAheadOfTheLogIsRefusedAsCorruption) {
  MemoryObjectStore store;
  {
    auto p = start_process(store, 1, dir_.sub("local"));
    register_type(*p->engine, kThreeSteps);
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

void EngineCrashTest::run(bool fresh_store) {
  MemoryObjectStore memory;
  GateStore store(memory);
  const char* type = R"(
name: crash
steps:
  - {name: a, taskQueue: q, retry: {maxAttempts: 5, initialInterval: 1s}}
  - {name: b, taskQueue: q, after: [a], dispatch: ASYNC, retry: {maxAttempts: 5, initialInterval: 1s}}
  - {name: c, taskQueue: q, after: [b], retry: {maxAttempts: 5, initialInterval: 1s}}
)";
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back("f" + std::to_string(i));
  auto p1 = start_process(store, 1, dir_.sub("local1"));
  Engine& e1 = *p1->engine;
  register_type(e1, type);
  auto w1 = std::make_shared<FakeWorker>();
  auto h1 = connect(e1, w1);
  for (const auto& id : ids) start(e1, "crash", id, json{{"id", id}}.dump());
  std::map<std::string, StepTask> held;  // "<flow>/<step>" -> task the old Worker holds
  auto take = [&](size_t n) {
    for (size_t i = 0; i < n; ++i) {
      auto task = w1->next();
      ASSERT_TRUE(task);
      held[task->flow_id() + "/" + task->step()] = *task;
    }
  };
  take(10);  // every a (SYNC: durable before sent)
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(complete(e1, h1, held.at(ids[i] + "/a"), "1").accepted());
  }
  take(5);  // b of f0..f4 (ASYNC)
  ASSERT_TRUE(eventually([&] {
    for (int i = 0; i < 5; ++i) {
      if (step_of(e1.get_flow(ids[i]).value(), "b").status() != STEP_STATUS_RUNNING) return false;
    }
    return true;
  }));
  EXPECT_TRUE(complete(e1, h1, held.at("f0/b"), "2").accepted());
  EXPECT_TRUE(complete(e1, h1, held.at("f1/b"), "2").accepted());
  take(2);  // c of f0, f1
  EXPECT_TRUE(complete(e1, h1, held.at("f0/c"), "3").accepted());
  ASSERT_EQ(e1.get_flow("f0")->status(), FLOW_STATUS_COMPLETED);
  // f5's a completes durably, then its ASYNC b is sent while its start is
  // being written — and that write never lands.
  store.allow(1);
  EXPECT_TRUE(complete(e1, h1, held.at("f5/a"), "1").accepted());
  take(1);
  ASSERT_TRUE(held.count("f5/b"));
  ASSERT_TRUE(store.wait_held());
  const std::string lost_async_task = held.at("f5/b").task_id();
  EXPECT_EQ(held.at("f5/b").attempt(), 1u);

  // Crash: nothing more reaches the log; the engine and writer are dropped.
  p1->lease = false;
  store.crash();
  p1->engine.reset();
  p1->writer.reset();
  store.allow(-1);

  clock_.advance(seconds(5));
  const int64_t takeover_ms = wall_ms();
  auto p2 = start_process(store, 2, fresh_store ? dir_.sub("local2") : dir_.sub("local1"));
  ASSERT_TRUE(p2->engine);
  Engine& e2 = *p2->engine;
  // Recovery: attempts a Worker had received end NOT_COMPLETED and consume a retry.
  Flow f6 = e2.get_flow("f6").value();
  ASSERT_EQ(step_of(f6, "a").attempts_size(), 1);
  EXPECT_EQ(step_of(f6, "a").attempts(0).outcome(), ATTEMPT_OUTCOME_NOT_COMPLETED);
  EXPECT_EQ(step_of(f6, "a").attempts(0).ended_at_ms(), takeover_ms);
  EXPECT_EQ(step_of(f6, "a").status(), STEP_STATUS_BACKOFF);
  // The ASYNC start that never became durable: READY, nothing consumed.
  Flow f5 = e2.get_flow("f5").value();
  EXPECT_EQ(step_of(f5, "b").status(), STEP_STATUS_READY);
  EXPECT_EQ(step_of(f5, "b").attempts_size(), 0);
  EXPECT_EQ(e2.get_flow("f0")->status(), FLOW_STATUS_COMPLETED);
  // The old Worker re-sends results on its new stream: all stale now.
  auto w2 = std::make_shared<FakeWorker>();
  auto h2 = connect(e2, w2, 100, "w2");
  EXPECT_FALSE(complete(e2, h2, held.at("f2/b"), "old").accepted());
  EXPECT_FALSE(complete(e2, h2, held.at("f5/b"), "old").accepted());

  std::map<std::string, int> runs;
  drive(e2, *w2, h2, ids, [&](const StepTask& task) -> std::optional<std::string> {
    ++runs[task.flow_id() + "/" + task.step()];
    if (task.flow_id() == "f5" && task.step() == "b") {
      EXPECT_EQ(task.attempt(), 1u);  // the same number
      EXPECT_NE(task.task_id(), lost_async_task);
    }
    return json{{"step", task.step()}, {"attempt", task.attempt()}}.dump();
  });
  for (const auto& id : ids) {
    Flow f = e2.get_flow(id).value();
    EXPECT_EQ(f.status(), FLOW_STATUS_COMPLETED) << id;
    for (const auto& s : f.steps()) {
      // Numbered 1..n, exactly one COMPLETED, the last.
      ASSERT_GE(s.attempts_size(), 1) << id << "/" << s.name();
      for (int i = 0; i < s.attempts_size(); ++i) {
        EXPECT_EQ(s.attempts(i).number(), static_cast<uint32_t>(i + 1)) << id << "/" << s.name();
        EXPECT_EQ(s.attempts(i).outcome() == ATTEMPT_OUTCOME_COMPLETED, i + 1 == s.attempts_size())
            << id << "/" << s.name();
        if (i + 1 < s.attempts_size()) {
          EXPECT_EQ(s.attempts(i).outcome(), ATTEMPT_OUTCOME_NOT_COMPLETED);
        }
      }
    }
  }
  // f5's b ran once more with number 1; f6's a is attempt 2 after the lost one.
  EXPECT_EQ(step_of(e2.get_flow("f5").value(), "b").attempts_size(), 1);
  EXPECT_EQ(step_of(e2.get_flow("f6").value(), "a").attempts_size(), 2);
  EXPECT_EQ(step_of(e2.get_flow("f0").value(), "a").attempts_size(), 1);  // finished before

  // No Step's output was recorded twice: replay the whole log into a fresh
  // store, count accepted completions, and compare the states.
  p2->engine->stop();
  auto live = StateMachine::open(fresh_store ? dir_.sub("local2") : dir_.sub("local1"));
  ASSERT_TRUE(live.is_ok());
  auto rebuilt = StateMachine::open(dir_.sub("rebuilt"));
  ASSERT_TRUE(rebuilt.is_ok());
  LogReader reader(memory, kNode, kFirstSlot);
  std::map<std::string, int> completions;
  Status read = reader.read_to_end([&](const LogEntry& entry) {
    auto out = rebuilt.value()->apply(entry.slot, entry.batch);
    if (!out.is_ok()) return out.status();
    for (const auto& ended : out->effects.attempts_ended) {
      if (ended.outcome == ATTEMPT_OUTCOME_COMPLETED)
        ++completions[ended.flow_id + "/" + ended.step];
    }
    return Status::ok();
  });
  ASSERT_TRUE(read.is_ok()) << read.to_string();
  EXPECT_EQ(completions.size(), 30u);
  for (const auto& [key, n] : completions) EXPECT_EQ(n, 1) << key;
  EXPECT_EQ(rebuilt.value()->dump().value(), live.value()->dump().value());
}

TEST_F(EngineCrashTest, EveryStartedFlowCompletesAfterACrashOnTheSameLocalStore) { run(false); }

TEST_F(EngineCrashTest, EveryStartedFlowCompletesAfterACrashOnAFreshLocalStore) { run(true); }

// ------------------------------------------------ snapshots and restore

class EngineRestoreTest : public EngineTest {
 protected:
  // Ends a process cleanly: the engine stops, the writer closes.
  static void end(std::unique_ptr<EngineProcess>& p) {
    p->engine->stop();
    EXPECT_TRUE(p->writer->close().is_ok());
    p.reset();
  }
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
};

TEST_F(EngineRestoreTest, DeletedLocalStoreIsRestoredFromTheNewestSnapshotAndMatchesAFullReplay) {
  MemoryObjectStore store;
  auto p1 = start_process(store, 1, dir_.sub("local"));
  register_type(*p1->engine, kThreeSteps);
  auto w = std::make_shared<FakeWorker>();
  auto h = connect(*p1->engine, w);
  for (int i = 0; i < 20; ++i) start(*p1->engine, "three", "f" + std::to_string(i));
  for (int i = 0; i < 10; ++i) {
    auto task = w->next();
    ASSERT_TRUE(task);
    EXPECT_TRUE(complete(*p1->engine, h, *task, "done").accepted());
  }
  auto first = p1->engine->snapshot_now();
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  for (int i = 20; i < 25; ++i) start(*p1->engine, "three", "f" + std::to_string(i));
  auto second = p1->engine->snapshot_now();
  ASSERT_TRUE(second.is_ok());
  EXPECT_GT(second->slot, first->slot);
  for (int i = 25; i < 30; ++i) start(*p1->engine, "three", "f" + std::to_string(i));
  end(p1);

  std::filesystem::remove_all(dir_.sub("local"));
  auto p2 = start_process(store, 2, dir_.sub("local"));
  ASSERT_TRUE(p2->engine);
  EXPECT_NE(p2->engine->local_store_report().find(
                fmt::format("restored the snapshot at log slot {}", second->slot.value)),
            std::string::npos)
      << p2->engine->local_store_report();
  EXPECT_NE(p2->engine->local_store_report().find("is missing"), std::string::npos);
  for (int i = 0; i < 30; ++i) {
    EXPECT_TRUE(p2->engine->get_flow("f" + std::to_string(i)).is_ok()) << i;
  }
  end(p2);
  expect_matches_full_replay(store, dir_.sub("local"));
}

TEST_F(EngineRestoreTest, CorruptLocalStoreIsKeptAsideAndRestored) {
  MemoryObjectStore store;
  auto p1 = start_process(store, 1, dir_.sub("local"));
  register_type(*p1->engine, kThreeSteps);
  for (int i = 0; i < 5; ++i) start(*p1->engine, "three", "f" + std::to_string(i));
  ASSERT_TRUE(p1->engine->snapshot_now().is_ok());
  start(*p1->engine, "three", "after-snapshot");
  end(p1);
  // A torn CURRENT file: RocksDB refuses to open the store.
  std::ofstream(dir_.sub("local") / "CURRENT", std::ios::trunc) << "MANIFEST-garbage";

  auto p2 = start_process(store, 2, dir_.sub("local"));
  ASSERT_TRUE(p2->engine);
  EXPECT_NE(p2->engine->local_store_report().find("is corrupt"), std::string::npos)
      << p2->engine->local_store_report();
  EXPECT_TRUE(std::filesystem::exists(dir_.sub("local.corrupt") / "CURRENT"));
  EXPECT_TRUE(p2->engine->get_flow("f4").is_ok());
  EXPECT_TRUE(p2->engine->get_flow("after-snapshot").is_ok());
  end(p2);
  expect_matches_full_replay(store, dir_.sub("local"));
}

TEST_F(EngineRestoreTest, LocalStoreBehindTheCollectedLogIsRestoredAndWithoutSnapshotsRefused) {
  MemoryObjectStore store;
  auto p1 = start_process(store, 1, dir_.sub("local"));
  register_type(*p1->engine, kThreeSteps);
  end(p1);
  std::filesystem::copy(dir_.sub("local"), dir_.sub("stale"));
  std::filesystem::copy(dir_.sub("local"), dir_.sub("stale2"));

  auto p2 = start_process(store, 2, dir_.sub("local"));
  for (int i = 0; i < 1100; ++i) start(*p2->engine, "three", "f" + std::to_string(i));
  // Within the epoch's first 10 minutes its EpochStart pins the log.
  ASSERT_TRUE(p2->engine->snapshot_now().is_ok());
  EXPECT_EQ(find_log_bounds(store, kNode)->first, p2->writer->epoch_start_slot());
  EXPECT_EQ(p2->engine->snapshot_stats().log_slots_collected, 2u);  // epoch 1's slots
  clock_.advance(kEpochSettleTime);
  start(*p2->engine, "three", "last");
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
  EXPECT_TRUE(p3->engine->get_flow("f0").is_ok());
  EXPECT_TRUE(p3->engine->get_flow("last").is_ok());
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
