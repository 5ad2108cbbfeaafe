// dexcli and dex-example-worker as real processes against the in-process fake
// services: flags, exit codes, stderr messages, JSON output, signals.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST_F(ProgramsTest, NoCommandIsAUsageErrorListingTheCommands) {
  Ran ran = dexcli({});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(
      ran.err.find(
          "'dexcli' needs one of these commands: flow-type, dag, flow, admin, health, inspect"),
      std::string::npos)
      << ran.err;
  ran = dexcli({"dag"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("start, get, list, cancel, wait"), std::string::npos) << ran.err;
}

TEST_F(ProgramsTest, HelpAtEveryLevelExitsZero) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"},
                                        {"flow", "--help"},
                                        {"dag", "--help"},
                                        {"dag", "start", "--help"},
                                        {"flow-type", "register", "--help"},
                                        {"admin", "describe", "--help"},
                                        {"dag", "wait", "--help"}}) {
    Ran ran = dexcli(args);
    EXPECT_EQ(ran.exit_code, 0) << args.back();
    EXPECT_NE(ran.out.find("Usage:"), std::string::npos) << ran.out;
  }
  EXPECT_NE(dexcli({"dag", "start", "--help"}).out.find("--flow-id"), std::string::npos);
  EXPECT_NE(dexcli({"dag", "wait", "--help"}).out.find("--wait-timeout"), std::string::npos);
}

TEST_F(ProgramsTest, BadFlagsAndInputAreRefusedAndNothingIsSent) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"dag", "start", "three-step", "--input", "{not json"}, "--input is not valid JSON"},
           {{"--timeout", "10", "dag", "get", "x"}, "--timeout: invalid duration '10'"},
           {{"dag", "list", "--status", "DONE"}, "--status must be RUNNING, COMPLETED"},
           {{"dag", "list", "--page-size", "0"}, "--page-size"},
           {{"dag", "wait", "x", "--wait-timeout", "soon"}, "--wait-timeout: invalid duration"},
           {{"dag", "get"}, "ID is required"},
           {{"flow-type", "register", (dir_ / "missing.yaml").string()}, "cannot read"},
           {{"dag", "start", "t", "--bogus"}, "--bogus"},
       }) {
    Ran ran = call(c.args);
    EXPECT_EQ(ran.exit_code, 2) << c.message << "\n" << ran.err;
    EXPECT_EQ(ran.err.rfind("dexcli: ", 0), 0u) << ran.err;
    EXPECT_NE(ran.err.find(c.message), std::string::npos) << ran.err;
    EXPECT_TRUE(ran.out.empty()) << ran.out;
  }
  EXPECT_EQ(flows_.calls(), 0u);
}

TEST_F(ProgramsTest, DefinitionWithASyntaxErrorIsRefusedBeforeSending) {
  fs::path yaml = write_file("bad.yaml", "name: x\nsteps: [\n");
  Ran ran = call({"flow-type", "register", yaml.string()});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("bad.yaml is not valid YAML"), std::string::npos) << ran.err;
  fs::path js = write_file("bad.json", "{\"name\": ");
  ran = call({"flow-type", "register", js.string()});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("bad.json is not valid JSON"), std::string::npos) << ran.err;
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
  Ran ran = dexcli({"--server", address, "dag", "get", "f-1"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_EQ(
      ran.err.rfind(
          "dexcli: getting flow f-1: UNAVAILABLE: the server is not reachable at " + address, 0),
      0u)
      << ran.err;
}

TEST_F(ProgramsTest, SeveralServersFindTheActiveOneInAnyOrderCommaSeparatedOrRepeated) {
  auto standby = start_standby();
  ASSERT_TRUE(standby);
  const std::string s = address_of(*standby), a = server_.address();
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--server", s + "," + a, "dag", "get", "f-done"},
        {"--server", a + "," + s, "dag", "get", "f-done"},
        {"--server", s, "--server", a, "dag", "get", "f-done"},
        {"dag", "get", "f-done", "--server", s + ", " + a}}) {
    Ran ran = dexcli(args);
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    EXPECT_EQ(json::parse(ran.out)["status"], "COMPLETED");
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
    Ran ran = dexcli({"--server", c.list, "dag", "get", "f-done"});
    EXPECT_EQ(ran.exit_code, 2) << c.list << "\n" << ran.err;
    EXPECT_NE(ran.err.find("dexcli: " + c.message), std::string::npos) << ran.err;
    EXPECT_TRUE(ran.out.empty());
  }
  Ran ran = dexcli({"--server", "127.0.0.1:1", "--server", "nope", "dag", "list"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("invalid server address 'nope'"), std::string::npos) << ran.err;
  EXPECT_EQ(flows_.calls(), 0u);
}

