// A small HTTPS endpoint that answers GET <path> with a text a function
// renders: the metrics endpoint when metrics.tls is set (docs/metrics.md,
// docs/configuration.md "TLS"). civetweb, which serves /metrics in
// plaintext, is not used for it: its TLS setup callback crashed its worker
// threads with the Debian build (1.15) when handed a complete context. The
// TLS context comes from the caller (tls::ReloadingSslContext::setup, which
// follows rotations on disk). Thread-safe; serves on threads of its own until
// stop().
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace dex::web {

class HttpsText {
 public:
  // Binds `listen` (host:port; port 0: any free port) and serves.
  // InvalidArgument naming the address when it cannot be bound, or when
  // `tls_setup` refuses the context.
  static StatusOr<std::unique_ptr<HttpsText>> start(const std::string& listen,
                                                    const std::string& path,
                                                    const std::string& content_type,
                                                    std::function<std::string()> render,
                                                    std::function<bool(SSL_CTX&)> tls_setup);
  ~HttpsText();  // stop()

  int port() const;
  void stop();

  class Impl;

 private:
  explicit HttpsText(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex::web
