// A thin typed client for dex.FlowService and dex.AdminService
// (proto/dex/api.proto). Every call has a deadline and returns a Status whose
// message starts with the gRPC code name, e.g.
//   "UNAVAILABLE: the server is not reachable at 127.0.0.1:8801 (...)"
//   "NOT_FOUND: no flow with ID f-1"
// so that callers can print it as it is. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "dex/api.pb.h"

namespace dex {

struct ClientOptions {
  std::string server_address = "127.0.0.1:8801";
  // Deadline of each call (WaitFlow: its wait timeout plus this).
  Duration timeout = seconds(30);
  // Sent as "authorization: Bearer <token>" on AdminService calls when set.
  std::string admin_credential;
};

class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // `definition`: a flow type as JSON or YAML text (examples/flow-types/).
  StatusOr<RegisterFlowTypeResponse> register_flow_type(const std::string& definition);
  StatusOr<FlowType> get_flow_type(const std::string& name);
  StatusOr<ListFlowTypesResponse> list_flow_types();
  // `input_json`: JSON text (empty: {}). `flow_id` empty: the server picks one.
  StatusOr<StartFlowResponse> start_flow(const std::string& flow_type,
                                         const std::string& input_json,
                                         const std::string& flow_id = "");
  StatusOr<Flow> get_flow(const std::string& flow_id);
  // `status` UNSPECIFIED: every status; `page_size` 0: the server's default.
  StatusOr<ListFlowsResponse> list_flows(FlowStatus status = FLOW_STATUS_UNSPECIFIED,
                                         uint32_t page_size = 0,
                                         const std::string& page_token = "");
  StatusOr<CancelFlowResponse> cancel_flow(const std::string& flow_id);
  // Blocks until the flow ends or `wait_timeout` passes (ended = false).
  StatusOr<WaitFlowResponse> wait_flow(const std::string& flow_id, Duration wait_timeout);
  StatusOr<DescribeResponse> describe();

  const ClientOptions& options() const { return options_; }

 private:
  struct Stubs;
  ClientOptions options_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace dex
