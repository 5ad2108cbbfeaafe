// Tests of the gRPC layer alone, with a fake Engine: role handling (UNAVAILABLE
// and NOT_SERVING while not active), health names, status mapping of
// dex.FlowService calls, the Worker stream's framing and acknowledgements, and
// request size limits.
#include "api/api_server.h"
#include "fake_engine.h"
#include "node/role_board.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <thread>

#include "dex/api.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace dex {
namespace {

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ApiServerOptions options;
    options.listen = "127.0.0.1:0";
    options.message_bytes_max = 64 * 1024;
    auto server = ApiServer::start(options, role_);
    ASSERT_TRUE(server.is_ok()) << server.status().to_string();
    server_ = std::move(server).value();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    flows_ = FlowService::NewStub(channel_);
  }
  void activate() {
    role_.set_active(&engine_, {"node-a", Epoch(7), "host-1-abc"});
    applied();
  }
  // The API applies each role change on its watcher thread.
  void applied() { ASSERT_TRUE(server_->wait_role_applied(seconds(5))); }
  std::unique_ptr<grpc::ClientContext> context() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return c;
  }
  grpc::health::v1::HealthCheckResponse::ServingStatus health(const std::string& name) {
    auto stub = grpc::health::v1::Health::NewStub(channel_);
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    auto c = context();
    grpc::Status s = stub->Check(c.get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.status();
  }

  FakeEngine engine_;
  RoleBoard role_;
  std::unique_ptr<ApiServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<FlowService::Stub> flows_;
};

TEST_F(ApiServerTest, InactiveProcessAnswersUnavailableAndNotServing) {
  flow::StartFlowRequest request;
  request.set_flow_type("Order");
  flow::StartFlowResponse response;
  auto c = context();
  grpc::Status s = flows_->StartFlow(c.get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("starting"), std::string::npos) << s.error_message();
  for (const char* name : {"", "dex.FlowService", "dex.WorkerTaskService", "dex.HotStandby"}) {
    EXPECT_EQ(health(name), grpc::health::v1::HealthCheckResponse::NOT_SERVING) << name;
  }
}

// Spec (Health and probes): a standby is NOT_SERVING for the readiness names;
// dex.HotStandby is SERVING only on a hot standby that follows.
TEST_F(ApiServerTest, HotStandbyIsServingOnlyWhileAStandbyFollows) {
  using HS = grpc::health::v1::HealthCheckResponse;
  role_.set_standby("this process is a hot standby", /*hot=*/true);
  applied();
  EXPECT_EQ(health("dex.HotStandby"), HS::SERVING);
  for (const char* name : {"", "dex.FlowService", "dex.WorkerTaskService"}) {
    EXPECT_EQ(health(name), HS::NOT_SERVING) << name;
  }
  role_.set_hot_standby(false);  // behind, restarting, bootstrapping: not hot
  applied();
  EXPECT_EQ(health("dex.HotStandby"), HS::NOT_SERVING);
  role_.set_hot_standby(true);
  applied();
  EXPECT_EQ(health("dex.HotStandby"), HS::SERVING);
  // Taking over: the active process is never a hot standby.
  role_.set_active(&engine_, {"node-a", Epoch(8), "host-1-abc"});
  applied();
  channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                 grpc::InsecureChannelCredentials());
  EXPECT_EQ(health("dex.HotStandby"), HS::NOT_SERVING);
  EXPECT_EQ(health(""), HS::SERVING);
  role_.set_hot_standby(true);  // ignored while active
  applied();
  EXPECT_EQ(health("dex.HotStandby"), HS::NOT_SERVING);
  // Back to a cold standby.
  role_.set_standby("this process is a cold standby", /*hot=*/false);
  applied();
  EXPECT_EQ(health("dex.HotStandby"), HS::NOT_SERVING);
  EXPECT_EQ(health(""), HS::NOT_SERVING);
}

