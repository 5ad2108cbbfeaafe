// dexcli's InvokeRpc call. The SDK's Client::invoke_rpc answers the output as
// JSON only; dexcli prints the run ID and an output that is not JSON too
// (base64), so it needs the whole response. The call goes to the node's
// addresses in turn as the Client's do (src/sdk/README.md, "Several
// addresses"), more simply (no readiness probes): an UNAVAILABLE (no
// connection, or a process that is not the active one) or a CANCELLED (a
// listener replaced at a role change) moves on to the next address, round
// after round, within the call's deadline; any other answer ends the call.
// It is safe to repeat: it carries a request ID (the server answers a
// committed RPC's output again, and an UNAVAILABLE from it means nothing of
// the RPC was committed). Statuses read as the Client's: "<CODE>: <message>".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "dex/flow_api.pb.h"
#include "sdk/tls_options.h"

namespace dex::cli {

class FlowCalls {
 public:
  // `addresses`: checked (sdk/addresses.h); `timeout`: each call's deadline;
  // `tls`: checked (sdk/tls_options.h).
  FlowCalls(std::vector<std::string> addresses, Duration timeout, const TlsOptions& tls = {});
  ~FlowCalls();
  FlowCalls(const FlowCalls&) = delete;
  FlowCalls& operator=(const FlowCalls&) = delete;

  // The deadline is the RPC's own timeout (request.timeout_ms, 0: 10 s) plus
  // the call's timeout, so that the server's DEADLINE_EXCEEDED comes first.
  StatusOr<flow::InvokeRpcResponse> invoke_rpc(const flow::InvokeRpcRequest& request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex::cli
