// Step down from the client side: Client::step_down and `dexcli admin
// step-down` / `admin describe` against a small in-process fake
// dex.AdminService that records what it receives and answers what each test
// says (the real server side lives in src/api and src/server). Covers the
// spec's flag combinations, the unknown-outcome retry output, the errors, the
// JSON fields, the admin credential, and the rule that a StepDown is sent to
// another address only when no connection was made.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "dex/api.grpc.pb.h"
#include "run_program.h"
#include "sdk/client.h"

namespace dex {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using testing::Ran;
using testing::run_program;

// --------------------------------------------------------------- the fake

// dex.AdminService with scripted answers. Describe answers node-a at epoch 7
// unless told otherwise; StepDown answers a takeover by epoch 8, echoing the
// request's expectations, unless told otherwise. Each answer can wait first
// (until the call's deadline cancels it).
class ScriptedAdminService final : public AdminService::Service {
 public:
  ScriptedAdminService() {
    describe_.set_node_id("node-a");
    describe_.set_node_epoch("7");
    describe_.set_holder_process_id("host-1-aaaa");
    step_down_.set_node_id("node-a");
    step_down_.set_released_node_epoch("7");
    step_down_.set_lease_reacquisition_hold_off_ms(5000);
    step_down_.set_lease_holder_after_step_down(TAKEN_OVER_BY_ANOTHER_PROCESS);
    step_down_.set_active_node_epoch("8");
    step_down_.set_active_holder_process_id("host-2-bbbb");
  }

  grpc::Status Describe(grpc::ServerContext* context, const DescribeRequest*,
                        DescribeResponse* response) override {
    record("describe", context);
    grpc::Status status;
    Duration delay;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status = describe_status_;
      delay = describe_delay_;
      *response = describe_;
    }
    wait(context, delay);
    return status;
  }

  grpc::Status StepDown(grpc::ServerContext* context, const StepDownRequest* request,
                        StepDownResponse* response) override {
    record("step-down", context);
    grpc::Status status;
    Duration delay;
    {
      std::lock_guard<std::mutex> lock(mu_);
      step_downs_.push_back(*request);
      deadlines_.push_back(std::chrono::duration_cast<Duration>(context->deadline() -
                                                                std::chrono::system_clock::now()));
      status = step_down_status_;
      delay = step_down_delay_;
      *response = step_down_;
    }
    if (response->expected_node_id().empty()) {
      response->set_expected_node_id(request->expected_node_id());
    }
    if (response->expected_node_epoch().empty()) {
      response->set_expected_node_epoch(request->expected_node_epoch());
    }
    wait(context, delay);
    return status;
  }

  void set_describe(const std::string& node_id, const std::string& epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    describe_.set_node_id(node_id);
    describe_.set_node_epoch(epoch);
  }
  void fail_describe(grpc::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    describe_status_ = std::move(status);
  }
  void set_step_down(StepDownResponse response) {
    std::lock_guard<std::mutex> lock(mu_);
    step_down_ = std::move(response);
  }
  void fail_step_down(grpc::Status status, Duration delay = Duration::zero()) {
    std::lock_guard<std::mutex> lock(mu_);
    step_down_status_ = std::move(status);
    step_down_delay_ = delay;
  }

  // "describe" and "step-down" in arrival order.
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::vector<StepDownRequest> step_downs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return step_downs_;
  }
  // The time each StepDown had left until its deadline when it arrived.
  std::vector<Duration> step_down_deadlines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return deadlines_;
  }
  // The authorization header of each call ("" when it had none).
  std::vector<std::string> authorizations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }

 private:
  void record(const std::string& event, grpc::ServerContext* context) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
    auto it = context->client_metadata().find("authorization");
    authorizations_.push_back(it == context->client_metadata().end()
                                  ? ""
                                  : std::string(it->second.data(), it->second.size()));
  }
  static void wait(grpc::ServerContext* context, Duration delay) {
    auto until = std::chrono::steady_clock::now() + delay;
    while (!context->IsCancelled() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  }

  mutable std::mutex mu_;
  DescribeResponse describe_;
  grpc::Status describe_status_;
  Duration describe_delay_{0};
  StepDownResponse step_down_;
  grpc::Status step_down_status_;
  Duration step_down_delay_{0};
  std::vector<std::string> events_;
  std::vector<StepDownRequest> step_downs_;
  std::vector<Duration> deadlines_;
  std::vector<std::string> authorizations_;
};

