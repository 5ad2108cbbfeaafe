// RetryOnce: a Flow retry (StartOptions::retry) seen from the Flow. Its one
// Step, Attempt, fails the run (ForceFail) while the run's Flow retry
// attempt is at most the input's `fail_runs` (default 1), and otherwise
// completes with {"flow_attempt": n, "run_id": <this run's ID>}. Started with
// a retry policy that allows it, the first run ends FAILED and the server
// starts the next run of the same Flow ID after the backoff, which completes.
#include <string>

#include "example_flows.h"

namespace dex::examples {
namespace {

class Attempt final : public Step {
 public:
  std::string type() const override { return "Attempt"; }
  StepDecision execute(Context& ctx) override {
    const uint32_t fail_runs = ctx.input().value("fail_runs", 1u);
    if (ctx.flow_attempt() <= fail_runs)
      return StepDecision::force_fail("run " + std::to_string(ctx.flow_attempt()) +
                                      " fails on purpose");
    return StepDecision::graceful_complete(
        {{"flow_attempt", ctx.flow_attempt()}, {"run_id", ctx.run_id()}});
  }
};

class RetryOnce final : public Flow {
 public:
  std::string type() const override { return "RetryOnce"; }
  std::string start_step() const override { return "Attempt"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Attempt>()};
  }
};

}  // namespace

std::shared_ptr<Flow> retry_once() { return std::make_shared<RetryOnce>(); }

}  // namespace dex::examples
