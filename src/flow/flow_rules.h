// The flow rules: how each flow record changes the state (docs/flow-rules.md).
// Pure: no clock, thread, socket or database. Every time comes inside the
// record; every read and write goes through the FlowTxn. The same code applies
// records on the active process, on replay, on a hot standby, in the seeded
// simulation (tests/flow/flow_sim_test.cc) and under the fuzzer.
//
// Contract: apply() of the same records in the same order to the same state
// yields the same state and the same results. A record that is refused
// (kStale, kRejected) or repeats one (kUnchanged) writes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dex/flow_records.pb.h"
#include "flow/flow_txn.h"

namespace dex::flow {

enum class ApplyKind {
  kApplied,    // the state changed
  kUnchanged,  // an idempotent repeat: nothing to change (e.g. an equal declaration)
  kStale,      // names an attempt, timer or run that is no longer current
  kRejected,   // invalid or not allowed now; `code` says which
};
std::string_view apply_kind_name(ApplyKind kind);

// Why a record was rejected, for the gRPC code the caller gets.
enum class RefusalCode {
  kNone,
  kInvalidArgument,     // a malformed or undeclared name or value
  kNotFound,            // no such Flow ID, run or Step execution
  kFailedPrecondition,  // the run is closed, the timer already fired, ...
  kAlreadyExists,       // a start refused by the ID reuse policy
};
std::string_view refusal_code_name(RefusalCode code);

struct ApplyResult {
  ApplyKind kind = ApplyKind::kApplied;
  RefusalCode code = RefusalCode::kNone;
  std::string message;  // why, for every kind but kApplied
  std::string run_id;   // StartFlow: the run started, or the one a retry answers
};

// What the shell around the rules must learn from an apply: which tasks to
// dispatch, which Worker streams to tell, which timers to watch, whom to wake.
struct Effects {
  struct Queued {
    std::string flow_type;
    TaskRef task;
    uint64_t seq = 0;
    Durability durability = DURABILITY_UNSPECIFIED;
  };
  struct Started {
    TaskRef task;
    std::string task_id, worker_id;
  };
  struct Ended {  // a running attempt ended: a result, a timeout, a cancel, recovery
    TaskRef task;
    std::string task_id, worker_id;
    AttemptOutcome outcome = ATTEMPT_OUTCOME_UNSPECIFIED;
  };
  struct Closed {
    std::string flow_id, run_id;
    FlowStatus status = FLOW_STATUS_UNSPECIFIED;
  };
  std::vector<Queued> queued;
  std::vector<Started> started;
  std::vector<Ended> ended;
  std::vector<int64_t> timers_set;  // fire times of new durable timers
  std::vector<Closed> closed;
  std::vector<std::string> history;             // "<flow_id>/<run_id>" of runs with new events
  std::vector<std::string> steps_done;          // "<flow_id>/<run_id>/<step execution id>" closed
  std::vector<std::string> attributes_changed;  // "<flow_id>/<run_id>" of runs with new values
  std::vector<std::string> rpcs_done;           // "<flow_id>/<run_id>/<rpc id>" that ended
  std::vector<std::string> runs_deleted;        // "<flow_id>/<run_id>" deleted by retention
  void clear() { *this = Effects(); }
};

// Applies one record. Appends to `effects`; never clears it.
ApplyResult apply_record(FlowTxn& txn, const FlowRecord& record, Effects& effects);

// Recovery at an EpochStart (docs/flow-rules.md, "Recovery"): every attempt
// handed to a Worker ends NOT_COMPLETED at `at_ms`, consuming a retry; queued
// attempts stay queued. Every RPC not done ends NOT_COMPLETED (its caller
// waited on the old process), releasing its lock keys.
void recover_attempts(FlowTxn& txn, int64_t at_ms, Effects& effects);

// The current values of the Attributes `task`'s Step type (or RPC, or the
// timeout handler) declares in attribute_reads (an AttributeMap key: every instance), in declared
// order: what the task carries to its Worker. Empty for an unknown task. Reads only.
std::vector<Attribute> task_attributes(FlowTxn& txn, const TaskRef& task);
// The keys task_attributes reads (whether or not they hold values).
std::vector<std::string> task_attribute_reads(FlowTxn& txn, const TaskRef& task);

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
inline constexpr size_t kLockKeysMax = 16;                 // per method or RPC
inline constexpr size_t kRpcsDoneKept = 256;               // per run, for repeated InvokeRpc
inline constexpr int64_t kRpcTimeoutMsMax = 60'000;        // an InvokeRpc's timeout
inline constexpr size_t kRpcIdBytesMax = kNameBytesMax + 8;  // "req:" + a request ID
// Any duration (timeouts, delays, Timer durations, retry intervals): ten years.
inline constexpr int64_t kDurationMsMax = 10LL * 365 * 24 * 3600 * 1000;

// `at` plus `ms`, saturating: time arithmetic never overflows, whatever a
// record holds.
inline int64_t later_ms(int64_t at, int64_t ms) {
  int64_t out = 0;
  if (__builtin_add_overflow(at, ms, &out)) return ms > 0 ? INT64_MAX : INT64_MIN;
  return out;
}

}  // namespace dex::flow
