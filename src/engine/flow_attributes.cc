// FlowEngine's Attribute calls (docs/api.md, "Attributes"): GetAttributes
// reads the store; SetAttributes appends a record (its request ID makes a
// client's repeat change nothing). WaitForAttribute is a long poll
// (flow_waits.h).
#include <fmt/format.h>

#include <set>

#include "engine/flow_engine.h"
#include "engine/flow_reads.h"
#include "engine/rocks_kv.h"
#include "flow/kv_txn.h"

namespace dex {
namespace {

constexpr int kAttributeKeysPerGetMax = 1'000;

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

}  // namespace dex
