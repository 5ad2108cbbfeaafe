// Pipelines: the simplest Flows, Execute-only Steps in a row, each passing its
// input on (the last completes the Flow with it). Each Step takes `work_time`
// (a sleep standing for the Step's own work).
//
// The benchmarks and the failover and step-down measurements run these:
//  - OneStep:    Work
//  - ThreeSteps: Work1 -> Work2 -> Work3
//
// The HA end-to-end tests (tests/server/) run these, whose Step options are
// what those tests rely on:
//  - E2EThreeSteps: Fetch -> Transform -> Store. Transform fails its first
//    attempt on purpose; every Step has up to 5 attempts (backoff 100 ms
//    doubling to 500 ms) of at most 4 s each, so that a killed Worker's
//    attempts time out fast and a lost attempt or two still leave retries;
//    Store is ASYNC. Each Step appends its type to the value's "path" array,
//    so the output shows each Step's result passed on once.
//  - E2ESlowStep: Slow, one Step of `work_time` with 2 attempts (100 ms
//    apart) and a 60 s attempt timeout (so that no timeout interferes): an
//    attempt interrupted by a drain's expiry consumes the retry, attempt 2
//    completes.
//  - E2ESlowStepNoRetry: the same with 1 attempt: an interrupted attempt
//    fails the Flow.
//  - E2EIdle: Idle waits on Channel "wake" (one message), which the tests
//    never publish to: the run stays RUNNING until it is stopped.
#include <stdexcept>
#include <thread>

#include "common/invariant.h"
#include "example_flows.h"

namespace dex::examples {
namespace {

using namespace std::chrono_literals;

class Work final : public Step {
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

class Pipeline final : public Flow {
 public:
  Pipeline(std::string type, std::vector<std::string> steps, std::chrono::milliseconds work_time)
      : type_(std::move(type)), step_types_(std::move(steps)), work_time_(work_time) {}
  std::string type() const override { return type_; }
  std::string start_step() const override { return step_types_.front(); }
  std::vector<std::shared_ptr<Step>> steps() const override {
    std::vector<std::shared_ptr<Step>> out;
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

// ---------------------------------------------------------------- the e2e tests' Flows

// One Step of an E2E Flow: works `work_time`, appends its type to "path"
// and goes to `next` ("": completes the Flow).
class E2EStep final : public Step {
 public:
  struct Spec {
    std::string type, next;
    StepOptions options;
    bool fail_first_attempt = false;
  };
  E2EStep(Spec spec, std::chrono::milliseconds work_time)
      : spec_(std::move(spec)), work_time_(work_time) {}
  std::string type() const override { return spec_.type; }
  StepOptions options() const override { return spec_.options; }
  StepDecision execute(Context& ctx) override {
    if (work_time_.count() > 0) std::this_thread::sleep_for(work_time_);
    if (spec_.fail_first_attempt && ctx.attempt() == 1)
      throw std::runtime_error(spec_.type + " fails its first attempt on purpose");
    json value = ctx.input().is_object() ? ctx.input() : json::object();
    if (!value.contains("path")) value["path"] = json::array();
    value["path"].push_back(spec_.type);
    if (spec_.next.empty()) return StepDecision::graceful_complete(value);
    return StepDecision::go_to(spec_.next, value);
  }

 private:
  Spec spec_;
  std::chrono::milliseconds work_time_;
};

class E2EFlow final : public Flow {
 public:
  E2EFlow(std::string type, std::vector<E2EStep::Spec> steps, std::chrono::milliseconds work_time)
      : type_(std::move(type)), specs_(std::move(steps)), work_time_(work_time) {}
  std::string type() const override { return type_; }
  std::string start_step() const override { return specs_.front().type; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    std::vector<std::shared_ptr<Step>> out;
    for (const auto& spec : specs_)  // bounded by the Steps named
      out.push_back(std::make_shared<E2EStep>(spec, work_time_));
    return out;
  }

 private:
  std::string type_;
  std::vector<E2EStep::Spec> specs_;
  std::chrono::milliseconds work_time_;
};

StepOptions execute_options(uint32_t attempts, std::chrono::milliseconds initial,
                            std::chrono::milliseconds maximum,
                            std::chrono::milliseconds attempt_timeout, bool async = false) {
  StepOptions o;
  o.execute.retry.maximum_attempts = attempts;
  o.execute.retry.initial_interval = initial;
  o.execute.retry.maximum_interval = maximum;
  o.execute.attempt_timeout = attempt_timeout;
  o.execute.async = async;
  return o;
}

std::shared_ptr<Flow> e2e_three_steps(std::chrono::milliseconds work_time) {
  const auto sync = execute_options(5, 100ms, 500ms, 4s);
  const auto async = execute_options(5, 100ms, 500ms, 4s, true);
  return std::make_shared<E2EFlow>("E2EThreeSteps",
                                   std::vector<E2EStep::Spec>{{"Fetch", "Transform", sync, false},
                                                              {"Transform", "Store", sync, true},
                                                              {"Store", "", async, false}},
                                   work_time);
}

std::shared_ptr<Flow> e2e_slow_step(std::string type, uint32_t attempts,
                                    std::chrono::milliseconds work_time) {
  return std::make_shared<E2EFlow>(
      std::move(type),
      std::vector<E2EStep::Spec>{{"Slow", "", execute_options(attempts, 100ms, 100ms, 60s), false}},
      work_time);
}

const Channel kWake("wake");

class Idle final : public WaitingStep {
 public:
  std::string type() const override { return "Idle"; }
  Wait wait_for(Context&) override { return Wait::any_of({kWake.for_one()}); }
  StepDecision execute(Context& ctx) override {
    return StepDecision::graceful_complete(ctx.messages(kWake).at(0));
  }
};

class E2EIdle final : public Flow {
 public:
  std::string type() const override { return "E2EIdle"; }
  std::string start_step() const override { return "Idle"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Idle>()}; }
  std::vector<Channel> channels() const override { return {kWake}; }
};

}  // namespace

std::shared_ptr<Flow> pipeline(std::string type, std::vector<std::string> steps,
                               std::chrono::milliseconds work_time) {
  DEX_INVARIANT(!steps.empty(), "a pipeline has Steps");
  return std::make_shared<Pipeline>(std::move(type), std::move(steps), work_time);
}

std::vector<std::shared_ptr<Flow>> pipelines(std::chrono::milliseconds work_time) {
  return {pipeline("OneStep", {"Work"}, work_time),
          pipeline("ThreeSteps", {"Work1", "Work2", "Work3"}, work_time),
          e2e_three_steps(work_time),
          e2e_slow_step("E2ESlowStep", 2, work_time),
          e2e_slow_step("E2ESlowStepNoRetry", 1, work_time),
          std::make_shared<E2EIdle>()};
}

}  // namespace dex::examples
