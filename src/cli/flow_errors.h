// How the `flow` commands report a failure: one JSON object on stderr,
// {"error": {kind, operation, message, grpcCode}} (docs/cli.md, "Exit codes
// and errors"), and the exit code that goes with its kind.
#pragma once

#include <string>

#include "common/status.h"

namespace dex::cli {

inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitWaitTimedOut = 3;

// Bad flags or input, nothing sent: kind "usage"; returns kExitUsage.
int usage_error(const std::string& operation, const std::string& message);
// The call failed: kind "request" with the gRPC code that starts the
// status's message ("INVALID_ARGUMENT: ..."), taken off the message; returns
// kExitFailed.
int request_error(const std::string& operation, const Status& status);
// A wait gave up: kind "timeout"; returns kExitWaitTimedOut.
int timeout_error(const std::string& operation, const std::string& message);

}  // namespace dex::cli
