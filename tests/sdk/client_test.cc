// dex::Client against the fake FlowService/AdminService, and against nothing.
#include <gtest/gtest.h>

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
