// Frozen processes (src/sdk/README.md, "Frozen processes"): a process that
// accepts TCP connections and answers nothing, like a SIGSTOPped one whose
// kernel still completes handshakes on its listening socket. The readiness
// probe asks every address at once and never waits past its deadline; the
// Worker gives up a silent stream after 3 s, bounds a stream's set-up, and
// skips an address that does not answer while another does.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "fake_server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/health_check_service_interface.h"
#include "sdk/client.h"
#include "sdk/grpc_status.h"
#include "sdk/readiness.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using sdk_internal::Readiness;
using testing::FakeAdminService;
using testing::FakeFlowService;
using testing::FakeServer;
using testing::FakeWorkerTaskService;

// A listening socket that never accepts: the kernel completes TCP handshakes
// into the backlog and nothing ever answers, as with a frozen process.
class FrozenListener {
 public:
  FrozenListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~FrozenListener() { close(fd_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A process whose gRPC health says SERVING or NOT_SERVING for every name (a
// fake FlowService beside it: gRPC serves health only next to a service).
class HealthServer {
 public:
  explicit HealthServer(bool serving) {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&flows_);
    server_ = builder.BuildAndStart();
    server_->GetHealthCheckService()->SetServingStatus(serving);
  }
  ~HealthServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  FakeFlowService flows_;
  std::unique_ptr<grpc::Server> server_;
};

std::shared_ptr<grpc::Channel> channel_to(const std::string& address) {
  return sdk_internal::make_channel(address, milliseconds(100), seconds(1));
}

TEST(SearchOrder, ServingFirstThenAnsweredThenUnreachableAndSilentOnlyWhenNoneAnswered) {
  using R = Readiness;
  EXPECT_EQ(sdk_internal::search_order({R::kNotServing, R::kNoAnswer, R::kServing}, 0),
            (std::vector<size_t>{2, 0}));
  EXPECT_EQ(sdk_internal::search_order({R::kUnreachable, R::kNotServing, R::kAnswered}, 2),
            (std::vector<size_t>{2, 1, 0}));
  // Nobody answered: a bounded attempt on each is all that is left, in rotation order.
  EXPECT_EQ(sdk_internal::search_order({R::kNoAnswer, R::kUnreachable, R::kNoAnswer}, 1),
            (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ(sdk_internal::search_order({R::kNoAnswer, R::kNoAnswer}, 1),
            (std::vector<size_t>{1, 0}));
}

TEST(ProbeReadiness, AsksEveryAddressAtOnceAndEndsAsSoonAsOneServes) {
  FrozenListener frozen1, frozen2;
  HealthServer standby(false), active(true);
  auto start = std::chrono::steady_clock::now();
  auto readiness =
      sdk_internal::probe_readiness({channel_to(frozen1.address()), channel_to(frozen2.address()),
                                     channel_to(standby.address()), channel_to(active.address())},
                                    "", SystemClock::instance().now() + seconds(3));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(readiness[0], Readiness::kNoAnswer);
  EXPECT_EQ(readiness[1], Readiness::kNoAnswer);
  EXPECT_EQ(readiness[3], Readiness::kServing);
  // Not one wait per frozen address, nor the deadline.
  EXPECT_LT(took, std::chrono::milliseconds(1500));
}

TEST(ProbeReadiness, WithNoneServingWaitsOnlyUntilTheDeadline) {
  FrozenListener frozen;
  HealthServer standby(false);
  int closed_port = 0;
  {
    HealthServer gone(true);
    closed_port = std::stoi(gone.address().substr(gone.address().rfind(':') + 1));
  }
  auto start = std::chrono::steady_clock::now();
  auto readiness =
      sdk_internal::probe_readiness({channel_to(frozen.address()), channel_to(standby.address()),
                                     channel_to("127.0.0.1:" + std::to_string(closed_port))},
                                    "", SystemClock::instance().now() + milliseconds(800));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(readiness, (std::vector<Readiness>{Readiness::kNoAnswer, Readiness::kNotServing,
                                               Readiness::kUnreachable}));
  EXPECT_GE(took, std::chrono::milliseconds(700));
  EXPECT_LT(took, std::chrono::milliseconds(1500));
}

// A standby: every DescribeFlow answers UNAVAILABLE, as a standby's API does.
class StandbyFlows final : public FlowService::Service {
 public:
  grpc::Status DescribeFlow(grpc::ServerContext*, const flow::FlowRef*,
                            flow::FlowDescription*) override {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this process is a standby");
  }
};

// gRPC health that answers NOT_SERVING to its first check and then nothing
// (each later check is held until cancelled, 10 s at most): a standby that
// stalls in the middle of a client's search.
class SilentAfterFirstCheck final : public grpc::health::v1::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest*,
                     grpc::health::v1::HealthCheckResponse* response) override {
    if (checks_.fetch_add(1) == 0) {
      response->set_status(grpc::health::v1::HealthCheckResponse::NOT_SERVING);
      return grpc::Status::OK;
    }
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    // Bounded by `until`.
    while (!context->IsCancelled() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "held");
  }

 private:
  std::atomic<int> checks_{0};
};

// Two standbys on 127.0.0.1: `steady` with gRPC's own health (NOT_SERVING),
// `stalling` with SilentAfterFirstCheck.
class TwoStandbys {
 public:
  TwoStandbys() {
    grpc::EnableDefaultHealthCheckService(true);
    steady_ = build(&steady_port_, nullptr);
    steady_->GetHealthCheckService()->SetServingStatus(false);
    // Off while `stalling` is built: its own Health service takes the name.
    grpc::EnableDefaultHealthCheckService(false);
    stalling_ = build(&stalling_port_, &stalling_health_);
    grpc::EnableDefaultHealthCheckService(true);
  }
  ~TwoStandbys() {
    for (auto* server : {steady_.get(), stalling_.get()}) {
      server->Shutdown(std::chrono::system_clock::now());
    }
  }
  std::string steady() const { return "127.0.0.1:" + std::to_string(steady_port_); }
  std::string stalling() const { return "127.0.0.1:" + std::to_string(stalling_port_); }

 private:
  std::unique_ptr<grpc::Server> build(int* port, grpc::Service* health) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
    builder.RegisterService(&flows_);
    if (health != nullptr) builder.RegisterService(health);
    return builder.BuildAndStart();
  }

  StandbyFlows flows_;
  SilentAfterFirstCheck stalling_health_;
  int steady_port_ = 0;
  int stalling_port_ = 0;
  std::unique_ptr<grpc::Server> steady_;
  std::unique_ptr<grpc::Server> stalling_;
};

std::string describe_error(const TwoStandbys& standbys, Duration timeout) {
  ClientOptions options;
  options.server_addresses = {standbys.steady(), standbys.stalling()};
  options.timeout = timeout;
  Client client(options);
  auto described = client.describe_flow("f-1");
  EXPECT_FALSE(described.is_ok());
  return described.is_ok() ? std::string() : described.status().message();
}

// The search's first round asks both (each answers "a standby"); the next
// round's probe finds the stalling one silent. Cut short by the call's
// deadline (800 ms in all), that silence is not called a frozen process: the
// report keeps what the address said before.
TEST(SearchReport, AnAddressSilentOnlyWhenTheDeadlineCutsTheProbeShortKeepsItsEarlierAnswer) {
  TwoStandbys standbys;
  std::string message = describe_error(standbys, milliseconds(800));
  EXPECT_EQ(message.rfind("UNAVAILABLE: no active dex process at any of 2 addresses", 0), 0u)
      << message;
  for (const std::string& address : {standbys.steady(), standbys.stalling()}) {
    EXPECT_NE(message.find("the server at " + address +
                           " is not serving: this process is a "
                           "standby"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(message.find("did not answer a health check"), std::string::npos) << message;
}

// Given the probe's full second (a 3 s call), the same silence is a frozen
// or cut-off process, and the report says so.
TEST(SearchReport, AnAddressSilentForTheProbesFullWaitIsReportedAsFrozen) {
  TwoStandbys standbys;
  std::string message = describe_error(standbys, seconds(3));
  EXPECT_NE(message.find("the server at " + standbys.stalling() +
                         " did not answer a health check within 1s (a frozen or cut-off "
                         "process); not tried"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the server at " + standbys.steady() + " is not serving"),
            std::string::npos)
      << message;
}

// A Flow for the Worker to host: these tests send it no tasks.
class Idle final : public Flow {
  class Done final : public Step {
    std::string type() const override { return "Done"; }
    StepDecision execute(Context&) override { return StepDecision::graceful_complete(); }
  };

 public:
  std::string type() const override { return "Idle"; }
  std::string start_step() const override { return "Done"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Done>()}; }
};

class FrozenWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FakeServer>(workers_, flows_, admin_);
    options_.worker_id = "frozen-test";
    options_.max_concurrent_tasks = 2;
    options_.reconnect_backoff_initial = milliseconds(20);
    options_.reconnect_backoff_max = milliseconds(200);
    options_.shutdown_timeout = seconds(1);
  }
  void TearDown() override {
    if (worker_) worker_->shutdown();
    if (run_.valid()) {
      ASSERT_EQ(run_.wait_for(seconds(10)), std::future_status::ready) << "run() did not return";
    }
    worker_.reset();
    server_.reset();
  }
  void start() {
    worker_ = std::make_unique<Worker>(options_);
    worker_->host(std::make_shared<Idle>());
    run_ = std::async(std::launch::async, [this] { return worker_->run(); });
  }
  // Polls the Worker's stats until `predicate` holds or `timeout` passes.
  bool eventually(const std::function<bool(const WorkerStats&)>& predicate, Duration timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (predicate(worker_->stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
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

TEST_F(FrozenWorkerTest, AStreamSilentFor3sIsGivenUpAndOpenedAgain) {
  workers_.set_ping_interval(Duration::zero());  // froze right after its HelloAck
  options_.server_address = server_->address();
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, seconds(5)));
  auto first = std::chrono::steady_clock::now();
  ASSERT_TRUE(workers_.wait_for_streams(2, seconds(6))) << "the silent stream was kept";
  auto gap = std::chrono::steady_clock::now() - first;
  EXPECT_GE(gap, std::chrono::milliseconds(2800));
  EXPECT_LT(gap, std::chrono::milliseconds(4500));
}

TEST_F(FrozenWorkerTest, AStreamThatGetsPingsIsKept) {
  options_.server_address = server_->address();  // the fake pings every second
  start();
  ASSERT_TRUE(workers_.wait_for_streams(1, seconds(5)));
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_EQ(workers_.hellos().size(), 1u);
  EXPECT_EQ(worker_->stats().streams_accepted, 1u);
}

TEST_F(FrozenWorkerTest, AnAddressThatAcceptsConnectionsButNeverAnswersIsSkipped) {
  FrozenListener frozen;
  options_.server_addresses = {frozen.address(), server_->address()};
  auto begin = std::chrono::steady_clock::now();
  start();
  ASSERT_TRUE(eventually([&](const WorkerStats& s) { return s.streams_accepted == 1; }, seconds(4)))
      << "the Worker waited on the frozen address";
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(2500));
  EXPECT_EQ(worker_->stats().connected_address, server_->address());
}

TEST_F(FrozenWorkerTest, TheSetUpOfAStreamToAFrozenProcessIsBounded) {
  FrozenListener frozen;
  options_.server_address = frozen.address();
  start();
  // Opening the stream blocks on a connection that never completes; the
  // hello wait (5 s) covers it, so the attempt ends and the next one starts.
  EXPECT_TRUE(eventually([&](const WorkerStats& s) { return s.streams_refused >= 1; }, seconds(7)))
      << "the stream's set-up was not bounded";
}

}  // namespace
}  // namespace dex
