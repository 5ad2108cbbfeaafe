// The durable-execution engine of the active process: the face that the gRPC
// layer (src/api) calls. It runs dex Flows (docs/flow-rules.md): inside, the
// flow rules (src/flow, pure) applied by a deterministic state machine over
// RocksDB (applying a log batch changes the store and the last applied slot in
// one atomic write), and the flow engine that decides what to append: starts,
// results, due timers, timeouts, and which Worker gets which attempt.
// docs/engine.md describes the parts and the recovery rules. This header is
// the interface only: it pulls in neither the log nor the snapshot machinery.
//
// Every change is appended to the node's log first; a caller is answered only
// once its record is durable and applied. Thread-safe.
#pragma once

#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "attrstore/store_settings.h"
#include "blob/blob_store.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "dex/api.pb.h"
#include "dex/flow_api.pb.h"
#include "dex/records.pb.h"
#include "engine/attribute_sync_report.h"
#include "engine/worker_sink.h"
#include "objstore/object_store.h"
#include "snapshot/snapshot_types.h"

namespace dex {

class LogWriter;
struct HandedLocalStore;
namespace attrstore {
class AttributeTable;
}  // namespace attrstore
namespace flow {
struct Effects;
}  // namespace flow

// The bridge from the log writer to the engine (docs/engine.md, "How the engine
// uses the log"). The writer must exist before the engine, and the engine must
// see every acknowledged batch before its callers do, so the server:
//
//   auto hook = std::make_shared<EngineLogHook>();
//   LogWriterOptions wo{...};
//   wo.on_durable = hook->on_durable();
//   wo.epoch_start_unix_ms = <wall clock now, Unix ms>;
//   LogWriter writer(store, clock, wo, lease_valid, on_fatal);
//   writer.open();
//   EngineOptions eo{...};
//   eo.log_hook = hook;
//   auto engine = Engine::open(eo, store, writer, clock);
//
// Batches that arrive while no engine is attached are ignored (nothing else
// appends engine records); Engine::open replays the log through the EpochStart
// and attaches; Engine::stop detaches. Thread-safe.
class EngineLogHook {
 public:
  using Target = std::function<void(Slot, const proto::LogBatch&)>;
  // For LogWriterOptions::on_durable. Keeps this hook's state alive.
  Target on_durable() const;
  // Used by the engine. detach() waits for a delivery in progress.
  void attach(Target target);
  void detach();

 private:
  struct State {
    std::mutex mu;
    Target target;  // guarded by mu
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

struct EngineOptions {
  NodeId node_id;
  ProcessId process_id;
  Epoch epoch;
  // The local RocksDB store; created if missing, rebuilt from the log if empty.
  std::filesystem::path local_store_path;
  // Wall-clock Unix milliseconds, written into records (timers survive a
  // takeover by another host). Injectable for tests; default: system_clock.
  std::function<int64_t()> now_unix_ms;
  // How often the scheduler pings idle Worker streams. Workers treat a stream
  // silent for three of these as dead (a frozen process, a partition) and look
  // for the active process again, well within a lease (src/sdk/README.md).
  Duration worker_ping_interval = seconds(1);
  // How long the attempts of a Worker whose stream ended wait for it to come
  // back under the same worker ID (re-sending its results), before they end
  // NOT_COMPLETED and are retried by their policies (workers.reconnectGrace).
  Duration worker_reconnect_grace = seconds(5);
  // Required: the hook installed in the LogWriter's on_durable (see EngineLogHook).
  std::shared_ptr<EngineLogHook> log_hook;
  // A hot standby's takeover: the local store its follower kept open (see
  // Follower::stop_and_hand_over). Engine::open takes it out of the box; null
  // or empty: the engine opens local_store_path itself.
  std::shared_ptr<HandedLocalStore> handed_store;
  // Snapshots of the local store taken while this engine runs, and the log
  // collected behind them (docs/snapshots.md). Checkpoints are made in
  // <local_store_path>.checkpoint.
  SnapshotPolicy snapshots;
  RequestOptions snapshot_request = {seconds(30)};
  // Large values (docs/engine.md, "Large values"): a value over the threshold
  // is stored as a blob under nodes/<nodeId>/blobs/ before the record that
  // references it; what leaves the engine (answers, tasks) has it back in place.
  // values.collect_interval (0: never) and collect_min_age: blobs no run
  // references are collected (engine/flow_blob_sweep.h).
  BlobSettings values;
  // flows.retention: how long a run is kept after it closes for good, written
  // into every start record (docs/flow-rules.md, "Retention"). 0: forever.
  int64_t flow_retention_ms = 7LL * 24 * 3600 * 1000;
  // Optional, for metrics (docs/metrics.md): told of every method attempt and
  // every run that ends in a batch this engine applies live, on the log
  // writer's thread, after the apply and before the callers hear of it. Replay
  // at open does not report what earlier epochs ended (their process did),
  // except this epoch's EpochStart: the attempts its recovery ends
  // NOT_COMPLETED are this process's and are reported once. They must not
  // block or call into the engine.
  std::function<void(flow::AttemptOutcome)> on_attempt_ended;
  std::function<void(flow::FlowStatus)> on_flow_ended;  // a run closed, with its status
  std::function<void(size_t)> on_runs_deleted;          // runs retention deleted in a batch
  // The same batches' effects whole (flow/effects.h), for the series by Flow,
  // Step and RPC type: starts, closes, attempts, RPC calls.
  std::function<void(const flow::Effects&)> on_applied;
  // Optional (metrics, tests): the counts of every blob collection pass that
  // ran to its end, on the collector's thread.
  std::function<void(const SweepCounts&)> on_blobs_collected;

  // Attribute Store sync (docs/attribute-store.md): the stores this engine
  // syncs while it runs, each with its table (opened and checked by the
  // server at startup; it outlives the engine). A start or a declaration that
  // names a store not listed here is refused.
  struct AttributeStore {
    attrstore::StoreSettings settings;
    attrstore::AttributeTable* table = nullptr;
  };
  std::vector<AttributeStore> attribute_stores;
  attrstore::AttributeStoreSettings attribute_store_settings;
  // A quarter of lease.duration: the bound of every sync transaction.
  Duration attribute_sync_budget = milliseconds(2500);
  // How long this process's lease stays valid by its clock (0: not valid).
  // Required with attribute_stores.
  std::function<Duration()> lease_remaining;
  // After every sync try, on the store's sync thread (metrics). Must not block.
  std::function<void(const AttributeSyncReport&)> on_attribute_sync;
};

class Engine {
 public:
  // After the lease is held and `log` is open (its EpochStart written):
  // opens the local store, replays the log from the store's last applied slot
  // through the EpochStart (recovery: every attempt still running at the
  // EpochStart ends NOT_COMPLETED and consumes a retry), then starts
  // scheduling. `store`, `log` and `clock` must outlive the engine; `log` must
  // have been built with options.log_hook->on_durable(). A local store that is
  // missing, corrupt or behind the start of the log is restored from the newest
  // snapshot first (engine/local_store.h); one ahead of the log is Corruption. `clock` is the
  // steady clock of timeouts and of wait_flow deadlines (SystemClock in the server).
  static StatusOr<std::unique_ptr<Engine>> open(EngineOptions options, ObjectStore& store,
                                                LogWriter& log, Clock& clock);
  virtual ~Engine() = default;

  // Stops scheduling and dispatching, fails waiting calls with Stopped, closes
  // the local store. Idempotent. Call it before closing the log writer.
  virtual void stop() = 0;

  // Step down (spec: Step down the active process): from now on no new Step
  // task is handed out; SYNC tasks recorded but not yet sent are withdrawn
  // (they do not fail: the next active dispatches them). Heartbeats and
  // results are still accepted. Default: nothing (engines without tasks).
  virtual void begin_drain() {}
  // Attempts this process handed to Workers that have not ended yet.
  virtual size_t attempts_running() const { return 0; }

  // How open() made the local store usable ("opened ...", "restored the
  // snapshot at log slot N because ..."), for the startup log.
  virtual std::string local_store_report() const = 0;
  // Takes a snapshot now, trims old ones and collects the log behind them, as
  // the policy's triggers do. Stopped once the engine stopped.
  virtual StatusOr<SnapshotInfo> snapshot_now() = 0;
  virtual SnapshotStats snapshot_stats() const = 0;

  // WorkerTaskService. A handle names one connected Worker stream.
  using WorkerHandle = uint64_t;
  virtual StatusOr<WorkerHandle> connect_worker(const WorkerHello& hello,
                                                std::shared_ptr<WorkerSink> sink) = 0;
  // The stream ended. Its running attempts wait for the Worker to come back
  // (worker_reconnect_grace); a result may still arrive on its next stream.
  virtual void disconnect_worker(WorkerHandle worker) = 0;
  virtual HeartbeatAck heartbeat(WorkerHandle worker, const TaskHeartbeat& heartbeat) = 0;
  // A Worker's result of a FlowTask. Resolves once the result is durable
  // (accepted) or refused (stale: the attempt already ended; changes nothing).
  // If the engine stops first, the future holds an EngineStoppedError: send no ack.
  virtual std::future<ResultAck> complete_task(WorkerHandle worker,
                                               const flow::FlowTaskResult& result) = 0;

  // dex.FlowService (docs/api.md; docs/flow-rules.md). Errors: InvalidArgument
  // (naming the bad input), NotFound, AlreadyExists (a start its ID reuse
  // policy refuses), PreconditionFailed (the run is closed, the Timer already
  // fired, ...), Stopped (the engine stopped: the lease was lost or released).
  // The long polls end at their timeout (0: 30 s, at most 60 s), when
  // `cancelled()` turns true, or Stopped.
  virtual StatusOr<flow::StartFlowResponse> start_flow(const flow::StartFlowRequest&) = 0;
  virtual Status stop_flow(const flow::StopFlowRequest&) = 0;
  virtual Status publish(const flow::PublishToChannelRequest&) = 0;
  virtual Status skip_timer(const flow::SkipTimerRequest&) = 0;
  virtual StatusOr<flow::TimeTravelResponse> time_travel(const flow::TimeTravelRequest&) = 0;
  virtual StatusOr<flow::TriggerContinueAsNewResponse> continue_as_new(
      const flow::TriggerContinueAsNewRequest&) = 0;
  // docs/flow-rules.md, "FlowConfig": a running run's FlowConfig, field by field.
  virtual StatusOr<flow::UpdateFlowConfigResponse> update_flow_config(
      const flow::UpdateFlowConfigRequest&) = 0;
  virtual StatusOr<flow::FlowDescription> describe_flow(const flow::FlowRef&) = 0;
  virtual StatusOr<flow::GetFlowStateResponse> flow_state(const flow::FlowRef&) = 0;
  virtual StatusOr<flow::GetHistoryEventsResponse> history(
      const flow::GetHistoryEventsRequest&) = 0;
  virtual StatusOr<flow::WaitForFlowResponse> wait_for_flow(
      const flow::WaitForFlowRequest&, const std::function<bool()>& cancelled) = 0;
  virtual StatusOr<flow::GetHistoryEventsResponse> wait_for_history_event(
      const flow::WaitForHistoryEventRequest&, const std::function<bool()>& cancelled) = 0;
  virtual StatusOr<flow::WaitForStepCompletionResponse> wait_for_step(
      const flow::WaitForStepCompletionRequest&, const std::function<bool()>& cancelled) = 0;
  // Attributes and RPCs. invoke_rpc answers once the RPC's end is durable:
  // DeadlineExceeded at its timeout, Transient when it was not completed (a
  // takeover), PreconditionFailed when the run closed or the handler failed.
  virtual StatusOr<flow::GetAttributesResponse> get_attributes(
      const flow::GetAttributesRequest&) = 0;
  // SearchFlows (docs/search.md): one page of the runs a query selects, from
  // one applied slot (named in the answer). InvalidArgument for a bad query.
  virtual StatusOr<flow::SearchFlowsResponse> search_flows(const flow::SearchFlowsRequest&) = 0;
  // Query completion (docs/search.md, "Completing a query"): the fields a
  // query can name, and distinct values of a KEYWORD field by prefix.
  virtual StatusOr<flow::ListSearchKeysResponse> list_search_keys(
      const flow::ListSearchKeysRequest&) = 0;
  virtual StatusOr<flow::ListSearchValuesResponse> list_search_values(
      const flow::ListSearchValuesRequest&) = 0;
  virtual StatusOr<flow::SetAttributesResponse> set_attributes(
      const flow::SetAttributesRequest&) = 0;
  virtual StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(
      const flow::WaitForAttributeRequest&, const std::function<bool()>& cancelled) = 0;
  virtual StatusOr<flow::InvokeRpcResponse> invoke_rpc(const flow::InvokeRpcRequest&,
                                                       const std::function<bool()>& cancelled) = 0;

  // Where each Attribute Store's sync stands (admin describe), in configured order.
  virtual std::vector<AttributeSyncReport> attribute_sync_reports() const { return {}; }
};

}  // namespace dex
