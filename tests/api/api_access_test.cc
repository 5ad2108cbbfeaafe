// Access on the API (docs/api.md, "Access"): a table-driven test over every
// method of dex.FlowService, dex.WorkerTaskService and dex.AdminService
// (found in the services' descriptors, so a new method is covered the day it
// is added) for each role, with the expectations written out here rather than
// read from the table under test; the admin keys alone keeping their old
// meaning; a token file rotated on disk taking effect without a restart; and
// what Describe reports of access (never a token or a digest).
#include "api/api_server.h"
#include "auth/token_store.h"
#include "common/digest.h"
#include "fake_engine.h"
#include "node/role_board.h"
#include "sdk/client.h"
#include "sdk/worker.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>

#include "dex/api.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace dex {
namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;

// What this test expects, independently of src/auth's table: the FlowService
// calls a viewer may make (the rest of FlowService changes a Flow).
const std::set<std::string> kViewerReads = {
    "WaitForFlow",         "DescribeFlow",          "GetFlowState",    "GetHistoryEvents",
    "WaitForHistoryEvent", "WaitForStepCompletion", "GetAttributes",   "WaitForAttribute",
    "SearchFlows",         "ListSearchKeys",        "ListSearchValues"};

enum class Who { kNobody, kWrongToken, kViewer, kClient, kWorker, kAdmin };

const char* name_of(Who who) {
  switch (who) {
    case Who::kNobody:
      return "no credential";
    case Who::kWrongToken:
      return "a wrong token";
    case Who::kViewer:
      return "viewer";
    case Who::kClient:
      return "client";
    case Who::kWorker:
      return "worker";
    case Who::kAdmin:
      return "admin";
  }
  return "?";
}

std::string token_of(Who who) {
  switch (who) {
    case Who::kNobody:
      return "";
    case Who::kWrongToken:
      return "not-a-configured-token";
    default:
      return std::string(name_of(who)) + "-secret-token";
  }
}

// Allowed, or the code of the refusal.
std::optional<grpc::StatusCode> expected(Who who, const std::string& service,
                                         const std::string& method) {
  if (who == Who::kNobody || who == Who::kWrongToken) return grpc::StatusCode::UNAUTHENTICATED;
  bool allowed = false;
  if (who == Who::kAdmin) allowed = true;
  if (service == "dex.FlowService") {
    allowed |= who == Who::kClient || (who == Who::kViewer && kViewerReads.contains(method));
  }
  if (service == "dex.WorkerTaskService") allowed |= who == Who::kWorker;
  if (allowed) return std::nullopt;
  return grpc::StatusCode::PERMISSION_DENIED;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/dex-api-access-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path tmp = path_ / (name + ".tmp");
    std::ofstream(tmp) << text;
    fs::rename(tmp, path_ / name);  // as a Secret update swaps the file
    return (path_ / name).string();
  }

 private:
  fs::path path_;
};