// The fake on 127.0.0.1 (port 0: a free one) with gRPC health, whose
// readiness ("") a test sets: SERVING like an active process, or not like a
// standby.
class AdminServer {
 public:
  AdminServer() {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&admin);
    server_ = builder.BuildAndStart();
    EXPECT_TRUE(server_ != nullptr && port_ > 0) << "the fake server could not listen";
  }
  ~AdminServer() { stop(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void set_ready(bool serving) { server_->GetHealthCheckService()->SetServingStatus("", serving); }
  void stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    server_->Wait();
    server_.reset();
  }

  ScriptedAdminService admin;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// An address where nothing listens (a fake that was started and stopped).
std::string closed_address() {
  AdminServer gone;
  return gone.address();
}

grpc::Status error(grpc::StatusCode code, const std::string& message) {
  return grpc::Status(code, message);
}

// ------------------------------------------------------------ the client

ClientOptions options_for(std::vector<std::string> addresses) {
  ClientOptions options;
  options.server_addresses = std::move(addresses);
  options.timeout = seconds(5);
  options.connect_timeout = milliseconds(500);
  return options;
}

TEST(ClientStepDownTest, SendsTheExpectationsWithTheBearerTokenAndReturnsTheAnswer) {
  AdminServer server;
  ClientOptions options = options_for({server.address()});
  options.admin_credential = "s3cret";
  Client client(options);
  auto answer = client.step_down("node-a", "7");
  ASSERT_TRUE(answer.is_ok()) << answer.status().message();
  EXPECT_EQ(answer->expected_node_id(), "node-a");
  EXPECT_EQ(answer->lease_holder_after_step_down(), TAKEN_OVER_BY_ANOTHER_PROCESS);
  ASSERT_EQ(server.admin.step_downs().size(), 1u);
  EXPECT_EQ(server.admin.step_downs()[0].expected_node_id(), "node-a");
  EXPECT_EQ(server.admin.step_downs()[0].expected_node_epoch(), "7");
  EXPECT_EQ(server.admin.authorizations(), (std::vector<std::string>{"Bearer s3cret"}));
}

TEST(ClientStepDownTest, TheDeadlineIsTheGivenTimeoutOrTheClientsOwn) {
  AdminServer server;
  Client client(options_for({server.address()}));
  ASSERT_TRUE(client.step_down("node-a", "7", seconds(90)).is_ok());
  ASSERT_TRUE(client.step_down("node-a", "7").is_ok());
  auto deadlines = server.admin.step_down_deadlines();
  ASSERT_EQ(deadlines.size(), 2u);
  EXPECT_GT(deadlines[0], seconds(85));
  EXPECT_LE(deadlines[0], milliseconds(91'500));  // gRPC rounds the deadline up
  EXPECT_GT(deadlines[1], seconds(3));
  EXPECT_LE(deadlines[1], milliseconds(6'500));
}

TEST(ClientStepDownTest, BadExpectationsAreRefusedAndNothingIsSent) {
  AdminServer server;
  Client client(options_for({server.address()}));
  for (auto [node, epoch] :
       std::vector<std::pair<std::string, std::string>>{{"", "7"},
                                                        {"bad id", "7"},
                                                        {"node-a", ""},
                                                        {"node-a", "0"},
                                                        {"node-a", "07"},
                                                        {"node-a", "-7"},
                                                        {"node-a", "7x"},
                                                        {"node-a", "18446744073709551616"}}) {
    auto answer = client.step_down(node, epoch);
    ASSERT_FALSE(answer.is_ok()) << node << " " << epoch;
    EXPECT_EQ(answer.status().code(), Code::kInvalidArgument) << answer.status().message();
  }
  EXPECT_TRUE(server.admin.events().empty());
}

// Every answer that may come from a process that acted ends the call: it is
// never sent to the next address, not even on UNAVAILABLE (which the other
// calls move on after).
TEST(ClientStepDownTest, AnAnswerIsNeverFollowedByASendToAnotherAddress) {
  struct Case {
    grpc::StatusCode code;
    std::string prefix;
  };
  for (const Case& c : std::vector<Case>{
           {grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE: the server at "},
           {grpc::StatusCode::FAILED_PRECONDITION, "FAILED_PRECONDITION: does not match"},
           {grpc::StatusCode::CANCELLED, "CANCELLED: "},
           {grpc::StatusCode::INTERNAL, "INTERNAL: "},
       }) {
    AdminServer first, second;
    first.admin.fail_step_down(error(c.code, "does not match"));
    Client client(options_for({first.address(), second.address()}));
    auto answer = client.step_down("node-a", "7");
    ASSERT_FALSE(answer.is_ok());
    EXPECT_EQ(answer.status().message().rfind(c.prefix, 0), 0u) << answer.status().message();
    EXPECT_EQ(first.admin.step_downs().size(), 1u) << c.prefix;
    EXPECT_TRUE(second.admin.events().empty()) << c.prefix;
  }
}

TEST(ClientStepDownTest, DeadlineExceededEndsTheCallWithoutTryingElsewhere) {
  AdminServer first, second;
  first.admin.fail_step_down(grpc::Status::OK, seconds(5));
  Client client(options_for({first.address(), second.address()}));
  auto answer = client.step_down("node-a", "7", milliseconds(300));
  ASSERT_FALSE(answer.is_ok());
  EXPECT_EQ(answer.status().message().rfind(
                "DEADLINE_EXCEEDED: no answer from " + first.address() + " within 300ms", 0),
            0u)
      << answer.status().message();
  EXPECT_TRUE(second.admin.events().empty());
}

TEST(ClientStepDownTest, MovesOnOnlyWhenNoConnectionWasMade) {
  AdminServer active;
  const std::string nobody = closed_address();
  Client client(options_for({nobody, active.address()}));
  auto answer = client.step_down("node-a", "7");
  ASSERT_TRUE(answer.is_ok()) << answer.status().message();
  EXPECT_EQ(active.admin.step_downs().size(), 1u);

  // Nothing listens anywhere: one round, nothing sent, every address named.
  const std::string other = closed_address();
  Client none(options_for({nobody, other}));
  auto failed = none.step_down("node-a", "7");
  ASSERT_FALSE(failed.is_ok());
  EXPECT_NE(failed.status().message().find("UNAVAILABLE: no active dex process at any of 2"),
            std::string::npos)
      << failed.status().message();
  EXPECT_NE(failed.status().message().find(other), std::string::npos);
}

// With several addresses and no call answered yet, the step down goes first to
// the address whose readiness is SERVING, not to a standby listed first.
TEST(ClientStepDownTest, GoesFirstToTheAddressThatReportsReady) {
  AdminServer standby, active;
  standby.set_ready(false);
  standby.admin.fail_step_down(error(grpc::StatusCode::UNAVAILABLE, "this process is a standby"));
  active.set_ready(true);
  Client client(options_for({standby.address(), active.address()}));
  auto answer = client.step_down("node-a", "7");
  ASSERT_TRUE(answer.is_ok()) << answer.status().message();
  EXPECT_TRUE(standby.admin.events().empty());
  EXPECT_EQ(active.admin.step_downs().size(), 1u);
}

// After describe found the active process, the step down goes to that very
// address (the readiness hint is not consulted then).
TEST(ClientStepDownTest, AfterDescribeGoesToTheAddressThatDescribed) {
  AdminServer standby, active;
  standby.admin.fail_describe(error(grpc::StatusCode::UNAVAILABLE, "this process is a standby"));
  standby.set_ready(true);  // a stale hint must not win over the describe
  Client client(options_for({standby.address(), active.address()}));
  auto described = client.describe();
  ASSERT_TRUE(described.is_ok()) << described.status().message();
  ASSERT_TRUE(client.step_down(described->node_id(), described->node_epoch()).is_ok());
  EXPECT_EQ(standby.admin.events(), (std::vector<std::string>{"describe"}));
  EXPECT_EQ(active.admin.events(), (std::vector<std::string>{"describe", "step-down"}));
}

// ---------------------------------------------------------------- dexcli

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class DexcliStepDownTest : public ::testing::Test {
 protected:
  DexcliStepDownTest() {
    dir_ = fs::temp_directory_path() /
           ("dex-sdk-step-down-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    token_ = write_file("admin-token", "  tok-XYZZY-42\n");
  }
  ~DexcliStepDownTest() override { fs::remove_all(dir_); }

  // Runs dexcli with `args`; `prefix` wraps it (default: a 30 s bound).
  Ran dexcli(const std::vector<std::string>& args, const std::string& prefix = "timeout 30") {
    Ran ran = run_program(prefix, DEXCLI_PATH, args, dir_);
    // The token is never printed, whatever happened.
    EXPECT_FALSE(contains(ran.out, "XYZZY")) << ran.out;
    EXPECT_FALSE(contains(ran.err, "XYZZY")) << ran.err;
    return ran;
  }
  // dexcli against the fake with the admin credential.
  Ran step_down(std::vector<std::string> args) {
    std::vector<std::string> all = {"--server",  server_.address(),   "admin",
                                    "step-down", "--credential-file", token_.string()};
    all.insert(all.end(), args.begin(), args.end());
    return dexcli(all);
  }
  fs::path write_file(const std::string& name, const std::string& text) {
    fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path;
  }
  std::string retry_command(const std::string& node, const std::string& epoch,
                            const std::string& timeout = "") {
    return "dexcli --server " + server_.address() +
           (timeout.empty() ? "" : " --timeout " + timeout) +
           " admin step-down --yes --expected-node-id " + node + " --expected-node-epoch " + epoch +
           " --credential-file " + token_.string();
  }
  void expect_unknown_outcome(const Ran& ran, const std::string& node, const std::string& epoch,
                              const std::string& timeout = "") {
    EXPECT_EQ(ran.exit_code, 1) << ran.err;
    EXPECT_TRUE(ran.out.empty()) << ran.out;
    EXPECT_TRUE(contains(ran.err, "the outcome of the step down is unknown")) << ran.err;
    EXPECT_TRUE(contains(ran.err, "expectedNodeId: " + node + "\n")) << ran.err;
    EXPECT_TRUE(contains(ran.err, "expectedNodeEpoch: " + epoch + "\n")) << ran.err;
    EXPECT_TRUE(contains(ran.err, "\n  " + retry_command(node, epoch, timeout) + "\n")) << ran.err;
    EXPECT_TRUE(contains(ran.err,
                         "Never retry with a node epoch that 'dexcli admin describe' "
                         "prints after this failure"))
        << ran.err;
  }

  AdminServer server_;
  fs::path dir_;
  fs::path token_;
};

using Events = std::vector<std::string>;

TEST_F(DexcliStepDownTest, WithoutExpectationsItDescribesAndExpectsTheDescribedProcess) {
  server_.admin.set_describe("node-a", "18446744073709551615");
  Ran ran = step_down({"--yes"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(server_.admin.events(), (Events{"describe", "step-down"}));
  ASSERT_EQ(server_.admin.step_downs().size(), 1u);
  EXPECT_EQ(server_.admin.step_downs()[0].expected_node_id(), "node-a");
  EXPECT_EQ(server_.admin.step_downs()[0].expected_node_epoch(), "18446744073709551615");
  json out = json::parse(ran.out);
  EXPECT_EQ(out["expectedNodeId"], "node-a");
  EXPECT_EQ(out["expectedNodeEpoch"], "18446744073709551615");
  // The step down call has the whole default of 2 minutes.
  ASSERT_EQ(server_.admin.step_down_deadlines().size(), 1u);
  EXPECT_GT(server_.admin.step_down_deadlines()[0], seconds(110));
  EXPECT_LE(server_.admin.step_down_deadlines()[0], milliseconds(121'500));  // rounded up
}

TEST_F(DexcliStepDownTest, NodeIdAloneThatMatchesTakesTheDescribedEpoch) {
  server_.admin.set_describe("node-a", "12");
  Ran ran = step_down({"--yes", "--expected-node-id", "node-a"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(server_.admin.events(), (Events{"describe", "step-down"}));
  ASSERT_EQ(server_.admin.step_downs().size(), 1u);
  EXPECT_EQ(server_.admin.step_downs()[0].expected_node_id(), "node-a");
  EXPECT_EQ(server_.admin.step_downs()[0].expected_node_epoch(), "12");
}

TEST_F(DexcliStepDownTest, NodeIdAloneThatDoesNotMatchStepsNothingDown) {
  server_.admin.set_describe("node-b", "12");
  Ran ran = step_down({"--yes", "--expected-node-id", "node-a"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_TRUE(ran.out.empty());
  EXPECT_TRUE(contains(ran.err,
                       "the server reports node ID 'node-b', not 'node-a' "
                       "(--expected-node-id): nothing was stepped down; check --server"))
      << ran.err;
  EXPECT_EQ(server_.admin.events(), (Events{"describe"}));
}

TEST_F(DexcliStepDownTest, BothExpectationsAreSentAsTheyAreWithoutDescribing) {
  Ran ran = step_down(
      {"--yes", "--expected-node-id", "node-a", "--expected-node-epoch", "7", "--timeout", "45s"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(server_.admin.events(), (Events{"step-down"}));
  EXPECT_EQ(server_.admin.step_downs()[0].expected_node_id(), "node-a");
  EXPECT_EQ(server_.admin.step_downs()[0].expected_node_epoch(), "7");
  EXPECT_GT(server_.admin.step_down_deadlines()[0], seconds(40));
  EXPECT_LE(server_.admin.step_down_deadlines()[0], milliseconds(46'500));
}

TEST_F(DexcliStepDownTest, EpochAloneIsAUsageErrorAndNothingIsSent) {
  Ran ran = step_down({"--yes", "--expected-node-epoch", "7"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_TRUE(ran.out.empty());
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: --expected-node-epoch needs --expected-node-id: an epoch "
                       "alone does not say which node's process to step down"))
      << ran.err;
  EXPECT_TRUE(server_.admin.events().empty());
}

TEST_F(DexcliStepDownTest, WithoutYesItIsAUsageErrorThatSaysWhy) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{},
        {"--expected-node-id", "node-a", "--expected-node-epoch", "7"}}) {
    Ran ran = step_down(args);
    EXPECT_EQ(ran.exit_code, 2);
    EXPECT_TRUE(ran.out.empty());
    EXPECT_TRUE(contains(ran.err,
                         "dexcli: admin step-down needs --yes: stepping down makes the "
                         "active process stop serving"))
        << ran.err;
    EXPECT_TRUE(contains(ran.err, "on a single replica nothing serves for about one hold-off"))
        << ran.err;
  }
  EXPECT_TRUE(server_.admin.events().empty());
}

TEST_F(DexcliStepDownTest, BadExpectationsAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--expected-node-id", "node a"}, "--expected-node-id: invalid nodeId 'node a'"},
           {{"--expected-node-id", ""}, "--expected-node-id: invalid nodeId ''"},
           {{"--expected-node-id", "node-a", "--expected-node-epoch", "07"},
            "--expected-node-epoch: invalid node epoch '07'"},
           {{"--expected-node-id", "node-a", "--expected-node-epoch", "0"},
            "--expected-node-epoch: invalid node epoch '0'"},
           {{"--expected-node-id", "node-a", "--expected-node-epoch", "seven"},
            "--expected-node-epoch: invalid node epoch 'seven'"},
           {{"--expected-node-id", "node-a", "--timeout", "2"}, "--timeout: invalid duration"},
       }) {
    std::vector<std::string> args = {"--yes"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Ran ran = step_down(args);
    EXPECT_EQ(ran.exit_code, 2) << c.message;
    EXPECT_TRUE(contains(ran.err, "dexcli: " + c.message)) << ran.err;
  }
  EXPECT_TRUE(server_.admin.events().empty());
}

TEST_F(DexcliStepDownTest, AFailingFirstDescribeStepsNothingDown) {
  server_.admin.fail_describe(
      error(grpc::StatusCode::FAILED_PRECONDITION, "a step down or its hold-off is in progress"));
  Ran ran = step_down({"--yes"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_TRUE(ran.out.empty());
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: describing the active process before stepping it down: "
                       "FAILED_PRECONDITION: a step down or its hold-off is in progress"))
      << ran.err;
  EXPECT_TRUE(contains(ran.err, "wait past the hold-off")) << ran.err;
  EXPECT_TRUE(contains(ran.err, "dexcli: nothing was stepped down\n")) << ran.err;

  server_.admin.fail_describe(error(grpc::StatusCode::UNAVAILABLE, "this process is a standby"));
  ran = step_down({"--yes", "--expected-node-id", "node-a", "--timeout", "300ms"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_TRUE(contains(ran.err, "before stepping it down: UNAVAILABLE")) << ran.err;
  EXPECT_TRUE(contains(ran.err, "dexcli: nothing was stepped down\n")) << ran.err;
  for (const std::string& event : server_.admin.events()) EXPECT_EQ(event, "describe");
}

TEST_F(DexcliStepDownTest, DeadlineExceededPrintsTheUnknownOutcomeAndTheSafeRetry) {
  server_.admin.fail_step_down(grpc::Status::OK, seconds(10));
  Ran ran = step_down({"--yes", "--expected-node-id", "node-a", "--expected-node-epoch", "7",
                       "--timeout", "500ms"});
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: stepping down node node-a at node epoch 7: "
                       "DEADLINE_EXCEEDED: no answer from " +
                           server_.address() + " within 500ms"))
      << ran.err;
  expect_unknown_outcome(ran, "node-a", "7", "500ms");
  EXPECT_EQ(server_.admin.events(), (Events{"step-down"}));
}

TEST_F(DexcliStepDownTest, UnavailableAndCancelledPrintTheDescribedValuesToRetryWith) {
  server_.admin.set_describe("node-a", "41");
  for (grpc::StatusCode code : {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED}) {
    server_.admin.fail_step_down(error(code, "the lease was released under the call"));
    Ran ran = step_down({"--yes"});
    expect_unknown_outcome(ran, "node-a", "41");
  }
  // One StepDown per run: an UNAVAILABLE is not retried.
  EXPECT_EQ(server_.admin.events(), (Events{"describe", "step-down", "describe", "step-down"}));
}

// No connection to any address: the request never went out, so the outcome is
// known (nothing happened); the retry for the same process is still shown.
TEST_F(DexcliStepDownTest, NoConnectionMeansNothingWasSent) {
  const std::string nobody = closed_address();
  Ran ran = dexcli({"--server", nobody, "admin", "step-down", "--yes", "--expected-node-id",
                    "node-a", "--expected-node-epoch", "7"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: stepping down node node-a at node epoch 7: UNAVAILABLE: "
                       "the server is not reachable at " +
                           nobody))
      << ran.err;
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: the step down was not sent (no connection could be "
                       "made), so nothing was stepped down. To try again for the same "
                       "process:\n  dexcli --server " +
                           nobody +
                           " admin step-down --yes --expected-node-id node-a "
                           "--expected-node-epoch 7\n"))
      << ran.err;
  EXPECT_FALSE(contains(ran.err, "unknown")) << ran.err;
}

TEST_F(DexcliStepDownTest, AnInterruptedStepDownPrintsTheUnknownOutcome) {
  server_.admin.fail_step_down(grpc::Status::OK, seconds(20));
  // SIGINT after 1 s, while the StepDown call waits.
  Ran ran = dexcli({"--server", server_.address(), "admin", "step-down", "--yes",
                    "--credential-file", token_.string()},
                   "timeout --preserve-status -s INT 1");
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: interrupted while stepping down node node-a at node "
                       "epoch 7"))
      << ran.err;
  expect_unknown_outcome(ran, "node-a", "7");
}

TEST_F(DexcliStepDownTest, FailedPreconditionExplainsAndPrintsNoRetry) {
  server_.admin.fail_step_down(
      error(grpc::StatusCode::FAILED_PRECONDITION, "this process is node-a at epoch 8, not 7"));
  Ran ran = step_down({"--yes", "--expected-node-id", "node-a", "--expected-node-epoch", "7"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_TRUE(ran.out.empty());
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: stepping down node node-a at node epoch 7: "
                       "FAILED_PRECONDITION: this process is node-a at epoch 8, not 7\n"))
      << ran.err;
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: this call stepped nothing down: the process that answered "
                       "does not match node node-a at node epoch 7 (or is already stepping "
                       "down). Another process may be active now"))
      << ran.err;
  EXPECT_TRUE(contains(ran.err, "a step down may be in progress")) << ran.err;
  EXPECT_TRUE(contains(ran.err,
                       "Wait past the hold-off (standby.stepDownHoldOff), run 'dexcli "
                       "admin describe', and step down again only if the switchover you "
                       "wanted has not happened"))
      << ran.err;
  EXPECT_FALSE(contains(ran.err, "outcome of the step down is unknown")) << ran.err;
}

TEST_F(DexcliStepDownTest, OutputHasTheSpecFieldsForEachLeaseHolder) {
  StepDownResponse answer;
  answer.set_node_id("node-a");
  answer.set_released_node_epoch("7");
  answer.set_lease_reacquisition_hold_off_ms(5000);
  answer.set_lease_holder_after_step_down(TAKEN_OVER_BY_ANOTHER_PROCESS);
  answer.set_active_node_epoch("8");
  answer.set_active_holder_process_id("host-2-bbbb");
  server_.admin.set_step_down(answer);
  Ran ran = step_down({"--yes"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), (json{{"expectedNodeId", "node-a"},
                                        {"expectedNodeEpoch", "7"},
                                        {"nodeId", "node-a"},
                                        {"releasedNodeEpoch", "7"},
                                        {"leaseReacquisitionHoldOff", "5s"},
                                        {"leaseHolderAfterStepDown", "takenOverByAnotherProcess"},
                                        {"activeNodeEpoch", "8"},
                                        {"activeHolderProcessId", "host-2-bbbb"}}));

  answer.set_lease_holder_after_step_down(TAKEN_BACK_BY_THIS_PROCESS);
  answer.set_lease_reacquisition_hold_off_ms(1500);
  answer.set_active_holder_process_id("host-1-aaaa");
  server_.admin.set_step_down(answer);
  ran = step_down({"--yes"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), (json{{"expectedNodeId", "node-a"},
                                        {"expectedNodeEpoch", "7"},
                                        {"nodeId", "node-a"},
                                        {"releasedNodeEpoch", "7"},
                                        {"leaseReacquisitionHoldOff", "1500ms"},
                                        {"leaseHolderAfterStepDown", "takenBackByThisProcess"},
                                        {"activeNodeEpoch", "8"},
                                        {"activeHolderProcessId", "host-1-aaaa"}}));

  answer.set_lease_holder_after_step_down(UNKNOWN);
  answer.set_lease_holder_unknown_detail("the lease could not be read: object storage timed out");
  answer.clear_active_node_epoch();
  answer.clear_active_holder_process_id();
  server_.admin.set_step_down(answer);
  ran = step_down({"--yes"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out),
            (json{{"expectedNodeId", "node-a"},
                  {"expectedNodeEpoch", "7"},
                  {"nodeId", "node-a"},
                  {"releasedNodeEpoch", "7"},
                  {"leaseReacquisitionHoldOff", "1500ms"},
                  {"leaseHolderAfterStepDown", "unknown"},
                  {"leaseHolderUnknownDetail",
                   "the lease could not be read: object storage timed out"}}));
}

TEST_F(DexcliStepDownTest, TheCredentialIsSentAsABearerTokenAndNeverPrinted) {
  Ran ran = step_down({"--yes"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(server_.admin.authorizations(),
            (Events{"Bearer tok-XYZZY-42", "Bearer tok-XYZZY-42"}));  // describe and step down
  ran = dexcli(
      {"--server", server_.address(), "admin", "describe", "--credential-file", token_.string()});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(server_.admin.authorizations().back(), "Bearer tok-XYZZY-42");
}

TEST_F(DexcliStepDownTest, AnEmptyOrMissingCredentialFileIsRefusedNamingIt) {
  fs::path empty = write_file("empty-token", " \n\t\n");
  fs::path missing = dir_ / "missing-token";
  for (std::vector<std::string> command :
       {std::vector<std::string>{"step-down", "--yes"}, std::vector<std::string>{"describe"}}) {
    auto with_file = [&](const fs::path& file) {
      std::vector<std::string> args = {"--server", server_.address(), "admin"};
      args.insert(args.end(), command.begin(), command.end());
      args.insert(args.end(), {"--credential-file", file.string()});
      return args;
    };
    Ran ran = dexcli(with_file(empty));
    EXPECT_EQ(ran.exit_code, 2) << command[0];
    EXPECT_TRUE(contains(ran.err, "dexcli: --credential-file: " + empty.string() + " is empty"))
        << ran.err;
    ran = dexcli(with_file(missing));
    EXPECT_EQ(ran.exit_code, 2) << command[0];
    EXPECT_TRUE(contains(ran.err, "dexcli: --credential-file: cannot read " + missing.string()))
        << ran.err;
  }
  EXPECT_TRUE(server_.admin.events().empty());
}

TEST_F(DexcliStepDownTest, UnauthenticatedSaysTheCredentialIsNeededOrRefused) {
  server_.admin.fail_describe(
      error(grpc::StatusCode::UNAUTHENTICATED, "the admin credential was refused"));
  Ran ran = step_down({"--yes"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_TRUE(contains(ran.err, "UNAUTHENTICATED: the admin credential was refused")) << ran.err;
  EXPECT_TRUE(
      contains(ran.err, "dexcli: the server refused the admin credential in " + token_.string()))
      << ran.err;
  EXPECT_EQ(server_.admin.events(), (Events{"describe"}));

  server_.admin.fail_describe(grpc::Status::OK);
  server_.admin.fail_step_down(
      error(grpc::StatusCode::UNAUTHENTICATED, "this call needs an admin credential"));
  ran = dexcli({"--server", server_.address(), "admin", "step-down", "--yes", "--expected-node-id",
                "node-a", "--expected-node-epoch", "7"});
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_TRUE(contains(ran.err,
                       "dexcli: this server needs an admin credential: give "
                       "--credential-file FILE"))
      << ran.err;
  EXPECT_EQ(server_.admin.authorizations().back(), "");
}

TEST_F(DexcliStepDownTest, SeveralServersSendTheStepDownToTheActiveOneOnly) {
  AdminServer standby;
  standby.set_ready(false);
  standby.admin.fail_describe(error(grpc::StatusCode::UNAVAILABLE, "this process is a standby"));
  standby.admin.fail_step_down(error(grpc::StatusCode::UNAVAILABLE, "this process is a standby"));
  server_.set_ready(true);
  const std::string both = standby.address() + "," + server_.address();
  // Both expectations: no describe; the readiness hint finds the active one.
  Ran ran = dexcli({"--server", both, "admin", "step-down", "--yes", "--expected-node-id", "node-a",
                    "--expected-node-epoch", "7"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  // Without: describe finds it, and the step down follows.
  ran = dexcli({"--server", both, "admin", "step-down", "--yes"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(server_.admin.events(), (Events{"step-down", "describe", "step-down"}));
  EXPECT_TRUE(standby.admin.step_downs().empty());
}

TEST_F(DexcliStepDownTest, HelpExplainsTheCommandAndEveryFlag) {
  Ran ran = dexcli({"admin", "step-down", "--help"});
  ASSERT_EQ(ran.exit_code, 0);
  for (const char* part :
       {"--yes", "--expected-node-id", "--expected-node-epoch", "--credential-file", "default 2m",
        "single replica", "FAILED_PRECONDITION", "outcome is unknown",
        "leaseHolderAfterStepDown"}) {
    EXPECT_TRUE(contains(ran.out, part)) << part << "\n" << ran.out;
  }
  ran = dexcli({"admin", "--help"});
  ASSERT_EQ(ran.exit_code, 0);
  EXPECT_TRUE(contains(ran.out, "step-down")) << ran.out;
  EXPECT_TRUE(contains(ran.out, "describe")) << ran.out;
}

}  // namespace
}  // namespace dex
