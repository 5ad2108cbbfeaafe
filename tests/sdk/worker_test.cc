// The Worker against a fake WorkerTaskService on a loopback port: one test per
// rule of the Worker stream (docs/api.md, "The Worker stream").
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "fake_server.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;
using testing::AckMode;
using testing::FakeAdminService;
using testing::FakeFlowService;
using testing::FakeServer;
using testing::FakeWorkerTaskService;

constexpr Duration kWait = seconds(5);  // bound on every wait for something that should happen

StepTask make_task(const std::string& id, const std::string& step = "s",
                   const std::string& queue = "q", uint32_t attempt = 1,
                   const std::string& input = R"({"flow":{"n":1},"steps":{}})") {
  StepTask task;
  task.set_task_id(id);
  task.set_flow_id("flow-" + id);
  task.set_flow_type("type");
  task.set_step(step);
  task.set_attempt(attempt);
  task.set_task_queue(queue);
  task.set_input(input);
  task.set_start_to_close_timeout_ms(60'000);
  return task;
}

// A latch with a bounded wait, so that no test can hang.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait(Duration timeout = kWait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FakeServer>(workers_, flows_, admin_);
    options_.server_address = server_->address();
    options_.worker_id = "test-worker";
    options_.max_concurrent_tasks = 4;
    options_.reconnect_backoff_initial = milliseconds(20);
    options_.reconnect_backoff_max = milliseconds(200);
    options_.shutdown_timeout = seconds(3);
  }
  void TearDown() override {
    if (worker_) worker_->shutdown();
    if (run_.valid()) {
      ASSERT_EQ(run_.wait_for(seconds(10)), std::future_status::ready) << "run() did not return";
    }
    worker_.reset();
    server_.reset();
  }
  // Starts run() on its own thread; handlers must be given first.
  void start() {
    run_ = std::async(std::launch::async, [this] { return worker_->run(); });
  }
  Worker& make_worker(Worker::Handler handler, const std::string& queue = "q") {
    worker_ = std::make_unique<Worker>(options_);
    worker_->handle(queue, std::move(handler));
    return *worker_;
  }

  FakeWorkerTaskService workers_;
  FakeFlowService flows_;
  FakeAdminService admin_;
  std::unique_ptr<FakeServer> server_;
  WorkerOptions options_;
  std::unique_ptr<Worker> worker_;
  std::future<Status> run_;
};

