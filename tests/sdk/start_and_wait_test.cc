// Start and wait in one call (StartFlow with wait_timeout_ms,
// Client::start_and_wait; issue 30, "Round trips"): end to end, a Worker and
// a Client against a real ApiServer over a real Engine. A short run answers
// closed with its outputs; a run that outlives the wait answers closed =
// false with its run ID; a repeated start (same request ID) waits for the run
// the first one started; a run that continues as new is waited past; a
// negative wait is refused.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dex/api.grpc.pb.h"
#include "live_stack.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const Channel kGo{"go"};

// "Echo": one Step that completes the run with its input.
class Echo final : public Flow {
  class EchoStep final : public Step {
   public:
    std::string type() const override { return "Echo"; }
    StepDecision execute(Context& ctx) override {
      return StepDecision::graceful_complete(ctx.input());
    }
  };

 public:
  std::string type() const override { return "Echo"; }
  std::string start_step() const override { return "Echo"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<EchoStep>()};
  }
};

// "Gated": waits for a message on "go", then completes with its input.
class Gated final : public Flow {
  class Gate final : public WaitingStep {
   public:
    std::string type() const override { return "Gate"; }
    Wait wait_for(Context&) override { return Wait::any_of({kGo.for_one()}); }
    StepDecision execute(Context& ctx) override {
      return StepDecision::graceful_complete(ctx.input());
    }
  };

 public:
  std::string type() const override { return "Gated"; }
  std::string start_step() const override { return "Gate"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Gate>()}; }
  std::vector<Channel> channels() const override { return {kGo}; }
};

// "Hops": continues as new at each of its first `hops` Steps (input
// {"hops": n}), then completes with {"run": <its run ID>}.
const Attribute<int64_t> kHop{"hop"};
class Hops final : public Flow {
  class Hop final : public Step {
   public:
    std::string type() const override { return "Hop"; }
    StepDecision execute(Context& ctx) override {
      const int64_t done = kHop.get(ctx).value_or(0);
      if (done >= ctx.input().value("hops", 0))
        return StepDecision::graceful_complete({{"run", ctx.run_id()}});
      kHop.set(ctx, done + 1);
      return StepDecision::go_to("Hop", ctx.input()).continue_as_new();
    }
  };

 public:
  std::string type() const override { return "Hops"; }
  std::string start_step() const override { return "Hop"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Hop>()}; }
  std::vector<AttributeDef> attributes() const override { return {kHop}; }
};

class StartAndWait : public LiveStackTest {
 protected:
  std::vector<std::shared_ptr<Flow>> flows() const override {
    return {std::make_shared<Echo>(), std::make_shared<Gated>(), std::make_shared<Hops>()};
  }
  void configure(WorkerOptions& wo) const override { wo.worker_id = "w-start-and-wait"; }

  // The raw service, for what the Client never sends (a negative wait) and to
  // repeat one exact request.
  std::unique_ptr<FlowService::Stub> stub() {
    return FlowService::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  static std::unique_ptr<grpc::ClientContext> context() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return c;
  }
};

TEST_F(StartAndWait, AShortRunAnswersClosedWithItsOutputsInOneCall) {
  auto done = client_->start_and_wait("Echo", "f-echo", json{{"n", 7}}, kWait);
  ASSERT_TRUE(done.is_ok()) << done.status().message();
  EXPECT_TRUE(done->closed());
  EXPECT_FALSE(done->already_started());
  EXPECT_FALSE(done->run_id().empty());
  const flow::FlowDescription& run = done->flow();
  EXPECT_EQ(run.run_id(), done->run_id());
  EXPECT_EQ(run.flow_id(), "f-echo");
  EXPECT_EQ(run.status(), flow::FLOW_COMPLETED) << run.close_reason();
  ASSERT_EQ(run.outputs_size(), 1);
  EXPECT_EQ(from_payload(run.outputs(0).output()), (json{{"n", 7}}));
  // A plain start is unchanged: no wait, no description.
  auto plain = client_->start("Echo", "f-plain", json{{"n", 1}});
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_FALSE(plain->closed());
  EXPECT_FALSE(plain->has_flow());
}

