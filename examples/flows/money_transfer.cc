// MoneyTransfer: debit the source account, credit the destination, and give
// the money back when the credit keeps failing (a compensation).
//  - Attribute `balance` (int64): the source account's balance, set at the
//    start (StartOptions initial Attributes); `transferred` (bool).
//  - Debit (lock key "balance"): an amount the balance does not cover fails
//    the run at once (non-retryable: retrying cannot help); otherwise it
//    writes balance - amount and goes to Credit.
//  - Credit: the destination bank, which refuses every attempt with
//    "fail_credit"; it writes transferred = true and completes. Its exhausted
//    retries proceed to the recovery Step Compensate.
//  - Compensate (lock key "balance"): writes balance + amount and
//    transferred = false, and completes with status "compensated".
//  - RPC `balance` (lock key "balance"): answers {"balance": <balance>}. The
//    lock makes it wait for a Debit or Compensate under way, so it never
//    answers a balance that is about to change.
//
// Input: {"amount": 30, "to": "acct-2", "fail_credit": false}
#include "example_flows.h"

namespace dex::examples {
namespace {

using namespace std::chrono_literals;

const Attribute<int64_t> kBalance{"balance"};
const Attribute<bool> kTransferred{"transferred"};
const char* const kBalanceLock = "balance";

int64_t amount_of(const Context& ctx) {
  const json& input = ctx.input();
  if (!input.is_object() || !input.contains("amount") || !input["amount"].is_number_integer() ||
      input["amount"].get<int64_t>() <= 0)
    throw FlowFailure("the input needs a positive integer \"amount\", not " + input.dump(), true);
  return input["amount"].get<int64_t>();
}

// A Step whose Execute reads and writes the balance: it holds the lock key
// "balance" while it runs, so no other such Step or RPC reads it meanwhile.
class BalanceStep : public Step {
 public:
  StepOptions options() const override {
    StepOptions o;
    o.execute.lock_keys = {kBalanceLock};
    return o;
  }
  AttributeReads attribute_reads() const override { return {kBalance}; }
};

class Debit final : public BalanceStep {
 public:
  std::string type() const override { return "Debit"; }
  StepDecision execute(Context& ctx) override {
    const int64_t amount = amount_of(ctx);
    const int64_t balance = kBalance.get(ctx).value_or(0);
    if (balance < amount)
      throw FlowFailure("insufficient funds: the balance " + std::to_string(balance) +
                            " does not cover " + std::to_string(amount),
                        true);
    kBalance.set(ctx, balance - amount);
    return StepDecision::go_to("Credit", ctx.input());
  }
};

class Credit final : public Step {
 public:
  std::string type() const override { return "Credit"; }
  StepOptions options() const override {
    StepOptions o;
    // Compensation 3 s after the first refusal (1 s, then 2 s): time for a
    // client to see the debited balance.
    o.execute.retry.initial_interval = 1s;
    o.execute.retry.maximum_attempts = 3;
    o.execute.recovery_step = "Compensate";
    return o;
  }
  AttributeReads attribute_reads() const override { return AttributeReads::none(); }
  StepDecision execute(Context& ctx) override {
    const int64_t amount = amount_of(ctx);
    // A real Step would call the destination bank here (idempotently).
    if (ctx.input().value("fail_credit", false))
      throw std::runtime_error("the destination bank refused the credit");
    kTransferred.set(ctx, true);
    return StepDecision::graceful_complete(
        {{"status", "transferred"}, {"amount", amount}, {"to", ctx.input().value("to", "")}});
  }
};

class Compensate final : public BalanceStep {
 public:
  std::string type() const override { return "Compensate"; }
  StepDecision execute(Context& ctx) override {
    const int64_t amount = amount_of(ctx);
    const int64_t balance = kBalance.get(ctx).value_or(0) + amount;
    kBalance.set(ctx, balance);
    kTransferred.set(ctx, false);
    return StepDecision::graceful_complete({{"status", "compensated"},
                                            {"amount", amount},
                                            {"balance", balance},
                                            {"reason", ctx.recovery_error()}});
  }
};

class MoneyTransfer final : public Flow {
 public:
  std::string type() const override { return "MoneyTransfer"; }
  std::string start_step() const override { return "Debit"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Debit>(), std::make_shared<Credit>(), std::make_shared<Compensate>()};
  }
  std::vector<AttributeDef> attributes() const override { return {kBalance, kTransferred}; }
  std::vector<Rpc> rpcs() const override {
    return {Rpc(
        "balance",
        [](Context& ctx, const json&) -> RpcResult {
          return json{{"balance", kBalance.get(ctx).value_or(0)}};
        },
        RpcOptions{{kBalanceLock}, {kBalance}})};
  }
};

}  // namespace

std::shared_ptr<Flow> money_transfer() { return std::make_shared<MoneyTransfer>(); }

}  // namespace dex::examples
