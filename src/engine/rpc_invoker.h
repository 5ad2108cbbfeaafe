// InvokeRpc (docs/api.md, "RPCs"): the RPC's record is appended through the
// flow engine, and the caller waits (FlowWaits) for the record that ends its
// one attempt: answered with the output only when that record committed it.
// A unit of its own above the flow engine: the engine never calls it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "dex/flow_api.pb.h"
#include "engine/flow_waits.h"
#include "engine/shared_store.h"

namespace dex {

class FlowEngine;

class RpcInvoker {
 public:
  // All must outlive this. `now_unix_ms` is the wall clock of records.
  RpcInvoker(FlowEngine& flows, FlowWaits& waits, const SharedStore& store, Clock& clock,
             Epoch epoch, std::function<int64_t()> now_unix_ms)
      : flows_(flows),
        waits_(waits),
        store_(store),
        clock_(clock),
        epoch_(epoch),
        now_unix_ms_(std::move(now_unix_ms)) {}

  // Answers once the RPC's end is durable: its output, or why it did not
  // complete (DeadlineExceeded, Transient for NOT_COMPLETED, PreconditionFailed).
  StatusOr<flow::InvokeRpcResponse> invoke(const flow::InvokeRpcRequest& request,
                                           const FlowWaits::Cancelled& cancelled);

 private:
  FlowEngine& flows_;
  FlowWaits& waits_;
  const SharedStore& store_;
  Clock& clock_;
  const Epoch epoch_;
  const std::function<int64_t()> now_unix_ms_;
  // An RPC without a request ID is "rpc:<epoch>.<n>": unique across processes.
  std::atomic<uint64_t> next_rpc_{1};
};

}  // namespace dex
