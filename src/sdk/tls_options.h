// TLS for the connections of a Client, a Worker and dexcli to dex
// (docs/operations.md, "TLS"): the CA that signs the server's certificate, a
// client certificate for mutual TLS, and the name to check the server's
// certificate against. Every address of a node is dialled with the same
// options, so the search for the active process and failover work as in
// plaintext.
#pragma once

#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace dex {

struct TlsOptions {
  // Dial with TLS. Setting any field below turns it on too.
  bool enabled = false;
  // PEM CAs that sign the server's certificate; empty: the system's CAs.
  std::string ca_file;
  // A client certificate chain and its unencrypted key (PEM), for a server
  // that asks for client certificates (api.tls.clientAuth). Both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must hold (a DNS name or an IP
  // address); empty: the host of each address.
  std::string server_name;
};

// The environment variables dexcli and the example Workers read: DEX_TLS
// (1/true/yes or 0/false/no), DEX_TLS_CA_FILE, DEX_TLS_CERT_FILE,
// DEX_TLS_KEY_FILE, DEX_TLS_SERVER_NAME.
inline constexpr const char* kTlsEnv = "DEX_TLS";
inline constexpr const char* kTlsCaFileEnv = "DEX_TLS_CA_FILE";
inline constexpr const char* kTlsCertFileEnv = "DEX_TLS_CERT_FILE";
inline constexpr const char* kTlsKeyFileEnv = "DEX_TLS_KEY_FILE";
inline constexpr const char* kTlsServerNameEnv = "DEX_TLS_SERVER_NAME";

// enabled, or any file or the server name set.
bool tls_active(const TlsOptions& tls);

// Fills each field of `tls` that is still empty (enabled: still false) from
// its environment variable. InvalidArgument naming DEX_TLS for a value that is
// not a yes or no.
Status apply_tls_env(TlsOptions& tls);

// Reads and checks the files: each readable PEM, the key the certificate's,
// the client certificate within its validity. InvalidArgument naming the
// option and the file otherwise. OK when !tls_active.
Status check_tls_options(const TlsOptions& tls);

// Why a TLS connection to `address` fails, found by making one with OpenSSL
// and checking what the server presents against `tls`: "the server's
// certificate expired on ...", "... is not signed by a CA in <ca_file>",
// "... is not for 'name' (it names ...)", "the server refused this client's
// certificate: ...", "the server requires a client certificate ...", "the
// server does not speak TLS ...". With TLS off in `tls`: whether the server
// speaks TLS ("connect with --tls"). Empty when nothing TCP answers, or the
// handshake and the checks pass. Takes at most about `timeout`.
std::string diagnose_tls(const std::string& address, const TlsOptions& tls,
                         Duration timeout = seconds(2));

}  // namespace dex
