// The timeout handler in the C++ SDK (Flow::has_timeout_handler, on_timeout;
// docs/flow-rules.md, "Timeout handler"): what a Flow declares, how the
// runner answers an ON_TIMEOUT task, misuse; and end to end, a Worker and a
// Client against a real ApiServer over a real Engine: a run whose timeout
// passes while its Step waits is completed by its handler, or ends TIMED_OUT
// when the handler fails.
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

const Attribute<std::string> kNote{"note"};
const Attribute<int64_t> kOther{"other"};
const Channel kNever("never");

// Hang waits on a Channel nobody publishes to.
class Hang final : public WaitingStep {
 public:
  std::string type() const override { return "Hang"; }
  Wait wait_for(Context&) override { return Wait::any_of({kNever.for_one()}); }
  StepDecision execute(Context&) override { return StepDecision::graceful_complete("hang"); }
};

// Guarded: its handler reads `note`, writes it, publishes, and completes the
// run with {"handled": <note as read>}, canceling Hang; with {"fail_handler":
// true} it throws. One attempt, so that a failure ends the run at once.
class Guarded final : public Flow {
 public:
  explicit Guarded(bool handler = true, MethodOptions options = one_attempt())
      : handler_(handler), options_(std::move(options)) {}
  static MethodOptions one_attempt() {
    MethodOptions o;
    o.attempt_timeout = std::chrono::seconds(5);
    o.retry.maximum_attempts = 1;
    return o;
  }
  std::string type() const override { return "Guarded"; }
  std::string start_step() const override { return "Hang"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Hang>()}; }
  std::vector<Channel> channels() const override { return {kNever}; }
  std::vector<AttributeDef> attributes() const override { return {kNote, kOther}; }
  bool has_timeout_handler() const override { return handler_; }
  MethodOptions timeout_handler_options() const override { return options_; }
  AttributeReads timeout_handler_reads() const override { return {kNote}; }
  StepDecision on_timeout(Context& ctx) override {
    if (!ctx.is_timeout_handler() || ctx.step_execution_id() != "timeout" ||
        !ctx.step_type().empty())
      throw FlowFailure("not a timeout handler's Context", true);
    if (ctx.input().value("fail_handler", false)) throw std::runtime_error("handler broke");
    const std::string note = kNote.get(ctx).value_or("none");
    kNote.set(ctx, "timed out");
    ctx.publish(kNever, {{"from", "handler"}});
    return StepDecision::force_complete({{"handled", note}}).cancel_siblings();
  }

 private:
  bool handler_;
  MethodOptions options_;
};

flow::FlowTaskResult run(Flow& flow, const flow::FlowTask& t) {
  return run_flow_task(
      flow, t, [] {}, [] { return false; });
}

flow::FlowTask handler_task(const json& input) {
  flow::FlowTask t;
  t.set_task_id("t-timeout");
  t.set_flow_id("g-1");
  t.set_run_id("run-1");
  t.set_flow_type("Guarded");
  t.set_step_execution_id("timeout");
  t.set_method(flow::ON_TIMEOUT);
  t.set_attempt(1);
  *t.mutable_input() = to_payload(input);
  *t.add_attributes() = kNote.write("started");
  return t;
}

TEST(TimeoutHandler, AFlowDeclaresItsHandlerWithItsOptionsAndReads) {
  const flow::FlowDeclaration d = Guarded().declaration();
  EXPECT_TRUE(d.has_timeout_handler());
  ASSERT_TRUE(d.has_on_timeout());
  EXPECT_EQ(d.on_timeout().options().attempt_timeout_ms(), 5'000);
  EXPECT_EQ(d.on_timeout().options().retry().maximum_attempts(), 1u);
  EXPECT_TRUE(d.on_timeout().options().lock_keys().empty());
  ASSERT_EQ(d.on_timeout().attribute_reads_size(), 1);
  EXPECT_EQ(d.on_timeout().attribute_reads(0), "note");
  const flow::FlowDeclaration none = Guarded(false).declaration();
  EXPECT_FALSE(none.has_timeout_handler());
  EXPECT_FALSE(none.has_on_timeout());
  EXPECT_TRUE(Guarded().validate().is_ok());
}

TEST(TimeoutHandler, ValidateRefusesLockKeysAndFailurePoliciesNamingThem) {
  MethodOptions locked = Guarded::one_attempt();
  locked.lock_keys = {"k"};
  Status s = Guarded(true, locked).validate();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("lock keys"), std::string::npos) << s.message();
  MethodOptions recovering = Guarded::one_attempt();
  recovering.recovery_step = "Hang";
  s = Guarded(true, recovering).validate();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("no failure policy"), std::string::npos) << s.message();
}

