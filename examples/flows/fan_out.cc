// FanOut: a parent Flow that fans out SubFlows and waits for all of them
// (tests/server/test_flow_examples.py relies on exactly this).
//  - Square (the child): its one Step, Compute, takes {"n": k}, writes
//    Attribute `square` (int64) = k * k with its decision and completes with
//    {"n": k, "square": k * k}.
//  - FanOut (the parent): input {"children": N} (1 to 100, the most conditions
//    one wait may have; default 100). Step Fan's WaitFor waits AllOf N SubFlow
//    conditions, child i (from 0) of type Square with input {"n": i + 1}; the
//    server derives each child's Flow ID, "<flow id>/Fan-1/<i>". Its Execute
//    sums the children's squares and completes with
//    {"children": N, "sum": <the sum>}; a child that did not complete fails
//    the run, naming it. N = 100: the sum is 338350.
#include <string>

#include "example_flows.h"

namespace dex::examples {
namespace {

constexpr int64_t kChildrenMax = 100;

const Attribute<int64_t> kSquare{"square"};

class Compute final : public Step {
 public:
  std::string type() const override { return "Compute"; }
  StepDecision execute(Context& ctx) override {
    const int64_t n = ctx.input().value("n", int64_t{0});
    kSquare.set(ctx, n * n);
    return StepDecision::graceful_complete({{"n", n}, {"square", n * n}});
  }
};

class Square final : public Flow {
 public:
  std::string type() const override { return "Square"; }
  std::string start_step() const override { return "Compute"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Compute>()};
  }
  std::vector<AttributeDef> attributes() const override { return {kSquare}; }
};

class Fan final : public WaitingStep {
 public:
  std::string type() const override { return "Fan"; }
  Wait wait_for(Context& ctx) override {
    const int64_t n = ctx.input().value("children", kChildrenMax);
    if (n < 1 || n > kChildrenMax)
      throw FlowFailure("children must be 1 to 100, not " + std::to_string(n), true);
    std::vector<Condition> children;
    for (int64_t i = 0; i < n; ++i)  // bounded by kChildrenMax
      children.push_back(SubFlow::start("Square", {{"n", i + 1}}));
    return Wait::all_of(std::move(children));
  }
  StepDecision execute(Context& ctx) override {
    int64_t sum = 0;
    const std::vector<SubFlowResult> children = ctx.sub_flows();
    for (const SubFlowResult& child : children) {  // bounded by kChildrenMax
      if (!child.completed())
        return StepDecision::force_fail("SubFlow " + child.flow_id + " ended " +
                                        flow::FlowStatus_Name(child.status) + ": " +
                                        child.close_reason);
      sum += child.output().value("square", int64_t{0});
    }
    return StepDecision::graceful_complete(
        {{"children", static_cast<int64_t>(children.size())}, {"sum", sum}});
  }
};

class FanOut final : public Flow {
 public:
  std::string type() const override { return "FanOut"; }
  std::string start_step() const override { return "Fan"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Fan>()}; }
};

}  // namespace

std::shared_ptr<Flow> fan_out() { return std::make_shared<FanOut>(); }
std::shared_ptr<Flow> square() { return std::make_shared<Square>(); }

}  // namespace dex::examples