// How long a client connection lives: the time until an open health Watch
// stream ends (bounded by `max`).
Duration watch_lifetime(const std::shared_ptr<grpc::Channel>& channel, Duration max) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + max);
  grpc::health::v1::HealthCheckRequest request;
  auto start = SystemClock::instance().now();
  auto reader = stub->Watch(&c, request);
  grpc::health::v1::HealthCheckResponse response;
  while (reader->Read(&response)) {
  }
  (void)reader->Finish();
  return SystemClock::instance().now() - start;
}

// Spec: "A standby closes each client connection after about 3 seconds. A
// client that reached it ... then reconnects and reaches the active process."
TEST_F(ApiServerTest, AStandbyClosesEachConnectionAfterAboutThreeSecondsAndTheActiveDoesNot) {
  const Duration on_standby = watch_lifetime(channel_, seconds(10));
  EXPECT_GE(on_standby, milliseconds(2500));
  EXPECT_LE(on_standby, milliseconds(6000));
  activate();
  channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                 grpc::InsecureChannelCredentials());
  const Duration on_active = watch_lifetime(channel_, seconds(6));
  EXPECT_GE(on_active, milliseconds(5900)) << "the active process closed a connection";
}

// Spec (admin credentials): Describe and StepDown need a credential when one
// is configured; a server without AdminService answers UNIMPLEMENTED.
TEST(ApiServerAdmin, CredentialsAreCheckedAndTheServiceCanBeDisabled) {
  FakeEngine engine;
  const std::string token = "s3cret-admin-token";
  // sha256("s3cret-admin-token"), as `auth.adminTokenSha256` would name it.
  unsigned char digest[32];
  unsigned int n = 0;
  EVP_Digest(token.data(), token.size(), digest, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", digest[i]);
  ApiServerOptions options;
  options.listen = "127.0.0.1:0";
  options.admin_token_sha256 = {std::string(64, '0'), hex};
  RoleBoard role;
  auto server = ApiServer::start(options, role);
  ASSERT_TRUE(server.is_ok());
  role.set_active(&engine, {"node-a", Epoch(7), "host-1-abc"});
  ASSERT_TRUE(server.value()->wait_role_applied(seconds(5)));
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server.value()->port()),
                                     grpc::InsecureChannelCredentials());
  auto admin = AdminService::NewStub(channel);
  auto describe = [&](const std::string& authorization) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) c.AddMetadata("authorization", authorization);
    DescribeResponse r;
    return admin->Describe(&c, DescribeRequest(), &r);
  };
  EXPECT_EQ(describe("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(describe("Bearer wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(describe(token).error_code(), grpc::StatusCode::UNAUTHENTICATED);  // no "Bearer "
  grpc::Status refused = describe("Bearer wrong");
  EXPECT_EQ(refused.error_message().find("wrong"), std::string::npos) << "the token was echoed";
  EXPECT_TRUE(describe("Bearer " + token).ok());
  {
    grpc::ClientContext c;
    StepDownResponse r;
    EXPECT_EQ(admin->StepDown(&c, StepDownRequest(), &r).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  // While a step down or its hold-off is in progress, Describe is FAILED_PRECONDITION.
  role.set_describe_refused(true);
  ASSERT_TRUE(server.value()->wait_role_applied(seconds(5)));
  EXPECT_EQ(describe("Bearer " + token).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  role.set_describe_refused(false);
  EXPECT_TRUE(describe("Bearer " + token).ok());

  ApiServerOptions disabled;
  disabled.listen = "127.0.0.1:0";
  disabled.admin_enabled = false;
  RoleBoard off_role;
  auto off = ApiServer::start(disabled, off_role);
  ASSERT_TRUE(off.is_ok());
  off_role.set_active(&engine, {"node-a", Epoch(7), "host-1-abc"});
  ASSERT_TRUE(off.value()->wait_role_applied(seconds(5)));
  auto off_admin = AdminService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(off.value()->port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext c;
  DescribeResponse r;
  EXPECT_EQ(off_admin->Describe(&c, DescribeRequest(), &r).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ApiServerTest, ActiveProcessServesAndReportsReadiness) {
  activate();
  for (const char* name : {"", "dex.FlowService", "dex.WorkerTaskService"}) {
    EXPECT_EQ(health(name), grpc::health::v1::HealthCheckResponse::SERVING) << name;
  }
  EXPECT_EQ(health("dex.HotStandby"), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  flow::StartFlowRequest request;
  request.set_flow_type("Order");
  request.set_flow_id("f1");
  flow::StartFlowResponse response;
  auto c = context();
  ASSERT_TRUE(flows_->StartFlow(c.get(), request, &response).ok());
  EXPECT_EQ(response.run_id(), "run-of-f1");
}

TEST_F(ApiServerTest, LostRoleAnswersUnavailableAtOnceNamingWhy) {
  activate();
  role_.set_inactive("the lease of node node-a was lost");
  applied();
  flow::FlowRef request;
  request.set_flow_id("f1");
  flow::FlowDescription response;
  auto c = context();
  grpc::Status s = flows_->DescribeFlow(c.get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("lease"), std::string::npos);
  EXPECT_EQ(health(""), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

TEST_F(ApiServerTest, LeaseThatIsNoLongerValidRefusesCallsAtOnceBeforeTheEngine) {
  // A process resumed after a freeze longer than its lease: its lease keeper
  // has not noticed yet, but the lease period has ended by its own clock.
  std::atomic<bool> valid{true};
  role_.set_active(&engine_, {"node-a", Epoch(7), "host-1-abc"}, [&] { return valid.load(); });
  applied();
  flow::StartFlowRequest request;
  request.set_flow_type("Order");
  flow::StartFlowResponse response;
  auto c1 = context();
  ASSERT_TRUE(flows_->StartFlow(c1.get(), request, &response).ok());
  valid = false;
  auto c2 = context();
  grpc::Status s = flows_->StartFlow(c2.get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("no longer valid"), std::string::npos) << s.error_message();
  applied();
  for (const char* name : {"", "dex.FlowService", "dex.WorkerTaskService"}) {
    EXPECT_EQ(health(name), grpc::health::v1::HealthCheckResponse::NOT_SERVING) << name;
  }
  auto admin = AdminService::NewStub(channel_);
  DescribeResponse described;
  auto c3 = context();
  EXPECT_EQ(admin->Describe(c3.get(), DescribeRequest(), &described).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ApiServerTest, EngineErrorsMapToGrpcCodesWithTheirMessage) {
  activate();
  flow::PublishToChannelRequest publish;
  publish.set_flow_id("f");
  publish.set_channel("nope");
  flow::PublishToChannelResponse published;
  auto c1 = context();
  grpc::Status s = flows_->PublishToChannel(c1.get(), publish, &published);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Channel 'nope' is not declared");
  flow::FlowRef ref;
  ref.set_flow_id("ghost");
  flow::GetFlowStateResponse state;
  auto c2 = context();
  s = flows_->GetFlowState(c2.get(), ref, &state);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "no Flow 'ghost'");
  flow::FlowDescription description;
  auto c3 = context();
  EXPECT_EQ(flows_->DescribeFlow(c3.get(), ref, &description).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  flow::StopFlowRequest stop;
  flow::StopFlowResponse stopped;
  auto c4 = context();
  EXPECT_EQ(flows_->StopFlow(c4.get(), stop, &stopped).error_code(), grpc::StatusCode::INTERNAL);
  flow::SkipTimerRequest skip;
  flow::SkipTimerResponse skipped;
  auto c5 = context();
  EXPECT_EQ(flows_->SkipTimer(c5.get(), skip, &skipped).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  flow::TimeTravelRequest travel;
  travel.mutable_flow()->set_run_id("r-1");
  flow::TimeTravelResponse traveled;
  auto c7 = context();
  const grpc::Status t = flows_->TimeTravel(c7.get(), travel, &traveled);
  EXPECT_EQ(t.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(t.error_message(), "run 'r-1' is not the latest run");
  flow::StartFlowRequest start;
  start.set_flow_id("taken");
  flow::StartFlowResponse started;
  auto c6 = context();
  EXPECT_EQ(flows_->StartFlow(c6.get(), start, &started).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(ApiServerTest, OversizedRequestIsRefusedNamingTheSizes) {
  activate();
  flow::StartFlowRequest request;
  request.set_flow_type("Order");
  request.mutable_input()->set_data(std::string(100 * 1024, 'x'));
  flow::StartFlowResponse response;
  auto c = context();
  grpc::Status s = flows_->StartFlow(c.get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("larger than max"), std::string::npos) << s.error_message();
}

TEST_F(ApiServerTest, WaitForFlowHonoursItsTimeoutAndLongPollsRefuseANegativeOne) {
  activate();
  flow::WaitForFlowRequest request;
  request.mutable_flow()->set_flow_id("f");
  request.set_timeout_ms(200);
  flow::WaitForFlowResponse response;
  auto c = context();
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(flows_->WaitForFlow(c.get(), request, &response).ok());
  EXPECT_FALSE(response.closed());
  EXPECT_EQ(response.flow().flow_id(), "f");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  request.set_timeout_ms(-1);
  auto c2 = context();
  grpc::Status s = flows_->WaitForFlow(c2.get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("timeoutMs"), std::string::npos) << s.error_message();
  flow::WaitForHistoryEventRequest history;
  history.set_timeout_ms(-1);
  flow::GetHistoryEventsResponse events;
  auto c3 = context();
  EXPECT_EQ(flows_->WaitForHistoryEvent(c3.get(), history, &events).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  flow::WaitForStepCompletionRequest step;
  step.set_timeout_ms(-1);
  flow::WaitForStepCompletionResponse completed;
  auto c4 = context();
  EXPECT_EQ(flows_->WaitForStepCompletion(c4.get(), step, &completed).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// StartFlow with wait_timeout_ms starts, then waits on the run it started
// (the fake's wait sleeps to its timeout: not closed) in the same call.
TEST_F(ApiServerTest, StartFlowWaitsForTheRunItStartedAndRefusesANegativeWait) {
  activate();
  flow::StartFlowRequest request;
  request.set_flow_id("f");
  request.set_wait_timeout_ms(200);
  flow::StartFlowResponse response;
  auto c = context();
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(flows_->StartFlow(c.get(), request, &response).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
  EXPECT_EQ(response.run_id(), "run-of-f");
  EXPECT_FALSE(response.closed());
  EXPECT_EQ(response.flow().flow_id(), "f");
  EXPECT_EQ(response.flow().run_id(), "run-of-f") << "the wait was not on the run started";
  // 0: no wait, as before.
  request.set_wait_timeout_ms(0);
  flow::StartFlowResponse plain;
  auto c2 = context();
  ASSERT_TRUE(flows_->StartFlow(c2.get(), request, &plain).ok());
  EXPECT_EQ(plain.run_id(), "run-of-f");
  EXPECT_FALSE(plain.has_flow());
  // A refused start does not wait; a negative wait is refused before the start.
  request.set_flow_id("taken");
  request.set_wait_timeout_ms(60'000);
  auto c3 = context();
  EXPECT_EQ(flows_->StartFlow(c3.get(), request, &plain).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  request.set_flow_id("f");
  request.set_wait_timeout_ms(-5);
  auto c4 = context();
  grpc::Status s = flows_->StartFlow(c4.get(), request, &plain);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("waitTimeoutMs"), std::string::npos) << s.error_message();
}

TEST_F(ApiServerTest, DescribeNamesTheNodeWithEpochAsDecimalString) {
  activate();
  auto admin = AdminService::NewStub(channel_);
  DescribeResponse response;
  auto c = context();
  ASSERT_TRUE(admin->Describe(c.get(), DescribeRequest(), &response).ok());
  EXPECT_EQ(response.node_id(), "node-a");
  EXPECT_EQ(response.node_epoch(), "7");
  EXPECT_EQ(response.holder_process_id(), "host-1-abc");
}

TEST_F(ApiServerTest, WorkerStreamNeedsHelloFirst) {
  activate();
  auto workers = WorkerTaskService::NewStub(channel_);
  auto c = context();
  auto stream = workers->PollWorkerTask(c.get());
  WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat()->set_task_id("x");
  ASSERT_TRUE(stream->Write(heartbeat));
  stream->WritesDone();
  ServerMessage reply;
  EXPECT_FALSE(stream->Read(&reply));
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("WorkerHello"), std::string::npos);
}

TEST_F(ApiServerTest, WorkerStreamCarriesTasksHeartbeatsAndAcks) {
  activate();
  auto workers = WorkerTaskService::NewStub(channel_);
  auto c = context();
  auto stream = workers->PollWorkerTask(c.get());
  WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w1");
  hello.mutable_hello()->add_flows()->set_flow_type("Order");
  ASSERT_TRUE(stream->Write(hello));
  ServerMessage reply;
  ASSERT_TRUE(stream->Read(&reply));
  ASSERT_TRUE(reply.has_hello_ack());
  EXPECT_EQ(reply.hello_ack().node_epoch(), "7");
  // The HelloAck goes out before the stream is handed to the engine (so that it
  // precedes every task): wait, bounded, for the engine to see the Worker.
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(engine_.mu);
      if (engine_.sink) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard<std::mutex> lock(engine_.mu);
    ASSERT_TRUE(engine_.sink != nullptr);
    EXPECT_EQ(engine_.last_hello.worker_id(), "w1");
    ASSERT_EQ(engine_.last_hello.flows_size(), 1);
    EXPECT_EQ(engine_.last_hello.flows(0).flow_type(), "Order");
    flow::FlowTask task;
    task.set_task_id("t1");
    task.set_step_execution_id("Start-1");
    ASSERT_TRUE(engine_.sink->send_task(task));
    ASSERT_TRUE(engine_.sink->send_ping());
  }
  ASSERT_TRUE(stream->Read(&reply));
  ASSERT_TRUE(reply.has_flow_task());
  EXPECT_EQ(reply.flow_task().task_id(), "t1");
  EXPECT_EQ(reply.flow_task().step_execution_id(), "Start-1");
  ASSERT_TRUE(stream->Read(&reply));
  EXPECT_TRUE(reply.has_ping());

  WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat()->set_task_id("cancel-me");
  ASSERT_TRUE(stream->Write(heartbeat));
  ASSERT_TRUE(stream->Read(&reply));
  ASSERT_TRUE(reply.has_heartbeat_ack());
  EXPECT_TRUE(reply.heartbeat_ack().cancel_requested());

  // Results are acknowledged in order; one the engine could not make durable
  // gets no ack at all, so the Worker keeps it.
  for (const char* id : {"engine-stopped", "t1", "stale"}) {
    WorkerMessage result;
    result.mutable_flow_result()->set_task_id(id);
    result.mutable_flow_result()->mutable_decision()->mutable_graceful_complete()->set_data("ok");
    ASSERT_TRUE(stream->Write(result));
  }
  ASSERT_TRUE(stream->Read(&reply));
  ASSERT_TRUE(reply.has_result_ack());
  EXPECT_EQ(reply.result_ack().task_id(), "t1");
  EXPECT_TRUE(reply.result_ack().accepted());
  ASSERT_TRUE(stream->Read(&reply));
  EXPECT_EQ(reply.result_ack().task_id(), "stale");
  EXPECT_FALSE(reply.result_ack().accepted());
  stream->WritesDone();
  while (stream->Read(&reply)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
  std::lock_guard<std::mutex> lock(engine_.mu);
  EXPECT_EQ(engine_.disconnected, 7u);
}

// A step down deletes the engine after its release: every call that got the
// engine before it (here a Worker stream and a WaitForFlow) must be done with it.
TEST_F(ApiServerTest, TheEngineCountsAsUsedUntilEveryCallThatGotItIsDone) {
  activate();
  EXPECT_TRUE(role_.wait_engine_unused(std::chrono::milliseconds(0)));
  auto workers = WorkerTaskService::NewStub(channel_);
  auto c = context();
  auto stream = workers->PollWorkerTask(c.get());
  WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w1");
  hello.mutable_hello()->add_flows()->set_flow_type("Order");
  ASSERT_TRUE(stream->Write(hello));
  ServerMessage reply;
  ASSERT_TRUE(stream->Read(&reply));
  ASSERT_TRUE(reply.has_hello_ack());
  std::thread waiter([&] {
    flow::WaitForFlowRequest request;
    request.mutable_flow()->set_flow_id("f");
    request.set_timeout_ms(1500);
    flow::WaitForFlowResponse response;
    auto wc = context();
    EXPECT_TRUE(flows_->WaitForFlow(wc.get(), request, &response).ok());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  role_.set_inactive("stepped down");
  // The stream and the wait still hold the engine.
  EXPECT_FALSE(role_.wait_engine_unused(std::chrono::milliseconds(200)));
  role_.end_worker_streams();
  while (stream->Read(&reply)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The WaitForFlow (the fake sleeps to its deadline) is the last user.
  EXPECT_TRUE(role_.wait_engine_unused(std::chrono::seconds(10)));
  waiter.join();
  std::lock_guard<std::mutex> lock(engine_.mu);
  EXPECT_EQ(engine_.disconnected, 7u);  // the stream's cleanup ran before the release
}

TEST_F(ApiServerTest, ListenErrorNamesTheAddress) {
  ApiServerOptions options;
  options.listen = "127.0.0.1:" + std::to_string(server_->port());
  RoleBoard role;
  auto second = ApiServer::start(options, role);
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find(options.listen), std::string::npos);
}

// Query completion's calls (docs/search.md, "Completing a query") go to the
// engine on the active process, refused UNAVAILABLE before it on a standby,
// with the engine's INVALID_ARGUMENT message as it is.
TEST_F(ApiServerTest, SearchCompletionCallsServeOnTheActiveProcessOnly) {
  flow::ListSearchKeysResponse keys;
  auto c1 = context();
  EXPECT_EQ(flows_->ListSearchKeys(c1.get(), flow::ListSearchKeysRequest(), &keys).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  flow::ListSearchValuesRequest values_request;
  values_request.set_key("customer");
  values_request.set_prefix("ac");
  flow::ListSearchValuesResponse values;
  auto c2 = context();
  EXPECT_EQ(flows_->ListSearchValues(c2.get(), values_request, &values).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  activate();
  auto c3 = context();
  ASSERT_TRUE(flows_->ListSearchKeys(c3.get(), flow::ListSearchKeysRequest(), &keys).ok());
  ASSERT_EQ(keys.keys_size(), 1);
  EXPECT_EQ(keys.keys(0).name(), "customer");
  EXPECT_EQ(keys.keys(0).flow_types(0), "Order");
  EXPECT_EQ(keys.applied_slot(), 7u);
  auto c4 = context();
  ASSERT_TRUE(flows_->ListSearchValues(c4.get(), values_request, &values).ok());
  EXPECT_EQ(values.values(0), "acme");
  values_request.set_key("total");
  auto c5 = context();
  const grpc::Status s = flows_->ListSearchValues(c5.get(), values_request, &values);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "key 'total' is DOUBLE");
}

}  // namespace
}  // namespace dex
