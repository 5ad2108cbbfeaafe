#include "cli/tls_flags.h"

#include <grpc/support/log.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>

namespace dex::cli {

void add_tls_flags(CLI::App& app, TlsOptions& flags) {
  app.add_flag("--tls", flags.enabled,
               "Connect with TLS (default $DEX_TLS; implied by any option below). The server's "
               "certificate is checked against --ca-file, or the system's CAs");
  app.add_option("--ca-file", flags.ca_file,
                 "PEM file of the CAs that sign the server's certificate (default "
                 "$DEX_TLS_CA_FILE; without it, the system's CAs)");
  app.add_option("--cert-file", flags.cert_file,
                 "PEM client certificate chain for mutual TLS, with --key-file (default "
                 "$DEX_TLS_CERT_FILE)");
  app.add_option("--key-file", flags.key_file,
                 "PEM private key of --cert-file, unencrypted (default $DEX_TLS_KEY_FILE)");
  app.add_option("--server-name", flags.server_name,
                 "The name the server's certificate must hold, instead of each --server's host "
                 "(default $DEX_TLS_SERVER_NAME)");
}

void quiet_grpc_handshake_logs() {
  gpr_set_log_function([](gpr_log_func_args* args) {
    if (std::strstr(args->file, "ssl_transport_security") != nullptr ||
        std::strstr(args->file, "security_handshaker") != nullptr ||
        std::strstr(args->file, "ssl_utils") != nullptr) {
      return;  // dexcli's error explains the handshake (diagnose_tls)
    }
    std::fprintf(stderr, "%s %s:%d] %s\n", gpr_log_severity_string(args->severity), args->file,
                 args->line, args->message);
  });
}

StatusOr<TlsOptions> resolve_tls_flags(const TlsOptions& flags) {
  TlsOptions tls = flags;
  if (Status s = apply_tls_env(tls); !s.is_ok()) return s;
  if (Status s = check_tls_options(tls); !s.is_ok()) return s;
  return tls;
}

}  // namespace dex::cli