class ApiAccessTest : public ::testing::Test {
 protected:
  // Every role's token: the client's from a file (rotated below), the others
  // as digests.
  void start(bool every_call) {
    auth::AccessSettings settings;
    settings.every_call_needs_credential = every_call;
    client_file_ = dir_.write("client-token", token_of(Who::kClient) + "\n");
    settings.files.push_back({auth::Role::kClient, client_file_, "auth.tokens.client.files"});
    for (auto [who, role] : {std::pair{Who::kViewer, auth::Role::kViewer},
                             std::pair{Who::kWorker, auth::Role::kWorker},
                             std::pair{Who::kAdmin, auth::Role::kAdmin}}) {
      settings.digests.push_back({role, sha256_hex(token_of(who)), "auth.tokens.x.sha256"});
    }
    auto store = auth::TokenStore::open(settings);
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = store.value();
    ApiServerOptions options;
    options.listen = "127.0.0.1:0";
    options.access = store_;
    auto server = ApiServer::start(options, role_);
    ASSERT_TRUE(server.is_ok()) << server.status().to_string();
    server_ = std::move(server).value();
    role_.set_active(&engine_, {"node-a", Epoch(7), "host-1-abc"});
    ASSERT_TRUE(server_->wait_role_applied(seconds(5)));
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  // One unary call with an empty request (a valid message of every type).
  grpc::Status unary(const std::string& service, const std::string& method,
                     const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    grpc::GenericStub stub(channel_);
    grpc::Slice empty("");
    request = grpc::ByteBuffer(&empty, 1);
    stub.UnaryCall(&context, "/" + service + "/" + method, grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }

  // Opens a Worker stream, sends the hello and reads the first answer.
  grpc::Status worker_stream(const std::string& token, bool* acked) {
    auto stub = WorkerTaskService::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    auto stream = stub->PollWorkerTask(&context);
    WorkerMessage hello;
    hello.mutable_hello()->set_worker_id("w-1");
    stream->Write(hello);
    ServerMessage first;
    *acked = stream->Read(&first) && first.has_hello_ack();
    stream->WritesDone();
    while (stream->Read(&first)) {
    }
    return stream->Finish();
  }

  TempDir dir_;
  std::string client_file_;
  FakeEngine engine_;
  RoleBoard role_;
  std::shared_ptr<auth::TokenStore> store_;
  std::unique_ptr<ApiServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ApiAccessTest, EveryCallOfEveryServiceForEachRole) {
  start(/*every_call=*/true);
  size_t checked = 0;
  for (const char* service_name :
       {"dex.FlowService", "dex.WorkerTaskService", "dex.AdminService"}) {
    const pb::ServiceDescriptor* service =
        pb::DescriptorPool::generated_pool()->FindServiceByName(service_name);
    ASSERT_NE(service, nullptr) << service_name;
    for (int i = 0; i < service->method_count(); ++i) {
      const pb::MethodDescriptor* method = service->method(i);
      for (Who who : {Who::kNobody, Who::kWrongToken, Who::kViewer, Who::kClient, Who::kWorker,
                      Who::kAdmin}) {
        const auto want = expected(who, service_name, method->name());
        const std::string what =
            std::string(service_name) + "/" + method->name() + " by " + name_of(who);
        grpc::Status got;
        bool acked = false;
        if (method->client_streaming()) {
          got = worker_stream(token_of(who), &acked);
          EXPECT_EQ(acked, !want.has_value()) << what << ": the HelloAck";
        } else {
          got = unary(service_name, method->name(), token_of(who));
        }
        if (want) {
          EXPECT_EQ(got.error_code(), *want) << what << ": " << got.error_message();
        } else {
          EXPECT_NE(got.error_code(), grpc::StatusCode::UNAUTHENTICATED)
              << what << ": " << got.error_message();
          EXPECT_NE(got.error_code(), grpc::StatusCode::PERMISSION_DENIED)
              << what << ": " << got.error_message();
        }
        // No answer ever carries a token.
        for (Who any : {Who::kWrongToken, Who::kViewer, Who::kClient, Who::kWorker, Who::kAdmin}) {
          EXPECT_EQ(got.error_message().find(token_of(any)), std::string::npos) << what;
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 23u * 6u);
}

TEST_F(ApiAccessTest, RefusalsSayWhatIsNeededAndWhatIsHeld) {
  start(/*every_call=*/true);
  grpc::Status none = unary("dex.FlowService", "StartFlow", "");
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(none.error_message(),
            "this call needs a credential (authorization: Bearer <token>): "
            "dex.FlowService/StartFlow needs the client role (or admin)");
  grpc::Status viewer = unary("dex.FlowService", "PublishToChannel", token_of(Who::kViewer));
  EXPECT_EQ(viewer.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(viewer.error_message(),
            "dex.FlowService/PublishToChannel needs the client role (or admin); this caller "
            "holds viewer");
  grpc::Status client = unary("dex.AdminService", "StepDown", token_of(Who::kClient));
  EXPECT_EQ(client.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(client.error_message(),
            "dex.AdminService/StepDown needs the admin role; this caller holds client");
  bool acked = true;
  grpc::Status worker = worker_stream(token_of(Who::kClient), &acked);
  EXPECT_FALSE(acked);
  EXPECT_EQ(worker.error_code(), grpc::StatusCode::PERMISSION_DENIED) << worker.error_message();
  EXPECT_NE(worker.error_message().find("needs the worker role (or admin)"), std::string::npos)
      << worker.error_message();
  // The Worker saw the refusal's reason, and the engine never saw the Worker.
  std::lock_guard<std::mutex> lock(engine_.mu);
  EXPECT_EQ(engine_.sink, nullptr);
}

TEST_F(ApiAccessTest, HealthChecksStayOpen) {
  start(/*every_call=*/true);
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = health->Check(&context, request, &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(ApiAccessTest, TheAdminKeysAloneGuardAdminServiceOnly) {
  start(/*every_call=*/false);
  EXPECT_TRUE(unary("dex.FlowService", "StartFlow", "").ok());
  EXPECT_EQ(unary("dex.AdminService", "Describe", "").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(unary("dex.AdminService", "Describe", token_of(Who::kViewer)).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(unary("dex.AdminService", "Describe", token_of(Who::kAdmin)).ok());
  bool acked = false;
  EXPECT_TRUE(worker_stream("", &acked).ok());
  EXPECT_TRUE(acked);
  // A wrong token is refused even where no token is needed.
  EXPECT_EQ(unary("dex.FlowService", "GetFlowState", token_of(Who::kWrongToken)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(ApiAccessTest, ATokenFileRotatedOnDiskIsUsedWithoutARestart) {
  start(/*every_call=*/true);
  store_->watch(milliseconds(20));
  const std::string old_token = token_of(Who::kClient);
  EXPECT_NE(unary("dex.FlowService", "StartFlow", old_token).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  dir_.write("client-token", "rotated-client-token\n");
  grpc::Status s;
  for (int i = 0; i < 500; ++i) {
    s = unary("dex.FlowService", "StartFlow", "rotated-client-token");
    if (s.error_code() != grpc::StatusCode::UNAUTHENTICATED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(unary("dex.FlowService", "StartFlow", old_token).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // A bad new version (emptied) keeps the tokens read before.
  dir_.write("client-token", "\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(unary("dex.FlowService", "StartFlow", "rotated-client-token").ok());
}

TEST_F(ApiAccessTest, DescribeReportsAccessPerRoleWithoutSecrets) {
  start(/*every_call=*/true);
  auto admin = AdminService::NewStub(channel_);
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + token_of(Who::kAdmin));
  DescribeResponse response;
  grpc::Status s = admin->Describe(&context, DescribeRequest(), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.access_mode(), "every-call");
  ASSERT_EQ(response.access_roles_size(), 4);
  for (const AccessRoleStatus& r : response.access_roles()) {
    EXPECT_EQ(r.tokens_accepted(), 1u) << r.role();
    if (r.role() == "client") {
      ASSERT_EQ(r.token_files_size(), 1);
      EXPECT_EQ(r.token_files(0), client_file_);
      EXPECT_EQ(r.token_digests(), 0u);
    } else {
      EXPECT_EQ(r.token_digests(), 1u) << r.role();
    }
  }
  const std::string bytes = response.SerializeAsString();
  for (Who who : {Who::kViewer, Who::kClient, Who::kWorker, Who::kAdmin}) {
    EXPECT_EQ(bytes.find(token_of(who)), std::string::npos);
    EXPECT_EQ(bytes.find(sha256_hex(token_of(who))), std::string::npos);
  }
}

// A Flow for the Worker's hello: one Step that completes the run.
class Done final : public Flow {
  class DoneStep final : public Step {
   public:
    std::string type() const override { return "Done"; }
    StepDecision execute(Context& ctx) override {
      return StepDecision::graceful_complete(ctx.input());
    }
  };

 public:
  std::string type() const override { return "Done"; }
  std::string start_step() const override { return "Done"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<DoneStep>()};
  }
};

TEST_F(ApiAccessTest, TheSdkClientSendsItsTokenFromOptionsAFileOrTheEnvironment) {
  start(/*every_call=*/true);
  ClientOptions options;
  options.server_address = "127.0.0.1:" + std::to_string(server_->port());
  options.timeout = seconds(5);
  ::unsetenv("DEX_TOKEN");
  ::unsetenv("DEX_TOKEN_FILE");
  {
    Client none(options);
    auto r = none.start("Order", "f-1", nlohmann::json::object());
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("UNAUTHENTICATED"), std::string::npos)
        << r.status().message();
  }
  {
    ClientOptions with = options;
    with.token = token_of(Who::kClient);
    EXPECT_TRUE(Client(with).start("Order", "f-1", nlohmann::json::object()).is_ok());
    // The viewer's token reads but cannot start; admin calls use admin_credential.
    with.token = token_of(Who::kViewer);
    Client viewer(with);
    auto refused = viewer.start("Order", "f-2", nlohmann::json::object());
    ASSERT_FALSE(refused.is_ok());
    EXPECT_NE(refused.status().message().find("PERMISSION_DENIED"), std::string::npos)
        << refused.status().message();
    EXPECT_FALSE(viewer.describe().is_ok());
    with.admin_credential = token_of(Who::kAdmin);
    EXPECT_TRUE(Client(with).describe().is_ok());
  }
  {
    // A token file, read again when it changes (the Client looks at most once a second).
    ClientOptions with = options;
    with.token_file = dir_.write("my-token", token_of(Who::kViewer) + "\n");
    Client client(with);
    EXPECT_FALSE(client.start("Order", "f-3", nlohmann::json::object()).is_ok());
    dir_.write("my-token", token_of(Who::kClient) + "\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    EXPECT_TRUE(client.start("Order", "f-3", nlohmann::json::object()).is_ok());
    // A file that cannot be read fails every call, naming it.
    ClientOptions missing = options;
    missing.token_file = "/nonexistent/dex-token";
    auto r = Client(missing).start("Order", "f-4", nlohmann::json::object());
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("/nonexistent/dex-token"), std::string::npos);
  }
  // The environment: $DEX_TOKEN, else $DEX_TOKEN_FILE.
  ::setenv("DEX_TOKEN", token_of(Who::kClient).c_str(), 1);
  EXPECT_TRUE(Client(options).start("Order", "f-5", nlohmann::json::object()).is_ok());
  ::unsetenv("DEX_TOKEN");
  ::setenv("DEX_TOKEN_FILE", dir_.write("env-token", token_of(Who::kClient)).c_str(), 1);
  EXPECT_TRUE(Client(options).start("Order", "f-6", nlohmann::json::object()).is_ok());
  ::unsetenv("DEX_TOKEN_FILE");
}

TEST_F(ApiAccessTest, AStandbyChecksTheCredentialFirstAndTheClientFindsTheActiveProcess) {
  start(/*every_call=*/true);
  // A second process of the node, a standby, with the same tokens.
  RoleBoard standby_role;
  ApiServerOptions options;
  options.listen = "127.0.0.1:0";
  options.access = store_;
  auto standby = ApiServer::start(options, standby_role);
  ASSERT_TRUE(standby.is_ok()) << standby.status().to_string();
  const std::string standby_address = "127.0.0.1:" + std::to_string(standby.value()->port());
  auto channel = grpc::CreateChannel(standby_address, grpc::InsecureChannelCredentials());
  auto flows = FlowService::NewStub(channel);
  auto call = [&](const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    flow::StartFlowResponse response;
    return flows->StartFlow(&context, flow::StartFlowRequest(), &response).error_code();
  };
  // Access first: a caller without a credential learns nothing of the node's roles.
  EXPECT_EQ(call(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call(token_of(Who::kViewer)), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(call(token_of(Who::kClient)), grpc::StatusCode::UNAVAILABLE);
  // The SDK's search moves on from the standby's UNAVAILABLE to the active process.
  ::unsetenv("DEX_TOKEN");
  ::unsetenv("DEX_TOKEN_FILE");
  ClientOptions client_options;
  client_options.server_addresses = {standby_address,
                                     "127.0.0.1:" + std::to_string(server_->port())};
  client_options.timeout = seconds(10);
  client_options.token = token_of(Who::kClient);
  auto started = Client(client_options).start("Order", "f-standby", nlohmann::json::object());
  EXPECT_TRUE(started.is_ok()) << started.status().message();
}

TEST_F(ApiAccessTest, AWorkerWithoutTheWorkerRoleCannotConnect) {
  start(/*every_call=*/true);
  ::unsetenv("DEX_TOKEN");
  ::unsetenv("DEX_TOKEN_FILE");
  auto run_worker = [&](const std::string& token, bool expect_connected) {
    WorkerOptions options;
    options.server_address = "127.0.0.1:" + std::to_string(server_->port());
    options.token = token;
    options.reconnect_backoff_initial = milliseconds(20);
    options.reconnect_backoff_max = milliseconds(100);
    Worker worker(options);
    worker.host(std::make_shared<Done>());
    auto ran = std::async(std::launch::async, [&] { return worker.run(); });
    for (int i = 0; i < 300; ++i) {
      const WorkerStats stats = worker.stats();
      if (expect_connected ? stats.streams_accepted > 0 : stats.streams_refused >= 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const WorkerStats stats = worker.stats();
    worker.shutdown();
    EXPECT_TRUE(ran.get().is_ok());
    return stats;
  };
  for (Who who : {Who::kNobody, Who::kWrongToken, Who::kViewer, Who::kClient}) {
    const WorkerStats stats = run_worker(token_of(who), false);
    EXPECT_EQ(stats.streams_accepted, 0u) << name_of(who);
    EXPECT_GE(stats.streams_refused, 3u) << name_of(who) << ": it keeps trying";
  }
  {
    std::lock_guard<std::mutex> lock(engine_.mu);
    EXPECT_EQ(engine_.sink, nullptr) << "the engine saw a refused Worker";
  }
  for (Who who : {Who::kWorker, Who::kAdmin}) {
    EXPECT_GE(run_worker(token_of(who), true).streams_accepted, 1u) << name_of(who);
  }
}

}  // namespace
}  // namespace dex
