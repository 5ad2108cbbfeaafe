#include "flow/apply_result.h"

namespace dex::flow {

std::string_view apply_kind_name(ApplyKind kind) {
  switch (kind) {
    case ApplyKind::kApplied:
      return "applied";
    case ApplyKind::kUnchanged:
      return "unchanged";
    case ApplyKind::kStale:
      return "stale";
    case ApplyKind::kRejected:
      return "rejected";
  }
  return "?";
}

std::string_view refusal_code_name(RefusalCode code) {
  switch (code) {
    case RefusalCode::kNone:
      return "none";
    case RefusalCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case RefusalCode::kNotFound:
      return "NOT_FOUND";
    case RefusalCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case RefusalCode::kAlreadyExists:
      return "ALREADY_EXISTS";
  }
  return "?";
}

}  // namespace dex::flow
