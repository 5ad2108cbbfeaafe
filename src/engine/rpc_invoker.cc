#include "engine/rpc_invoker.h"

#include <fmt/format.h>

#include "engine/flow_engine.h"
#include "engine/flow_reads.h"
#include "engine/rocks_kv.h"
#include "flow/declaration.h"
#include "flow/kv_txn.h"
#include "flow/limits.h"

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
  // The call's own lock keys, before anything is logged; the rules check them
  // again with the declaration's (at most kLockKeysMax in all).
  if (static_cast<size_t>(request.lock_keys_size()) > flow::kLockKeysMax)
    return Status::invalid_argument(fmt::format("lockKeys has {} keys; at most {}",
                                                request.lock_keys_size(), flow::kLockKeysMax));
  for (int i = 0; i < request.lock_keys_size(); ++i) {  // bounded by kLockKeysMax
    if (Status s = flow::validate_name(fmt::format("lockKeys[{}]", i), request.lock_keys(i));
        !s.is_ok())
      return s;
  }
  const int64_t timeout_ms =
      request.timeout_ms() == 0 ? kRpcTimeoutDefaultMs : request.timeout_ms();
  // The run is resolved here so that the record names it: a new run started
  // meanwhile never receives this RPC.
  bool declared_keys = false;  // the RPC's declaration names lock keys
  auto run = with_view(store_, [&](RocksKv& kv) -> StatusOr<flow::Run> {
    flow::KvFlowTxn txn(kv);
    auto found = resolve_run(txn, request.flow());
    if (!found.is_ok()) return found;
    if (auto d = txn.declaration(found->flow_type(), found->declaration_version())) {
      const flow::RpcDeclaration* rpc = flow::find_rpc(d->declaration(), request.name());
      declared_keys = rpc != nullptr && rpc->lock_keys_size() > 0;
    }
    return found;
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
  *r->mutable_lock_keys() = request.lock_keys();
  const std::string rpc_id = r->rpc_id();
  // An RPC with lock keys is not handed out while its record is written: the
  // speculation sees the applied state only, not an earlier record still being
  // written that takes one of its keys, so the task could go out beside that
  // holder's. It goes out once its record applied and it holds its keys.
  const bool speculative = request.lock_keys().empty() && !declared_keys;
  auto result = flows_.propose_and_wait(std::move(record), speculative);
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
