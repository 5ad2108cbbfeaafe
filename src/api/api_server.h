// The gRPC face of a dex process: dex.FlowService, dex.WorkerTaskService,
// dex.AdminService and grpc.health.v1.Health on one listen address. The
// services are thin: they check the process's role, translate to the Engine
// and map Status codes to gRPC codes. docs/api.md describes the API.
//
// Role: while this process is the active one (set_active with an engine),
// public calls reach the engine and readiness names are SERVING. Otherwise
// (starting, lease lost, shutting down) every public call answers UNAVAILABLE
// and readiness names are NOT_SERVING — at once, before the process exits
// (spec: Health and probes). Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"

namespace grpc {
class Server;
}

namespace dex {

// Limits on requests: a larger message is refused by gRPC with
// RESOURCE_EXHAUSTED naming both sizes.
inline constexpr int kApiMessageBytesMax = 4 << 20;

struct ApiServerOptions {
  std::string listen = "127.0.0.1:8801";
  int message_bytes_max = kApiMessageBytesMax;
  // A standby closes each client connection after about this long, so that a
  // client that reached it reconnects and finds the active process (spec:
  // Health and probes).
  Duration standby_connection_age = seconds(3);
  // admin.enabled: false leaves dex.AdminService out (calls answer UNIMPLEMENTED).
  bool admin_enabled = true;
  // SHA-256 (hex) of every accepted admin token; empty: admin calls need none.
  std::vector<std::string> admin_token_sha256;
};

// Runs a step down for the AdminService (the node's role loop implements it).
// Errors: PreconditionFailed (does not match, or one is in progress), Stopped.
using StepDownHandler = std::function<StatusOr<StepDownResponse>(const StepDownRequest&)>;

// Who answers Describe.
struct NodeIdentity {
  std::string node_id;
  Epoch epoch;
  std::string holder_process_id;
};

// gRPC status code for a dex Status (the codes of grpc::StatusCode).
int grpc_code_for(const Status& status);

class ApiServer {
 public:
  // Binds and starts serving as a standby: UNAVAILABLE and NOT_SERVING until
  // set_active, connections closed after standby_connection_age.
  // InvalidArgument if the address cannot be bound, naming it.
  static StatusOr<std::unique_ptr<ApiServer>> start(const ApiServerOptions& options);
  ~ApiServer();

  // The port actually bound (useful with port 0).
  int port() const;
  const std::string& listen_address() const;

  // This process became the active one: serve `engine` (which must outlive the
  // call to set_inactive or the destructor) as `identity`. `lease_valid` is
  // asked on every public call: once it answers false (say, the process was
  // frozen past its lease), the call and every later one answer UNAVAILABLE
  // and readiness turns NOT_SERVING, before anything is read from the engine.
  //
  // A standby's connections are closed after about 3 s; the active process's
  // are not. Changing between the two replaces the gRPC server on the same
  // port (gRPC has no per-connection control), so clients reconnect once.
  // Fails only if the port cannot be bound again.
  Status activate(
      Engine* engine, NodeIdentity identity,
      std::function<bool()> lease_valid = [] { return true; });
  // activate() for callers that cannot act on a failure (tests): logs it.
  void set_active(
      Engine* engine, NodeIdentity identity,
      std::function<bool()> lease_valid = [] { return true; });
  // This process is (again) a standby: public calls UNAVAILABLE, readiness
  // NOT_SERVING, connections closed after about 3 s, and dex.HotStandby
  // SERVING only while `hot` (a following hot standby).
  Status set_standby(bool hot);
  // Updates dex.HotStandby on a standby (no effect while active).
  void set_hot_standby(bool hot);
  // Step down: the handler runs StepDown calls (unset: UNIMPLEMENTED); while
  // `stepping_down` Describe answers FAILED_PRECONDITION (spec: Step down).
  void set_step_down_handler(StepDownHandler handler);
  void set_stepping_down(bool stepping_down);
  // Ends every open PollWorkerTask stream (a step down's release: their
  // Workers reconnect and find the active process).
  void end_worker_streams();
  // Waits until no call still uses the engine it got before the last
  // set_inactive() (a Worker stream ending, a unary call finishing); false
  // after `timeout`. Call after set_inactive() and Engine::stop() and before
  // deleting the engine.
  bool wait_engine_unused(Duration timeout);
  // Stop serving public calls at once: UNAVAILABLE and NOT_SERVING from now on.
  // Calls already inside the engine finish with the engine's answer.
  void set_inactive(std::string why);

  // Stops accepting calls; open calls are cancelled after `grace`.
  void shutdown(Duration grace);

  class Impl;

 private:
  explicit ApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex
