#include "common/grpc_code.h"

#include <array>

namespace dex {

std::string_view grpc_code_name(int code) {
  // Indexed by the code's number (doc/statuscodes.md of gRPC): fixed by the
  // wire protocol, so a table is safe.
  static constexpr std::array<std::string_view, 17> kNames = {
      "OK",                   // 0
      "CANCELLED",            // 1
      "UNKNOWN",              // 2
      "INVALID_ARGUMENT",     // 3
      "DEADLINE_EXCEEDED",    // 4
      "NOT_FOUND",            // 5
      "ALREADY_EXISTS",       // 6
      "PERMISSION_DENIED",    // 7
      "RESOURCE_EXHAUSTED",   // 8
      "FAILED_PRECONDITION",  // 9
      "ABORTED",              // 10
      "OUT_OF_RANGE",         // 11
      "UNIMPLEMENTED",        // 12
      "INTERNAL",             // 13
      "UNAVAILABLE",          // 14
      "DATA_LOSS",            // 15
      "UNAUTHENTICATED",      // 16
  };
  if (code < 0 || static_cast<size_t>(code) >= kNames.size()) return "UNKNOWN";
  return kNames[static_cast<size_t>(code)];
}

}  // namespace dex
