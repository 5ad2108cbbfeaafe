// The Worker hosting dex Flows against a fake WorkerTaskService on a loopback
// port: one test per rule of the Worker stream (docs/api.md, "The Worker
// stream"), FlowTasks sent by hand.
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

using Execute = std::function<StepDecision(Context&)>;

// An Execute-only Step that runs `execute`.
class TestStep final : public Step {
 public:
  TestStep(std::string type, Execute execute)
      : type_(std::move(type)), execute_(std::move(execute)) {}
  std::string type() const override { return type_; }
  StepDecision execute(Context& context) override { return execute_(context); }

 private:
  std::string type_;
  Execute execute_;
};

// Flow type "type" whose Steps (`step_types`, the first one starts) all run `execute`.
class TestFlow final : public Flow {
 public:
  TestFlow(std::vector<std::string> step_types, Execute execute)
      : step_types_(std::move(step_types)), execute_(std::move(execute)) {}
  std::string type() const override { return "type"; }
  std::string start_step() const override { return step_types_.front(); }
  std::vector<std::shared_ptr<Step>> steps() const override {
    std::vector<std::shared_ptr<Step>> out;
    for (const auto& t : step_types_) out.push_back(std::make_shared<TestStep>(t, execute_));
    return out;
  }

 private:
  std::vector<std::string> step_types_;
  Execute execute_;
};

flow::FlowTask make_task(const std::string& id, const std::string& step = "s", uint32_t attempt = 1,
                         const std::string& input = R"({"n":1})") {
  flow::FlowTask task;
  task.set_task_id(id);
  task.set_flow_id("flow-" + id);
  task.set_run_id("run-" + id);
  task.set_flow_type("type");
  task.set_declaration_version(1);
  task.set_step_type(step);
  task.set_step_execution_id(step + "-1");
  task.set_method(flow::EXECUTE);
  task.set_attempt(attempt);
  task.mutable_input()->set_data(input);
  task.set_attempt_timeout_ms(60'000);
  return task;
}

// The output of a result's GracefulComplete decision; null if it is not one.
json completed_output(const flow::FlowTaskResult& result) {
  if (!result.has_decision() || !result.decision().has_graceful_complete()) return nullptr;
  return from_payload(result.decision().graceful_complete());
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
  // Starts run() on its own thread; Flows must be hosted first.
  void start() {
    run_ = std::async(std::launch::async, [this] { return worker_->run(); });
  }
  // A Worker hosting Flow type "type" whose Steps `step_types` run `execute`.
  Worker& make_worker(Execute execute, std::vector<std::string> step_types = {"s"}) {
    worker_ = std::make_unique<Worker>(options_);
    worker_->host(std::make_shared<TestFlow>(std::move(step_types), std::move(execute)));
    return *worker_;
  }
  // Waits until the Worker's stats satisfy `predicate`.
  bool eventually(const std::function<bool(const WorkerStats&)>& predicate) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!predicate(worker_->stats()) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    return predicate(worker_->stats());
  }

  FakeWorkerTaskService workers_;
  FakeFlowService flows_;
  FakeAdminService admin_;
  std::unique_ptr<FakeServer> server_;
  WorkerOptions options_;
  std::unique_ptr<Worker> worker_;
  std::future<Status> run_;
};

StepDecision complete_empty(Context&) { return StepDecision::graceful_complete(json::object()); }