TEST_F(StartAndWait, ARunThatOutlivesTheWaitAnswersNotClosedWithItsRunId) {
  const auto t0 = std::chrono::steady_clock::now();
  auto waited = client_->start_and_wait("Gated", "f-gated", json{{"g", 1}}, milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(waited.is_ok()) << waited.status().message();
  EXPECT_FALSE(waited->closed());
  EXPECT_FALSE(waited->run_id().empty());
  EXPECT_EQ(waited->flow().run_id(), waited->run_id());
  EXPECT_EQ(waited->flow().status(), flow::FLOW_RUNNING);
  EXPECT_GE(took, milliseconds(250));
  EXPECT_LT(took, seconds(5));
  // The run goes on: a message ends it, and a wait on its ID says so.
  ASSERT_TRUE(client_->publish("f-gated", "go", {json::object()}).is_ok());
  auto closed = client_->wait_for_flow("f-gated", kWait, waited->run_id());
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  EXPECT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_COMPLETED);
}

TEST_F(StartAndWait, ARepeatedStartWaitsForTheRunTheFirstOneStarted) {
  flow::StartFlowRequest request;
  request.set_flow_id("f-repeat");
  request.set_flow_type("Gated");
  request.mutable_input()->set_data(R"({"r":1})");
  request.mutable_options()->set_request_id("req-1");
  request.mutable_options()->set_ignore_already_started(true);
  request.set_wait_timeout_ms(100);
  auto flows = stub();
  flow::StartFlowResponse first;
  auto c1 = context();
  ASSERT_TRUE(flows->StartFlow(c1.get(), request, &first).ok());
  EXPECT_FALSE(first.closed());
  EXPECT_FALSE(first.already_started());

  // The run closes; the same start (a client's retry after a lost answer)
  // starts nothing and answers how the first run closed.
  ASSERT_TRUE(client_->publish("f-repeat", "go", {json::object()}).is_ok());
  request.set_wait_timeout_ms(20'000);
  flow::StartFlowResponse again;
  auto c2 = context();
  grpc::Status s = flows->StartFlow(c2.get(), request, &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(again.already_started());
  EXPECT_EQ(again.run_id(), first.run_id());
  EXPECT_TRUE(again.closed());
  EXPECT_EQ(again.flow().status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(again.flow().outputs_size(), 1);
  EXPECT_EQ(from_payload(again.flow().outputs(0).output()), (json{{"r", 1}}));
  EXPECT_EQ(again.flow().runs(), 1u) << "the repeat started a second run";
}

TEST_F(StartAndWait, ARunThatContinuesAsNewIsWaitedPastToTheEndOfItsChain) {
  auto done = client_->start_and_wait("Hops", "f-hops", json{{"hops", 2}}, kWait);
  ASSERT_TRUE(done.is_ok()) << done.status().message();
  ASSERT_TRUE(done->closed());
  const std::string first = done->run_id();
  EXPECT_EQ(done->flow().status(), flow::FLOW_COMPLETED) << done->flow().close_reason();
  EXPECT_EQ(done->flow().run_id(), first + ".c2");
  ASSERT_EQ(done->flow().outputs_size(), 1);
  EXPECT_EQ(from_payload(done->flow().outputs(0).output()), (json{{"run", first + ".c2"}}));
}

TEST_F(StartAndWait, ANegativeWaitIsRefusedNamingTheFieldAndStartsNothing) {
  flow::StartFlowRequest request;
  request.set_flow_id("f-negative");
  request.set_flow_type("Echo");
  request.set_wait_timeout_ms(-1);
  flow::StartFlowResponse response;
  auto c = context();
  grpc::Status s = stub()->StartFlow(c.get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("waitTimeoutMs"), std::string::npos) << s.error_message();
  auto described = client_->describe_flow("f-negative");
  EXPECT_FALSE(described.is_ok()) << "the refused start started a run";
  // The Client refuses a timeout that is not positive before sending anything.
  auto zero = client_->start_and_wait("Echo", "f-zero", json::object(), Duration::zero());
  ASSERT_FALSE(zero.is_ok());
  EXPECT_EQ(zero.status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(client_->describe_flow("f-zero").is_ok());
}

}  // namespace
}  // namespace dex
