// dex-web's server side (docs/dex-web.md): one HTTP listener in the server
// process that serves the app's built files and the JSON gateway to the
// public API. It reaches the engine only through the process's own gRPC API
// address, as any client does: what the UI can do is what a client can do,
// with the same errors and credentials. Thread-safe; the listener runs on
// threads of its own until stop().
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "web/process_status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace dex::web {

// The largest request body the gateway reads; a larger one answers 413.
inline constexpr size_t kRequestBytesMax = 8u << 20;

struct WebServerOptions {
  std::string listen = "127.0.0.1:8802";  // host:port; port 0: any free port
  // The API address to call (host:port as the API listens; a wildcard host,
  // 0.0.0.0 or [::], is dialled as loopback) and to show in GET /api/v1/web.
  std::string api_address;
  // The built app (index.html and assets/); a directory without index.html
  // serves the built-in "not built" page.
  std::filesystem::path assets_dir;
  std::string version;      // GET /api/v1/web "version"
  bool admin_auth = false;  // GET /api/v1/web "adminAuth": admin calls need a credential
  size_t request_bytes_max = kRequestBytesMax;
  // GET /api/v1/process: this process's role, standby state, epoch, holder,
  // log position (web/process_status.h). Unset: that path answers 404.
  ProcessStatusSource process_status;
  // web.tls: configures the OpenSSL context of an HTTPS listener (the server
  // passes tls::ReloadingSslContext::setup, which follows rotations on disk);
  // false refuses to start. Unset: plain HTTP.
  std::function<bool(SSL_CTX&)> tls_setup;
  // The address the JSON gateway dials instead of api_address (the API's
  // local plaintext socket when the API listener uses TLS); empty: api_address.
  std::string gateway_address;
};

// <directory of /proc/self/exe>/../share/dex-web, where the build copies
// the app (empty if the executable's path cannot be read).
std::filesystem::path default_assets_dir();

// The address to dial for a listen address: a wildcard host (0.0.0.0, [::],
// ::, empty) becomes loopback (127.0.0.1, [::1]); others stay.
std::string dial_address(std::string_view listen);

class WebServer {
 public:
  // Binds `options.listen` and serves. InvalidArgument naming the address if
  // it cannot be bound (a port in use).
  static StatusOr<std::unique_ptr<WebServer>> start(const WebServerOptions& options);
  ~WebServer();  // stop()

  int port() const;
  // "http://<host>:<port>" with the port actually bound.
  std::string url() const;
  // Whether the app's files were found (else the built-in page answers).
  bool assets_built() const;
  const std::filesystem::path& assets_dir() const;

  // Stops listening, cancels the gateway's calls in flight (they answer 503)
  // and waits for the listener's threads. Idempotent.
  void stop();

  class Impl;

 private:
  explicit WebServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex::web
