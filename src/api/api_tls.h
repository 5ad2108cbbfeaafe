// The API listener's TLS (api.tls.*; docs/operations.md, "TLS"): gRPC server
// credentials that follow a TlsWatcher, so a certificate or CA rotated on disk
// is used by the next connection without a restart.
//
// Why not gRPC's FileWatcherCertificateProvider on the operator's files
// directly: on a file it cannot read it drops the certificate (every
// handshake then fails), it does not check that key and certificate match,
// and it would serve an expired certificate. So the TlsWatcher checks the
// files, and only material that passed is written to a private staging
// directory (mode 0700 in /dev/shm, memory, or else $TMPDIR; removed at exit,
// or by the next start after a crash) that gRPC's file watcher reads every
// second: a bad file never reaches gRPC, which keeps the
// previous material. gRPC 1.51 has no public interface for a provider of our
// own, and StaticDataCertificateProvider cannot change its material.
//
// Minimum version: gRPC 1.51 negotiates TLS 1.2 or 1.3 only (its TLS
// credentials have no setting for older versions, and its default minimum
// is 1.2); tests/server/test_tls.py checks that a TLS 1.1 client is refused.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "common/status.h"
#include "tls/tls_watcher.h"

namespace grpc {
class ServerCredentials;
}

namespace dex {

class ApiTls {
 public:
  // Stages the watcher's current material and builds the credentials; every
  // accepted change of the watcher is staged from then on.
  static StatusOr<std::unique_ptr<ApiTls>> start(std::shared_ptr<tls::TlsWatcher> watcher);
  ~ApiTls();  // stops following the watcher, removes the staging directory
  ApiTls(const ApiTls&) = delete;
  ApiTls& operator=(const ApiTls&) = delete;

  // The same credentials for every gRPC server the API builds (it builds a
  // new one when the process's role changes).
  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }
  // "unix:<staging directory>/gateway.sock": where the process's own JSON
  // gateway reaches the API in plaintext (ApiServerOptions::local_listen).
  // The directory is mode 0700, so only this user can connect.
  std::string gateway_address() const { return "unix:" + (dir_ / "gateway.sock").string(); }

 private:
  ApiTls(std::shared_ptr<tls::TlsWatcher> watcher, std::filesystem::path dir);
  Status stage(const tls::ServerTlsMaterial& material, uint64_t generation);

  std::shared_ptr<tls::TlsWatcher> watcher_;
  const std::filesystem::path dir_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
};

}  // namespace dex
