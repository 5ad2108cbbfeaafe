#include "engine/flow_waits.h"

#include <fmt/format.h>

#include <algorithm>

#include "blob/blob_values.h"
#include "engine/flow_reads.h"
#include "flow/kv_txn.h"

namespace dex {
namespace {

constexpr int64_t kWaitDefaultMs = 30'000;
constexpr int64_t kWaitMaxMs = 60'000;

bool is_scalar(const flow::AttributeValue& v) {
  switch (v.value_case()) {
    case flow::AttributeValue::kStringValue:
    case flow::AttributeValue::kInt64Value:
    case flow::AttributeValue::kDoubleValue:
    case flow::AttributeValue::kBoolValue:
    case flow::AttributeValue::kDatetimeUnixMs:
      return true;
    default:
      return false;
  }
}

}  // namespace

TimePoint long_poll_deadline(Clock& clock, int64_t timeout_ms) {
  if (timeout_ms <= 0) timeout_ms = kWaitDefaultMs;
  return clock.now() + milliseconds(std::min(timeout_ms, kWaitMaxMs));
}

void FlowWaits::changed() {
  std::lock_guard<std::mutex> lock(mu_);
  ++version_;
  changed_cv_.notify_all();
}

void FlowWaits::stop(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stopped_) stopped_ = why;
  changed_cv_.notify_all();
}

template <typename T>
StatusOr<std::optional<T>> FlowWaits::wait_until(
    TimePoint deadline, const Cancelled& cancelled,
    const std::function<StatusOr<std::optional<T>>()>& ready) {
  // Bounded by the deadline: each round waits at most kWaitSlice.
  while (true) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return *stopped_;
      seen = version_;
    }
    auto value = ready();
    if (!value.is_ok() || value->has_value()) return value;
    const TimePoint now = clock_.now();
    if (now >= deadline || (cancelled && cancelled())) return std::optional<T>();
    std::unique_lock<std::mutex> lock(mu_);
    clock_.wait_until(lock, changed_cv_, std::min(deadline, now + kWaitSlice),
                      [&] { return stopped_.has_value() || version_ != seen; });
  }
}

template <typename T>
StatusOr<std::optional<T>> FlowWaits::wait_on_run(
    const flow::FlowRef& ref, TimePoint deadline, const Cancelled& cancelled,
    const std::function<StatusOr<std::optional<T>>(RocksKv&, flow::KvFlowTxn&, const flow::Run&)>&
        ready) {
  return wait_until<T>(deadline, cancelled, [&]() -> StatusOr<std::optional<T>> {
    return with_view(store_, [&](RocksKv& kv) -> StatusOr<std::optional<T>> {
      flow::KvFlowTxn txn(kv);
      auto run = resolve_run(txn, ref);
      if (!run.is_ok()) return run.status();
      return ready(kv, txn, *run);
    });
  });
}

StatusOr<flow::WaitForFlowResponse> FlowWaits::wait_for_flow(const flow::FlowRef& ref,
                                                             TimePoint deadline,
                                                             const Cancelled& cancelled) {
  using Response = flow::WaitForFlowResponse;
  Response last;
  // No run named: the Flow ID's latest run, which a pending Flow retry
  // replaces, so the wait goes on until a run closes with none to follow.
  // A run named that continued as new: the run its chain goes on as (the
  // wait is for the end of the chain).
  const bool follow_retries = ref.run_id().empty();
  auto got = wait_on_run<Response>(
      ref, deadline, cancelled,
      [&](RocksKv&, flow::KvFlowTxn& txn,
          const flow::Run& named) -> StatusOr<std::optional<Response>> {
        const flow::Run run = follow_continued(txn, named);
        *last.mutable_flow() = describe_run(txn, run);
        const flow::FlowDescription& d = last.flow();
        if (d.status() == flow::FLOW_RUNNING || (follow_retries && d.retry_unix_ms() != 0))
          return std::optional<Response>();
        last.set_closed(true);
        return std::optional<Response>(last);
      });
  if (!got.is_ok()) return got.status();
  return got->value_or(last);
}

StatusOr<flow::GetHistoryEventsResponse> FlowWaits::wait_for_history_event(
    const flow::WaitForHistoryEventRequest& request, TimePoint deadline,
    const Cancelled& cancelled) {
  using Response = flow::GetHistoryEventsResponse;
  Response last;
  auto got = wait_on_run<Response>(request.flow(), deadline, cancelled,
                                   [&](RocksKv& kv, flow::KvFlowTxn&,
                                       const flow::Run& run) -> StatusOr<std::optional<Response>> {
                                     last = history_page(kv, run, request.after_seq(),
                                                         request.from_start(), kHistoryPageDefault);
                                     if (last.events_size() == 0) return std::optional<Response>();
                                     return std::optional<Response>(last);
                                   });
  if (!got.is_ok()) return got.status();
  return got->value_or(last);
}

