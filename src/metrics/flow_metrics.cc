#include "metrics/flow_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>

#include "metrics/flow_labels.h"

namespace dex {
namespace {

// From 5 ms to 1 h: an Execute may take a few ms or many minutes, and an
// attempt may wait for a Worker as long as none is free (docs/metrics.md).
const std::vector<double> kTaskBucketsSeconds = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};

}  // namespace

FlowMetrics::FlowMetrics(prometheus::Registry& r, size_t type_labels_max)
    : starts_(prometheus::BuildCounter()
                  .Name("dexzd_flow_starts_total")
                  .Help("Runs of dex Flows started (a StartFlow, a SubFlow child, a Flow retry)")
                  .Register(r)),
      closes_(prometheus::BuildCounter()
                  .Name("dexzd_flow_closes_total")
                  .Help("Runs of dex Flows closed, by Flow type and final status")
                  .Register(r)),
      attempts_(prometheus::BuildCounter()
                    .Name("dexzd_step_attempts_total")
                    .Help("WaitFor, Execute and timeout-handler attempts that ended, by Flow type, "
                          "Step type, kind and outcome")
                    .Register(r)),
      attempt_seconds_(
          prometheus::BuildHistogram()
              .Name("dexzd_step_attempt_seconds")
              .Help("Duration of an attempt, from its hand-over to a Worker to its end")
              .Register(r)),
      schedule_to_start_(prometheus::BuildHistogram()
                             .Name("dexzd_step_schedule_to_start_seconds")
                             .Help("Time an attempt waited from being queued (runnable) to its "
                                   "hand-over to a Worker")
                             .Register(r)),
      rpc_calls_(prometheus::BuildCounter()
                     .Name("dexzd_rpc_calls_total")
                     .Help("RPCs that ended, by Flow type, RPC name and outcome")
                     .Register(r)),
      rpc_seconds_(prometheus::BuildHistogram()
                       .Name("dexzd_rpc_seconds")
                       .Help("Duration of an RPC, from its InvokeRpc to its end")
                       .Register(r)),
      flow_types_(type_labels_max),
      step_types_(type_labels_max),
      rpc_names_(type_labels_max) {}

double FlowMetrics::seconds_between(int64_t from_ms, int64_t to_ms) const {
  // Record times never run backwards within a node's log (record_time.h); a
  // negative difference would be a bug elsewhere, never a negative observation.
  return std::max<int64_t>(0, to_ms - from_ms) / 1000.0;
}

void FlowMetrics::applied(const flow::Effects& fx) {
  for (const std::string& type : fx.runs_started) {  // bounded by the batch's records
    starts_.Add({{"flow_type", flow_types_.label(type)}}).Increment();
  }
  for (const auto& c : fx.closed) {
    closes_
        .Add({{"flow_type", flow_types_.label(c.flow_type)},
              {"status", std::string(flow_status_label(c.status))}})
        .Increment();
  }
  for (const auto& s : fx.started) {
    const std::string_view kind = attempt_kind_label(s.task.method());
    if (kind.empty() || s.queued_ms == 0) continue;  // an RPC, or queued before it was kept
    schedule_to_start_
        .Add({{"flow_type", flow_types_.label(s.flow_type)},
              {"step_type", step_types_.label(s.type)},
              {"kind", std::string(kind)}},
             kTaskBucketsSeconds)
        .Observe(seconds_between(s.queued_ms, s.at_ms));
  }
  for (const auto& e : fx.ended) {
    const std::string_view kind = attempt_kind_label(e.task.method());
    if (kind.empty()) continue;  // an RPC's attempt: its call is counted below
    const std::string flow_type = flow_types_.label(e.flow_type);
    const std::string step_type = step_types_.label(e.type);
    attempts_
        .Add({{"flow_type", flow_type},
              {"step_type", step_type},
              {"kind", std::string(kind)},
              {"outcome", std::string(attempt_outcome_label(e.outcome))}})
        .Increment();
    if (e.started_ms == 0) continue;
    attempt_seconds_
        .Add({{"flow_type", flow_type}, {"step_type", step_type}, {"kind", std::string(kind)}},
             kTaskBucketsSeconds)
        .Observe(seconds_between(e.started_ms, e.at_ms));
  }
  for (const auto& r : fx.rpcs_ended) {
    const std::string flow_type = flow_types_.label(r.flow_type);
    const std::string name = rpc_names_.label(r.name);
    rpc_calls_
        .Add({{"flow_type", flow_type},
              {"rpc_name", name},
              {"outcome", std::string(attempt_outcome_label(r.outcome))}})
        .Increment();
    rpc_seconds_.Add({{"flow_type", flow_type}, {"rpc_name", name}}, kTaskBucketsSeconds)
        .Observe(seconds_between(r.invoked_ms, r.at_ms));
  }
}

}  // namespace dex
