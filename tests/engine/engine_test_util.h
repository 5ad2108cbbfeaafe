// Helpers shared by the engine tests: temporary store directories, records,
// the flow types and Worker streams they use, and (EngineProcessTest) whole
// processes of a log writer and an engine.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/clock.h"
#include "dex/engine.pb.h"
#include "dex/records.pb.h"
#include "engine/engine.h"
#include "engine/flow_type.h"
#include "log/log.h"

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

// Three Steps: b after a (retried once after 1 s), c after both.
inline constexpr const char* kThreeSteps = R"(
name: three
steps:
  - {name: a, taskQueue: q}
  - {name: b, taskQueue: q, after: [a], retry: {maxAttempts: 3, initialInterval: 1s}}
  - {name: c, taskQueue: q, after: [a, b]}
)";

// The Step of `f` called `name`; throws if there is none.
inline const Step& step_of(const Flow& f, const std::string& name) {
  for (const auto& s : f.steps()) {
    if (s.name() == name) return s;
  }
  throw std::runtime_error("no step " + name);
}

inline FlowType must_parse(const std::string& text) {
  auto t = parse_flow_type(text);
  if (!t.is_ok()) throw std::runtime_error(t.status().to_string());
  return t.value();
}

inline proto::LogRecord engine_record(proto::EngineRecord rec) {
  proto::LogRecord r;
  *r.mutable_engine() = std::move(rec);
  return r;
}

inline proto::LogRecord register_type(const FlowType& type) {
  proto::EngineRecord rec;
  *rec.mutable_register_flow_type()->mutable_flow_type() = type;
  return engine_record(rec);
}

inline proto::LogRecord start_flow(const std::string& id, const std::string& type,
                                   const std::string& input, int64_t at) {
  proto::EngineRecord rec;
  auto* s = rec.mutable_start_flow();
  s->set_flow_id(id);
  s->set_flow_type(type);
  s->set_input(input);
  s->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord attempt_started(const std::string& flow, const std::string& step,
                                        uint32_t attempt, const std::string& task, int64_t at) {
  proto::EngineRecord rec;
  auto* s = rec.mutable_attempt_started();
  s->set_flow_id(flow);
  s->set_step(step);
  s->set_attempt(attempt);
  s->set_task_id(task);
  s->set_worker_id("w1");
  s->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord attempt_ended(const std::string& flow, const std::string& step,
                                      const std::string& task, AttemptOutcome outcome,
                                      const std::string& output_or_error, int64_t at,
                                      bool non_retryable = false) {
  proto::EngineRecord rec;
  auto* e = rec.mutable_attempt_ended();
  e->set_flow_id(flow);
  e->set_step(step);
  e->set_task_id(task);
  e->set_outcome(outcome);
  if (outcome == ATTEMPT_OUTCOME_COMPLETED) {
    e->set_output(output_or_error);
  } else {
    e->set_error(output_or_error);
  }
  e->set_non_retryable(non_retryable);
  e->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord attempt_withdrawn(const std::string& flow, const std::string& step,
                                          const std::string& task, int64_t at) {
  proto::EngineRecord rec;
  auto* w = rec.mutable_attempt_withdrawn();
  w->set_flow_id(flow);
  w->set_step(step);
  w->set_task_id(task);
  w->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord timer_fired(const std::string& flow, const std::string& step,
                                    int64_t wake_at, int64_t at) {
  proto::EngineRecord rec;
  auto* t = rec.mutable_timer_fired();
  t->set_flow_id(flow);
  t->set_step(step);
  t->set_wake_at_ms(wake_at);
  t->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord cancel_flow(const std::string& flow, int64_t at) {
  proto::EngineRecord rec;
  auto* c = rec.mutable_cancel_flow();
  c->set_flow_id(flow);
  c->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord epoch_start(const std::string& holder, int64_t at) {
  proto::LogRecord r;
  r.mutable_epoch_start()->set_holder_process_id(holder);
  r.mutable_epoch_start()->set_at_unix_ms(at);
  return r;
}

// ------------------------------------------------ whole engines

// The node whose log the engine tests write.
inline const NodeId kNode("n1");
// The wall clock (Unix ms) at the ManualClock's start; EngineProcessTest::wall_ms.
inline constexpr int64_t kWallBaseMs = 1'700'000'000'000;

// A Worker stream: collects the tasks the engine sends; `alive = false` makes
// send_task and send_ping fail as on a dead stream.
class FakeWorker final : public WorkerSink {
 public:
  // `wait`: how long next() waits for a task by default.
  explicit FakeWorker(std::chrono::milliseconds wait = std::chrono::milliseconds(2000))
      : wait_(wait) {}
  bool send_task(const StepTask& task) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!alive) return false;
    tasks_.push_back(task);
    cv_.notify_all();
    return true;
  }
  bool send_ping() override {
    pings++;
    return alive.load();
  }
  std::optional<StepTask> next() { return next(wait_); }
  std::optional<StepTask> next(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, wait, [&] { return !tasks_.empty(); })) return std::nullopt;
    StepTask t = tasks_.front();
    tasks_.pop_front();
    return t;
  }
  std::atomic<bool> alive{true};
  std::atomic<int> pings{0};

 private:
  const std::chrono::milliseconds wait_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StepTask> tasks_;
};

// Connects `worker` to `engine` as Worker `id` serving task queue "q".
inline Engine::WorkerHandle connect(Engine& engine, std::shared_ptr<WorkerSink> worker,
                                    uint32_t capacity = 100, std::string id = "w1") {
  WorkerHello hello;
  hello.set_worker_id(id);
  hello.add_task_queues("q");
  hello.set_max_concurrent_tasks(capacity);
  auto handle = engine.connect_worker(hello, std::move(worker));
  EXPECT_TRUE(handle.is_ok()) << handle.status().to_string();
  return handle.is_ok() ? handle.value() : 0;
}

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

  ManualClock clock_;
  TempDir dir_;
};

}  // namespace dex::testing
