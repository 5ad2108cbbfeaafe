// Flow-type definitions: JSON or YAML text to a validated dex::FlowType
// (docs/engine.md, "Flow types"). Pure functions: no clock, no I/O.
//
//   name: order
//   steps:
//     - name: charge
//       taskQueue: payments
//       after: [reserve]
//       retry: {maxAttempts: 5, initialInterval: 1s, backoffCoefficient: 2.0, maxInterval: 1m}
//       startToCloseTimeout: 30s
//       heartbeatTimeout: 10s
//       dispatch: SYNC            # or ASYNC
//     - name: cool-down
//       after: [charge]
//       sleep: 5s                 # a durable timer: no taskQueue
//
// Every refusal is InvalidArgument and names the problem: the key path of an
// unknown key, the step of a duplicate or unknown dependency, the steps of a
// cycle, the field and value of a bad duration, the limit that was exceeded.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "dex/api.pb.h"

namespace dex {

// Limits on a definition (docs/engine.md, "Limits").
inline constexpr size_t kFlowTypeDefinitionBytesMax = 256u << 10;
inline constexpr size_t kFlowTypeNameBytesMax = 128;
inline constexpr size_t kStepNameBytesMax = 64;
inline constexpr size_t kTaskQueueBytesMax = 128;
inline constexpr size_t kStepsPerFlowTypeMax = 100;
inline constexpr uint32_t kMaxAttemptsMax = 1000;
inline constexpr double kBackoffCoefficientMax = 100.0;
// Every duration in a definition (intervals, timeouts, sleeps) is at most this.
inline constexpr int64_t kDefinitionDurationMsMax = 366LL * 24 * 3600 * 1000;

// Defaults filled in by validate_flow_type (Temporal's retry defaults).
inline constexpr uint32_t kDefaultMaxAttempts = 3;
inline constexpr int64_t kDefaultInitialIntervalMs = 1000;
inline constexpr double kDefaultBackoffCoefficient = 2.0;
inline constexpr int64_t kDefaultMaxIntervalFactor = 100;  // x initial interval
inline constexpr int64_t kDefaultStartToCloseTimeoutMs = 60'000;

// Parses a JSON or YAML definition, then validates it like validate_flow_type.
StatusOr<FlowType> parse_flow_type(std::string_view text);

// Checks a flow type given as a proto and returns it with every default filled
// in (retry policy, start-to-close timeout, dispatch SYNC for task Steps), so
// that the stored type is explicit. Idempotent: validating the result returns it
// unchanged.
StatusOr<FlowType> validate_flow_type(const FlowType& flow_type);

// Names, task queues: 1..max bytes of [A-Za-z0-9_.-]. `what` names the field in
// the error ("flow type name").
Status validate_name(std::string_view name, size_t bytes_max, std::string_view what);

// The retry backoff after attempt `attempt` (from 1) failed:
// min(initial * coefficient^(attempt-1), max), in whole milliseconds. Deterministic.
int64_t retry_backoff_ms(const RetryPolicy& policy, uint32_t attempt);

}  // namespace dex
