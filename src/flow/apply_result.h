// What applying a record answers: applied, unchanged, stale or rejected, and
// why (docs/flow-rules.md, "Refusals"). The bottom of src/flow.
#pragma once

#include <string>
#include <string_view>

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

}  // namespace dex::flow
