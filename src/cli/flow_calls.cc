#include "cli/flow_calls.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "config/config.h"
#include "dex/api.grpc.pb.h"
#include "sdk/grpc_status.h"

namespace dex::cli {

namespace {

// When no address could even be connected to, give up after this (a wrong
// address fails fast; a quick restart or a role change is still covered).
constexpr Duration kUnreachableGrace = milliseconds(1500);
constexpr Duration kRoundPause = milliseconds(200);
constexpr int64_t kDefaultRpcTimeoutMs = 10'000;

std::chrono::system_clock::time_point system_deadline(TimePoint deadline) {
  const Duration left = std::max(deadline - SystemClock::instance().now(), Duration::zero());
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(left);
}

}  // namespace

struct FlowCalls::Impl {
  Duration timeout;
  TlsOptions tls;
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<FlowService::Stub>> stubs;
  size_t preferred = 0;  // the address that answered last

  using Attempt = std::function<grpc::Status(FlowService::Stub&, grpc::ClientContext&)>;

  Status call(Duration call_timeout, const Attempt& attempt) {
    const TimePoint start = SystemClock::instance().now();
    const TimePoint deadline = start + call_timeout;
    const size_t n = stubs.size();
    Status last = Status::transient("UNAVAILABLE: no address to call");
    std::string last_address;  // the address `last` is about
    // Bounded by the deadline: each round tries every address once.
    for (;;) {
      bool answered = false;  // a process answered (UNAVAILABLE: not the active one)
      for (size_t k = 0; k < n; ++k) {
        const size_t i = (preferred + k) % n;
        if (SystemClock::instance().now() >= deadline) return last;
        grpc::ClientContext context;
        context.set_deadline(system_deadline(deadline));
        grpc::Status status = attempt(*stubs[i], context);
        if (status.ok()) {
          preferred = i;
          return Status::ok();
        }
        const grpc::StatusCode code = status.error_code();
        if (code == grpc::StatusCode::DEADLINE_EXCEEDED &&
            SystemClock::instance().now() < deadline) {
          // The server's own answer (an RPC that timed out), not this call's deadline.
          return Status::transient("DEADLINE_EXCEEDED: " + status.error_message());
        }
        last = sdk_internal::status_from_grpc(status, addresses[i], call_timeout);
        last_address = addresses[i];
        if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::CANCELLED) {
          if (code != grpc::StatusCode::DEADLINE_EXCEEDED) preferred = i;
          return last;
        }
        if (code == grpc::StatusCode::CANCELLED ||
            !sdk_internal::is_connection_failure(status.error_message())) {
          answered = true;
        }
      }
      const TimePoint now = SystemClock::instance().now();
      if (now >= deadline || (!answered && now - start >= kUnreachableGrace)) {
        // Nothing answered: with TLS, a failed handshake says why.
        return answered ? last : sdk_internal::explain_tls_failure(last, last_address, tls);
      }
      std::this_thread::sleep_for(std::min<Duration>(kRoundPause, deadline - now));
    }
  }

  template <typename Response, typename Method>
  StatusOr<Response> unary(Duration call_timeout, Method method) {
    Response response;
    Status s = call(call_timeout, [&](FlowService::Stub& stub, grpc::ClientContext& context) {
      response.Clear();
      return method(stub, context, response);
    });
    if (!s.is_ok()) return s;
    return response;
  }
};

FlowCalls::FlowCalls(std::vector<std::string> addresses, Duration timeout, const TlsOptions& tls)
    : impl_(std::make_unique<Impl>()) {
  impl_->timeout = timeout;
  impl_->addresses = std::move(addresses);
  impl_->tls = tls;
  for (const std::string& address : impl_->addresses) {
    impl_->stubs.push_back(FlowService::NewStub(
        sdk_internal::make_channel(address, milliseconds(100), seconds(1), tls)));
  }
}

FlowCalls::~FlowCalls() = default;

StatusOr<flow::InvokeRpcResponse> FlowCalls::invoke_rpc(const flow::InvokeRpcRequest& request) {
  const int64_t rpc_ms = request.timeout_ms() > 0 ? request.timeout_ms() : kDefaultRpcTimeoutMs;
  return impl_->unary<flow::InvokeRpcResponse>(
      impl_->timeout + milliseconds(rpc_ms), [&](FlowService::Stub& s, grpc::ClientContext& c,
                                                 auto& r) { return s.InvokeRpc(&c, request, &r); });
}

}  // namespace dex::cli
