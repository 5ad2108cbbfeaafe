// The example flow types parse and validate with the engine's parser, and the
// example handlers do what examples/README.md promises (transform fails its
// first attempt, retryably, and succeeds on the second).
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <sstream>

#include "engine/flow_type.h"
#include "fake_server.h"
#include "handlers.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;
using testing::FakeAdminService;
using testing::FakeFlowService;
using testing::FakeServer;
using testing::FakeWorkerTaskService;

std::string read(const std::string& name) {
  std::ifstream in(std::string(DEX_EXAMPLES_DIR) + "/flow-types/" + name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ExampleFlowTypes, ThreeStepIsAChainOnQueueExampleWithAShortRetry) {
  auto type = parse_flow_type(read("three-step.yaml"));
  ASSERT_TRUE(type.is_ok()) << type.status().message();
  EXPECT_EQ(type->name(), "three-step");
  ASSERT_EQ(type->steps_size(), 3);
  EXPECT_EQ(type->steps(0).name(), "fetch");
  EXPECT_EQ(type->steps(1).name(), "transform");
  EXPECT_EQ(type->steps(2).name(), "store");
  for (const StepDef& step : type->steps()) EXPECT_EQ(step.task_queue(), "example");
  EXPECT_EQ(std::vector<std::string>(type->steps(1).after().begin(), type->steps(1).after().end()),
            std::vector<std::string>{"fetch"});
  EXPECT_EQ(std::vector<std::string>(type->steps(2).after().begin(), type->steps(2).after().end()),
            std::vector<std::string>{"transform"});
  EXPECT_GE(type->steps(1).retry().max_attempts(), 2u);
  EXPECT_EQ(type->steps(1).retry().initial_interval_ms(), 200);
}

TEST(ExampleFlowTypes, OneStepIsEchoOnQueueExample) {
  auto type = parse_flow_type(read("one-step.yaml"));
  ASSERT_TRUE(type.is_ok()) << type.status().message();
  EXPECT_EQ(type->name(), "one-step");
  ASSERT_EQ(type->steps_size(), 1);
  EXPECT_EQ(type->steps(0).name(), "echo");
  EXPECT_EQ(type->steps(0).task_queue(), "example");
}

class ExampleHandlersTest : public ::testing::Test {
 protected:
  ExampleHandlersTest() : server_(workers_, flows_, admin_) {
    WorkerOptions options;
    options.server_address = server_.address();
    options.shutdown_timeout = seconds(2);
    worker_ = std::make_unique<Worker>(options);
    worker_->handle("example", examples::handle_example_step);
    run_ = std::async(std::launch::async, [this] { return worker_->run(); });
  }
  ~ExampleHandlersTest() override {
    worker_->shutdown();
    run_.wait_for(seconds(10));
  }
  TaskResult run_step(const std::string& id, const std::string& step, uint32_t attempt,
                      const json& input) {
    EXPECT_TRUE(workers_.wait_for_streams(1, seconds(5)));
    StepTask task;
    task.set_task_id(id);
    task.set_flow_id("f");
    task.set_flow_type("three-step");
    task.set_step(step);
    task.set_attempt(attempt);
    task.set_task_queue("example");
    task.set_input(input.dump());
    EXPECT_TRUE(workers_.send_task(task));
    auto result = workers_.wait_for_result(id, seconds(5));
    EXPECT_TRUE(result.has_value()) << id;
    return result ? result->result : TaskResult();
  }

  FakeWorkerTaskService workers_;
  FakeFlowService flows_;
  FakeAdminService admin_;
  FakeServer server_;
  std::unique_ptr<Worker> worker_;
  std::future<Status> run_;
};

TEST_F(ExampleHandlersTest, ThreeStepChainFailsTransformOnceThenCompletes) {
  json input = {{"flow", {{"n", 21}}}, {"steps", json::object()}};
  TaskResult fetch = run_step("1", "fetch", 1, input);
  ASSERT_TRUE(fetch.has_output());
  EXPECT_EQ(json::parse(fetch.output()), (json{{"fetched", 21}}));

  input["steps"]["fetch"] = json::parse(fetch.output());
  TaskResult first = run_step("2", "transform", 1, input);
  ASSERT_TRUE(first.has_failure());
  EXPECT_EQ(first.failure().message(), examples::kTransformFirstAttemptFailure);
  EXPECT_FALSE(first.failure().non_retryable());
  TaskResult second = run_step("3", "transform", 2, input);
  ASSERT_TRUE(second.has_output());
  EXPECT_EQ(json::parse(second.output()), (json{{"transformed", 42}}));

  json store_input = {{"flow", {{"n", 21}}}, {"steps", {{"transform", {{"transformed", 42}}}}}};
  TaskResult store = run_step("4", "store", 1, store_input);
  ASSERT_TRUE(store.has_output());
  EXPECT_EQ(json::parse(store.output()), (json{{"stored", true}, {"value", 42}}));
}

TEST_F(ExampleHandlersTest, EchoReturnsTheFlowInputAndUnknownStepsFailForGood) {
  TaskResult echo = run_step("1", "echo", 1, {{"flow", {{"a", "b"}}}, {"steps", json::object()}});
  ASSERT_TRUE(echo.has_output());
  EXPECT_EQ(json::parse(echo.output()), (json{{"a", "b"}}));
  TaskResult unknown = run_step("2", "nope", 1, json::object());
  ASSERT_TRUE(unknown.has_failure());
  EXPECT_TRUE(unknown.failure().non_retryable());
  EXPECT_NE(unknown.failure().message().find("no handler for step 'nope'"), std::string::npos);
}

}  // namespace
}  // namespace dex
