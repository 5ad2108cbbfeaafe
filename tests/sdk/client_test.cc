// dex::Client against the fake FlowService/AdminService, and against nothing.
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
#include "sdk/grpc_status.h"

namespace dex {
namespace {

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
  auto flow = client.get_flow("f-1");
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
  auto flow = client.get_flow("missing");
  ASSERT_FALSE(flow.is_ok());
  // The server's own answer, not UNAVAILABLE from the connection.
  EXPECT_TRUE(flow.status().is_not_found()) << flow.status().message();
}

TEST_F(ClientTest, ServerErrorKeepsItsCodeAndMessage) {
  Client client(options_);
  auto flow = client.get_flow("missing");
  ASSERT_FALSE(flow.is_ok());
  EXPECT_TRUE(flow.status().is_not_found());
  EXPECT_EQ(flow.status().message(), "NOT_FOUND: no flow with ID missing");

  auto registered = client.register_flow_type("name: invalid");
  ASSERT_FALSE(registered.is_ok());
  EXPECT_EQ(registered.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(registered.status().message().rfind("INVALID_ARGUMENT: steps[0].taskQueue", 0), 0u);
}

TEST_F(ClientTest, DeadlineExceededNamesTheTimeout) {
  options_.timeout = milliseconds(200);
  Client client(options_);
  auto flow = client.get_flow("slow");
  ASSERT_FALSE(flow.is_ok());
  EXPECT_TRUE(flow.status().is_transient());
  EXPECT_EQ(flow.status().message().rfind(
                "DEADLINE_EXCEEDED: no answer from " + server_.address() + " within 200ms", 0),
            0u)
      << flow.status().message();
}

TEST_F(ClientTest, TypedCallsCarryTheirFields) {
  Client client(options_);
  auto started = client.start_flow("three-step", R"({"n":1})", "my-id");
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  EXPECT_EQ(started->flow().flow_id(), "my-id");
  ASSERT_EQ(flows_.starts().size(), 1u);
  EXPECT_EQ(flows_.starts()[0].flow_type(), "three-step");
  EXPECT_EQ(flows_.starts()[0].input(), R"({"n":1})");

  auto listed = client.list_flows(FLOW_STATUS_FAILED, 7, "tok");
  ASSERT_TRUE(listed.is_ok());
  ASSERT_EQ(flows_.lists().size(), 1u);
  EXPECT_EQ(flows_.lists()[0].status(), FLOW_STATUS_FAILED);
  EXPECT_EQ(flows_.lists()[0].page_size(), 7u);
  EXPECT_EQ(flows_.lists()[0].page_token(), "tok");

  auto flow = client.get_flow("f-done");
  ASSERT_TRUE(flow.is_ok());
  EXPECT_EQ(flow->status(), FLOW_STATUS_COMPLETED);
  auto type = client.get_flow_type("three-step");
  ASSERT_TRUE(type.is_ok());
  EXPECT_EQ(type->steps_size(), 2);
  EXPECT_TRUE(client.list_flow_types().is_ok());
  auto cancelled = client.cancel_flow("f-2");
  ASSERT_TRUE(cancelled.is_ok());
  EXPECT_EQ(cancelled->flow().status(), FLOW_STATUS_CANCELLED);
}

TEST_F(ClientTest, WaitDeadlineCoversTheWaitTimeout) {
  // The call's deadline is the wait timeout plus the client timeout, so the
  // server's "not ended yet" answer arrives even when the wait is longer than
  // the client timeout.
  options_.timeout = milliseconds(300);
  Client client(options_);
  auto waited = client.wait_flow("f-running", milliseconds(600));
  ASSERT_TRUE(waited.is_ok()) << waited.status().message();
  EXPECT_FALSE(waited->ended());
  auto ended = client.wait_flow("f-done", seconds(10));
  ASSERT_TRUE(ended.is_ok());
  EXPECT_TRUE(ended->ended());
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