TEST_F(WorkerTest, HelloFirstCarriesWorkerIdQueuesAndConcurrency) {
  options_.max_concurrent_tasks = 5;
  make_worker([](TaskContext&) { return json::object(); }, "a");
  worker_->handle("b", [](TaskContext&) { return json::object(); });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  WorkerHello hello = workers_.hellos().at(0);
  EXPECT_EQ(hello.worker_id(), "test-worker");
  EXPECT_EQ(std::vector<std::string>(hello.task_queues().begin(), hello.task_queues().end()),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(hello.max_concurrent_tasks(), 5u);
}

TEST_F(WorkerTest, DefaultWorkerIdIsHostnameDashPid) {
  std::string id = default_worker_id();
  std::string suffix = "-" + std::to_string(getpid());
  ASSERT_GT(id.size(), suffix.size());
  EXPECT_EQ(id.substr(id.size() - suffix.size()), suffix);
  options_.worker_id = "";
  Worker worker(options_);
  EXPECT_EQ(worker.worker_id(), id);
}

TEST_F(WorkerTest, RunsTaskAndSendsItsOutput) {
  std::promise<std::string> seen;
  make_worker([&](TaskContext& task) {
    seen.set_value(task.task_id() + "|" + task.flow_id() + "|" + task.flow_type() + "|" +
                   task.step() + "|" + task.task_queue() + "|" + std::to_string(task.attempt()));
    return json{{"doubled", task.flow_input()["n"].get<int>() * 2},
                {"had_steps", task.input().contains("steps")}};
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1", "fetch", "q", 2)));
  auto result = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(result->result.has_output()) << result->result.DebugString();
  EXPECT_EQ(json::parse(result->result.output()), (json{{"doubled", 2}, {"had_steps", true}}));
  EXPECT_EQ(seen.get_future().get(), "t1|flow-t1|type|fetch|q|2");
  // The fake accepted it: nothing stays pending.
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (worker_->stats().results_accepted < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(worker_->stats().results_accepted, 1u);
  EXPECT_EQ(worker_->stats().tasks_finished, 1u);
}

TEST_F(WorkerTest, ThrowingHandlerYieldsFailureAndNonRetryableIsHonoured) {
  make_worker([](TaskContext& task) -> json {
    if (task.step() == "non-retryable") throw StepFailure("bad input", /*non_retryable=*/true);
    if (task.step() == "retryable") throw StepFailure("try again");
    if (task.step() == "std") throw std::runtime_error("boom");
    throw 42;  // not a std::exception
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  for (const char* step : {"non-retryable", "retryable", "std", "other"}) {
    ASSERT_TRUE(workers_.send_task(make_task(step, step)));
  }
  struct Expect {
    const char* id;
    const char* message;
    bool non_retryable;
  };
  for (const Expect& e : {Expect{"non-retryable", "bad input", true},
                          Expect{"retryable", "try again", false}, Expect{"std", "boom", false},
                          Expect{"other", "the handler threw a non-standard exception", false}}) {
    auto result = workers_.wait_for_result(e.id, kWait);
    ASSERT_TRUE(result.has_value()) << e.id;
    ASSERT_TRUE(result->result.has_failure()) << e.id;
    EXPECT_EQ(result->result.failure().message(), e.message);
    EXPECT_EQ(result->result.failure().non_retryable(), e.non_retryable) << e.id;
  }
}

TEST_F(WorkerTest, InputThatIsNotJsonIsANonRetryableFailure) {
  std::atomic<bool> called{false};
  make_worker([&](TaskContext&) {
    called = true;
    return json::object();
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1", "s", "q", 1, "{not json")));
  auto result = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(result->result.has_failure());
  EXPECT_TRUE(result->result.failure().non_retryable());
  EXPECT_NE(result->result.failure().message().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(called);
}

TEST_F(WorkerTest, ResendsUnacknowledgedResultOnTheNextStreamAfterADrop) {
  workers_.set_ack_mode(AckMode::kNone);
  make_worker([](TaskContext&) { return json{{"ok", true}}; });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1")));
  auto first = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->stream_index, 0u);

  workers_.drop_stream();  // no ack was sent: the Worker must keep the result
  ASSERT_TRUE(workers_.wait_for_streams(2, kWait)) << "the Worker did not reconnect";
  auto again = workers_.wait_for_result("t1", kWait, 2);
  ASSERT_TRUE(again.has_value()) << "the unacknowledged result was not re-sent";
  EXPECT_EQ(again->stream_index, 1u);
  EXPECT_EQ(again->result.output(), first->result.output());

  ASSERT_TRUE(workers_.ack("t1", true));
  workers_.drop_stream();  // acknowledged: not sent a third time
  ASSERT_TRUE(workers_.wait_for_streams(3, kWait));
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(workers_.result_count("t1"), 2u);
  EXPECT_EQ(worker_->stats().results_accepted, 1u);
  EXPECT_GE(worker_->stats().results_resent, 1u);
}

TEST_F(WorkerTest, KeepsResultAcrossServerRestartAndResendsToTheNewProcess) {
  workers_.set_ack_mode(AckMode::kNone);
  Gate release;
  std::promise<void> started;
  make_worker([&](TaskContext&) {
    started.set_value();
    release.wait();
    return json{{"done", 1}};
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1")));
  ASSERT_EQ(started.get_future().wait_for(kWait), std::future_status::ready);

  int port = server_->port();
  server_->stop();                                 // the process at the address is gone
  release.open();                                  // the result is produced while no server answers
  std::this_thread::sleep_for(milliseconds(300));  // a few failed reconnects with backoff
  EXPECT_EQ(workers_.result_count("t1"), 0u);

  // Another process answers at the same address (same fake state, new server).
  FakeWorkerTaskService new_workers;
  FakeFlowService new_flows;
  FakeAdminService new_admin;
  FakeServer restarted(new_workers, new_flows, new_admin, port);
  ASSERT_TRUE(new_workers.wait_for_streams(1, kWait)) << "no reconnect to the restarted server";
  auto result = new_workers.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value()) << "the result produced during the outage was not sent";
  EXPECT_EQ(json::parse(result->result.output()), (json{{"done", 1}}));
  worker_->shutdown();
  ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(run_.get().is_ok());
}

TEST_F(WorkerTest, RefusedResultIsDroppedAndNotResent) {
  workers_.set_ack_mode(AckMode::kNone);
  make_worker([](TaskContext&) { return json::object(); });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("refused")));
  ASSERT_TRUE(workers_.wait_for_result("refused", kWait).has_value());
  ASSERT_TRUE(workers_.ack("refused", false, "stale: the attempt already ended"));
  ASSERT_TRUE(workers_.send_task(make_task("unacked")));
  ASSERT_TRUE(workers_.wait_for_result("unacked", kWait).has_value());
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (worker_->stats().results_refused < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(worker_->stats().results_refused, 1u);

  workers_.drop_stream();
  ASSERT_TRUE(workers_.wait_for_streams(2, kWait));
  // The re-send of the unacknowledged one shows the re-send has happened.
  ASSERT_TRUE(workers_.wait_for_result("unacked", kWait, 2).has_value());
  EXPECT_EQ(workers_.result_count("refused"), 1u);
  ASSERT_TRUE(workers_.ack("unacked", true));
}

TEST_F(WorkerTest, NeverRunsMoreThanMaxConcurrentTasks) {
  options_.max_concurrent_tasks = 3;
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  make_worker([&](TaskContext&) {
    int now = ++running;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(milliseconds(30));
    --running;
    return json::object();
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  // The server sends more than the Worker said it runs at once (as a server
  // may after a reconnect, not knowing what still runs): the Worker queues.
  constexpr int kTasks = 15;
  for (int i = 0; i < kTasks; ++i) ASSERT_TRUE(workers_.send_task(make_task(std::to_string(i))));
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(workers_.wait_for_result(std::to_string(i), kWait).has_value()) << i;
  }
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 2);  // they did run in parallel
}

TEST_F(WorkerTest, HeartbeatReachesTheServerAndCancelRequestReachesTheHandler) {
  workers_.set_cancel_on_heartbeat(true);
  make_worker([](TaskContext& task) {
    EXPECT_FALSE(task.cancelled());
    task.heartbeat(json{{"progress", 50}});
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!task.cancelled() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    return json{{"cancelled", task.cancelled()}};
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1")));
  auto heartbeat = workers_.wait_for_heartbeat("t1", kWait);
  ASSERT_TRUE(heartbeat.has_value());
  EXPECT_EQ(json::parse(heartbeat->details()), (json{{"progress", 50}}));
  auto result = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(json::parse(result->result.output()), (json{{"cancelled", true}}));
  EXPECT_EQ(worker_->stats().heartbeats_sent, 1u);
}

TEST_F(WorkerTest, CancelledOnceTheStartToCloseTimeoutPasses) {
  make_worker([](TaskContext& task) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!task.cancelled() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    return json{{"cancelled", task.cancelled()}};
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  StepTask task = make_task("t1");
  task.set_start_to_close_timeout_ms(100);
  ASSERT_TRUE(workers_.send_task(task));
  auto result = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(json::parse(result->result.output()), (json{{"cancelled", true}}));
}

TEST_F(WorkerTest, GracefulShutdownFinishesTheRunningTaskAndWaitsForItsAck) {
  workers_.set_ack_mode(AckMode::kNone);
  Gate release;
  std::promise<void> started;
  std::atomic<int> late_runs{0};
  make_worker([&](TaskContext& task) {
    if (task.task_id() == "running") {
      started.set_value();
      release.wait();
    } else {
      ++late_runs;
    }
    return json{{"finished", task.task_id()}};
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("running")));
  ASSERT_EQ(started.get_future().wait_for(kWait), std::future_status::ready);

  worker_->shutdown();
  // Stops taking tasks: one that arrives now is not run, and not answered
  // while the shutdown lasts (an answer would free capacity for the next one).
  ASSERT_TRUE(workers_.send_task(make_task("late")));
  EXPECT_EQ(run_.wait_for(milliseconds(100)), std::future_status::timeout)
      << "run() returned while a task was running";
  release.open();
  auto result = workers_.wait_for_result("running", kWait);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(json::parse(result->result.output()), (json{{"finished", "running"}}));
  EXPECT_EQ(run_.wait_for(milliseconds(200)), std::future_status::timeout)
      << "run() returned before the result was acknowledged";
  EXPECT_EQ(workers_.result_count("late"), 0u);

  ASSERT_TRUE(workers_.ack("running", true));
  // Then the late task is handed back as a retryable failure, without running.
  auto late = workers_.wait_for_result("late", kWait);
  ASSERT_TRUE(late.has_value());
  ASSERT_TRUE(late->result.has_failure());
  EXPECT_FALSE(late->result.failure().non_retryable());
  EXPECT_NE(late->result.failure().message().find("shutting down"), std::string::npos);
  EXPECT_EQ(late_runs.load(), 0);
  ASSERT_TRUE(workers_.ack("late", true));
  ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(run_.get().is_ok());
  EXPECT_EQ(worker_->stats().results_accepted, 2u);
}

TEST_F(WorkerTest, ShutdownWaitsForAcksOnlyUpToItsBound) {
  workers_.set_ack_mode(AckMode::kNone);
  options_.shutdown_timeout = milliseconds(300);
  make_worker([](TaskContext&) { return json::object(); });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1")));
  ASSERT_TRUE(workers_.wait_for_result("t1", kWait).has_value());
  auto begin = std::chrono::steady_clock::now();
  worker_->shutdown();
  ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready);
  auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_GE(took, milliseconds(250));
  EXPECT_LT(took, seconds(3));
  EXPECT_TRUE(run_.get().is_ok());
}

TEST_F(WorkerTest, ShutdownWhenIdleReturnsPromptly) {
  make_worker([](TaskContext&) { return json::object(); });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  auto begin = std::chrono::steady_clock::now();
  worker_->shutdown();
  ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, seconds(1));
}

TEST_F(WorkerTest, RegistersFlowTypesBeforeOpeningTheStream) {
  std::mutex mu;
  std::vector<std::string> events;
  auto record = [&](const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  };
  workers_.on_event = record;
  flows_.on_event = record;
  make_worker([](TaskContext&) { return json::object(); });
  worker_->register_flow_type("name: a\nsteps: []\n");
  worker_->register_flow_type("name: b\nsteps: []\n");
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  EXPECT_EQ(flows_.definitions(),
            (std::vector<std::string>{"name: a\nsteps: []\n", "name: b\nsteps: []\n"}));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(events, (std::vector<std::string>{"register", "register", "hello:test-worker"}));
}

TEST_F(WorkerTest, RefusedFlowTypeEndsRunWithTheServersReason) {
  make_worker([](TaskContext&) { return json::object(); });
  worker_->register_flow_type("name: x\nsteps: [{name: s, taskQueue: invalid queue}]\n");
  start();
  ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready);
  Status s = run_.get();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("INVALID_ARGUMENT"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not a valid task queue name"), std::string::npos) << s.message();
  EXPECT_TRUE(workers_.hellos().empty());
}

TEST_F(WorkerTest, WaitsForTheServerToRegisterAndServe) {
  // Nothing listens yet: registration retries with backoff until a server appears.
  int port = server_->port();
  server_->stop();
  make_worker([](TaskContext&) { return json::object(); });
  worker_->register_flow_type("name: a\nsteps: []\n");
  start();
  std::this_thread::sleep_for(milliseconds(300));
  server_ = std::make_unique<FakeServer>(workers_, flows_, admin_, port);
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  EXPECT_EQ(flows_.definitions().size(), 1u);
}

TEST_F(WorkerTest, RunWithoutHandlerIsRefused) {
  Worker worker(options_);
  Status s = worker.run();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("handle()"), std::string::npos);
  EXPECT_TRUE(workers_.hellos().empty());
}

TEST_F(WorkerTest, BadOptionsAreRefusedByRun) {
  options_.max_concurrent_tasks = 0;
  {
    Worker worker(options_);
    worker.handle("q", [](TaskContext&) { return json::object(); });
    Status s = worker.run();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("max_concurrent_tasks"), std::string::npos);
  }
  options_.max_concurrent_tasks = 1;
  options_.reconnect_backoff_initial = seconds(2);
  options_.reconnect_backoff_max = seconds(1);
  Worker worker(options_);
  worker.handle("q", [](TaskContext&) { return json::object(); });
  EXPECT_EQ(worker.run().code(), Code::kInvalidArgument);
  EXPECT_TRUE(workers_.hellos().empty());
}

TEST_F(WorkerTest, DuplicateTaskIsRunOnce) {
  std::atomic<int> calls{0};
  workers_.set_ack_mode(AckMode::kNone);
  Gate release;
  make_worker([&](TaskContext&) {
    ++calls;
    release.wait();
    return json::object();
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1")));
  ASSERT_TRUE(workers_.send_task(make_task("t1")));  // while running
  release.open();
  ASSERT_TRUE(workers_.wait_for_result("t1", kWait).has_value());
  ASSERT_TRUE(workers_.send_task(make_task("t1")));  // while its result awaits an ack
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(workers_.result_count("t1"), 1u);
  ASSERT_TRUE(workers_.ack("t1", true));
}

}  // namespace
}  // namespace dex
