#include "handlers.h"

namespace dex::examples {

namespace {

using nlohmann::json;

// input = {"flow": <flow input>, "steps": {<dependency>: <its output>}}
const json& dependency(const TaskContext& task, const char* step) {
  static const json kNull;
  const json& input = task.input();
  if (!input.is_object() || !input.contains("steps") || !input["steps"].is_object()) return kNull;
  auto it = input["steps"].find(step);
  return it == input["steps"].end() ? kNull : *it;
}

int64_t number_or(const json& value, const char* key, int64_t fallback) {
  if (!value.is_object()) return fallback;
  auto it = value.find(key);
  return it != value.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

}  // namespace

json handle_example_step(TaskContext& task) {
  const std::string& step = task.step();
  if (step == "fetch") {
    int64_t n = number_or(task.flow_input(), "n", 0);
    return {{"fetched", n}};
  }
  if (step == "transform") {
    if (task.attempt() == 1) throw StepFailure(kTransformFirstAttemptFailure);
    int64_t fetched = number_or(dependency(task, "fetch"), "fetched", 0);
    return {{"transformed", fetched * 2}};
  }
  if (step == "store") {
    int64_t value = number_or(dependency(task, "transform"), "transformed", 0);
    return {{"stored", true}, {"value", value}};
  }
  if (step == "echo" || step.starts_with("echo-")) {  // echo-1, echo-2, ...: benchmark chains
    return task.flow_input();
  }
  throw StepFailure("dex-example-worker has no handler for step '" + step + "' of flow type '" +
                        task.flow_type() + "'",
                    /*non_retryable=*/true);
}

}  // namespace dex::examples
