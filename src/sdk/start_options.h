// How a run starts: a Client's start (client.h) and a SubFlow's child
// (sub_flow.h) take these options. A RetryPolicy serves both a method's
// attempts (flow.h, MethodOptions) and a Flow's runs (StartOptions::retry).
//
//   dex::StartOptions options;
//   options.timeout(std::chrono::minutes(5))
//       .retry({.initial_interval = std::chrono::seconds(2), .maximum_attempts = 3})
//       .initial(status, std::string("new"))
//       .attribute_store("orders");
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "dex/flow.pb.h"
#include "sdk/attribute.h"

namespace dex {

// A backoff between attempts (or, for a Flow, between runs): the first after
// initial_interval, each next one backoff_coefficient times longer, at most
// maximum_interval.
struct RetryPolicy {
  std::chrono::milliseconds initial_interval{0};  // 0: 1 s
  double backoff_coefficient = 0;                 // 0: 2
  std::chrono::milliseconds maximum_interval{0};  // 0: 100 x initial
  // Attempts (a Flow's: runs), the first included; unset: 3; 0: no limit.
  std::optional<uint32_t> maximum_attempts = std::nullopt;
  std::chrono::milliseconds total_duration{0};  // 0: no limit

  flow::RetryPolicy proto() const;
};

// The options of a start, fixed for the run. `proto` holds them (and any
// field without a setter here); the setters return *this to chain.
struct StartOptions {
  flow::StartOptions proto = {};

  // The run ends when `d` passes after its start: TIMED_OUT with
  // flow::TIMEOUT_FAIL (the default), CANCELED with flow::TIMEOUT_CANCEL.
  StartOptions& timeout(std::chrono::milliseconds d,
                        flow::TimeoutPolicy policy = flow::TIMEOUT_FAIL);
  // The start Step waits this long after the start.
  StartOptions& start_delay(std::chrono::milliseconds d);
  // Flow retry: a run that ends FAILED or TIMED_OUT (timeout policy FAIL)
  // starts again as a new run of the same Flow ID, same input and options,
  // after the policy's backoff, while runs are left (maximum_attempts counts
  // runs). A client's stop never retries. RetryPolicy{} gives the defaults.
  StartOptions& retry(const RetryPolicy& policy);
  // Client starts only (a SubFlow's are derived): the start's request ID
  // (default: a fresh one per call) and what happens when the Flow ID has a run.
  StartOptions& request_id(std::string id);
  StartOptions& id_reuse(flow::IdReusePolicy policy);
  // The Attribute Store (the server's attributeStore.stores.<name>) the run's
  // synced Attributes (dex::kSync) go to, instead of its Flow's
  // Flow::attribute_store(). A SubFlow's child takes one too.
  StartOptions& attribute_store(std::string name);
  // This run's FlowConfig: each field set here overrides the Flow's
  // (Flow::config()), e.g. its continue-as-new thresholds. A SubFlow's child
  // takes one too.
  StartOptions& config(const flow::FlowConfig& config);

  // Initial Attribute values, written with the start in the same record.
  template <typename T>
  StartOptions& initial(const Attribute<T>& attribute, const T& value) {
    *proto.add_initial_attributes() = attribute.write(value);
    return *this;
  }
  template <typename T>
  StartOptions& initial(const AttributeMap<T>& map, const std::string& instance_key,
                        const T& value) {
    *proto.add_initial_attributes() = map.write(instance_key, value);
    return *this;
  }
};

}  // namespace dex
