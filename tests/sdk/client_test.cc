// dex::Client against the fake dex.FlowService and AdminService, and
// against nothing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "fake_server.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/grpc_status.h"

namespace dex {
namespace {

using nlohmann::json;
using testing::FakeAdminService;
using testing::FakeFlowService;
using testing::FakeServer;
using testing::FakeWorkerTaskService;

class ClientTest : public ::testing::Test {
 protected:
  ClientTest() : server_(workers_, flows_, admin_) {
    options_.server_address = server_.address();
    options_.timeout = seconds(5);
  }
  FakeWorkerTaskService workers_;
  FakeFlowService flows_;
  FakeAdminService admin_;
  FakeServer server_;
  ClientOptions options_;
};

// An address where nothing listens: a port that was just free.
std::string dead_address() {
  FakeWorkerTaskService w;
  FakeFlowService f;
  FakeAdminService a;
  FakeServer s(w, f, a);
  std::string address = s.address();
  s.stop();
  return address;
}

TEST(ClientErrors, UnavailableWithNoServerNamesTheAddress) {
  std::string address = dead_address();
  ClientOptions options;
  options.server_address = address;
  options.timeout = seconds(5);
  Client client(options);
  auto flow = client.describe_flow("f-1");
  ASSERT_FALSE(flow.is_ok());
  EXPECT_TRUE(flow.status().is_transient());
  const std::string& message = flow.status().message();
  EXPECT_EQ(message.rfind("UNAVAILABLE: the server is not reachable at " + address, 0), 0u)
      << message;
  EXPECT_EQ(sdk_internal::grpc_code_of(flow.status()), "UNAVAILABLE");
}

// A TCP relay to `upstream_port` on 127.0.0.1 that holds each new connection
// for `delay` before relaying it: a server whose connection handshake is slow,
// as on a loaded machine.
class SlowHandshakeRelay {
 public:
  SlowHandshakeRelay(int upstream_port, Duration delay) : upstream_(upstream_port), delay_(delay) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listener_, 16), 0);
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~SlowHandshakeRelay() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
    for (auto& t : relays_) t.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void accept_loop() {
    while (!stop_) {
      int client = accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      relays_.emplace_back([this, client] { relay(client); });
    }
  }
  void relay(int client) {
    std::this_thread::sleep_for(delay_);
    int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(upstream_));
    if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      char buf[16384];
      // Bounded by the test: the relay ends when either side closes or stop_.
      while (!stop_ && poll(fds, 2, 100) >= 0) {
        bool closed = false;
        for (int k = 0; k < 2; ++k) {
          if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
          ssize_t n = read(fds[k].fd, buf, sizeof buf);
          if (n <= 0 || write(fds[1 - k].fd, buf, static_cast<size_t>(n)) != n) closed = true;
        }
        if (closed) break;
      }
    }
    close(server);
    close(client);
  }
  int upstream_;
  Duration delay_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> relays_;
};

// gRPC gives each connection attempt max(backoff, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS)
// to complete its handshake. With that minimum at 100 ms, a machine slow to
// answer a new connection (the CI machines under load) made every attempt
// time out ("tcp handshaker shutdown") until the client's 1.5 s grace ran out.
TEST_F(ClientTest, ASlowConnectionHandshakeIsWaitedFor) {
  const std::string direct = server_.address();
  SlowHandshakeRelay relay(std::stoi(direct.substr(direct.rfind(':') + 1)), milliseconds(700));
  ClientOptions options;
  options.server_address = relay.address();
  options.timeout = seconds(10);
  Client client(options);
  auto flow = client.describe_flow("missing");
  ASSERT_FALSE(flow.is_ok());
  // The server's own answer, not UNAVAILABLE from the connection.
  EXPECT_TRUE(flow.status().is_not_found()) << flow.status().message();
}

