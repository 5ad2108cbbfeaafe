// ParallelQuotes: ask three carriers at once (GoToMulti); Pick waits AllOf
// (two quotes, a short settle Timer), completes with the cheapest and cancels
// the Quote Step still waiting (the slowest carrier).
//
// Input: {"parcel": "p-1", "delays_ms": {"A": 100, "B": 200, "C": 600000},
//         "prices": {"A": 12, "B": 9, "C": 5}, "settle_ms": 100}
#include "example_flows.h"

namespace dex::examples {
namespace {

const Channel kQuotes("quotes");

class Start final : public Step {
 public:
  std::string type() const override { return "Start"; }
  StepDecision execute(Context& ctx) override {
    std::vector<Movement> moves;
    for (const char* carrier : {"A", "B", "C"}) {
      json ask = ctx.input();
      ask["carrier"] = carrier;
      moves.push_back({"Quote", ask, std::nullopt});
    }
    moves.push_back({"Pick", ctx.input(), std::nullopt});
    return StepDecision::go_to_multi(std::move(moves));
  }
};

// A carrier answers after its delay (a durable Timer stands in for the call).
class Quote final : public WaitingStep {
 public:
  std::string type() const override { return "Quote"; }
  Wait wait_for(Context& ctx) override {
    const std::string carrier = ctx.input().value("carrier", "");
    const auto delay = ctx.input()["delays_ms"].value(carrier, 0);
    return Wait::any_of({Timer::after(std::chrono::milliseconds(delay))});
  }
  StepDecision execute(Context& ctx) override {
    const std::string carrier = ctx.input().value("carrier", "");
    ctx.publish(kQuotes,
                {{"carrier", carrier}, {"price", ctx.input()["prices"].value(carrier, 0)}});
    return StepDecision::dead_end();
  }
};

class Pick final : public WaitingStep {
 public:
  std::string type() const override { return "Pick"; }
  Wait wait_for(Context& ctx) override {
    const auto settle = std::chrono::milliseconds(ctx.input().value("settle_ms", 100));
    return Wait::all_of({kQuotes.for_n(2), Timer::after(settle)});
  }
  StepDecision execute(Context& ctx) override {
    json best;
    for (const auto& q : ctx.messages(kQuotes))
      if (best.is_null() || q.value("price", 0) < best.value("price", 0)) best = q;
    return StepDecision::graceful_complete(
               {{"parcel", ctx.input().value("parcel", "")}, {"winner", best}})
        .cancel_steps({"Quote"});
  }
};

class ParallelQuotes final : public Flow {
 public:
  std::string type() const override { return "ParallelQuotes"; }
  std::string start_step() const override { return "Start"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Start>(), std::make_shared<Quote>(), std::make_shared<Pick>()};
  }
  std::vector<Channel> channels() const override { return {kQuotes}; }
};

}  // namespace

std::shared_ptr<Flow> parallel_quotes() { return std::make_shared<ParallelQuotes>(); }

std::vector<std::shared_ptr<Flow>> all_flows(std::chrono::milliseconds work_time, bool charge_bug) {
  std::vector<std::shared_ptr<Flow>> out = {
      order_processing(), signup(),  parallel_quotes(), money_transfer(), attr_rpc_demo(),
      e2e_counter(),      fan_out(), square(),          retry_once(),     checkout(charge_bug)};
  for (auto& flow : pipelines(work_time)) out.push_back(std::move(flow));
  return out;
}

}  // namespace dex::examples
