// Helpers shared by the engine tests: temporary store directories, flow records
// (docs/flow-rules.md) for the state machine, the Flow type and Worker streams
// they use, an object store that forwards (for tests that intercept a call),
// and (EngineProcessTest, OneWorkerTest) whole processes of a log writer and
// an engine.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "dex/flow_api.pb.h"
#include "dex/flow_records.pb.h"
#include "dex/records.pb.h"
#include "engine/engine.h"
#include "forwarding_store.h"
#include "log/log.h"
#include "objstore/memory_store.h"

namespace dex::testing {

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("dex-engine-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path sub(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// ------------------------------------------------ Flow types and decisions

// Order: Start -> (Next | Wait). Wait waits on Channel "approval" or a Timer.
// Every method keeps the defaults (SYNC, 3 attempts, 1 s first backoff).
inline flow::FlowDeclaration order_declaration() {
  flow::FlowDeclaration d;
  d.set_flow_type("Order");
  d.set_start_step_type("Start");
  d.add_steps()->set_step_type("Start");
  d.add_steps()->set_step_type("Next");
  auto* wait = d.add_steps();
  wait->set_step_type("Wait");
  wait->set_has_wait_for(true);
  d.add_channels()->set_name("approval");
  return d;
}

// The Execute options of `step_type` in `d` (which must declare it).
inline flow::MethodOptions& execute_options(flow::FlowDeclaration& d,
                                            const std::string& step_type) {
  for (auto& s : *d.mutable_steps()) {
    if (s.step_type() == step_type) return *s.mutable_options()->mutable_execute();
  }
  ADD_FAILURE() << "no Step type " << step_type;
  static flow::MethodOptions none;
  return none;
}

inline flow::StepDecision go_to(const std::string& type) {
  flow::StepDecision d;
  auto* m = d.mutable_go_to()->add_movements();
  m->set_step_type(type);
  m->mutable_input()->set_data(type + "-input");
  return d;
}

inline flow::StepDecision complete(const std::string& output) {
  flow::StepDecision d;
  d.mutable_graceful_complete()->set_data(output);
  return d;
}

// ------------------------------------------------ records

inline proto::LogRecord flow_record(flow::FlowRecord r) {
  proto::LogRecord out;
  *out.mutable_flow() = std::move(r);
  return out;
}

inline proto::LogRecord declare(const flow::FlowDeclaration& d, int64_t at = 0) {
  flow::FlowRecord r;
  *r.mutable_declare_flows()->add_declarations() = d;
  r.mutable_declare_flows()->set_at_unix_ms(at);
  return flow_record(std::move(r));
}

inline flow::TaskRef task_ref(const std::string& flow_id, const std::string& exec,
                              uint32_t attempt = 1, flow::Method method = flow::EXECUTE,
                              const std::string& run_id = "r1") {
  flow::TaskRef t;
  t.set_flow_id(flow_id);
  t.set_run_id(run_id);
  t.set_step_execution_id(exec);
  t.set_method(method);
  t.set_attempt(attempt);
  return t;
}

// Hands `task` to Worker "w1" as `task_id` in `r`.
inline void assign(flow::FlowRecord& r, const flow::TaskRef& task, const std::string& task_id) {
  auto* a = r.add_assignments();
  *a->mutable_task() = task;
  a->set_task_id(task_id);
  a->set_worker_id("w1");
}

// A start of run "r1"; with `task_id`, its start Step's first attempt is handed out.
inline flow::FlowRecord start_record(const std::string& flow_id, const std::string& type,
                                     int64_t at, const std::string& task_id = "") {
  flow::FlowRecord r;
  auto* s = r.mutable_start_flow();
  s->set_flow_id(flow_id);
  s->set_run_id("r1");
  s->set_flow_type(type);
  s->mutable_input()->set_data("in");
  s->set_at_unix_ms(at);
  if (!task_id.empty()) {
    r.set_at_unix_ms(at);
    assign(r, task_ref(flow_id, "Start-1"), task_id);
  }
  return r;
}

// The Execute result of `task` (attempt `task_id`): `decision`, COMPLETED.
inline flow::FlowRecord decided(const flow::TaskRef& task, const std::string& task_id,
                                const flow::StepDecision& decision, int64_t at) {
  flow::FlowRecord r;
  auto* m = r.mutable_method_result();
  *m->mutable_task() = task;
  m->set_task_id(task_id);
  m->set_outcome(flow::ATTEMPT_COMPLETED);
  *m->mutable_decision() = decision;
  m->set_at_unix_ms(at);
  return r;
}

inline proto::LogRecord epoch_start(const std::string& holder, int64_t at) {
  proto::LogRecord r;
  r.mutable_epoch_start()->set_holder_process_id(holder);
  r.mutable_epoch_start()->set_at_unix_ms(at);
  return r;
}

// ------------------------------------------------ Worker streams

// A Worker stream that hosts Flows: collects the FlowTasks the engine sends;
// `alive = false` makes send_task and send_ping fail as on a dead stream. A
// task ID it already received is ignored, as the SDK's Worker does.
class FlowWorker final : public WorkerSink {
 public:
  bool send_task(const flow::FlowTask& task) override {
    ++sends;
    std::lock_guard<std::mutex> lock(mu_);
    if (!alive) return false;
    if (!received_.insert(task.task_id()).second) {
      ++repeats;
      return true;
    }
    tasks_.push_back(task);
    cv_.notify_all();
    return true;
  }
  bool send_ping() override {
    ++pings;
    return alive.load();
  }
  std::optional<flow::FlowTask> next(
      std::chrono::milliseconds wait = std::chrono::milliseconds(3000)) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, wait, [&] { return !tasks_.empty(); })) return std::nullopt;
    flow::FlowTask t = tasks_.front();
    tasks_.pop_front();
    return t;
  }
  std::atomic<bool> alive{true};
  std::atomic<int> sends{0};    // send_task calls, on a dead stream too
  std::atomic<int> repeats{0};  // tasks received again (ignored)
  std::atomic<int> pings{0};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<flow::FlowTask> tasks_;
  std::set<std::string> received_;  // task IDs
};