TEST_F(WorkerTest, HelloFirstCarriesWorkerIdFlowsAndConcurrency) {
  options_.max_concurrent_tasks = 5;
  make_worker(complete_empty, {"First", "Second"});
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  WorkerHello hello = workers_.hellos().at(0);
  EXPECT_EQ(hello.worker_id(), "test-worker");
  ASSERT_EQ(hello.flows_size(), 1);
  EXPECT_EQ(hello.flows(0).flow_type(), "type");
  EXPECT_EQ(hello.flows(0).start_step_type(), "First");
  ASSERT_EQ(hello.flows(0).steps_size(), 2);
  EXPECT_EQ(hello.flows(0).steps(1).step_type(), "Second");
  EXPECT_FALSE(hello.flows(0).steps(1).has_wait_for());
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
  make_worker([&](Context& ctx) {
    seen.set_value(ctx.flow_id() + "|" + ctx.run_id() + "|" + ctx.flow_type() + "|" +
                   ctx.step_type() + "|" + ctx.step_execution_id() + "|" +
                   std::to_string(ctx.attempt()));
    return StepDecision::graceful_complete({{"doubled", ctx.input()["n"].get<int>() * 2}});
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1", "s", 2)));
  auto result = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(completed_output(result->result), (json{{"doubled", 2}}))
      << result->result.DebugString();
  EXPECT_EQ(seen.get_future().get(), "flow-t1|run-t1|type|s|s-1|2");
  // The fake accepted it: nothing stays pending.
  ASSERT_TRUE(eventually([](const WorkerStats& s) { return s.results_accepted == 1; }));
  EXPECT_EQ(worker_->stats().tasks_finished, 1u);
}

// A Step that waits: WaitFor's Wait and locals travel in the result, and
// Execute sees the locals and what met the wait.
class Approve final : public WaitingStep {
 public:
  std::string type() const override { return "Approve"; }
  Wait wait_for(Context& ctx) override {
    ctx.set_local("asked", ctx.input()["who"]);
    return Wait::any_of(
        {Channel("approval").for_one().id("ok"), Timer::after(seconds(60)).id("late")});
  }
  StepDecision execute(Context& ctx) override {
    ctx.publish(Channel("audit"), {{"asked", ctx.local("asked")}});
    if (ctx.timer_fired()) return StepDecision::force_fail("no approval");
    return StepDecision::graceful_complete(ctx.messages(Channel("approval")).at(0));
  }
};

class ApprovalFlow final : public Flow {
 public:
  std::string type() const override { return "Approval"; }
  std::string start_step() const override { return "Approve"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Approve>()};
  }
  std::vector<Channel> channels() const override { return {Channel("approval"), Channel("audit")}; }
};

TEST_F(WorkerTest, RunsWaitForThenExecuteWithItsLocalsAndMessages) {
  worker_ = std::make_unique<Worker>(options_);
  worker_->host(std::make_shared<ApprovalFlow>());
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  flow::FlowTask wait_for = make_task("w1", "Approve", 1, R"({"who":"ann"})");
  wait_for.set_flow_type("Approval");
  wait_for.set_method(flow::WAIT_FOR);
  ASSERT_TRUE(workers_.send_task(wait_for));
  auto waited = workers_.wait_for_result("w1", kWait);
  ASSERT_TRUE(waited.has_value());
  ASSERT_TRUE(waited->result.has_wait()) << waited->result.DebugString();
  ASSERT_EQ(waited->result.wait().conditions_size(), 2);
  EXPECT_EQ(from_payload(waited->result.locals()), (json{{"asked", "ann"}}));

  flow::FlowTask execute = wait_for;
  execute.set_task_id("e1");
  execute.set_method(flow::EXECUTE);
  *execute.mutable_locals() = waited->result.locals();
  flow::ConditionResult* met = execute.add_conditions();
  *met->mutable_condition() = waited->result.wait().conditions(0);
  met->set_condition_id("ok");
  met->set_fired(true);
  *met->add_messages() = to_payload({{"by", "bob"}});
  ASSERT_TRUE(workers_.send_task(execute));
  auto executed = workers_.wait_for_result("e1", kWait);
  ASSERT_TRUE(executed.has_value());
  EXPECT_EQ(completed_output(executed->result), (json{{"by", "bob"}}))
      << executed->result.DebugString();
  ASSERT_EQ(executed->result.publishes_size(), 1);
  EXPECT_EQ(executed->result.publishes(0).channel(), "audit");
  ASSERT_EQ(executed->result.publishes(0).messages_size(), 1);
  EXPECT_EQ(from_payload(executed->result.publishes(0).messages(0)), (json{{"asked", "ann"}}));
}

TEST_F(WorkerTest, ThrowingHandlerYieldsFailureAndNonRetryableAndRetryAfterAreHonoured) {
  make_worker(
      [](Context& ctx) -> StepDecision {
        if (ctx.step_type() == "non-retryable") {
          throw FlowFailure("bad input", /*non_retryable=*/true);
        }
        if (ctx.step_type() == "retryable") throw FlowFailure("try again");
        if (ctx.step_type() == "later")
          throw FlowFailure::retry_after("rate limited", std::chrono::seconds(45));
        if (ctx.step_type() == "std") throw std::runtime_error("boom");
        throw 42;  // not a std::exception
      },
      {"non-retryable", "retryable", "later", "std", "other"});
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  for (const char* step : {"non-retryable", "retryable", "later", "std", "other"}) {
    ASSERT_TRUE(workers_.send_task(make_task(step, step)));
  }
  struct Expect {
    const char* id;
    const char* message;
    bool non_retryable;
    int64_t retry_after_ms = 0;
  };
  for (const Expect& e :
       {Expect{"non-retryable", "bad input", true}, Expect{"retryable", "try again", false},
        Expect{"later", "rate limited", false, 45'000}, Expect{"std", "boom", false},
        Expect{"other", "the Step threw a non-standard exception", false}}) {
    auto result = workers_.wait_for_result(e.id, kWait);
    ASSERT_TRUE(result.has_value()) << e.id;
    ASSERT_TRUE(result->result.has_error()) << e.id;
    EXPECT_EQ(result->result.error().message(), e.message);
    EXPECT_EQ(result->result.error().non_retryable(), e.non_retryable) << e.id;
    EXPECT_EQ(result->result.error().retry_after_ms(), e.retry_after_ms) << e.id;
  }
}

TEST_F(WorkerTest, ATaskOfAFlowOrStepTypeTheWorkerDoesNotHostFailsNamingIt) {
  std::atomic<int> calls{0};
  make_worker([&](Context& ctx) {
    ++calls;
    return complete_empty(ctx);
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  flow::FlowTask other_type = make_task("t1");
  other_type.set_flow_type("Elsewhere");
  ASSERT_TRUE(workers_.send_task(other_type));
  ASSERT_TRUE(workers_.send_task(make_task("t2", "Missing")));
  auto type = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(type.has_value());
  ASSERT_TRUE(type->result.has_error());
  EXPECT_NE(type->result.error().message().find("hosts no Flow type 'Elsewhere'"),
            std::string::npos)
      << type->result.error().message();
  auto step = workers_.wait_for_result("t2", kWait);
  ASSERT_TRUE(step.has_value());
  ASSERT_TRUE(step->result.has_error());
  EXPECT_NE(step->result.error().message().find("no Step type 'Missing'"), std::string::npos)
      << step->result.error().message();
  EXPECT_EQ(calls.load(), 0);
}

TEST_F(WorkerTest, InputThatIsNotJsonIsANonRetryableFailure) {
  std::atomic<bool> called{false};
  make_worker([&](Context& ctx) {
    called = true;
    return complete_empty(ctx);
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1", "s", 1, "{not json")));
  auto result = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(result->result.has_error());
  EXPECT_TRUE(result->result.error().non_retryable());
  EXPECT_NE(result->result.error().message().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(called);
}

TEST_F(WorkerTest, ResendsUnacknowledgedResultOnTheNextStreamAfterADrop) {
  workers_.set_ack_mode(AckMode::kNone);
  make_worker([](Context&) { return StepDecision::graceful_complete({{"ok", true}}); });
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
  EXPECT_EQ(again->result.SerializeAsString(), first->result.SerializeAsString());

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
  make_worker([&](Context&) {
    started.set_value();
    release.wait();
    return StepDecision::graceful_complete({{"done", 1}});
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
  EXPECT_EQ(completed_output(result->result), (json{{"done", 1}}));
  worker_->shutdown();
  ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(run_.get().is_ok());
}

TEST_F(WorkerTest, RefusedResultIsDroppedAndNotResent) {
  workers_.set_ack_mode(AckMode::kNone);
  make_worker(complete_empty);
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("refused")));
  ASSERT_TRUE(workers_.wait_for_result("refused", kWait).has_value());
  ASSERT_TRUE(workers_.ack("refused", false, "stale: the attempt already ended"));
  ASSERT_TRUE(workers_.send_task(make_task("unacked")));
  ASSERT_TRUE(workers_.wait_for_result("unacked", kWait).has_value());
  ASSERT_TRUE(eventually([](const WorkerStats& s) { return s.results_refused == 1; }));

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
  make_worker([&](Context& ctx) {
    int now = ++running;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(milliseconds(30));
    --running;
    return complete_empty(ctx);
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
  make_worker([](Context& ctx) {
    EXPECT_FALSE(ctx.cancelled());
    ctx.heartbeat();
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!ctx.cancelled() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    return StepDecision::graceful_complete({{"cancelled", ctx.cancelled()}});
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1")));
  ASSERT_TRUE(workers_.wait_for_heartbeat("t1", kWait).has_value());
  auto result = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(completed_output(result->result), (json{{"cancelled", true}}));
  EXPECT_EQ(worker_->stats().heartbeats_sent, 1u);
}

TEST_F(WorkerTest, CancelledOnceTheAttemptTimeoutPasses) {
  make_worker([](Context& ctx) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!ctx.cancelled() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    return StepDecision::graceful_complete({{"cancelled", ctx.cancelled()}});
  });
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  flow::FlowTask task = make_task("t1");
  task.set_attempt_timeout_ms(100);
  ASSERT_TRUE(workers_.send_task(task));
  auto result = workers_.wait_for_result("t1", kWait);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(completed_output(result->result), (json{{"cancelled", true}}));
}

TEST_F(WorkerTest, GracefulShutdownFinishesTheRunningTaskAndWaitsForItsAck) {
  workers_.set_ack_mode(AckMode::kNone);
  Gate release;
  std::promise<void> started;
  std::atomic<int> late_runs{0};
  make_worker([&](Context& ctx) {
    if (ctx.flow_id() == "flow-running") {
      started.set_value();
      release.wait();
    } else {
      ++late_runs;
    }
    return StepDecision::graceful_complete({{"finished", ctx.flow_id()}});
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
  EXPECT_EQ(completed_output(result->result), (json{{"finished", "flow-running"}}));
  EXPECT_EQ(run_.wait_for(milliseconds(200)), std::future_status::timeout)
      << "run() returned before the result was acknowledged";
  EXPECT_EQ(workers_.result_count("late"), 0u);

  ASSERT_TRUE(workers_.ack("running", true));
  // Then the late task is handed back as a retryable failure, without running.
  auto late = workers_.wait_for_result("late", kWait);
  ASSERT_TRUE(late.has_value());
  ASSERT_TRUE(late->result.has_error());
  EXPECT_FALSE(late->result.error().non_retryable());
  EXPECT_NE(late->result.error().message().find("shutting down"), std::string::npos);
  EXPECT_EQ(late_runs.load(), 0);
  ASSERT_TRUE(workers_.ack("late", true));
  ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(run_.get().is_ok());
  EXPECT_EQ(worker_->stats().results_accepted, 2u);
}

TEST_F(WorkerTest, ShutdownWaitsForAcksOnlyUpToItsBound) {
  workers_.set_ack_mode(AckMode::kNone);
  options_.shutdown_timeout = milliseconds(300);
  make_worker(complete_empty);
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
  make_worker(complete_empty);
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  auto begin = std::chrono::steady_clock::now();
  worker_->shutdown();
  ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, seconds(1));
}

TEST_F(WorkerTest, WaitsForTheServerToComeUpAndServe) {
  // Nothing listens yet: the Worker keeps trying with backoff until a server appears.
  int port = server_->port();
  server_->stop();
  make_worker(complete_empty);
  start();
  // Refused at least once (bounded, not a fixed sleep: a sanitizer build is slow).
  ASSERT_TRUE(eventually([](const WorkerStats& s) { return s.streams_refused >= 1; }));
  server_ = std::make_unique<FakeServer>(workers_, flows_, admin_, port);
  ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  ASSERT_TRUE(workers_.send_task(make_task("t1")));
  EXPECT_TRUE(workers_.wait_for_result("t1", kWait).has_value());
}

TEST_F(WorkerTest, RunWithoutAFlowIsRefused) {
  Worker worker(options_);
  Status s = worker.run();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("host()"), std::string::npos) << s.message();
  EXPECT_TRUE(workers_.hellos().empty());
}

TEST_F(WorkerTest, BadOptionsAreRefusedByRun) {
  options_.max_concurrent_tasks = 0;
  {
    Worker worker(options_);
    worker.host(std::make_shared<TestFlow>(std::vector<std::string>{"s"}, complete_empty));
    Status s = worker.run();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("max_concurrent_tasks"), std::string::npos);
  }
  options_.max_concurrent_tasks = 1;
  options_.reconnect_backoff_initial = seconds(2);
  options_.reconnect_backoff_max = seconds(1);
  Worker worker(options_);
  worker.host(std::make_shared<TestFlow>(std::vector<std::string>{"s"}, complete_empty));
  EXPECT_EQ(worker.run().code(), Code::kInvalidArgument);
  EXPECT_TRUE(workers_.hellos().empty());
}

TEST_F(WorkerTest, DuplicateTaskIsRunOnce) {
  std::atomic<int> calls{0};
  workers_.set_ack_mode(AckMode::kNone);
  Gate release;
  make_worker([&](Context& ctx) {
    ++calls;
    release.wait();
    return complete_empty(ctx);
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
