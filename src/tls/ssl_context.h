// OpenSSL server contexts that follow a TlsWatcher (for listeners built on
// OpenSSL directly: dex-web's HTTP listener). At each handshake's
// ClientHello the connection takes the watcher's current certificate chain,
// key and client CA, so a rotation on disk is used by the next connection
// and open connections keep theirs. TLS 1.2 is the minimum.
#pragma once

#include <memory>
#include <mutex>

#include "tls/tls_watcher.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace dex::tls {

class ReloadingSslContext {
 public:
  explicit ReloadingSslContext(std::shared_ptr<TlsWatcher> watcher);
  ~ReloadingSslContext();
  ReloadingSslContext(const ReloadingSslContext&) = delete;
  ReloadingSslContext& operator=(const ReloadingSslContext&) = delete;

  // Configures a server context: minimum version, client certificate policy
  // (clientAuth), and the per-handshake selection above. False if OpenSSL
  // refused a setting. REQUIRES: this object outlives `ctx`.
  bool setup(SSL_CTX& ctx);

  struct Parsed;
  // The parsed form of the watcher's current material (cached per generation).
  std::shared_ptr<const Parsed> parsed();

 private:
  std::shared_ptr<TlsWatcher> watcher_;
  std::mutex mu_;
  uint64_t parsed_generation_ = 0;        // guarded by mu_
  std::shared_ptr<const Parsed> parsed_;  // guarded by mu_
};

}  // namespace dex::tls
