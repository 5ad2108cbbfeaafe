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

const flow::RpcDeclaration* rpc_of(const flow::FlowDeclaration& d, const std::string& name) {
  for (const auto& r : d.rpcs())
    if (r.name() == name) return &r;
  return nullptr;
}

std::vector<std::string> strings(const google::protobuf::RepeatedPtrField<std::string>& field) {
  return {field.begin(), field.end()};
}

// An RPC task of `name`, carrying `attributes` (what the server reads for it).
flow::FlowTask rpc_task(const std::string& name, const json& input,
                        const std::vector<flow::Attribute>& attributes = {}) {
  flow::FlowTask t;
  t.set_task_id("t-rpc-" + name);
  t.set_flow_id("f-1");
  t.set_run_id("run-1");
  t.set_step_execution_id("rpc:9.1");
  t.set_method(flow::RPC);
  t.set_rpc_name(name);
  t.set_attempt(1);
  *t.mutable_input() = to_payload(input);
  for (const auto& a : attributes) *t.add_attributes() = a;
  return t;
}

// The output of an RPC result (null when the result is not an RPC's).
json output_of(const flow::FlowTaskResult& r) {
  EXPECT_TRUE(r.has_rpc()) << r.DebugString();
  return r.has_rpc() ? from_payload(r.rpc().output()) : json();
}

