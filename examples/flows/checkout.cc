// Checkout: the "bug fix" story of time travel (docs/time-travel.md). Runs
// fail on a bug in a Worker's code; once a fixed Worker is deployed, each
// failed run is time traveled to the start of its Charge, which then runs the
// fixed code from the state the run had there.
//  - Attribute `stage` (string): Reserve writes "reserved".
//  - Reserve: reserves the items (writes stage = "reserved") and goes to
//    Charge with its input.
//  - Charge: a Worker started with `--charge-bug` (checkout(true)) reads the
//    amount in cents as dollars and fails the Step non-retryably (retrying
//    the same code cannot help), so the run ends FAILED. The fixed code
//    charges only a reserved order (it reads `stage`: a run time traveled to
//    Charge carries it from the point) and completes with
//    {"charged": <amount_cents>, "by": "fixed", "stage": "reserved"}.
//
// Input: {"order": "o-1", "amount_cents": 1999}
#include "example_flows.h"

namespace dex::examples {
namespace {

const Attribute<std::string> kStage{"stage"};

int64_t amount_cents(const Context& ctx) {
  const json& input = ctx.input();
  if (!input.is_object() || !input.contains("amount_cents") ||
      !input["amount_cents"].is_number_integer() || input["amount_cents"].get<int64_t>() <= 0)
    throw FlowFailure("the input needs a positive integer \"amount_cents\", not " + input.dump(),
                      true);
  return input["amount_cents"].get<int64_t>();
}

class Reserve final : public Step {
 public:
  std::string type() const override { return "Reserve"; }
  AttributeReads attribute_reads() const override { return AttributeReads::none(); }
  StepDecision execute(Context& ctx) override {
    (void)amount_cents(ctx);  // a bad input fails here, before anything is reserved
    kStage.set(ctx, "reserved");
    return StepDecision::go_to("Charge", ctx.input());
  }
};

class Charge final : public Step {
 public:
  explicit Charge(bool bug) : bug_(bug) {}
  std::string type() const override { return "Charge"; }
  AttributeReads attribute_reads() const override { return {kStage}; }
  StepDecision execute(Context& ctx) override {
    const int64_t cents = amount_cents(ctx);
    if (bug_)
      throw FlowFailure("bug: amount in cents read as dollars (would charge " +
                            std::to_string(cents * 100) + " cents instead of " +
                            std::to_string(cents) + ")",
                        true);
    const std::string stage = kStage.get(ctx).value_or("");
    if (stage != "reserved")
      throw FlowFailure("charge before the reservation (stage '" + stage + "')", true);
    return StepDecision::graceful_complete({{"charged", cents}, {"by", "fixed"}, {"stage", stage}});
  }

 private:
  const bool bug_;
};

class Checkout final : public Flow {
 public:
  explicit Checkout(bool charge_bug) : charge_bug_(charge_bug) {}
  std::string type() const override { return "Checkout"; }
  std::string start_step() const override { return "Reserve"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Reserve>(), std::make_shared<Charge>(charge_bug_)};
  }
  std::vector<AttributeDef> attributes() const override { return {kStage}; }

 private:
  const bool charge_bug_;
};

}  // namespace

std::shared_ptr<Flow> checkout(bool charge_bug) { return std::make_shared<Checkout>(charge_bug); }

}  // namespace dex::examples
