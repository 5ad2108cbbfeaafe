#include "engine/rpc_invoker.h"

#include <fmt/format.h>

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

StatusOr<flow::InvokeRpcResponse> RpcInvoker::invoke(const flow::InvokeRpcRequest& request,
                                                     const FlowWaits::Cancelled& cancelled) {
  if (request.timeout_ms() < 0 || request.timeout_ms() > kRpcTimeoutMaxMs)
    return Status::invalid_argument(fmt::format("timeoutMs {} is outside 0..{} (0: {} ms)",
                                                request.timeout_ms(), kRpcTimeoutMaxMs,
                                                kRpcTimeoutDefaultMs));
  if (request.name().empty()) return Status::invalid_argument("an RPC name is required");
  const int64_t timeout_ms =
      request.timeout_ms() == 0 ? kRpcTimeoutDefaultMs : request.timeout_ms();
  // The run is resolved here so that the record names it: a new run started
  // meanwhile never receives this RPC.
  auto run = with_view(store_, [&](RocksKv& kv) -> StatusOr<flow::Run> {
    flow::KvFlowTxn txn(kv);
    return resolve_run(txn, request.flow());
  });
  if (!run.is_ok()) return run.status();
  flow::FlowRecord record;
  auto* r = record.mutable_invoke_rpc();
  r->set_flow_id(run->flow_id());
  r->set_run_id(run->run_id());
  r->set_rpc_id(request.request_id().empty()
                    ? fmt::format("rpc:{}.{}", epoch_.value, next_rpc_.fetch_add(1))
                    : "req:" + request.request_id());
  r->set_name(request.name());
  *r->mutable_input() = request.input();
  r->set_request_id(request.request_id());
  r->set_timeout_ms(timeout_ms);
  r->set_at_unix_ms(now_unix_ms_());
  const std::string rpc_id = r->rpc_id();
  auto result = flows_.propose_and_wait(std::move(record), true);
  if (!result.is_ok()) return result.status();
  if (result->kind == flow::ApplyKind::kRejected || result->kind == flow::ApplyKind::kStale)
    return refusal(*result);
  // Applied (queued) or unchanged (a retry of a committed or running RPC):
  // wait for its end.
  const TimePoint deadline = clock_.now() + milliseconds(timeout_ms + kRpcAnswerSlackMs);
  auto got = waits_.wait_for_rpc_end(*run, rpc_id, request.name(), deadline, cancelled);
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
