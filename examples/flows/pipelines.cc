// Pipelines: the simplest Flows, Execute-only Steps in a row, each passing its
// input on (the last completes the Flow with it). The benchmarks and the
// failover and step-down measurements run them as their workload:
//  - OneStep:    Work
//  - ThreeSteps: Work1 -> Work2 -> Work3
// Each Step takes `work_time` (a sleep standing for the Step's own work).
#include <thread>

#include "common/invariant.h"
#include "example_flows.h"

namespace dex::examples {
namespace {

using sdk::Context;
using sdk::StepDecision;

class Work final : public sdk::Step {
 public:
  Work(std::string type, std::string next, std::chrono::milliseconds work_time)
      : type_(std::move(type)), next_(std::move(next)), work_time_(work_time) {}
  std::string type() const override { return type_; }
  StepDecision execute(Context& ctx) override {
    if (work_time_.count() > 0) std::this_thread::sleep_for(work_time_);
    if (next_.empty()) return StepDecision::graceful_complete(ctx.input());
    return StepDecision::go_to(next_, ctx.input());
  }

 private:
  std::string type_, next_;
  std::chrono::milliseconds work_time_;
};

class Pipeline final : public sdk::Flow {
 public:
  Pipeline(std::string type, std::vector<std::string> steps, std::chrono::milliseconds work_time)
      : type_(std::move(type)), step_types_(std::move(steps)), work_time_(work_time) {}
  std::string type() const override { return type_; }
  std::string start_step() const override { return step_types_.front(); }
  std::vector<std::shared_ptr<sdk::Step>> steps() const override {
    std::vector<std::shared_ptr<sdk::Step>> out;
    for (size_t i = 0; i < step_types_.size(); ++i) {  // bounded by the Steps named
      const std::string next = i + 1 < step_types_.size() ? step_types_[i + 1] : "";
      out.push_back(std::make_shared<Work>(step_types_[i], next, work_time_));
    }
    return out;
  }

 private:
  std::string type_;
  std::vector<std::string> step_types_;
  std::chrono::milliseconds work_time_;
};

}  // namespace

std::shared_ptr<sdk::Flow> pipeline(std::string type, std::vector<std::string> steps,
                                    std::chrono::milliseconds work_time) {
  DEX_INVARIANT(!steps.empty(), "a pipeline has Steps");
  return std::make_shared<Pipeline>(std::move(type), std::move(steps), work_time);
}

std::vector<std::shared_ptr<sdk::Flow>> pipelines(std::chrono::milliseconds work_time) {
  return {pipeline("OneStep", {"Work"}, work_time),
          pipeline("ThreeSteps", {"Work1", "Work2", "Work3"}, work_time)};
}

}  // namespace dex::examples