StatusOr<flow::WaitForStepCompletionResponse> FlowWaits::wait_for_step(
    const flow::WaitForStepCompletionRequest& request, TimePoint deadline,
    const Cancelled& cancelled) {
  using Response = flow::WaitForStepCompletionResponse;
  Response last;
  auto got = wait_on_run<Response>(
      request.flow(), deadline, cancelled,
      [&](RocksKv&, flow::KvFlowTxn& txn,
          const flow::Run& named) -> StatusOr<std::optional<Response>> {
        // An execution a continue-as-new carried (same ID; CANCELED in the
        // run it left), or one not started before the run continued, is
        // waited for in the run the chain goes on as.
        flow::Run run = named;
        auto s = txn.step(run.flow_id(), run.run_id(), request.step_execution_id());
        for (size_t hops = 0; hops < kContinueHopsMax; ++hops) {  // bounded by kContinueHopsMax
          if (run.status() != flow::FLOW_CONTINUED_AS_NEW || run.next_run_id().empty()) break;
          if (s && s->phase() != flow::PHASE_CANCELED) break;
          auto next = txn.run(run.flow_id(), run.next_run_id());
          if (!next) break;
          auto carried = txn.step(next->flow_id(), next->run_id(), request.step_execution_id());
          if (s && !carried) break;  // canceled before the run continued
          run = std::move(*next);
          s = std::move(carried);
        }
        // An execution the run has not started yet is waited for while the
        // run goes on.
        if (!s && run.status() == flow::FLOW_RUNNING) return std::optional<Response>();
        if (!s)
          return Status::not_found("Flow '" + run.flow_id() + "' run '" + run.run_id() +
                                   "' closed without a Step execution '" +
                                   request.step_execution_id() + "'");
        last.set_phase(s->phase());
        const bool ended = s->phase() == flow::PHASE_DONE || s->phase() == flow::PHASE_FAILED ||
                           s->phase() == flow::PHASE_CANCELED;
        if (!ended && run.status() == flow::FLOW_RUNNING) return std::optional<Response>();
        last.set_completed(true);
        return std::optional<Response>(last);
      });
  if (!got.is_ok()) return got.status();
  return got->value_or(last);
}

StatusOr<flow::WaitForAttributeResponse> FlowWaits::wait_for_attribute(
    const flow::WaitForAttributeRequest& request, TimePoint deadline, const Cancelled& cancelled) {
  using Response = flow::WaitForAttributeResponse;
  if (request.key().empty()) return Status::invalid_argument("an Attribute key is required");
  if (!is_scalar(request.value()))
    return Status::invalid_argument(
        "WaitForAttribute compares a scalar: give a string, int64, double, bool or datetime value");
  Response last;
  // A run that continued as new: its Attributes went on in the run its chain
  // goes on as, where the wait goes on too.
  auto got = wait_on_run<Response>(
      request.flow(), deadline, cancelled,
      [&](RocksKv&, flow::KvFlowTxn& txn,
          const flow::Run& named) -> StatusOr<std::optional<Response>> {
        const flow::Run run = follow_continued(txn, named);
        last.Clear();
        last.set_status(run.status());
        auto v = txn.attribute(run.flow_id(), run.run_id(), request.key(), request.instance_key());
        if (v) *last.mutable_current() = *v;
        // `v` may be a blob reference (docs/engine.md, "Large
        // values").
        if (v && same_attribute_value(*v, request.value())) {
          last.set_matched(true);
          return std::optional<Response>(last);
        }
        // A closed run never changes again.
        if (run.status() != flow::FLOW_RUNNING) return std::optional<Response>(last);
        return std::optional<Response>();
      });
  if (!got.is_ok()) return got.status();
  return got->value_or(last);
}

StatusOr<std::optional<flow::RpcExecution>> FlowWaits::wait_for_rpc_end(
    const flow::Run& run, const std::string& rpc_id, const std::string& rpc_name,
    TimePoint deadline, const Cancelled& cancelled) {
  return wait_until<flow::RpcExecution>(
      deadline, cancelled, [&]() -> StatusOr<std::optional<flow::RpcExecution>> {
        return with_view(store_, [&](RocksKv& kv) -> StatusOr<std::optional<flow::RpcExecution>> {
          flow::KvFlowTxn txn(kv);
          auto rpc = txn.rpc(run.flow_id(), run.run_id(), rpc_id);
          if (!rpc)
            return Status::transient(
                fmt::format("RPC '{}' of Flow '{}' run '{}' is no longer known (it ended long ago)",
                            rpc_name, run.flow_id(), run.run_id()));
          if (!rpc->done()) return std::optional<flow::RpcExecution>();
          return std::optional<flow::RpcExecution>(std::move(*rpc));
        });
      });
}

}  // namespace dex
