// dexcli's TLS flags (docs/cli.md, "TLS"): --tls, --ca-file, --cert-file,
// --key-file and --server-name, each with an environment variable
// (DEX_TLS, DEX_TLS_CA_FILE, ...; sdk/tls_options.h) that a flag overrides.
#pragma once

#include <string>

#include "common/status.h"
#include "sdk/tls_options.h"

namespace CLI {
class App;
}

namespace dex::cli {

// Adds the flags to `app` (they apply to every command that calls a server);
// they write into `flags`.
void add_tls_flags(CLI::App& app, TlsOptions& flags);

// The flags over the environment, checked (files readable, key matching
// the certificate). InvalidArgument naming the flag or variable otherwise.
StatusOr<TlsOptions> resolve_tls_flags(const TlsOptions& flags);

// gRPC logs each failed TLS handshake to stderr itself ("Handshake failed
// with fatal error ..."), once per connection attempt, before dexcli's own
// error says why in one line: those lines are dropped; gRPC's other log lines
// still go to stderr.
void quiet_grpc_handshake_logs();

}  // namespace dex::cli
