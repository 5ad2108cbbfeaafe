// dexcli and dex-flow-examples as real processes against the in-process fake
// services: flags, exit codes, stderr messages, JSON output, signals.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/api_server.h"
#include "api_process.h"
#include "fake_server.h"
#include "run_program.h"

namespace dex {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::FakeAdminService;
using testing::FakeFlowService;
using testing::FakeServer;
using testing::FakeWorkerTaskService;
using testing::quote;
using testing::Ran;
using testing::run_program;
using testing::slurp;

class ProgramsTest : public ::testing::Test {
 protected:
  ProgramsTest() : server_(workers_, flows_, admin_) {
    dir_ = fs::temp_directory_path() /
           ("dex-sdk-programs-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  ~ProgramsTest() override { fs::remove_all(dir_); }

  // Runs dexcli with `args` (bounded by `timeout 20`).
  Ran dexcli(const std::vector<std::string>& args) {
    return run_program("timeout 20", DEXCLI_PATH, args, dir_);
  }
  // dexcli against the fake server.
  Ran call(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_.address()});
    return dexcli(args);
  }
  // A process that is not the active one (never set active): it answers every
  // call UNAVAILABLE, as a standby does.
  std::unique_ptr<ApiProcess> start_standby() {
    ApiServerOptions options;
    options.listen = "127.0.0.1:0";
    auto server = ApiProcess::start(options);
    EXPECT_TRUE(server.is_ok()) << server.status().message();
    return server.is_ok() ? std::move(server).value() : nullptr;
  }
  static std::string address_of(const ApiProcess& api) {
    return "127.0.0.1:" + std::to_string(api.port());
  }
  fs::path write_file(const std::string& name, const std::string& text) {
    fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path;
  }

  FakeWorkerTaskService workers_;
  FakeFlowService flows_;
  FakeAdminService admin_;
  FakeServer server_;
  fs::path dir_;
};

// ------------------------------------------------------------------ dexcli

// The JSON error dexcli's flow commands print on stderr.
json error_of(const Ran& ran) {
  try {
    return json::parse(ran.err).at("error");
  } catch (const json::exception&) {
    ADD_FAILURE() << "stderr is not a JSON error: " << ran.err;
    return json::object();
  }
}

TEST_F(ProgramsTest, NoCommandIsAUsageErrorListingTheCommands) {
  Ran ran = dexcli({});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("'dexcli' needs one of these commands: flow, admin, health, inspect"),
            std::string::npos)
      << ran.err;
  ran = dexcli({"flow"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_EQ(error_of(ran)["kind"], "usage");
  EXPECT_NE(error_of(ran)["message"].get<std::string>().find(
                "start, stop, publish, skip-timer, wait, describe, state, history, watch"),
            std::string::npos)
      << ran.err;
}

TEST_F(ProgramsTest, HelpAtEveryLevelExitsZero) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"},
                                        {"flow", "--help"},
                                        {"flow", "start", "--help"},
                                        {"flow", "wait", "--help"},
                                        {"admin", "describe", "--help"}}) {
    Ran ran = dexcli(args);
    EXPECT_EQ(ran.exit_code, 0) << args.back();
    EXPECT_NE(ran.out.find("Usage:"), std::string::npos) << ran.out;
  }
  EXPECT_NE(dexcli({"flow", "start", "--help"}).out.find("--flow-id"), std::string::npos);
  EXPECT_NE(dexcli({"flow", "wait", "--help"}).out.find("--wait-timeout"), std::string::npos);
}

TEST_F(ProgramsTest, BadFlagsAndInputAreRefusedAndNothingIsSent) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"flow", "start", "Echo", "--flow-id", "f", "--input", "{not json"},
            "--input is not valid JSON"},
           {{"flow", "start", "Echo", "--flow-id", "f", "--input-file",
             (dir_ / "missing.json").string()},
            "--input-file: cannot read"},
           {{"--timeout", "10", "flow", "describe", "x"}, "--timeout: invalid duration '10'"},
           {{"flow", "wait", "x", "--wait-timeout", "soon"}, "--wait-timeout: invalid duration"},
           {{"flow", "describe"}, "ID is required"},
           {{"flow", "stop", "x", "--yes"}, "--run-id is required"},
           {{"flow", "stop", "x", "--run-id", "r"}, "add --yes to confirm"},
           {{"flow", "start", "t", "--flow-id", "f", "--bogus"}, "--bogus"},
       }) {
    Ran ran = call(c.args);
    EXPECT_EQ(ran.exit_code, 2) << c.message << "\n" << ran.err;
    EXPECT_NE(ran.err.find(c.message), std::string::npos) << ran.err;
    EXPECT_TRUE(ran.out.empty()) << ran.out;
  }
  EXPECT_EQ(flows_.calls(), 0u);
}