TEST_F(ClientTest, ServerErrorKeepsItsCodeAndMessage) {
  Client client(options_);
  auto flow = client.describe_flow("missing");
  ASSERT_FALSE(flow.is_ok());
  EXPECT_TRUE(flow.status().is_not_found());
  EXPECT_EQ(flow.status().message(), "NOT_FOUND: no Flow with ID 'missing'");

  auto started = client.start("undeclared", "f-1", json::object());
  ASSERT_FALSE(started.is_ok());
  EXPECT_EQ(started.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(started.status().message(),
            "INVALID_ARGUMENT: Flow type 'undeclared' was never declared by a Worker");
}

TEST_F(ClientTest, DeadlineExceededNamesTheTimeout) {
  options_.timeout = milliseconds(200);
  Client client(options_);
  auto flow = client.describe_flow("slow");
  ASSERT_FALSE(flow.is_ok());
  // The outcome is unknown: not a transient failure that a caller may repeat blindly.
  EXPECT_EQ(flow.status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(flow.status().message().rfind(
                "DEADLINE_EXCEEDED: no answer from " + server_.address() + " within 200ms", 0),
            0u)
      << flow.status().message();
}

TEST_F(ClientTest, TypedCallsCarryTheirFields) {
  Client client(options_);
  flow::StartOptions options;
  options.set_start_delay_ms(1500);
  auto started = client.start("Echo", "my-id", json{{"n", 1}}, options);
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  EXPECT_EQ(started->run_id(), "run-1");
  ASSERT_EQ(flows_.starts().size(), 1u);
  flow::StartFlowRequest start = flows_.starts()[0];
  EXPECT_EQ(start.flow_type(), "Echo");
  EXPECT_EQ(start.flow_id(), "my-id");
  EXPECT_EQ(json::parse(start.input().data()), (json{{"n", 1}}));
  EXPECT_EQ(start.options().start_delay_ms(), 1500);
  // Without a request ID of the caller's, one is picked so that a repeat
  // answers the run the first attempt started.
  EXPECT_EQ(start.options().request_id().size(), 32u);
  EXPECT_TRUE(start.options().ignore_already_started());
  options.set_request_id("mine");
  ASSERT_TRUE(client.start("Echo", "my-id", nullptr, options).is_ok());
  EXPECT_EQ(flows_.starts().at(1).options().request_id(), "mine");
  EXPECT_FALSE(flows_.starts().at(1).options().ignore_already_started());
  EXPECT_TRUE(flows_.starts().at(1).input().data().empty());  // null: no value

  ASSERT_TRUE(client.stop("f-2", flow::STOP_FAIL, "bad order", "run-7").is_ok());
  ASSERT_EQ(flows_.stops().size(), 1u);
  EXPECT_EQ(flows_.stops()[0].flow_id(), "f-2");
  EXPECT_EQ(flows_.stops()[0].run_id(), "run-7");
  EXPECT_EQ(flows_.stops()[0].mode(), flow::STOP_FAIL);
  EXPECT_EQ(flows_.stops()[0].reason(), "bad order");

  ASSERT_TRUE(
      client.publish("f-3", "approvals", {json{{"ok", true}}, json(2)}, "seller-1").is_ok());
  ASSERT_TRUE(client.publish("f-3", "approvals", {json(3)}, "", "", "req-1").is_ok());
  auto publishes = flows_.publishes();
  ASSERT_EQ(publishes.size(), 2u);
  EXPECT_EQ(publishes[0].channel(), "approvals");
  EXPECT_EQ(publishes[0].instance_key(), "seller-1");
  ASSERT_EQ(publishes[0].messages_size(), 2);
  EXPECT_EQ(json::parse(publishes[0].messages(0).data()), (json{{"ok", true}}));
  EXPECT_EQ(json::parse(publishes[0].messages(1).data()), json(2));
  EXPECT_EQ(publishes[0].request_id().size(), 32u);  // a fresh one per call
  EXPECT_EQ(publishes[1].request_id(), "req-1");

  flow::TimeTravelPoint charge;
  charge.set_kind(flow::TIME_TRAVEL_LATEST_OF_STEP_TYPE);
  charge.set_step_type("Charge");
  auto preview = client.time_travel("f-5", "run-5", charge, "fixed", /*dry_run=*/true);
  ASSERT_TRUE(preview.is_ok()) << preview.status().to_string();
  EXPECT_EQ(preview->start().flow().traveled_from_run_id(), "run-5");
  auto traveled = client.time_travel("f-5", "run-5", charge, "fixed", false, "tt-1");
  ASSERT_TRUE(traveled.is_ok()) << traveled.status().to_string();
  EXPECT_EQ(traveled->run_id(), "traveled-2");
  auto travels = flows_.travels();
  ASSERT_EQ(travels.size(), 2u);
  EXPECT_EQ(travels[0].flow().flow_id(), "f-5");
  EXPECT_EQ(travels[0].flow().run_id(), "run-5");
  EXPECT_EQ(travels[0].point().step_type(), "Charge");
  EXPECT_EQ(travels[0].reason(), "fixed");
  EXPECT_TRUE(travels[0].dry_run());
  EXPECT_EQ(travels[0].request_id().size(), 32u);  // a fresh one per call
  EXPECT_FALSE(travels[1].dry_run());
  EXPECT_EQ(travels[1].request_id(), "tt-1");

  flow::FlowConfig config;
  config.set_default_durability(flow::ASYNC);
  config.set_index_active_step_types(false);
  auto updated = client.update_flow_config("f-6", "run-6", config, {"attribute_store"});
  ASSERT_TRUE(updated.is_ok()) << updated.status().to_string();
  EXPECT_EQ(updated->config().default_durability(), flow::ASYNC);
  ASSERT_TRUE(client.update_flow_config("f-6", "run-6", config, {}, "cfg-1").is_ok());
  auto updates = flows_.config_updates();
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].flow().flow_id(), "f-6");
  EXPECT_EQ(updates[0].flow().run_id(), "run-6");
  EXPECT_TRUE(updates[0].config().has_index_active_step_types());
  EXPECT_FALSE(updates[0].config().index_active_step_types());
  ASSERT_EQ(updates[0].clear_fields_size(), 1);
  EXPECT_EQ(updates[0].clear_fields(0), "attribute_store");
  EXPECT_EQ(updates[0].request_id().size(), 32u);  // a fresh one per call
  EXPECT_EQ(updates[1].request_id(), "cfg-1");

  ASSERT_TRUE(client.skip_timer("f-4", "Ship-2", 1u).is_ok());
  ASSERT_TRUE(client.skip_timer("f-4", "Ship-2", std::string("reminder"), "run-4").is_ok());
  auto skips = flows_.skips();
  ASSERT_EQ(skips.size(), 2u);
  EXPECT_EQ(skips[0].flow().flow_id(), "f-4");
  EXPECT_EQ(skips[0].step_execution_id(), "Ship-2");
  EXPECT_EQ(skips[0].condition_index(), 1u);
  EXPECT_EQ(skips[1].condition_id(), "reminder");
  EXPECT_EQ(skips[1].flow().run_id(), "run-4");

  auto described = client.describe_flow("f-done");
  ASSERT_TRUE(described.is_ok()) << described.status().message();
  EXPECT_EQ(described->status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(described->outputs_size(), 1);
  EXPECT_EQ(from_payload(described->outputs(0).output()), (json{{"n", 1}}));
  auto state = client.flow_state("f-done", "run-done");
  ASSERT_TRUE(state.is_ok());
  EXPECT_EQ(flows_.state_requests().at(0).run_id(), "run-done");
  auto history = client.history("f-done", 0, /*from_start=*/true, 10);
  ASSERT_TRUE(history.is_ok());
  EXPECT_EQ(history->events_size(), 2);
  ASSERT_EQ(flows_.history_requests().size(), 1u);
  EXPECT_TRUE(flows_.history_requests()[0].from_start());
  EXPECT_EQ(flows_.history_requests()[0].page_size(), 10u);
}

TEST_F(ClientTest, WaitDeadlineCoversTheWaitTimeout) {
  // Each call's deadline is its wait plus the client timeout, so the server's
  // "not closed yet" answer arrives even when the wait is longer than the
  // client timeout.
  options_.timeout = milliseconds(300);
  Client client(options_);
  auto begin = std::chrono::steady_clock::now();
  auto waited = client.wait_for_flow("f-running", milliseconds(600));
  ASSERT_TRUE(waited.is_ok()) << waited.status().message();
  EXPECT_FALSE(waited->closed());
  EXPECT_GE(std::chrono::steady_clock::now() - begin, milliseconds(550));
  auto closed = client.wait_for_flow("f-done", seconds(10));
  ASSERT_TRUE(closed.is_ok());
  EXPECT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_COMPLETED);
}

TEST_F(ClientTest, DescribeSendsTheAdminCredential) {
  options_.admin_credential = "s3cret";
  Client client(options_);
  auto described = client.describe();
  ASSERT_TRUE(described.is_ok());
  EXPECT_EQ(described->node_epoch(), "18446744073709551615");
  EXPECT_EQ(admin_.last_authorization(), "Bearer s3cret");
}

}  // namespace
}  // namespace dex