// Connects `worker` to `engine` as Worker `id` hosting `declarations`.
inline Engine::WorkerHandle connect_flows(Engine& e, std::shared_ptr<WorkerSink> worker,
                                          const std::string& id,
                                          const std::vector<flow::FlowDeclaration>& declarations,
                                          uint32_t capacity = 10) {
  WorkerHello hello;
  hello.set_worker_id(id);
  hello.set_max_concurrent_tasks(capacity);
  for (const auto& d : declarations) *hello.add_flows() = d;
  auto handle = e.connect_worker(hello, std::move(worker));
  EXPECT_TRUE(handle.is_ok()) << handle.status().to_string();
  return handle.is_ok() ? handle.value() : 0;
}

inline Engine::WorkerHandle connect_flows(
    Engine& e, std::shared_ptr<WorkerSink> worker, const std::string& id = "w1",
    const flow::FlowDeclaration& declaration = order_declaration(), uint32_t capacity = 10) {
  return connect_flows(e, std::move(worker), id, std::vector<flow::FlowDeclaration>{declaration},
                       capacity);
}

// Starts a run of `type`; its run ID ("" and a test failure if refused).
inline std::string start(Engine& e, const std::string& flow_id, const std::string& input = "in",
                         const std::string& type = "Order") {
  flow::StartFlowRequest r;
  r.set_flow_id(flow_id);
  r.set_flow_type(type);
  r.mutable_input()->set_data(input);
  auto out = e.start_flow(r);
  EXPECT_TRUE(out.is_ok()) << flow_id << ": " << out.status().to_string();
  return out.is_ok() ? out->run_id() : "";
}

inline ResultAck answer(Engine& e, Engine::WorkerHandle w, const flow::FlowTaskResult& result) {
  auto f = e.complete_task(w, result);
  EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  return f.get();
}

inline ResultAck decide(Engine& e, Engine::WorkerHandle w, const flow::FlowTask& task,
                        const flow::StepDecision& decision) {
  flow::FlowTaskResult r;
  r.set_task_id(task.task_id());
  *r.mutable_decision() = decision;
  return answer(e, w, r);
}

inline ResultAck fail_task(Engine& e, Engine::WorkerHandle w, const flow::FlowTask& task,
                           const std::string& message, bool non_retryable = false) {
  flow::FlowTaskResult r;
  r.set_task_id(task.task_id());
  r.mutable_error()->set_message(message);
  r.mutable_error()->set_non_retryable(non_retryable);
  return answer(e, w, r);
}

inline flow::FlowRef flow_ref(const std::string& flow_id) {
  flow::FlowRef ref;
  ref.set_flow_id(flow_id);
  return ref;
}

// A GetHistoryEvents request for every event of the run (run_id "": the latest).
inline flow::GetHistoryEventsRequest whole_history(const std::string& flow_id,
                                                   const std::string& run_id = "") {
  flow::GetHistoryEventsRequest r;
  r.mutable_flow()->set_flow_id(flow_id);
  r.mutable_flow()->set_run_id(run_id);
  r.set_from_start(true);
  return r;
}

// The run's status now (UNSPECIFIED and a test failure if it cannot be read).
inline flow::FlowStatus status_of(Engine& e, const std::string& flow_id) {
  auto d = e.describe_flow(flow_ref(flow_id));
  EXPECT_TRUE(d.is_ok()) << flow_id << ": " << d.status().to_string();
  return d.is_ok() ? d->status() : flow::FLOW_STATUS_UNSPECIFIED;
}

// The active Step execution `exec` of the run, as GetFlowState shows it.
inline std::optional<flow::StepExecutionView> active_step(Engine& e, const std::string& flow_id,
                                                          const std::string& exec) {
  auto state = e.flow_state(flow_ref(flow_id));
  EXPECT_TRUE(state.is_ok()) << flow_id << ": " << state.status().to_string();
  if (!state.is_ok()) return std::nullopt;
  for (const auto& s : state->active()) {
    if (s.step_execution_id() == exec) return s;
  }
  return std::nullopt;
}