TEST_F(ProgramsTest, UnreachableServerIsNamedWithExitOne) {
  std::string address;
  {
    FakeWorkerTaskService w;
    FakeFlowService f;
    FakeAdminService a;
    FakeServer s(w, f, a);
    address = s.address();
  }
  Ran ran = dexcli({"--server", address, "flow", "describe", "f-1"});
  EXPECT_EQ(ran.exit_code, 1);
  json error = error_of(ran);
  EXPECT_EQ(error["grpcCode"], "UNAVAILABLE");
  EXPECT_EQ(error["operation"], "flow describe");
  EXPECT_EQ(
      error["message"].get<std::string>().rfind("the server is not reachable at " + address, 0), 0u)
      << ran.err;
}

TEST_F(ProgramsTest, SeveralServersFindTheActiveOneInAnyOrderCommaSeparatedOrRepeated) {
  auto standby = start_standby();
  ASSERT_TRUE(standby);
  const std::string s = address_of(*standby), a = server_.address();
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--server", s + "," + a, "flow", "describe", "f-done"},
        {"--server", a + "," + s, "flow", "describe", "f-done"},
        {"--server", s, "--server", a, "flow", "describe", "f-done"},
        {"flow", "describe", "f-done", "--server", s + ", " + a}}) {
    Ran ran = dexcli(args);
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    json run = json::parse(ran.out);
    EXPECT_EQ(run["flowId"], "f-done");
    EXPECT_EQ(run["input"], (json{{"n", 1}}));  // values embedded as JSON
  }
}

TEST_F(ProgramsTest, BadServerListIsRefusedNamingTheBadEntry) {
  struct Case {
    std::string list;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"127.0.0.1:1,,127.0.0.1:2",
            "--server: empty server address at position 2 of '127.0.0.1:1,,127.0.0.1:2'"},
           {"127.0.0.1:1,localhost", "--server: invalid server address 'localhost': use host:port"},
           {"127.0.0.1:1,h:70000",
            "--server: invalid server address 'h:70000': the port must be a number from 1 to "
            "65535"},
           {"127.0.0.1:1,127.0.0.1:1", "--server: server address '127.0.0.1:1' is listed twice"},
       }) {
    Ran ran = dexcli({"--server", c.list, "flow", "describe", "f-done"});
    EXPECT_EQ(ran.exit_code, 2) << c.list << "\n" << ran.err;
    EXPECT_NE(ran.err.find("dexcli: " + c.message), std::string::npos) << ran.err;
    EXPECT_TRUE(ran.out.empty());
  }
  Ran ran = dexcli({"--server", "127.0.0.1:1", "--server", "nope", "flow", "describe", "x"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("invalid server address 'nope'"), std::string::npos) << ran.err;
  EXPECT_EQ(flows_.calls(), 0u);
}

TEST_F(ProgramsTest, NoActiveServerNamesEveryAddressWithExitOne) {
  auto one = start_standby(), two = start_standby();
  ASSERT_TRUE(one && two);
  Ran ran = dexcli({"--server", address_of(*one) + "," + address_of(*two), "--timeout", "500ms",
                    "flow", "describe", "f-1"});
  EXPECT_EQ(ran.exit_code, 1);
  json error = error_of(ran);
  EXPECT_EQ(error["grpcCode"], "UNAVAILABLE");
  const std::string message = error.value("message", "");
  EXPECT_EQ(message.rfind("no active dex process at any of 2 addresses (kept trying for 500ms)", 0),
            0u)
      << ran.err;
  for (const auto* api : {one.get(), two.get()}) {
    EXPECT_NE(message.find("the server at " + address_of(*api) + " is not serving"),
              std::string::npos)
        << ran.err;
  }
}

