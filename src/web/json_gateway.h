// The JSON gateway (docs/dex-web.md, "The JSON gateway"): one call of the
// public gRPC API, given as JSON, made over gRPC to the process's own API
// address and answered as JSON. Generic: the method is looked up in the
// protobuf descriptor pool, the request is parsed into its message type and
// sent as bytes through a grpc::GenericStub, so a new API method is reachable
// without a change here. Only the allow-list (dex.FlowService, every unary
// method; dex.AdminService) is reachable: the Worker stream and the standby
// service are not. Thread-safe: calls run concurrently.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace dex::web {

// What answers an HTTP request: the status and the JSON body.
struct GatewayReply {
  int http_status = 200;
  std::string body;
};

// The deadline of a call without a timeout of its own.
inline constexpr std::chrono::milliseconds kGatewayDeadline{30'000};
// A long poll (a request with timeout_ms) gets its timeout plus this much; a
// timeout_ms of 0 means the server's default, 30 s.
inline constexpr std::chrono::milliseconds kLongPollSlack{10'000};
inline constexpr std::chrono::milliseconds kLongPollDefault{30'000};
// The API refuses a timeout_ms above 60 s; the deadline never exceeds this.
inline constexpr std::chrono::milliseconds kLongPollMax{60'000};

class JsonGateway {
 public:
  // `api_address`: host:port to dial (loopback; see dial_address in
  // web_server.h).
  explicit JsonGateway(const std::string& api_address);
  ~JsonGateway();

  // POST /api/v1/<service>/<method> with `body` (proto3 JSON; empty: the
  // empty request) and the Authorization header's value (empty: none),
  // forwarded as the call's `authorization` metadata and never logged.
  GatewayReply call(std::string_view service, std::string_view method, std::string_view body,
                    std::string_view authorization);

  // Cancels the calls in flight (they answer 503) and refuses new ones:
  // shutdown does not wait for a long poll.
  void cancel_all();

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::mutex mu_;
  bool stopped_ = false;                 // guarded by mu_
  std::set<grpc::ClientContext*> open_;  // guarded by mu_
};

}  // namespace dex::web
