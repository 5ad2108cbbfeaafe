// OrderProcessing: charge with retries; ship waits AnyOf(the seller's
// approval, a reminder Timer) and loops on the Timer; exhausted ship retries
// proceed to a refund.
//  - Attribute `order-status` (string, indexed KEYWORD as `OrderStatus`):
//    each Step writes where the order is ("charged", "awaiting-approval",
//    "shipped", "refunded"); the Steps only write it, so their tasks carry no
//    Attribute.
//  - Indexed Attributes a client sets (initial Attributes of the start, or
//    `flow attributes set`), so that orders can be found (docs/search.md):
//    `customer` (string, KEYWORD), `items` (int64, INT), `total` (double,
//    DOUBLE), `placed-at` (datetime, DATETIME as `PlacedAt`) and `tags` (a
//    JSON array of strings, KEYWORD_ARRAY). The Steps neither read nor write
//    them. E.g. dexcli flow start OrderProcessing --flow-id o-7 --string
//    customer=acme --int items=3 --double total=99.5 --datetime
//    placed-at=2027-01-15T10:00:00Z --json 'tags=["eu","gift"]', then
//    dexcli flow search "customer = 'acme' AND Total > 50".
//  - RPC `approve`, input {"seller": "<id>"}: publishes the seller's approval
//    (what Ship waits on) and answers {"approved": true}.
//  - RPC `describe`: answers {"status": <order-status>} (null before Charge).
//
// Input: {"order": "o-1", "amount": 42, "fail_charges": 0, "reminder_ms": 86400000,
//         "fail_shipping": false}
#include "example_flows.h"

namespace dex::examples {
namespace {

const Channel kSellerApproval("seller-approval");
// Queries name an index by its key: `OrderStatus`, where `order-status` would
// need back quotes. Each also syncs (kSync) to the run's Attribute Store when
// a start names one (`dexcli flow start ... --attribute-store orders`;
// docs/attribute-store.md): a table with a column per key.
const Attribute<std::string> kOrderStatus{
    "order-status", {flow::INDEX_KEYWORD, "OrderStatus"}, kSync};
const Attribute<std::string> kCustomer{"customer", flow::INDEX_KEYWORD, kSync};
const Attribute<int64_t> kItems{"items", flow::INDEX_INT, kSync};
const Attribute<double> kTotal{"total", flow::INDEX_DOUBLE, kSync};
const Attribute<DateTime> kPlacedAt{"placed-at", {flow::INDEX_DATETIME, "PlacedAt"}, kSync};
const Attribute<std::vector<std::string>> kTags{"tags", flow::INDEX_KEYWORD_ARRAY, kSync};

class Charge final : public Step {
 public:
  std::string type() const override { return "Charge"; }
  StepOptions options() const override {
    StepOptions o;
    o.execute.retry.initial_interval = std::chrono::milliseconds(200);
    o.execute.retry.maximum_attempts = 4;
    return o;
  }
  AttributeReads attribute_reads() const override { return AttributeReads::none(); }
  StepDecision execute(Context& ctx) override {
    // A payment provider that declines the first `fail_charges` attempts.
    if (ctx.attempt() <= ctx.input().value("fail_charges", 0u))
      throw std::runtime_error("the card was declined (attempt " + std::to_string(ctx.attempt()) +
                               ")");
    json order = ctx.input();
    order["charged_on_attempt"] = ctx.attempt();
    order["reminders"] = 0;
    kOrderStatus.set(ctx, "charged");
    return StepDecision::go_to("Ship", order);
  }
};

class Ship final : public WaitingStep {
 public:
  std::string type() const override { return "Ship"; }
  StepOptions options() const override {
    StepOptions o;
    o.execute.retry.initial_interval = std::chrono::milliseconds(100);
    o.execute.retry.maximum_attempts = 2;
    o.execute.recovery_step = "Refund";
    return o;
  }
  AttributeReads attribute_reads() const override { return AttributeReads::none(); }
  Wait wait_for(Context& ctx) override {
    kOrderStatus.set(ctx, "awaiting-approval");  // committed with the Wait
    const auto reminder = std::chrono::milliseconds(ctx.input().value("reminder_ms", 86'400'000));
    return Wait::any_of({kSellerApproval.for_one(), Timer::after(reminder)});
  }
  StepDecision execute(Context& ctx) override {
    json order = ctx.input();
    if (ctx.timer_fired()) {
      // No approval yet: remind the seller and wait again.
      order["reminders"] = order.value("reminders", 0) + 1;
      return StepDecision::go_to("Ship", order);
    }
    if (order.value("fail_shipping", false))
      throw std::runtime_error("the carrier refused the parcel");
    const auto approvals = ctx.messages(kSellerApproval);
    kOrderStatus.set(ctx, "shipped");
    return StepDecision::graceful_complete({{"order", order.value("order", "")},
                                            {"status", "shipped"},
                                            {"approved_by", approvals.at(0)},
                                            {"reminders", order["reminders"]},
                                            {"charged_on_attempt", order["charged_on_attempt"]}});
  }
};

class Refund final : public Step {
 public:
  std::string type() const override { return "Refund"; }
  AttributeReads attribute_reads() const override { return AttributeReads::none(); }
  StepDecision execute(Context& ctx) override {
    kOrderStatus.set(ctx, "refunded");
    return StepDecision::graceful_complete({{"order", ctx.input().value("order", "")},
                                            {"status", "refunded"},
                                            {"reason", ctx.recovery_error()}});
  }
};

// The seller approves through the run itself: the message goes to the
// Channel Ship waits on, committed with the answer.
RpcResult approve(Context& ctx, const json& input) {
  if (!input.is_object() || !input.contains("seller") || !input["seller"].is_string())
    throw FlowFailure("approve takes {\"seller\": \"<id>\"}, not " + input.dump(), true);
  ctx.publish(kSellerApproval, input);
  return json{{"approved", true}};
}

RpcResult describe(Context& ctx, const json&) {
  const auto status = kOrderStatus.get(ctx);
  return json{{"status", status ? json(*status) : json(nullptr)}};
}

class OrderProcessing final : public Flow {
 public:
  std::string type() const override { return "OrderProcessing"; }
  std::string start_step() const override { return "Charge"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Charge>(), std::make_shared<Ship>(), std::make_shared<Refund>()};
  }
  std::vector<Channel> channels() const override { return {kSellerApproval}; }
  std::vector<AttributeDef> attributes() const override {
    return {kOrderStatus, kCustomer, kItems, kTotal, kPlacedAt, kTags};
  }
  std::vector<Rpc> rpcs() const override {
    return {Rpc("approve", approve, RpcOptions{{}, AttributeReads::none()}),
            Rpc("describe", describe, RpcOptions{{}, {kOrderStatus}})};
  }
};

}  // namespace

std::shared_ptr<Flow> order_processing() { return std::make_shared<OrderProcessing>(); }

}  // namespace dex::examples
