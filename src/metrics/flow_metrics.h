// The series of dex Flows, Steps and RPCs by type (docs/metrics.md, "Flows,
// Steps and RPCs by type"): starts, closes by status, WaitFor/Execute attempts
// by outcome with their durations and schedule-to-start latencies, RPC calls
// by outcome with their latencies, labelled flow_type, step_type and rpc_name.
// Each of the three type labels has its own LabelLimit: types past the limit
// count under "other".
//
// Part of Metrics (metrics.h), which owns one and feeds it the effects of every
// batch the engine applies live (EngineOptions::on_applied). Everything is
// read from flow::Effects, a plain struct the flow rules return: this class
// never calls the engine or the rules. Durations are differences of record
// times (the proposer's wall clock, ms), so they survive a takeover.
//
// Thread-safe, like Metrics.
#pragma once

#include <cstddef>
#include <string>

#include "dex/flow_records.pb.h"
#include "flow/effects.h"
#include "metrics/label_limit.h"

namespace prometheus {
class Counter;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace dex {

class FlowMetrics {
 public:
  // Registers the families on `registry` (which must outlive this). Labelled
  // families have no series until their first event.
  FlowMetrics(prometheus::Registry& registry, size_t type_labels_max);
  FlowMetrics(const FlowMetrics&) = delete;
  FlowMetrics& operator=(const FlowMetrics&) = delete;

  // Counts what one applied batch did (bounded by the effects' sizes).
  void applied(const flow::Effects& fx);

 private:
  double seconds_between(int64_t from_ms, int64_t to_ms) const;

  // Constant after construction (the families are the registry's, thread-safe).
  prometheus::Family<prometheus::Counter>& starts_;
  prometheus::Family<prometheus::Counter>& closes_;
  prometheus::Family<prometheus::Counter>& attempts_;
  prometheus::Family<prometheus::Histogram>& attempt_seconds_;
  prometheus::Family<prometheus::Histogram>& schedule_to_start_;
  prometheus::Family<prometheus::Counter>& rpc_calls_;
  prometheus::Family<prometheus::Histogram>& rpc_seconds_;
  // One limit per label (thread-safe themselves).
  LabelLimit flow_types_;
  LabelLimit step_types_;
  LabelLimit rpc_names_;
};

}  // namespace dex
