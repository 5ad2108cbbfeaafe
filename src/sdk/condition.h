// The lowest pieces of the model that the other SDK headers share: a wait's
// Condition, the FlowFailure a method throws, and JSON <-> Payload (defined in
// flow.cc). flow.h includes this; sub_flow.h builds a Condition with it.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <stdexcept>
#include <string>

#include "dex/flow.pb.h"

namespace dex {

// One condition of a Wait. condition_id() names it (required in
// any_combination_of, optional elsewhere).
class Condition {
 public:
  explicit Condition(flow::Condition proto) : proto_(std::move(proto)) {}
  Condition id(std::string condition_id) const;
  const flow::Condition& proto() const { return proto_; }

 private:
  flow::Condition proto_;
};

// Thrown by wait_for or execute to fail the attempt. A non-retryable failure
// skips the remaining attempts (the failure policy applies at once). Any other
// exception is a retryable failure whose message is its what().
class FlowFailure : public std::runtime_error {
 public:
  explicit FlowFailure(const std::string& message, bool non_retryable = false)
      : std::runtime_error(message), non_retryable_(non_retryable) {}
  // A retryable failure whose next attempt starts after `delay` instead of
  // the retry policy's backoff (what a rate-limited service asked for, say);
  // the policy's attempts still bound the retries. At most 30 days.
  static FlowFailure retry_after(const std::string& message, std::chrono::milliseconds delay) {
    FlowFailure f(message);
    f.retry_after_ = delay;
    return f;
  }
  bool non_retryable() const { return non_retryable_; }
  std::chrono::milliseconds retry_after() const { return retry_after_; }

 private:
  bool non_retryable_;
  std::chrono::milliseconds retry_after_{0};
};

// JSON <-> Payload.
flow::Payload to_payload(const nlohmann::json& value);
nlohmann::json from_payload(const flow::Payload& payload);

}  // namespace dex
