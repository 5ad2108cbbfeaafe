// FlowEngine's Attribute and RPC calls (docs/api.md, "Attributes" and "RPCs"):
// GetAttributes and WaitForAttribute read the store; SetAttributes and
// InvokeRpc append records. An RPC is answered once the record of its one
// attempt's end applied: its output only when that record committed it.
#include <fmt/format.h>

#include "blob/blob_values.h"
#include "engine/flow_engine.h"
#include "engine/flow_reads.h"
#include "engine/rocks_kv.h"
#include "flow/kv_txn.h"

namespace dex {
namespace {

constexpr int64_t kRpcTimeoutDefaultMs = 10'000;
constexpr int64_t kRpcTimeoutMaxMs = 60'000;
// The caller waits this long past the RPC's deadline for the record that ends
// it (the deadline timer's record may queue behind others).
constexpr int64_t kRpcAnswerSlackMs = 5'000;
constexpr int kAttributeKeysPerGetMax = 1'000;

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

// `stored` may be a blob reference (docs/engine.md, "Large values").
bool same_value(const flow::AttributeValue& stored, const flow::AttributeValue& target) {
  return same_attribute_value(stored, target);
}

// How an RPC that ended reaches its caller.
StatusOr<flow::InvokeRpcResponse> rpc_answer(const flow::RpcExecution& rpc) {
  const std::string name =
      fmt::format("RPC '{}' of Flow '{}' run '{}'", rpc.name(), rpc.flow_id(), rpc.run_id());
  switch (rpc.outcome()) {
    case flow::ATTEMPT_COMPLETED: {
      flow::InvokeRpcResponse out;
      out.set_run_id(rpc.run_id());
      *out.mutable_output() = rpc.output();
      return out;
    }
    case flow::ATTEMPT_TIMED_OUT:
      return Status(Code::kDeadlineExceeded, name + " timed out: " + rpc.error());
    case flow::ATTEMPT_NOT_COMPLETED:
      return Status::transient(name +
                               " was not completed (nothing of it was committed): " + rpc.error());
    default:
      return Status::precondition_failed(name + " failed: " + rpc.error());
  }
}

}  // namespace

StatusOr<flow::GetAttributesResponse> FlowEngine::get_attributes(
    const flow::GetAttributesRequest& request) {
  if (request.keys_size() > kAttributeKeysPerGetMax)
    return Status::invalid_argument(fmt::format("{} keys asked; the limit is {}",
                                                request.keys_size(), kAttributeKeysPerGetMax));
  return with_view([&](RocksKv& kv) -> StatusOr<flow::GetAttributesResponse> {
    flow::KvFlowTxn txn(kv);
    auto run = resolve_run(txn, request.flow());
    if (!run.is_ok()) return run.status();
    flow::GetAttributesResponse out;
    out.set_run_id(run->run_id());
    out.set_status(run->status());
    if (request.keys().empty()) {
      for (auto& a : txn.attributes(run->flow_id(), run->run_id(), ""))
        *out.add_attributes() = std::move(a);
      return out;
    }
    std::set<std::string> keys(request.keys().begin(), request.keys().end());
    for (const auto& key : keys) {  // bounded by kAttributeKeysPerGetMax
      if (key.empty()) return Status::invalid_argument("an Attribute key must not be empty");
      for (auto& a : txn.attributes(run->flow_id(), run->run_id(), key))
        *out.add_attributes() = std::move(a);
    }
    return out;
  });
}

StatusOr<flow::SetAttributesResponse> FlowEngine::set_attributes(
    const flow::SetAttributesRequest& request) {
  auto run = with_view([&](RocksKv& kv) -> StatusOr<flow::Run> {
    flow::KvFlowTxn txn(kv);
    return resolve_run(txn, request.flow());
  });
  if (!run.is_ok()) return run.status();
  flow::FlowRecord record;
  auto* s = record.mutable_set_attributes();
  s->set_flow_id(run->flow_id());
  s->set_run_id(run->run_id());
  *s->mutable_writes() = request.writes();
  s->set_request_id(request.request_id());
  s->set_at_unix_ms(now_ms());
  auto result = propose_and_wait(std::move(record), false);
  if (!result.is_ok()) return result.status();
  // Unchanged: no writes, or a repeated request ID answered as its first try was.
  if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  flow::SetAttributesResponse out;
  out.set_run_id(run->run_id());
  return out;
}

StatusOr<flow::WaitForAttributeResponse> FlowEngine::wait_for_attribute(
    const flow::WaitForAttributeRequest& request, TimePoint deadline,
    const std::function<bool()>& cancelled) {
  if (request.key().empty()) return Status::invalid_argument("an Attribute key is required");
  if (!is_scalar(request.value()))
    return Status::invalid_argument(
        "WaitForAttribute compares a scalar: give a string, int64, double, bool or datetime value");
  flow::WaitForAttributeResponse last;
  auto got = wait_until<flow::WaitForAttributeResponse>(
      deadline, cancelled, [&]() -> StatusOr<std::optional<flow::WaitForAttributeResponse>> {
        return with_view(
            [&](RocksKv& kv) -> StatusOr<std::optional<flow::WaitForAttributeResponse>> {
              flow::KvFlowTxn txn(kv);
              auto run = resolve_run(txn, request.flow());
              if (!run.is_ok()) return run.status();
              last.Clear();
              last.set_status(run->status());
              auto v = txn.attribute(run->flow_id(), run->run_id(), request.key(),
                                     request.instance_key());
              if (v) *last.mutable_current() = *v;
              if (v && same_value(*v, request.value())) {
                last.set_matched(true);
                return std::optional<flow::WaitForAttributeResponse>(last);
              }
              // A closed run never changes again.
              if (run->status() != flow::FLOW_RUNNING)
                return std::optional<flow::WaitForAttributeResponse>(last);
              return std::optional<flow::WaitForAttributeResponse>();
            });
      });
  if (!got.is_ok()) return got.status();
  return got->value_or(last);
}

StatusOr<flow::InvokeRpcResponse> FlowEngine::invoke_rpc(const flow::InvokeRpcRequest& request,
                                                         const std::function<bool()>& cancelled) {
  if (request.timeout_ms() < 0 || request.timeout_ms() > kRpcTimeoutMaxMs)
    return Status::invalid_argument(fmt::format("timeoutMs {} is outside 0..{} (0: {} ms)",
                                                request.timeout_ms(), kRpcTimeoutMaxMs,
                                                kRpcTimeoutDefaultMs));
  if (request.name().empty()) return Status::invalid_argument("an RPC name is required");
  const int64_t timeout_ms =
      request.timeout_ms() == 0 ? kRpcTimeoutDefaultMs : request.timeout_ms();
  // The run is resolved here so that the record names it: a new run started
  // meanwhile never receives this RPC.
  auto run = with_view([&](RocksKv& kv) -> StatusOr<flow::Run> {
    flow::KvFlowTxn txn(kv);
    return resolve_run(txn, request.flow());
  });
  if (!run.is_ok()) return run.status();
  flow::FlowRecord record;
  auto* r = record.mutable_invoke_rpc();
  r->set_flow_id(run->flow_id());
  r->set_run_id(run->run_id());
  {
    std::lock_guard<std::mutex> lock(mu_);
    r->set_rpc_id(request.request_id().empty()
                      ? fmt::format("rpc:{}.{}", options_.epoch.value, next_rpc_++)
                      : "req:" + request.request_id());
  }
  r->set_name(request.name());
  *r->mutable_input() = request.input();
  r->set_request_id(request.request_id());
  r->set_timeout_ms(timeout_ms);
  r->set_at_unix_ms(now_ms());
  const std::string rpc_id = r->rpc_id();
  auto result = propose_and_wait(std::move(record), true);
  if (!result.is_ok()) return result.status();
  if (result->kind == flow::ApplyKind::kRejected || result->kind == flow::ApplyKind::kStale)
    return refusal(*result);
  // Applied (queued) or unchanged (a retry of a committed or running RPC):
  // wait for its end.
  const TimePoint deadline = clock_.now() + milliseconds(timeout_ms + kRpcAnswerSlackMs);
  auto got = wait_until<flow::RpcExecution>(
      deadline, cancelled, [&]() -> StatusOr<std::optional<flow::RpcExecution>> {
        return with_view([&](RocksKv& kv) -> StatusOr<std::optional<flow::RpcExecution>> {
          flow::KvFlowTxn txn(kv);
          auto rpc = txn.rpc(run->flow_id(), run->run_id(), rpc_id);
          if (!rpc)
            return Status::transient(
                fmt::format("RPC '{}' of Flow '{}' run '{}' is no longer known (it ended long ago)",
                            request.name(), run->flow_id(), run->run_id()));
          if (!rpc->done()) return std::optional<flow::RpcExecution>();
          return std::optional<flow::RpcExecution>(std::move(*rpc));
        });
      });
  if (!got.is_ok()) return got.status();
  if (!got->has_value()) {
    if (cancelled && cancelled()) return Status::stopped("the caller went away");
    return Status(Code::kDeadlineExceeded,
                  fmt::format("RPC '{}' of Flow '{}' run '{}' did not end within {} ms",
                              request.name(), run->flow_id(), run->run_id(), timeout_ms));
  }
  return rpc_answer(**got);
}

}  // namespace dex
