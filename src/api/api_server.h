// The gRPC face of a dex process: dex.FlowService, dex.WorkerTaskService,
// dex.AdminService and grpc.health.v1.Health on one listen address. The
// services are thin: they check the process's role, translate to the Engine
// and map Status codes to gRPC codes. docs/api.md describes the API.
//
// Role: the server reads the process's role through NodeRoleView
// (src/node/role_view.h). While the role is active, public calls reach the
// engine and readiness names are SERVING. Otherwise (a standby, the lease
// lost, shutting down) every public call answers UNAVAILABLE and readiness
// names are NOT_SERVING — at once, before the process exits (spec: Health and
// probes). Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "node/role_view.h"

namespace grpc {
class Server;
class ServerCredentials;
}  // namespace grpc

namespace dex {

namespace auth {
class TokenStore;
}  // namespace auth

// Limits on requests: a larger message is refused by gRPC with
// RESOURCE_EXHAUSTED naming both sizes. The servers raise it to fit the
// configured value maximum (config.h: values_message_bytes_max).
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
  // Who may call what (docs/api.md, "Access"): every call of FlowService,
  // WorkerTaskService and AdminService is checked against the access table
  // with the caller's token (and client certificate identity). Null: built
  // from admin_token_sha256 (admin keys only), or everything open.
  std::shared_ptr<auth::TokenStore> access;
  // api.tls: the listener's credentials (api_tls.h); null: plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // A second, plaintext address for this process's own JSON gateway when the
  // listener uses TLS ("unix:<path>" in a directory only this user can
  // enter); empty: none.
  std::string local_listen;
  // api.healthListen: a plaintext address that serves grpc.health.v1.Health
  // only, with the same statuses, for probes that cannot speak TLS (the
  // kubelet's gRPC probe); empty: none.
  std::string health_listen;
};

// gRPC status code for a dex Status (the codes of grpc::StatusCode).
int grpc_code_for(const Status& status);

class ApiServer {
 public:
  // Binds and serves whatever `role` says (it must outlive the server): a
  // watcher thread applies each change of the role — readiness, the
  // standby's short-lived connections (changing between the two replaces the
  // gRPC server on the same port, as gRPC has no per-connection control, so
  // clients reconnect once), ending Worker streams at a release.
  // InvalidArgument if the address cannot be bound, naming it.
  static StatusOr<std::unique_ptr<ApiServer>> start(const ApiServerOptions& options,
                                                    NodeRoleView& role);
  ~ApiServer();

  // The port actually bound (useful with port 0).
  int port() const;
  // The port of health_listen actually bound; 0 without one.
  int health_port() const;
  const std::string& listen_address() const;

  // Waits until the role's current version is applied (tests, and a shell
  // that prints a ready line only once readiness says so); false after `timeout`.
  bool wait_role_applied(Duration timeout);

  // Stops accepting calls; open calls are cancelled after `grace`. The owner
  // turns the role inactive first, so calls answer UNAVAILABLE meanwhile.
  void shutdown(Duration grace);

  class Impl;

 private:
  explicit ApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex
