// The long polls of dex.FlowService (docs/api.md): WaitForFlow,
// WaitForHistoryEvent, WaitForStepCompletion, WaitForAttribute, and the wait
// of an InvokeRpc caller for its RPC's end. Each reads the store; while what it
// waits for has not happened it sleeps until an applied batch changed runs
// (changed(), which the flow engine calls), its deadline, the caller going
// away, or stop(). It appends nothing: the rest of the engine never calls it
// back. Thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "dex/flow_api.pb.h"
#include "dex/flow_records.pb.h"
#include "engine/shared_store.h"
#include "flow/kv_txn.h"

namespace dex {

// A long poll re-checks whether its caller went away at least this often.
inline constexpr Duration kWaitSlice = milliseconds(500);

// The deadline of a long poll asking for `timeout_ms` (0: 30 s; at most 60 s).
TimePoint long_poll_deadline(Clock& clock, int64_t timeout_ms);

class FlowWaits {
 public:
  using Cancelled = std::function<bool()>;

  // `store` and `clock` (the steady clock of deadlines) must outlive this.
  FlowWaits(const SharedStore& store, Clock& clock) : store_(store), clock_(clock) {}

  // An applied batch changed runs (history, Steps, Attributes, RPCs, closes).
  void changed();
  // Every wait, now and later, ends with `why` (Stopped). Idempotent.
  void stop(const Status& why);

  StatusOr<flow::WaitForFlowResponse> wait_for_flow(const flow::FlowRef& ref, TimePoint deadline,
                                                    const Cancelled& cancelled);
  StatusOr<flow::GetHistoryEventsResponse> wait_for_history_event(
      const flow::WaitForHistoryEventRequest& request, TimePoint deadline,
      const Cancelled& cancelled);
  StatusOr<flow::WaitForStepCompletionResponse> wait_for_step(
      const flow::WaitForStepCompletionRequest& request, TimePoint deadline,
      const Cancelled& cancelled);
  StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(
      const flow::WaitForAttributeRequest& request, TimePoint deadline, const Cancelled& cancelled);
  // The RPC `rpc_id` of the run once it is done (nullopt at the deadline or
  // when the caller went away); Transient when the run no longer knows it.
  StatusOr<std::optional<flow::RpcExecution>> wait_for_rpc_end(const flow::Run& run,
                                                               const std::string& rpc_id,
                                                               const std::string& rpc_name,
                                                               TimePoint deadline,
                                                               const Cancelled& cancelled);

 private:
  // Waits until `ready()` answers a value, the deadline passes (nullopt), the
  // caller goes away or the waits stop. Bounded by the deadline: each round
  // waits at most kWaitSlice.
  template <typename T>
  StatusOr<std::optional<T>> wait_until(TimePoint deadline, const Cancelled& cancelled,
                                        const std::function<StatusOr<std::optional<T>>()>& ready);
  // wait_until over the run `ref` names, read afresh each round: `ready`
  // looks at it in the store's view.
  template <typename T>
  StatusOr<std::optional<T>> wait_on_run(
      const flow::FlowRef& ref, TimePoint deadline, const Cancelled& cancelled,
      const std::function<StatusOr<std::optional<T>>(RocksKv&, flow::KvFlowTxn&, const flow::Run&)>&
          ready);

  const SharedStore& store_;
  Clock& clock_;
  std::mutex mu_;
  std::condition_variable changed_cv_;  // version_ moved, or stopped
  uint64_t version_ = 0;                // guarded by mu_: bumped by every change
  std::optional<Status> stopped_;       // guarded by mu_
};

}  // namespace dex
