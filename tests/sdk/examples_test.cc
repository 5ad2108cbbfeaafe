// The example dex Flows (examples/flows/) do what examples/README.md promises,
// method by method through the SDK's task runner (run_flow_task), as a
// Worker runs them: their declarations, the Waits they return and the
// decisions they take for what met a Wait. tests/server/test_flow_examples.py
// runs them end to end against a real server.
#include <gtest/gtest.h>

#include "example_flows.h"
#include "sdk/flow.h"

namespace dex {
namespace {

using nlohmann::json;

flow::FlowTask task(const std::string& step_type, flow::Method method, const json& input,
                    uint32_t attempt = 1) {
  flow::FlowTask t;
  t.set_task_id("t-" + step_type);
  t.set_flow_id("f-1");
  t.set_run_id("run-1");
  t.set_step_type(step_type);
  t.set_step_execution_id(step_type + "-1");
  t.set_method(method);
  t.set_attempt(attempt);
  *t.mutable_input() = to_payload(input);
  return t;
}

// What met the wait: its condition `index` fired, with `messages` if a Channel's.
void fired(flow::FlowTask& t, const flow::Wait& wait, uint32_t index,
           const std::vector<json>& messages = {}) {
  flow::ConditionResult* c = t.add_conditions();
  c->set_index(index);
  c->set_fired(true);
  *c->mutable_condition() = wait.conditions(static_cast<int>(index));
  for (const json& m : messages) *c->add_messages() = to_payload(m);
}

flow::FlowTaskResult run(Flow& flow, const flow::FlowTask& t) {
  return run_flow_task(
      flow, t, [] {}, [] { return false; });
}

// The single movement of a GoTo decision.
const flow::StepMovement& go_to(const flow::FlowTaskResult& r) {
  EXPECT_TRUE(r.has_decision() && r.decision().has_go_to()) << r.DebugString();
  static const flow::StepMovement kNone;
  if (!r.has_decision() || r.decision().go_to().movements_size() != 1) return kNone;
  return r.decision().go_to().movements(0);
}

const flow::StepDeclaration* step_of(const flow::FlowDeclaration& d, const std::string& type) {
  for (const auto& s : d.steps())
    if (s.step_type() == type) return &s;
  return nullptr;
}

TEST(ExampleFlows, OrderProcessingChargesWithRetriesAndShipLoopsOnItsReminder) {
  auto order = examples::order_processing();
  const flow::FlowDeclaration d = order->declaration();
  EXPECT_EQ(d.flow_type(), "OrderProcessing");
  EXPECT_EQ(d.start_step_type(), "Charge");
  ASSERT_EQ(d.channels_size(), 1);
  EXPECT_EQ(d.channels(0).name(), "seller-approval");
  const auto* ship = step_of(d, "Ship");
  ASSERT_NE(ship, nullptr);
  EXPECT_TRUE(ship->has_wait_for());
  EXPECT_EQ(ship->options().execute().recovery_step_type(), "Refund");
  ASSERT_NE(step_of(d, "Refund"), nullptr);
  EXPECT_GE(step_of(d, "Charge")->options().execute().retry().maximum_attempts(), 2u);

  const json input = {{"order", "o-1"}, {"fail_charges", 1}, {"reminder_ms", 5000}};
  // The provider declines the first attempt (a retryable failure), not the second.
  auto declined = run(*order, task("Charge", flow::EXECUTE, input, 1));
  ASSERT_TRUE(declined.has_error()) << declined.DebugString();
  EXPECT_FALSE(declined.error().non_retryable());
  EXPECT_NE(declined.error().message().find("declined"), std::string::npos);
  auto charged = run(*order, task("Charge", flow::EXECUTE, input, 2));
  EXPECT_EQ(go_to(charged).step_type(), "Ship");
  const json shipping = from_payload(go_to(charged).input());
  EXPECT_EQ(shipping["charged_on_attempt"], 2);
  EXPECT_EQ(shipping["reminders"], 0);

  // Ship waits for the seller's approval or the reminder Timer.
  auto waited = run(*order, task("Ship", flow::WAIT_FOR, shipping));
  ASSERT_TRUE(waited.has_wait()) << waited.DebugString();
  const flow::Wait& wait = waited.wait();
  EXPECT_EQ(wait.kind(), flow::ANY_OF);
  ASSERT_EQ(wait.conditions_size(), 2);
  EXPECT_EQ(wait.conditions(0).channel().channel(), "seller-approval");
  EXPECT_EQ(wait.conditions(1).timer().duration_ms(), 5000);

  // The reminder fired: remind and wait again.
  flow::FlowTask reminded = task("Ship", flow::EXECUTE, shipping);
  fired(reminded, wait, 1);
  auto again = run(*order, reminded);
  EXPECT_EQ(go_to(again).step_type(), "Ship");
  EXPECT_EQ(from_payload(go_to(again).input())["reminders"], 1);

  // The seller approved: shipped.
  flow::FlowTask approved = task("Ship", flow::EXECUTE, shipping);
  fired(approved, wait, 0, {json{{"by", "seller-7"}}});
  auto shipped = run(*order, approved);
  ASSERT_TRUE(shipped.has_decision() && shipped.decision().has_graceful_complete())
      << shipped.DebugString();
  const json out = from_payload(shipped.decision().graceful_complete());
  EXPECT_EQ(out["status"], "shipped");
  EXPECT_EQ(out["approved_by"], (json{{"by", "seller-7"}}));
}

TEST(ExampleFlows, SignUpResendsOnItsTimerAndGivesUpAfterMaxSends) {
  auto signup = examples::signup();
  EXPECT_EQ(signup->declaration().start_step_type(), "SendEmail");
  const json input = {{"email", "ann@example.com"}, {"code", "123456"}, {"max_sends", 2}};
  auto sent = run(*signup, task("SendEmail", flow::EXECUTE, input));
  EXPECT_EQ(go_to(sent).step_type(), "AwaitVerification");
  json waiting = from_payload(go_to(sent).input());
  EXPECT_EQ(waiting["sends"], 1);

  auto waited = run(*signup, task("AwaitVerification", flow::WAIT_FOR, waiting));
  ASSERT_TRUE(waited.has_wait());
  const flow::Wait wait = waited.wait();
  // A wrong code waits again; the right one completes.
  flow::FlowTask wrong = task("AwaitVerification", flow::EXECUTE, waiting);
  fired(wrong, wait, 0, {json{{"code", "000000"}}});
  EXPECT_EQ(go_to(run(*signup, wrong)).step_type(), "AwaitVerification");
  flow::FlowTask right = task("AwaitVerification", flow::EXECUTE, waiting);
  fired(right, wait, 0, {json{{"code", "123456"}}});
  auto verified = run(*signup, right);
  ASSERT_TRUE(verified.decision().has_graceful_complete()) << verified.DebugString();
  EXPECT_EQ(from_payload(verified.decision().graceful_complete())["verified"],
            "ann@example.com");
  // The resend Timer: send again, until max_sends e-mails went out.
  flow::FlowTask resend = task("AwaitVerification", flow::EXECUTE, waiting);
  fired(resend, wait, 1);
  EXPECT_EQ(go_to(run(*signup, resend)).step_type(), "SendEmail");
  waiting["sends"] = 2;
  flow::FlowTask last = task("AwaitVerification", flow::EXECUTE, waiting);
  fired(last, wait, 1);
  auto failed = run(*signup, last);
  ASSERT_TRUE(failed.decision().has_force_fail()) << failed.DebugString();
  EXPECT_NE(failed.decision().force_fail().find("not verified after 2 e-mails"), std::string::npos);
}

TEST(ExampleFlows, ParallelQuotesFansOutAndPicksTheCheapestCancellingTheRest) {
  auto quotes = examples::parallel_quotes();
  const json input = {{"parcel", "p-1"}, {"settle_ms", 100}};
  auto started = run(*quotes, task("Start", flow::EXECUTE, input));
  ASSERT_TRUE(started.decision().has_go_to()) << started.DebugString();
  std::vector<std::string> moved;
  for (const auto& m : started.decision().go_to().movements()) moved.push_back(m.step_type());
  EXPECT_EQ(moved, (std::vector<std::string>{"Quote", "Quote", "Quote", "Pick"}));

  auto waited = run(*quotes, task("Pick", flow::WAIT_FOR, input));
  ASSERT_TRUE(waited.has_wait());
  EXPECT_EQ(waited.wait().kind(), flow::ALL_OF);
  flow::FlowTask pick = task("Pick", flow::EXECUTE, input);
  fired(pick, waited.wait(), 0,
        {json{{"carrier", "A"}, {"price", 12}}, json{{"carrier", "B"}, {"price", 9}}});
  fired(pick, waited.wait(), 1);
  auto picked = run(*quotes, pick);
  ASSERT_TRUE(picked.decision().has_graceful_complete()) << picked.DebugString();
  EXPECT_EQ(from_payload(picked.decision().graceful_complete())["winner"]["carrier"], "B");
  EXPECT_EQ(std::vector<std::string>(picked.decision().cancel_step_types().begin(),
                                     picked.decision().cancel_step_types().end()),
            std::vector<std::string>{"Quote"});
}

TEST(ExampleFlows, PipelinesPassTheirInputAlongAndCompleteWithIt) {
  std::shared_ptr<Flow> found;
  for (auto& f : examples::pipelines(std::chrono::milliseconds(0)))
    if (f->type() == "ThreeSteps") found = f;
  ASSERT_TRUE(found);
  Flow& three = *found;
  EXPECT_EQ(three.start_step(), "Work1");
  const json input = {{"n", 7}};
  auto first = run(three, task("Work1", flow::EXECUTE, input));
  EXPECT_EQ(go_to(first).step_type(), "Work2");
  EXPECT_EQ(from_payload(go_to(first).input()), input);
  auto last = run(three, task("Work3", flow::EXECUTE, input));
  ASSERT_TRUE(last.decision().has_graceful_complete()) << last.DebugString();
  EXPECT_EQ(from_payload(last.decision().graceful_complete()), input);
}

}  // namespace
}  // namespace dex
