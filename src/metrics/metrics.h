// Prometheus metrics of one dex-server-zd process (docs/metrics.md).
//
// One Metrics per process, over one prometheus::Registry. Every series the
// process can report exists from construction (counters at 0, the standby
// state all 0), so that alert expressions and rate() see them before the first
// event. listen() serves the text exposition on http://<host:port>/metrics.
//
// The names of the hot-standby series are fixed by the spec (High availability,
// "Lease duration and alerts"); the alerts there work against them:
//   sum(dexzd_hot_standby_state{state="following"}) == 0
//   max_over_time(dexzd_hot_standby_state{state=~"failed|restarting"}[5m]) == 1
//   dexzd_hot_standby_lag_seconds > 5
//
// Thread contract: every method may be called from any thread, concurrently;
// the recording methods take no lock of dex's and do not block (they update
// atomics, or take prometheus-cpp's short internal mutex for histograms), so
// they are safe on the log writer's and the engine's threads. listen() once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "dex/flow.pb.h"
#include "dex/flow_records.pb.h"
#include "metrics/attribute_sync_sample.h"
#include "metrics/flow_labels.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace dex {
namespace flow {
struct Effects;
}  // namespace flow

// A process's hot-standby state as the metric reports it. The five standby
// states are the spec's; kNotStandby is every other process (the active one,
// a cold standby, a process still acquiring): all five gauges are 0.
enum class StandbyState {
  kNotStandby,
  kFollowing,      // tailing the log, ready to take over
  kBootstrapping,  // restoring a snapshot / replaying up to the log end
  kBehind,         // following, but further behind than it should be
  kRestarting,     // its follower failed and is being restarted
  kFailed,         // gave up; will not take over
};
// "following", "bootstrapping", "behind", "restarting", "failed"; "" for kNotStandby.
std::string_view standby_state_label(StandbyState state);

// One lease renewal attempt as the keeper saw it.
enum class LeaseRenewal {
  kRenewed,  // the conditional write succeeded
  kAdopted,  // its answer was lost, a read-back found our own write
  kRetried,  // the attempt failed and the keeper will retry it
  kLost,     // the renewal failed for good: the lease is lost
};
std::string_view lease_renewal_label(LeaseRenewal renewal);  // "renewed", ...

enum class ObjectStoreOperation { kGet, kPut, kRemove, kList };
std::string_view object_store_operation_label(ObjectStoreOperation op);  // "get", ...
// A request's outcome label from its status code: "ok", "precondition_failed",
// "not_found", "transient", "permanent", "corruption", "fenced",
// "invalid_argument", "stopped".
std::string_view status_outcome_label(Code code);

class Metrics {
 public:
  // metrics.typeLabelsMax's default (config.h, kMetricsTypeLabelsMaxDefault).
  static constexpr size_t kTypeLabelsMaxDefault = 100;

  // `type_labels_max` (metrics.typeLabelsMax, 0..LabelLimit::kDistinctMaxLimit):
  // how many distinct values of each type label (flow_type, step_type,
  // rpc_name) get series of their own; later ones count under "other".
  explicit Metrics(size_t type_labels_max = kTypeLabelsMaxDefault);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves GET /metrics on `address`, "host:port" (an IPv4 address or
  // "localhost"; port 0 picks a free port, see port()). Errors: InvalidArgument
  // for a malformed address or a second call, Permanent when the address
  // cannot be bound (the message names it and the OS's reason, e.g. "Address
  // already in use"). Serving runs on the HTTP server's own threads until
  // destruction.
  Status listen(std::string_view address);
  // The port listen() bound; 0 before a successful listen().
  int port() const;

  // ------------------------------------------------------------- role
  // dexzd_hot_standby_state{state}: 1 for `state`, 0 for the other four.
  // kNotStandby sets all five to 0 and the lag to 0.
  void set_standby_state(StandbyState state);
  StandbyState standby_state() const;
  // dexzd_hot_standby_lag_seconds: how far a following standby is behind the
  // active process's log (negative values are recorded as 0).
  void set_standby_lag(Duration lag);
  // dexzd_node_epoch: the node epoch this process holds or last saw.
  void set_node_epoch(uint64_t epoch);
  // dexzd_active: 1 while this process holds the lease and serves, else 0.
  void set_active(bool active);

  // ----------------------------------------------------------- events
  // dexzd_lease_renewals_total{outcome}.
  void lease_renewal(LeaseRenewal renewal);
  // One acknowledged log batch: dexzd_log_append_seconds (latency from the
  // batch's first write attempt to its acknowledgement), dexzd_log_batches_total,
  // dexzd_log_records_total.
  void log_append(Duration latency, size_t records);
  // dexzd_object_store_requests_total{operation,outcome} and
  // dexzd_object_store_request_seconds{operation}.
  void object_store_request(ObjectStoreOperation op, Code outcome, Duration latency);
  // dexzd_flows_total{outcome}: a run closed with `status`.
  void flow_ended(flow::FlowStatus status);
  // dexzd_attempts_total{outcome}: a WaitFor or Execute attempt ended with `outcome`.
  void attempt_ended(flow::AttemptOutcome outcome);
  // What one batch applied live did, by type (flow_metrics.h):
  // dexzd_flow_starts_total, dexzd_flow_closes_total, dexzd_step_attempts_total,
  // dexzd_step_attempt_seconds, dexzd_step_schedule_to_start_seconds,
  // dexzd_rpc_calls_total, dexzd_rpc_seconds.
  void flow_effects(const flow::Effects& effects);
  // dexzd_runs_deleted_total: runs deleted by their retention (flows.retention).
  void runs_deleted(uint64_t runs);
  // One blob collection pass that ran to its end: dexzd_blob_collections_total,
  // dexzd_blobs_deleted_total, dexzd_blob_bytes_freed_total and
  // dexzd_blob_delete_errors_total.
  void blobs_collected(uint64_t deleted, uint64_t bytes_freed, uint64_t delete_errors);

  // Attribute Store sync (docs/attribute-store.md): where one store's sync stands.
  void attribute_sync(const AttributeSyncSample& sample);

  // The text exposition of every series, as GET /metrics serves it.
  std::string render() const;
  // The registry, for a component that wants to register its own families.
  std::shared_ptr<prometheus::Registry> registry() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex
