// Continue-as-new in the C++ SDK (docs/flow-rules.md, "Continue-as-new"): a
// Step decision's continue_as_new(), a Flow's config() and a start's
// StartOptions::config; end to end, a Worker and a Client against a real
// ApiServer over a real Engine: a looping Step continues as new every few
// loops (or by its history thresholds) and a wait on the first run answers
// the last run's result.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "live_stack.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const Attribute<int64_t> kLoops{"loops"};

// Loop runs `loops` times (input {"loops": n, "every": k, "sleep_ms": t},
// each loop taking t ms); every k-th loop
// (k > 0) its decision continues the run as new. The last completes the run
// with {"loops": <the Attribute>, "run": <its run ID>}.
class Loop final : public Step {
 public:
  std::string type() const override { return "Loop"; }
  StepDecision execute(Context& ctx) override {
    const json in = ctx.input();
    if (const int ms = in.value("sleep_ms", 0); ms > 0)
      std::this_thread::sleep_for(milliseconds(ms));
    const int64_t done = kLoops.get(ctx).value_or(0) + 1;
    kLoops.set(ctx, done);
    if (done >= in.value("loops", 1))
      return StepDecision::graceful_complete({{"loops", done}, {"run", ctx.run_id()}});
    StepDecision next = StepDecision::go_to("Loop", in);
    const int64_t every = in.value("every", 0);
    if (every > 0 && done % every == 0) next.continue_as_new();
    return next;
  }
};

class Looper final : public Flow {
 public:
  explicit Looper(uint64_t after_events = 0) : after_events_(after_events) {}
  std::string type() const override { return "Looper"; }
  std::string start_step() const override { return "Loop"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Loop>()}; }
  std::vector<AttributeDef> attributes() const override { return {kLoops}; }
  flow::FlowConfig config() const override {
    flow::FlowConfig c;
    c.set_continue_as_new_after_events(after_events_);
    return c;
  }

 private:
  uint64_t after_events_;
};

TEST(ContinueAsNew, TheDecisionAsksForItAndTheDeclarationAndStartCarryTheConfig) {
  EXPECT_TRUE(StepDecision::go_to("Loop").continue_as_new().proto().continue_as_new());
  EXPECT_TRUE(StepDecision::dead_end().continue_as_new().proto().has_dead_end());
  EXPECT_FALSE(StepDecision::go_to("Loop").proto().continue_as_new());
  EXPECT_EQ(Looper(40).declaration().config().continue_as_new_after_events(), 40u);
  EXPECT_FALSE(Looper().declaration().has_config()) << "an empty config is not declared";
  flow::FlowConfig c;
  c.set_continue_as_new_after_bytes(4096);
  StartOptions o;
  o.config(c);
  EXPECT_EQ(o.proto.config().continue_as_new_after_bytes(), 4096u);
}

// ---------------------------------------------------------------- end to end

class ContinueAsNewEndToEnd : public LiveStackTest {
 protected:
  std::vector<std::shared_ptr<Flow>> flows() const override {
    return {std::make_shared<Looper>(100'000)};
  }
  void configure(WorkerOptions& wo) const override { wo.worker_id = "w-continue"; }
};

TEST_F(ContinueAsNewEndToEnd,
       ALoopContinuingEveryFewLoopsEndsInItsLastRunAndTheFirstRunsWaitSaysSo) {
  auto started = client_->start("Looper", "loop-1", json{{"loops", 10}, {"every", 3}});
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  const std::string first = started->run_id();
  auto closed = client_->wait_for_flow("loop-1", kWait, first);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  ASSERT_TRUE(closed->closed());
  const flow::FlowDescription& last = closed->flow();
  EXPECT_EQ(last.status(), flow::FLOW_COMPLETED) << last.close_reason();
  // Loops 3, 6 and 9 continued: the fourth run of the chain ends it.
  EXPECT_EQ(last.run_id(), first + ".c3");
  EXPECT_EQ(last.continued_from_run_id(), first + ".c2");
  ASSERT_EQ(last.outputs_size(), 1);
  EXPECT_EQ(from_payload(last.outputs(0).output()), (json{{"loops", 10}, {"run", first + ".c3"}}))
      << "the Attribute went on through every run";
  // The first run closed CONTINUED_AS_NEW, linked to the second.
  auto old = client_->describe_flow("loop-1", first);
  ASSERT_TRUE(old.is_ok());
  EXPECT_EQ(old->status(), flow::FLOW_CONTINUED_AS_NEW);
  EXPECT_EQ(old->next_run_id(), first + ".c1");
  // A Step execution waited for on the first run is answered where it ran.
  auto step = client_->wait_for_step("loop-1", "Loop-10", kWait, first);
  ASSERT_TRUE(step.is_ok()) << step.status().message();
  EXPECT_TRUE(step->completed());
  EXPECT_EQ(step->phase(), flow::PHASE_DONE);
}

TEST_F(ContinueAsNewEndToEnd, AStartsConfigLowersTheHistoryThresholdAndAClientAsksForOneToo) {
  flow::FlowConfig c;
  c.set_continue_as_new_after_events(12);
  StartOptions o;
  o.config(c);
  auto started = client_->start("Looper", "loop-2", json{{"loops", 20}}, o);
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  const std::string first = started->run_id();
  auto closed = client_->wait_for_flow("loop-2", kWait, first);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  ASSERT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_COMPLETED) << closed->flow().close_reason();
  EXPECT_NE(closed->flow().run_id(), first) << "the history threshold continued the run";
  EXPECT_FALSE(closed->flow().continued_from_run_id().empty());
  ASSERT_EQ(closed->flow().outputs_size(), 1);
  EXPECT_EQ(from_payload(closed->flow().outputs(0).output())["loops"], 20);

  // A closed run does not continue; the client call names the refusal.
  auto refused = client_->continue_as_new("loop-2", closed->flow().run_id(), "too late");
  EXPECT_FALSE(refused.is_ok());
}

TEST_F(ContinueAsNewEndToEnd, AClientContinuesAWaitingRunAsNew) {
  // A loop that does not end on its own and never asks to continue: the
  // client asks, and the run goes on as "<first>.c1" between two loops.
  auto started = client_->start("Looper", "loop-3", json{{"loops", 1'000'000}, {"sleep_ms", 20}});
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  const std::string first = started->run_id();
  auto asked = client_->continue_as_new("loop-3", first, "operator", "req-1");
  ASSERT_TRUE(asked.is_ok()) << asked.status().message();
  std::string next;
  for (int i = 0; i < 500 && next.empty(); ++i) {
    auto d = client_->describe_flow("loop-3", first);
    ASSERT_TRUE(d.is_ok());
    if (d->status() == flow::FLOW_CONTINUED_AS_NEW) next = d->next_run_id();
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(next, first + ".c1");
  auto latest = client_->describe_flow("loop-3");
  ASSERT_TRUE(latest.is_ok());
  EXPECT_EQ(latest->continued_from_run_id(), first);
  ASSERT_TRUE(client_->stop("loop-3", flow::STOP_CANCEL, "done").is_ok());
  auto closed = client_->wait_for_flow("loop-3", kWait, first);
  ASSERT_TRUE(closed.is_ok());
  EXPECT_TRUE(closed->closed());
  EXPECT_NE(closed->flow().status(), flow::FLOW_CONTINUED_AS_NEW);
}

}  // namespace
}  // namespace dex