// Waits (real time, bounded) for the run to close; its description.
inline flow::FlowDescription wait_closed(Engine& e, const std::string& flow_id) {
  flow::WaitForFlowRequest r;
  r.mutable_flow()->set_flow_id(flow_id);
  r.set_timeout_ms(1);
  for (int i = 0; i < 200; ++i) {
    auto out = e.wait_for_flow(r, nullptr);
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    if (out.is_ok() && out->closed()) return out->flow();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << flow_id << " did not close";
  return {};
}

// Waits (real time, bounded) until `done` holds.
inline bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

// ------------------------------------------------ whole engines

// The node whose log the engine tests write.
inline const NodeId kNode("n1");
// The wall clock (Unix ms) at the ManualClock's start; EngineProcessTest::wall_ms.
inline constexpr int64_t kWallBaseMs = 1'700'000'000'000;

// One active process: a writer of an epoch and an engine over a local store.
struct EngineProcess {
  std::atomic<bool> lease{true};  // what the writer's lease check answers
  std::shared_ptr<EngineLogHook> hook = std::make_shared<EngineLogHook>();
  std::unique_ptr<LogWriter> writer;
  std::unique_ptr<Engine> engine;
};

// Tests of whole engines: a ManualClock (the wall clock is derived from it), a
// scratch directory, and processes opened on them.
class EngineProcessTest : public ::testing::Test {
 protected:
  int64_t wall_ms() const {
    return kWallBaseMs + to_ms(clock_.now() - TimePoint(seconds(1'000'000)));
  }

  // Opens in `p` a writer of `epoch` on `store` (process "p<epoch>") and an
  // engine over `local`; `more` may add to the engine's options. A failure is
  // a test failure, and leaves p.engine empty.
  void open_process(EngineProcess& p, ObjectStore& store, uint64_t epoch,
                    const std::filesystem::path& local,
                    const std::function<void(EngineOptions&)>& more = {}) {
    LogWriterOptions wo;
    wo.node_id = kNode;
    wo.process_id = ProcessId("p" + std::to_string(epoch));
    wo.epoch = Epoch(epoch);
    wo.jitter_seed = epoch;
    wo.on_durable = p.hook->on_durable();
    wo.epoch_start_unix_ms = wall_ms();
    EngineProcess* raw = &p;
    p.writer = std::make_unique<LogWriter>(
        store, clock_, wo, [raw] { return raw->lease.load(); }, [](const Status&) {});
    Status opened = p.writer->open();
    EXPECT_TRUE(opened.is_ok()) << opened.to_string();
    EngineOptions eo;
    eo.node_id = kNode;
    eo.process_id = wo.process_id;
    eo.epoch = Epoch(epoch);
    eo.local_store_path = local;
    eo.now_unix_ms = [this] { return wall_ms(); };
    eo.log_hook = p.hook;
    if (more) more(eo);
    auto engine = Engine::open(eo, store, *p.writer, clock_);
    EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
    if (engine.is_ok()) p.engine = std::move(engine).value();
  }

  std::unique_ptr<EngineProcess> start_process(ObjectStore& store, uint64_t epoch,
                                               const std::filesystem::path& local) {
    auto p = std::make_unique<EngineProcess>();
    open_process(*p, store, epoch, local);
    return p;
  }

  // Ends a process cleanly: the engine stops, the writer closes.
  static void end(std::unique_ptr<EngineProcess>& p) {
    p->engine->stop();
    EXPECT_TRUE(p->writer->close().is_ok());
    p.reset();
  }

  ManualClock clock_;
  TempDir dir_;
};

// Tests of one process (epoch 1, local store "local") over a memory store
// with one Worker stream: the start most single-process tests share.
class OneWorkerTest : public EngineProcessTest {
 protected:
  // Starts the process and connects worker_ to it as Worker "w1" hosting
  // `declarations`; its engine.
  Engine& open_with_worker(const std::vector<flow::FlowDeclaration>& declarations,
                           uint32_t capacity = 10) {
    process_ = start_process(store_, 1, dir_.sub("local"));
    handle_ = connect_flows(*process_->engine, worker_, "w1", declarations, capacity);
    return *process_->engine;
  }
  Engine& open_with_worker(const flow::FlowDeclaration& declaration = order_declaration(),
                           uint32_t capacity = 10) {
    return open_with_worker(std::vector<flow::FlowDeclaration>{declaration}, capacity);
  }

  MemoryObjectStore store_;  // before process_: it outlives the engine and writer
  std::unique_ptr<EngineProcess> process_;
  std::shared_ptr<FlowWorker> worker_ = std::make_shared<FlowWorker>();
  Engine::WorkerHandle handle_ = 0;
};

}  // namespace dex::testing
