// The flow rules' limits and the few constants every part of src/flow shares
// (docs/flow-rules.md, "Limits"). The bottom of src/flow: it includes nothing
// of it. The TypeScript SDK repeats some (tests/tools/check_limits.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dex::flow {

// The timeout handler's TaskRef.step_execution_id (method ON_TIMEOUT), and the
// parent of the Step executions its decision starts. No Step execution has it
// (theirs are "<type>-<n>").
inline constexpr std::string_view kTimeoutHandlerId = "timeout";

// Limits (docs/flow-rules.md, "Limits").
inline constexpr size_t kActiveStepsMax = 10'000;          // per run
inline constexpr size_t kMovementsMax = 1'000;             // per decision
inline constexpr size_t kConditionsMax = 100;              // per wait
inline constexpr size_t kPublishMessagesMax = 1'000;       // per record
inline constexpr size_t kPayloadBytesMax = 1 << 20;        // one input, output, message, locals
inline constexpr size_t kNameBytesMax = 255;               // Flow ID, type and Channel names, keys
inline constexpr size_t kStepTypesMax = 1'000;             // per declaration
inline constexpr size_t kChannelsMax = 1'000;              // per declaration
inline constexpr size_t kPublishRequestsRemembered = 256;  // per run, for repeated publishes
inline constexpr size_t kWriteRequestsRemembered = 256;    // per run: sets, stops, skips
inline constexpr size_t kAttributeKeysMax = 1'000;         // per declaration
inline constexpr size_t kAttributesMax = 10'000;           // stored instances per run
inline constexpr size_t kRpcTypesMax = 1'000;              // per declaration
inline constexpr uint64_t kSyncTrimMax = 4'096;      // SyncEntries one AttributeStoreSynced removes
inline constexpr size_t kLockKeysMax = 16;           // per method or RPC
inline constexpr size_t kRpcsDoneKept = 256;         // per run, for repeated InvokeRpc
inline constexpr int64_t kRpcTimeoutMsMax = 60'000;  // an InvokeRpc's timeout
inline constexpr int64_t kRetryAfterMaxMs = 30LL * 24 * 3600 * 1000;  // a Worker's RetryAfter
inline constexpr size_t kRpcIdBytesMax = kNameBytesMax + 8;           // "req:" + a request ID
// Any duration (timeouts, delays, Timer durations, retry intervals): ten years.
inline constexpr int64_t kDurationMsMax = 10LL * 365 * 24 * 3600 * 1000;

// `at` plus `ms`, saturating: time arithmetic never overflows, whatever a
// record holds.
inline int64_t later_ms(int64_t at, int64_t ms) {
  int64_t out = 0;
  if (__builtin_add_overflow(at, ms, &out)) return ms > 0 ? INT64_MAX : INT64_MIN;
  return out;
}

// How long from `from` to `to` (negative when `to` is earlier), saturating.
inline int64_t ms_between(int64_t from, int64_t to) {
  int64_t out = 0;
  if (__builtin_sub_overflow(to, from, &out)) return to > from ? INT64_MAX : INT64_MIN;
  return out;
}

}  // namespace dex::flow