TEST_F(ProgramsTest, NoActiveServerNamesEveryAddressWithExitOne) {
  auto one = start_standby(), two = start_standby();
  ASSERT_TRUE(one && two);
  Ran ran = dexcli({"--server", address_of(*one) + "," + address_of(*two), "--timeout", "500ms",
                    "dag", "get", "f-1"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_EQ(ran.err.rfind("dexcli: getting flow f-1: UNAVAILABLE: no active dex process at any of "
                          "2 addresses (kept trying for 500ms)",
                          0),
            0u)
      << ran.err;
  for (const auto* api : {one.get(), two.get()}) {
    EXPECT_NE(ran.err.find("the server at " + address_of(*api) + " is not serving"),
              std::string::npos)
        << ran.err;
  }
}

TEST_F(ProgramsTest, ServerErrorIsPrintedWithItsCode) {
  Ran ran = call({"dag", "get", "nope"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_EQ(ran.err, "dexcli: getting flow nope: NOT_FOUND: no flow with ID nope\n");
}

TEST_F(ProgramsTest, FlowGetPrintsEnumsByNameAndEmbedsJson) {
  Ran ran = call({"dag", "get", "f-done"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  json flow = json::parse(ran.out);
  EXPECT_EQ(flow["flowId"], "f-done");
  EXPECT_EQ(flow["status"], "COMPLETED");
  EXPECT_EQ(flow["input"], (json{{"n", 1}}));
  ASSERT_EQ(flow["steps"].size(), 3u);
  const json& transform = flow["steps"][1];
  EXPECT_EQ(transform["name"], "transform");
  EXPECT_EQ(transform["status"], "COMPLETED");
  EXPECT_EQ(transform["output"], (json{{"transformed", 2}}));
  ASSERT_EQ(transform["attempts"].size(), 2u);
  EXPECT_EQ(transform["attempts"][0]["outcome"], "FAILED");
  EXPECT_EQ(transform["attempts"][1]["outcome"], "COMPLETED");
  EXPECT_EQ(transform["attempts"][1]["number"], 2);
}

TEST_F(ProgramsTest, GlobalFlagsAreAcceptedAfterTheCommand) {
  Ran ran = dexcli({"dag", "get", "f-done", "--server", server_.address(), "--timeout", "5s"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["status"], "COMPLETED");
}

TEST_F(ProgramsTest, FlowStartSendsTypeInputAndId) {
  Ran ran = call({"dag", "start", "three-step", "--input", R"({"n": 1})", "--flow-id", "my-1"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  json out = json::parse(ran.out);
  EXPECT_EQ(out["flow"]["flowId"], "my-1");
  EXPECT_EQ(out["flow"]["status"], "RUNNING");
  EXPECT_EQ(out["flow"]["input"], (json{{"n", 1}}));
  EXPECT_EQ(out["alreadyExisted"], false);
  ASSERT_EQ(flows_.starts().size(), 1u);
  EXPECT_EQ(flows_.starts()[0].flow_type(), "three-step");
  EXPECT_EQ(json::parse(flows_.starts()[0].input()), (json{{"n", 1}}));
}

TEST_F(ProgramsTest, FlowListPassesFiltersAndPrintsTheNextPageToken) {
  Ran ran = call({"dag", "list", "--status", "completed", "--page-size", "10"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  json out = json::parse(ran.out);
  EXPECT_EQ(out["flows"].size(), 1u);
  EXPECT_EQ(out["nextPageToken"], "page-2");
  ASSERT_EQ(flows_.lists().size(), 1u);
  EXPECT_EQ(flows_.lists()[0].status(), FLOW_STATUS_COMPLETED);
  EXPECT_EQ(flows_.lists()[0].page_size(), 10u);
}

TEST_F(ProgramsTest, FlowWaitExitsThreeWhenTheFlowDidNotEnd) {
  Ran ran = call({"dag", "wait", "f-running", "--wait-timeout", "200ms"});
  EXPECT_EQ(ran.exit_code, 3) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["ended"], false);
  EXPECT_NE(ran.err.find("did not end within 200ms"), std::string::npos) << ran.err;
  ran = call({"dag", "wait", "f-done"});
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["flow"]["status"], "COMPLETED");
}

TEST_F(ProgramsTest, FlowTypeCommandsPrintDurationsAsInDefinitions) {
  fs::path yaml = write_file("t.yaml", "name: three-step\nsteps: []\n");
  Ran ran = call({"flow-type", "register", yaml.string()});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  ASSERT_EQ(flows_.definitions().size(), 1u);
  EXPECT_EQ(flows_.definitions()[0], "name: three-step\nsteps: []\n");  // sent as written
  json out = json::parse(ran.out);
  EXPECT_EQ(out["changed"], true);
  const json& transform = out["flowType"]["steps"][1];
  EXPECT_EQ(transform["retry"]["initialInterval"], "200ms");
  EXPECT_EQ(transform["retry"]["maxInterval"], "1s");
  EXPECT_EQ(transform["startToCloseTimeout"], "10s");
  EXPECT_EQ(transform["dispatch"], "SYNC");
  EXPECT_EQ(transform["after"], (json{"fetch"}));

  ran = call({"flow-type", "get", "three-step"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["name"], "three-step");
  ran = call({"flow-type", "list"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["flowTypes"].size(), 1u);
  ran = call({"dag", "cancel", "f-9"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["flow"]["status"], "CANCELLED");
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

// ------------------------------------------------------ dex-example-worker

TEST_F(ProgramsTest, ExampleWorkerFindsTheActiveServerAndRefusesABadList) {
  auto standby = start_standby();
  ASSERT_TRUE(standby);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string list = address_of(*standby) + "," + server_.address();
    execl(EXAMPLE_WORKER_PATH, EXAMPLE_WORKER_PATH, "--server", list.c_str(), "--worker-id",
          "example-2", static_cast<char*>(nullptr));
    _exit(127);
  }
  bool connected = workers_.wait_for_streams(1, seconds(10));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(connected) << "dex-example-worker never reached the active server";
  EXPECT_EQ(workers_.hellos().at(0).worker_id(), "example-2");
  EXPECT_EQ(flows_.definitions().size(), 2u);  // registered through the active server

  std::string command = "timeout 20 " + quote(EXAMPLE_WORKER_PATH) +
                        " --server 127.0.0.1:1,127.0.0.1 2>" + quote((dir_ / "err").string());
  int rc = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  EXPECT_NE(slurp(dir_ / "err")
                .find("dex-example-worker: --server: invalid server address "
                      "'127.0.0.1': use host:port"),
            std::string::npos)
      << slurp(dir_ / "err");
}

TEST_F(ProgramsTest, ExampleWorkerRegistersServesAndStopsOnSigterm) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string address = server_.address();
    execl(EXAMPLE_WORKER_PATH, EXAMPLE_WORKER_PATH, "--server", address.c_str(), "--worker-id",
          "example-1", static_cast<char*>(nullptr));
    _exit(127);
  }
  bool connected = workers_.wait_for_streams(1, seconds(10));
  if (connected) {
    WorkerHello hello = workers_.hellos().at(0);
    EXPECT_EQ(hello.worker_id(), "example-1");
    EXPECT_EQ(std::vector<std::string>(hello.task_queues().begin(), hello.task_queues().end()),
              (std::vector<std::string>{"example"}));
    EXPECT_EQ(hello.max_concurrent_tasks(), 16u);
    auto definitions = flows_.definitions();
    ASSERT_EQ(definitions.size(), 2u);
    EXPECT_NE(definitions[0].find("name: three-step"), std::string::npos);
    EXPECT_NE(definitions[1].find("name: one-step"), std::string::npos);

    StepTask task;
    task.set_task_id("t1");
    task.set_flow_id("f");
    task.set_flow_type("one-step");
    task.set_step("echo");
    task.set_attempt(1);
    task.set_task_queue("example");
    task.set_input(R"({"flow":{"hello":"world"},"steps":{}})");
    ASSERT_TRUE(workers_.send_task(task));
    auto result = workers_.wait_for_result("t1", seconds(5));
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(json::parse(result->result.output()), (json{{"hello", "world"}}));
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
    FAIL() << "dex-example-worker did not stop on SIGTERM";
  }
  ASSERT_TRUE(connected) << "dex-example-worker never connected";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace dex