// "key[instance]=<value>;..." of a result's Attribute writes, in order.
std::string writes(const flow::FlowTaskResult& r) {
  std::string out;
  for (const auto& w : r.attribute_writes()) {
    out += w.key() + (w.instance_key().empty() ? "" : "[" + w.instance_key() + "]") + "=";
    switch (w.value().value_case()) {
      case flow::AttributeValue::kStringValue:
        out += w.value().string_value();
        break;
      case flow::AttributeValue::kInt64Value:
        out += std::to_string(w.value().int64_value());
        break;
      case flow::AttributeValue::kBoolValue:
        out += w.value().bool_value() ? "true" : "false";
        break;
      case flow::AttributeValue::VALUE_NOT_SET:
        out += "<deleted>";
        break;
      default:
        out += w.value().ShortDebugString();
    }
    out += ";";
  }
  return out;
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
  EXPECT_EQ(from_payload(verified.decision().graceful_complete())["verified"], "ann@example.com");
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

TEST(ExampleFlows, AttrRpcDemoWritesItsStatusWaitsOnDoneAndAnswersItsRpcs) {
  auto demo = examples::attr_rpc_demo();
  const flow::FlowDeclaration d = demo->declaration();
  EXPECT_EQ(d.flow_type(), "AttrRpcDemo");
  EXPECT_EQ(d.start_step_type(), "Demo");
  ASSERT_EQ(d.attributes_size(), 2);
  EXPECT_EQ(d.attributes(0).key(), "status");
  EXPECT_EQ(d.attributes(0).type(), flow::ATTRIBUTE_STRING);
  EXPECT_FALSE(d.attributes(0).is_map());
  EXPECT_EQ(d.attributes(1).key(), "counts");
  EXPECT_EQ(d.attributes(1).type(), flow::ATTRIBUTE_INT64);
  EXPECT_TRUE(d.attributes(1).is_map());
  for (const char* name : {"describe", "set-status"}) {
    const auto* rpc = rpc_of(d, name);
    ASSERT_NE(rpc, nullptr) << name;
    EXPECT_EQ(strings(rpc->attribute_reads()), std::vector<std::string>{"status"}) << name;
    EXPECT_TRUE(rpc->lock_keys().empty()) << name;
  }
  EXPECT_TRUE(demo->validate().is_ok()) << demo->validate().message();

  // WaitFor writes "started" with its Wait on Channel `done`.
  auto waited = run(*demo, task("Demo", flow::WAIT_FOR, json::object()));
  ASSERT_TRUE(waited.has_wait()) << waited.DebugString();
  EXPECT_EQ(writes(waited), "status=started;");
  ASSERT_EQ(waited.wait().conditions_size(), 1);
  EXPECT_EQ(waited.wait().conditions(0).channel().channel(), "done");

  // describe answers the status it reads (null when there is none).
  EXPECT_EQ(output_of(run(*demo, rpc_task("describe", nullptr))), (json{{"status", nullptr}}));
  const Attribute<std::string> status("status");
  auto described = run(*demo, rpc_task("describe", nullptr, {status.write("paused")}));
  EXPECT_EQ(output_of(described), (json{{"status", "paused"}}));
  EXPECT_EQ(writes(described), "");

  // set-status writes its input's status; a bad input fails the RPC naming the shape.
  auto set = run(*demo, rpc_task("set-status", {{"status", "shipping"}}, {status.write("x")}));
  EXPECT_EQ(output_of(set), (json{{"ok", true}}));
  EXPECT_EQ(writes(set), "status=shipping;");
  auto bad = run(*demo, rpc_task("set-status", {{"status", 7}}));
  ASSERT_TRUE(bad.has_error()) << bad.DebugString();
  EXPECT_NE(bad.error().message().find("set-status takes"), std::string::npos);
  EXPECT_EQ(bad.attribute_writes_size(), 0);

  // A message on `done` completes the run with it, the status and the counts.
  const AttributeMap<int64_t> counts("counts");
  flow::FlowTask done = task("Demo", flow::EXECUTE, json::object());
  *done.add_attributes() = status.write("paused");
  *done.add_attributes() = counts.write("eu", 3);
  fired(done, waited.wait(), 0, {json{{"bye", 1}}});
  auto completed = run(*demo, done);
  ASSERT_TRUE(completed.has_decision() && completed.decision().has_graceful_complete())
      << completed.DebugString();
  EXPECT_EQ(from_payload(completed.decision().graceful_complete()),
            (json{{"done", {{"bye", 1}}}, {"status", "paused"}, {"counts", {{"eu", 3}}}}));
}

TEST(ExampleFlows, E2ECounterAddsOncePerIdUnderItsLockAndCompletesWithTheTotal) {
  auto counter = examples::e2e_counter();
  const flow::FlowDeclaration d = counter->declaration();
  EXPECT_EQ(d.flow_type(), "E2ECounter");
  EXPECT_EQ(d.start_step_type(), "Count");
  std::vector<std::string> keys;
  for (const auto& a : d.attributes()) keys.push_back(a.key() + (a.is_map() ? "[]" : ""));
  EXPECT_EQ(keys, (std::vector<std::string>{"applied[]", "total", "note[]"}));
  const auto* add = rpc_of(d, "add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(strings(add->lock_keys()), std::vector<std::string>{"counter"});
  EXPECT_EQ(strings(add->attribute_reads()), (std::vector<std::string>{"total", "applied"}));
  const auto* count = step_of(d, "Count");
  ASSERT_NE(count, nullptr);
  EXPECT_TRUE(count->has_wait_for());
  EXPECT_EQ(strings(count->options().execute().lock_keys()), std::vector<std::string>{"counter"});
  EXPECT_TRUE(count->options().wait_for().lock_keys().empty());
  EXPECT_EQ(strings(count->attribute_reads()), std::vector<std::string>{"total"});
  EXPECT_TRUE(counter->validate().is_ok()) << counter->validate().message();

  const Attribute<int64_t> total("total");
  const AttributeMap<int64_t> applied("applied");
  // The first add of an id: total + n and applied[id] = n.
  auto first = run(*counter, rpc_task("add", {{"id", "a"}, {"n", 5}}));
  EXPECT_EQ(output_of(first), (json{{"total", 5}}));
  EXPECT_EQ(writes(first), "total=5;applied[a]=5;");
  auto second = run(
      *counter, rpc_task("add", {{"id", "b"}, {"n", -2}}, {total.write(5), applied.write("a", 5)}));
  EXPECT_EQ(output_of(second), (json{{"total", 3}}));
  EXPECT_EQ(writes(second), "total=3;applied[b]=-2;");
  // An id already applied answers the total as it is and writes nothing.
  auto repeat =
      run(*counter, rpc_task("add", {{"id", "a"}, {"n", 5}},
                             {total.write(3), applied.write("a", 5), applied.write("b", -2)}));
  EXPECT_EQ(output_of(repeat), (json{{"total", 3}, {"repeat", true}}));
  EXPECT_EQ(writes(repeat), "");
  // A bad input fails the RPC, writing nothing.
  for (const json& bad :
       {json{{"n", 1}}, json{{"id", ""}, {"n", 1}}, json{{"id", "c"}, {"n", "1"}}}) {
    auto failed = run(*counter, rpc_task("add", bad));
    ASSERT_TRUE(failed.has_error()) << bad.dump();
    EXPECT_NE(failed.error().message().find("add takes"), std::string::npos) << bad.dump();
    EXPECT_EQ(failed.attribute_writes_size(), 0);
  }

  // Count waits for one message on `stop`, then completes with the total.
  auto waited = run(*counter, task("Count", flow::WAIT_FOR, json::object()));
  ASSERT_TRUE(waited.has_wait()) << waited.DebugString();
  ASSERT_EQ(waited.wait().conditions_size(), 1);
  EXPECT_EQ(waited.wait().conditions(0).channel().channel(), "stop");
  flow::FlowTask stop = task("Count", flow::EXECUTE, json::object());
  *stop.add_attributes() = total.write(42);
  fired(stop, waited.wait(), 0, {json::object()});
  auto done = run(*counter, stop);
  ASSERT_TRUE(done.has_decision() && done.decision().has_graceful_complete()) << done.DebugString();
  EXPECT_EQ(from_payload(done.decision().graceful_complete()), (json{{"total", 42}}));
  // No total yet: 0.
  flow::FlowTask empty = task("Count", flow::EXECUTE, json::object());
  fired(empty, waited.wait(), 0, {json::object()});
  EXPECT_EQ(from_payload(run(*counter, empty).decision().graceful_complete()),
            (json{{"total", 0}}));
}

TEST(ExampleFlows, OrderProcessingWritesItsStatusAndAnswersApproveAndDescribe) {
  auto order = examples::order_processing();
  const flow::FlowDeclaration d = order->declaration();
  ASSERT_EQ(d.attributes_size(), 6);
  EXPECT_EQ(d.attributes(0).key(), "order-status");
  EXPECT_EQ(d.attributes(0).type(), flow::ATTRIBUTE_STRING);
  // Every one is indexed, for `dexcli flow search` (and the search failover test).
  std::vector<std::string> indexes;
  for (const auto& a : d.attributes())
    indexes.push_back(a.key() + ":" + flow::IndexType_Name(a.index().type()) + ":" +
                      a.index().index_key());
  EXPECT_EQ(indexes, (std::vector<std::string>{
                         "order-status:INDEX_KEYWORD:OrderStatus",
                         "customer:INDEX_KEYWORD:", "items:INDEX_INT:", "total:INDEX_DOUBLE:",
                         "placed-at:INDEX_DATETIME:PlacedAt", "tags:INDEX_KEYWORD_ARRAY:"}));
  // The Steps only write it: their tasks carry nothing.
  for (const char* step : {"Charge", "Ship", "Refund"})
    EXPECT_TRUE(step_of(d, step)->attribute_reads().empty()) << step;
  ASSERT_NE(rpc_of(d, "approve"), nullptr);
  EXPECT_TRUE(rpc_of(d, "approve")->attribute_reads().empty());
  ASSERT_NE(rpc_of(d, "describe"), nullptr);
  EXPECT_EQ(strings(rpc_of(d, "describe")->attribute_reads()),
            std::vector<std::string>{"order-status"});
  EXPECT_TRUE(order->validate().is_ok()) << order->validate().message();

  const json input = {{"order", "o-1"}, {"reminder_ms", 5000}};
  EXPECT_EQ(writes(run(*order, task("Charge", flow::EXECUTE, input))), "order-status=charged;");
  // A declined charge writes nothing (its writes go with the failed attempt).
  auto declined = run(*order, task("Charge", flow::EXECUTE, {{"fail_charges", 1}}));
  ASSERT_TRUE(declined.has_error());
  EXPECT_EQ(declined.attribute_writes_size(), 0);
  auto waited = run(*order, task("Ship", flow::WAIT_FOR, input));
  EXPECT_EQ(writes(waited), "order-status=awaiting-approval;");
  flow::FlowTask approved = task("Ship", flow::EXECUTE, input);
  fired(approved, waited.wait(), 0, {json{{"seller", "s-1"}}});
  EXPECT_EQ(writes(run(*order, approved)), "order-status=shipped;");
  flow::FlowTask refund = task("Refund", flow::EXECUTE, input);
  refund.set_recovery_error("the carrier refused the parcel");
  auto refunded = run(*order, refund);
  EXPECT_EQ(writes(refunded), "order-status=refunded;");
  EXPECT_EQ(from_payload(refunded.decision().graceful_complete())["reason"],
            "the carrier refused the parcel");

  // approve publishes its input to the Channel Ship waits on, with its answer.
  auto approve = run(*order, rpc_task("approve", {{"seller", "s-1"}}));
  EXPECT_EQ(output_of(approve), (json{{"approved", true}}));
  ASSERT_EQ(approve.publishes_size(), 1);
  EXPECT_EQ(approve.publishes(0).channel(), "seller-approval");
  ASSERT_EQ(approve.publishes(0).messages_size(), 1);
  EXPECT_EQ(from_payload(approve.publishes(0).messages(0)), (json{{"seller", "s-1"}}));
  EXPECT_EQ(writes(approve), "");
  auto anonymous = run(*order, rpc_task("approve", json::object()));
  ASSERT_TRUE(anonymous.has_error()) << anonymous.DebugString();
  EXPECT_EQ(anonymous.publishes_size(), 0);

  const Attribute<std::string> status("order-status");
  EXPECT_EQ(output_of(run(*order, rpc_task("describe", nullptr, {status.write("shipped")}))),
            (json{{"status", "shipped"}}));
  EXPECT_EQ(output_of(run(*order, rpc_task("describe", nullptr))), (json{{"status", nullptr}}));
}

TEST(ExampleFlows, MoneyTransferDebitsUnderItsLockAndCompensatesAFailedCredit) {
  auto transfer = examples::money_transfer();
  const flow::FlowDeclaration d = transfer->declaration();
  EXPECT_EQ(d.flow_type(), "MoneyTransfer");
  EXPECT_EQ(d.start_step_type(), "Debit");
  std::vector<std::string> keys;
  for (const auto& a : d.attributes()) keys.push_back(a.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"balance", "transferred"}));
  const std::vector<std::string> balance_only{"balance"};
  for (const char* step : {"Debit", "Compensate"}) {
    EXPECT_EQ(strings(step_of(d, step)->options().execute().lock_keys()), balance_only) << step;
    EXPECT_EQ(strings(step_of(d, step)->attribute_reads()), balance_only) << step;
  }
  const auto* credit = step_of(d, "Credit");
  EXPECT_TRUE(credit->options().execute().lock_keys().empty());
  EXPECT_TRUE(credit->attribute_reads().empty());
  EXPECT_EQ(credit->options().execute().recovery_step_type(), "Compensate");
  EXPECT_GE(credit->options().execute().retry().maximum_attempts(), 2u);
  ASSERT_NE(rpc_of(d, "balance"), nullptr);
  EXPECT_EQ(strings(rpc_of(d, "balance")->lock_keys()), balance_only);
  EXPECT_EQ(strings(rpc_of(d, "balance")->attribute_reads()), balance_only);
  EXPECT_TRUE(transfer->validate().is_ok()) << transfer->validate().message();

  const Attribute<int64_t> balance("balance");
  const json input = {{"amount", 30}, {"to", "acct-2"}, {"fail_credit", true}};
  // Debit takes the amount from the balance.
  flow::FlowTask debit = task("Debit", flow::EXECUTE, input);
  *debit.add_attributes() = balance.write(100);
  auto debited = run(*transfer, debit);
  EXPECT_EQ(go_to(debited).step_type(), "Credit");
  EXPECT_EQ(from_payload(go_to(debited).input()), input);
  EXPECT_EQ(writes(debited), "balance=70;");
  // A balance that does not cover the amount (or none) fails the run at once, writing nothing.
  for (int64_t held : {29, -1}) {
    flow::FlowTask poor = task("Debit", flow::EXECUTE, input);
    if (held >= 0) *poor.add_attributes() = balance.write(held);
    auto refused = run(*transfer, poor);
    ASSERT_TRUE(refused.has_error()) << refused.DebugString();
    EXPECT_TRUE(refused.error().non_retryable());
    EXPECT_NE(refused.error().message().find("insufficient funds"), std::string::npos);
    EXPECT_EQ(refused.attribute_writes_size(), 0);
  }
  auto no_amount = run(*transfer, task("Debit", flow::EXECUTE, {{"amount", -5}}));
  ASSERT_TRUE(no_amount.has_error());
  EXPECT_TRUE(no_amount.error().non_retryable());

  // Credit: refused (retryably, so its retries and then Compensate follow), or transferred.
  auto refused = run(*transfer, task("Credit", flow::EXECUTE, input));
  ASSERT_TRUE(refused.has_error()) << refused.DebugString();
  EXPECT_FALSE(refused.error().non_retryable());
  EXPECT_EQ(refused.attribute_writes_size(), 0);
  json ok = input;
  ok["fail_credit"] = false;
  auto credited = run(*transfer, task("Credit", flow::EXECUTE, ok));
  EXPECT_EQ(writes(credited), "transferred=true;");
  EXPECT_EQ(from_payload(credited.decision().graceful_complete()),
            (json{{"status", "transferred"}, {"amount", 30}, {"to", "acct-2"}}));

  // Compensate gives the amount back to the balance as it is now.
  flow::FlowTask compensate = task("Compensate", flow::EXECUTE, input);
  compensate.set_recovery_error(refused.error().message());
  *compensate.add_attributes() = balance.write(70);
  auto compensated = run(*transfer, compensate);
  EXPECT_EQ(writes(compensated), "balance=100;transferred=false;");
  ASSERT_TRUE(compensated.decision().has_graceful_complete()) << compensated.DebugString();
  const json out = from_payload(compensated.decision().graceful_complete());
  EXPECT_EQ(out["status"], "compensated");
  EXPECT_EQ(out["balance"], 100);
  EXPECT_EQ(out["reason"], "the destination bank refused the credit");

  // The balance RPC answers what it reads.
  EXPECT_EQ(output_of(run(*transfer, rpc_task("balance", nullptr, {balance.write(70)}))),
            (json{{"balance", 70}}));
}