TEST(TimeoutHandler, AnOnTimeoutTaskRunsTheHandlerWithItsReadsAndReturnsItsDecision) {
  Guarded flow;
  const auto r = run(flow, handler_task({{"x", 1}}));
  ASSERT_TRUE(r.has_decision()) << r.DebugString();
  EXPECT_TRUE(r.decision().cancel_siblings());
  EXPECT_EQ(from_payload(r.decision().force_complete()), (json{{"handled", "started"}}));
  ASSERT_EQ(r.attribute_writes_size(), 1);
  EXPECT_EQ(r.attribute_writes(0).value().string_value(), "timed out");
  ASSERT_EQ(r.publishes_size(), 1);
  EXPECT_EQ(r.publishes(0).channel(), "never");
  // A throw fails the attempt, retryably unless a FlowFailure says otherwise.
  const auto failed = run(flow, handler_task({{"fail_handler", true}}));
  ASSERT_TRUE(failed.has_error());
  EXPECT_EQ(failed.error().message(), "handler broke");
  EXPECT_FALSE(failed.error().non_retryable());
  EXPECT_EQ(failed.attribute_writes_size(), 0);
}

TEST(TimeoutHandler, AFlowWithoutAHandlerFailsAnOnTimeoutTaskNonRetryablyNamingIt) {
  Guarded flow(false);
  const auto r = run(flow, handler_task({}));
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_TRUE(r.error().non_retryable());
  EXPECT_NE(r.error().message().find("no timeout handler"), std::string::npos);
}

TEST(TimeoutHandler, TheHandlersReadsAreItsOwn) {
  // `other` is declared but not among the handler's reads: a get fails naming it.
  class Nosy final : public Flow {
   public:
    std::string type() const override { return "Guarded"; }
    std::string start_step() const override { return "Hang"; }
    std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Hang>()}; }
    std::vector<AttributeDef> attributes() const override { return {kNote, kOther}; }
    bool has_timeout_handler() const override { return true; }
    AttributeReads timeout_handler_reads() const override { return {kNote}; }
    StepDecision on_timeout(Context& ctx) override {
      (void)kOther.get(ctx);
      return StepDecision::dead_end();
    }
  };
  Nosy flow;
  const auto r = run(flow, handler_task({}));
  ASSERT_TRUE(r.has_error());
  EXPECT_TRUE(r.error().non_retryable());
  EXPECT_NE(r.error().message().find("the timeout handler does not read Attribute 'other'"),
            std::string::npos)
      << r.error().message();
}

// ---------------------------------------------------------------- end to end

class TimeoutHandlerEndToEnd : public LiveStackTest {
 protected:
  std::vector<std::shared_ptr<Flow>> flows() const override {
    return {std::make_shared<Guarded>()};
  }
  void configure(WorkerOptions& wo) const override { wo.worker_id = "w-timeout"; }
  StartOptions guarded() {
    StartOptions o;
    o.timeout(milliseconds(300), flow::TIMEOUT_HANDLER).initial(kNote, std::string("started"));
    return o;
  }
};

TEST_F(TimeoutHandlerEndToEnd, TheHandlerCompletesARunWhoseTimeoutPassedWhileItsStepWaited) {
  ASSERT_TRUE(client_->start("Guarded", "g-1", json::object(), guarded()).is_ok());
  auto closed = client_->wait_for_flow("g-1", kWait);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  ASSERT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_COMPLETED) << closed->flow().close_reason();
  ASSERT_EQ(closed->flow().outputs_size(), 1);
  EXPECT_EQ(closed->flow().outputs(0).step_execution_id(), "timeout");
  EXPECT_EQ(from_payload(closed->flow().outputs(0).output()), (json{{"handled", "started"}}));
  auto got = client_->get_attributes("g-1");
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(kNote.get(*got), std::optional<std::string>("timed out"));
  auto h = client_->history("g-1", 0, true);
  ASSERT_TRUE(h.is_ok());
  std::vector<flow::HistoryKind> handler_events;
  for (const auto& e : h->events()) {
    if (e.kind() == flow::TIMEOUT_HANDLER_STARTED || e.kind() == flow::TIMEOUT_HANDLER_COMPLETED)
      handler_events.push_back(e.kind());
  }
  EXPECT_EQ(handler_events, (std::vector<flow::HistoryKind>{flow::TIMEOUT_HANDLER_STARTED,
                                                            flow::TIMEOUT_HANDLER_COMPLETED}));
}

TEST_F(TimeoutHandlerEndToEnd, AHandlerThatFailsForGoodEndsTheRunTimedOutWithItsError) {
  ASSERT_TRUE(client_->start("Guarded", "g-2", json{{"fail_handler", true}}, guarded()).is_ok());
  auto closed = client_->wait_for_flow("g-2", kWait);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  ASSERT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_TIMED_OUT);
  EXPECT_NE(closed->flow().close_reason().find("handler broke"), std::string::npos)
      << closed->flow().close_reason();
  auto got = client_->get_attributes("g-2");
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(kNote.get(*got), std::optional<std::string>("started")) << "a failed handler writes "
                                                                       "nothing";
}

}  // namespace
}  // namespace dex
