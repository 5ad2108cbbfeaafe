// The example Steps of examples/flow-types/: fetch → transform → store
// (three-step) and echo (one-step). Trivial and fast on purpose; transform
// fails its first attempt with a retryable StepFailure to show a retry.
#pragma once

#include <nlohmann/json.hpp>

#include "sdk/worker.h"

namespace dex::examples {

inline constexpr const char* kTransformFirstAttemptFailure =
    "transient failure on the first attempt, as the example intends";

// Routes by the task's Step name. An unknown Step is a non-retryable failure.
nlohmann::json handle_example_step(TaskContext& task);

}  // namespace dex::examples