TEST_F(ProgramsTest, ServerErrorIsPrintedWithItsCode) {
  Ran ran = call({"flow", "describe", "nope"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_EQ(error_of(ran), (json{{"kind", "request"},
                                 {"operation", "flow describe"},
                                 {"message", "no Flow with ID 'nope'"},
                                 {"grpcCode", "NOT_FOUND"}}));
  EXPECT_TRUE(ran.out.empty());
}

TEST_F(ProgramsTest, GlobalFlagsAreAcceptedAfterTheCommand) {
  Ran ran =
      dexcli({"flow", "describe", "f-done", "--server", server_.address(), "--timeout", "5s"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["flowId"], "f-done");
}

TEST_F(ProgramsTest, FlowStartSendsTypeInputAndId) {
  Ran ran = call({"flow", "start", "Echo", "--input", R"({"n": 1})", "--flow-id", "my-1"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out),
            (json{{"flowId", "my-1"}, {"runId", "run-1"}, {"alreadyStarted", false}}));
  ASSERT_EQ(flows_.starts().size(), 1u);
  EXPECT_EQ(flows_.starts()[0].flow_type(), "Echo");
  EXPECT_EQ(flows_.starts()[0].flow_id(), "my-1");
  EXPECT_EQ(json::parse(flows_.starts()[0].input().data()), (json{{"n", 1}}));
}

TEST_F(ProgramsTest, FlowWaitExitsThreeWhenTheFlowDidNotEnd) {
  Ran ran = call({"flow", "wait", "f-running", "--wait-timeout", "200ms"});
  EXPECT_EQ(ran.exit_code, 3) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["flowId"], "f-running");
  EXPECT_EQ(error_of(ran)["kind"], "timeout");
  EXPECT_NE(error_of(ran)["message"].get<std::string>().find("after 200ms"), std::string::npos)
      << ran.err;
  ran = call({"flow", "wait", "f-done"});
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["flowId"], "f-done");
}

TEST_F(ProgramsTest, AdminDescribePrintsTheEpochAsADecimalString) {
  fs::path token = write_file("token", "  s3cret\n");
  Ran ran = call({"admin", "describe", "--credential-file", token.string()});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  json out = json::parse(ran.out);
  EXPECT_EQ(out, (json{{"nodeId", "dev"},
                       {"nodeEpoch", "18446744073709551615"},
                       {"holderProcessId", "host-42-abcdef01"}}));
  EXPECT_EQ(admin_.last_authorization(), "Bearer s3cret");
}

// ------------------------------------------------------ dex-flow-examples worker

// Starts `dex-flow-examples worker` with `args`; returns its process ID.
pid_t start_flow_examples(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv = {const_cast<char*>(FLOW_EXAMPLES_PATH), const_cast<char*>("worker")};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(FLOW_EXAMPLES_PATH, argv.data());
    _exit(127);
  }
  return pid;
}

TEST_F(ProgramsTest, FlowExamplesWorkerFindsTheActiveServerAndRefusesABadList) {
  auto standby = start_standby();
  ASSERT_TRUE(standby);
  pid_t pid = start_flow_examples(
      {"--server", address_of(*standby) + "," + server_.address(), "--worker-id", "example-2"});
  ASSERT_GE(pid, 0);
  bool connected = workers_.wait_for_streams(1, seconds(10));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(connected) << "dex-flow-examples never reached the active server";
  EXPECT_EQ(workers_.hellos().at(0).worker_id(), "example-2");

  std::string command = "timeout 20 " + quote(FLOW_EXAMPLES_PATH) +
                        " worker --server 127.0.0.1:1,127.0.0.1 2>" +
                        quote((dir_ / "err").string());
  int rc = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  EXPECT_NE(slurp(dir_ / "err")
                .find("dex-flow-examples: --server: invalid server address "
                      "'127.0.0.1': use host:port"),
            std::string::npos)
      << slurp(dir_ / "err");
}

TEST_F(ProgramsTest, FlowExamplesWorkerDeclaresServesAndStopsOnSigterm) {
  pid_t pid = start_flow_examples({"--server", server_.address(), "--worker-id", "example-1"});
  ASSERT_GE(pid, 0);
  bool connected = workers_.wait_for_streams(1, seconds(10));
  if (connected) {
    WorkerHello hello = workers_.hellos().at(0);
    EXPECT_EQ(hello.worker_id(), "example-1");
    EXPECT_EQ(hello.max_concurrent_tasks(), 16u);
    std::vector<std::string> types;
    for (const auto& d : hello.flows()) types.push_back(d.flow_type());
    for (const char* type : {"OrderProcessing", "SignUp", "ParallelQuotes", "OneStep"}) {
      EXPECT_NE(std::find(types.begin(), types.end(), type), types.end()) << type;
    }

    flow::FlowTask task;
    task.set_task_id("t1");
    task.set_flow_id("f");
    task.set_run_id("r");
    task.set_flow_type("OneStep");
    task.set_step_type("Work");
    task.set_step_execution_id("Work-1");
    task.set_method(flow::EXECUTE);
    task.set_attempt(1);
    task.mutable_input()->set_data(R"({"hello":"world"})");
    ASSERT_TRUE(workers_.send_task(task));
    auto result = workers_.wait_for_result("t1", seconds(5));
    ASSERT_TRUE(result.has_value());
    ASSERT_TRUE(result->result.decision().has_graceful_complete()) << result->result.DebugString();
    EXPECT_EQ(json::parse(result->result.decision().graceful_complete().data()),
              (json{{"hello", "world"}}));
  }
  kill(pid, SIGTERM);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + seconds(10);
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "dex-flow-examples did not stop on SIGTERM";
  }
  ASSERT_TRUE(connected) << "dex-flow-examples never connected";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace dex