TEST(ExampleFlows, FanOutWaitsForItsSquareChildrenAndSumsThem) {
  auto fan_out = examples::fan_out();
  auto square = examples::square();
  auto waited = run(*fan_out, task("Fan", flow::WAIT_FOR, {{"children", 3}}));
  ASSERT_TRUE(waited.has_wait()) << waited.DebugString();
  const flow::Wait& w = waited.wait();
  EXPECT_EQ(w.kind(), flow::ALL_OF);
  ASSERT_EQ(w.conditions_size(), 3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(w.conditions(i).has_sub_flow());
    EXPECT_EQ(w.conditions(i).sub_flow().flow_type(), "Square");
    EXPECT_EQ(from_payload(w.conditions(i).sub_flow().input()), (json{{"n", i + 1}}));
  }
  EXPECT_EQ(run(*fan_out, task("Fan", flow::WAIT_FOR, json::object())).wait().conditions_size(),
            100)
      << "100 by default";
  auto too_many = run(*fan_out, task("Fan", flow::WAIT_FOR, {{"children", 101}}));
  ASSERT_TRUE(too_many.has_error());
  EXPECT_TRUE(too_many.error().non_retryable());

  // Square writes its Attribute and completes with it.
  auto squared = run(*square, task("Compute", flow::EXECUTE, {{"n", 4}}));
  EXPECT_EQ(writes(squared), "square=16;");
  EXPECT_EQ(from_payload(squared.decision().graceful_complete()), (json{{"n", 4}, {"square", 16}}));

  // Fan sums what its children completed with; a child that did not complete fails the run.
  auto execute = [&](flow::FlowStatus second) {
    flow::FlowTask t = task("Fan", flow::EXECUTE, {{"children", 3}});
    for (int i = 0; i < 3; ++i) {
      auto* c = t.add_conditions();
      c->set_index(static_cast<uint32_t>(i));
      c->set_fired(true);
      *c->mutable_condition() = w.conditions(i);
      auto* r = c->mutable_sub_flow();
      r->set_flow_id("f-1/Fan-1/" + std::to_string(i));
      r->set_status(i == 1 ? second : flow::FLOW_COMPLETED);
      if (r->status() == flow::FLOW_COMPLETED) {
        *r->add_outputs()->mutable_output() =
            to_payload({{"n", i + 1}, {"square", (i + 1) * (i + 1)}});
      } else {
        r->set_close_reason("boom");
      }
    }
    return run(*fan_out, t);
  };
  auto summed = execute(flow::FLOW_COMPLETED);
  EXPECT_EQ(from_payload(summed.decision().graceful_complete()),
            (json{{"children", 3}, {"sum", 14}}));
  auto failed = execute(flow::FLOW_FAILED);
  ASSERT_TRUE(failed.decision().has_force_fail()) << failed.DebugString();
  EXPECT_EQ(failed.decision().force_fail(), "SubFlow f-1/Fan-1/1 ended FLOW_FAILED: boom");
}

TEST(ExampleFlows, RetryOnceFailsItsFirstRunsAndCompletesTheNext) {
  auto flow = examples::retry_once();
  flow::FlowTask t = task("Attempt", flow::EXECUTE, {{"fail_runs", 1}});
  auto first = run(*flow, t);
  ASSERT_TRUE(first.decision().has_force_fail()) << first.DebugString();
  EXPECT_EQ(first.decision().force_fail(), "run 1 fails on purpose");
  t.set_flow_attempt(2);
  auto second = run(*flow, t);
  EXPECT_EQ(from_payload(second.decision().graceful_complete()),
            (json{{"flow_attempt", 2}, {"run_id", "run-1"}}));
}

}  // namespace
}  // namespace dex
