// One small status type for every fallible operation (LevelDB's Status, with the
// categories dex needs). Expected failures are values, not exceptions.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace dex {

enum class Code {
  kOk = 0,
  kPreconditionFailed,  // conditional write lost: the object exists / ETag differs
  kNotFound,
  kTransient,        // retry may help: 5xx, throttling, timeout, reset
  kPermanent,        // retry will not help: denied, missing bucket, bad key
  kCorruption,       // bytes that fail framing or CRC checks
  kFenced,           // another process holds the lease or wrote the slot
  kInvalidArgument,  // bad input from a user: config, flag, request
  kStopped,          // the component was stopped or lost its lease
  kAlreadyExists,    // a request to create what exists (a Flow ID its reuse policy refuses)
  kDeadlineExceeded, // the caller's deadline passed before the operation ended (an RPC)
};

std::string_view code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status precondition_failed(std::string msg) {
    return Status(Code::kPreconditionFailed, std::move(msg));
  }
  static Status not_found(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status transient(std::string msg) { return Status(Code::kTransient, std::move(msg)); }
  static Status permanent(std::string msg) { return Status(Code::kPermanent, std::move(msg)); }
  static Status corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status fenced(std::string msg) { return Status(Code::kFenced, std::move(msg)); }
  static Status invalid_argument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }
  static Status stopped(std::string msg) { return Status(Code::kStopped, std::move(msg)); }
  static Status already_exists(std::string msg) {
    return Status(Code::kAlreadyExists, std::move(msg));
  }

  bool is_ok() const { return code_ == Code::kOk; }
  bool is_precondition_failed() const { return code_ == Code::kPreconditionFailed; }
  bool is_not_found() const { return code_ == Code::kNotFound; }
  bool is_transient() const { return code_ == Code::kTransient; }
  bool is_permanent() const { return code_ == Code::kPermanent; }
  bool is_corruption() const { return code_ == Code::kCorruption; }
  bool is_fenced() const { return code_ == Code::kFenced; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Transient: connection reset" — for logs and error output.
  std::string to_string() const;

  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the status that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.is_ok() && "StatusOr needs a value or an error");
  }
  bool is_ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    assert(value_.has_value());
    return *value_;
  }
  const T& value() const& {
    assert(value_.has_value());
    return *value_;
  }
  T&& value() && {
    assert(value_.has_value());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace dex
