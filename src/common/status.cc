#include "common/status.h"

namespace dex {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kPreconditionFailed:
      return "PreconditionFailed";
    case Code::kNotFound:
      return "NotFound";
    case Code::kTransient:
      return "Transient";
    case Code::kPermanent:
      return "Permanent";
    case Code::kCorruption:
      return "Corruption";
    case Code::kFenced:
      return "Fenced";
    case Code::kAlreadyExists:
      return "AlreadyExists";
    case Code::kDeadlineExceeded:
      return "DeadlineExceeded";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kStopped:
      return "Stopped";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  std::string out(code_name(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

}  // namespace dex
