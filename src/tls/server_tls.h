// A listener's TLS settings (api.tls.*, web.tls.*; docs/configuration.md,
// "TLS") and the one reader that turns their files into checked PEM text.
// Every refusal names the key and the file, never the key's content: a
// missing or unreadable file, a certificate or key that does not parse, a key
// that does not belong to the certificate, a certificate that has expired or
// is not valid yet, a client CA file without a certificate.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace dex::tls {

// clientAuth: whether the listener asks for a client certificate and whether
// a connection without one is refused. optional and required verify a
// presented certificate against clientCaFile either way.
enum class ClientAuth { kNone, kOptional, kRequired };
// "none", "optional", "required".
std::string_view client_auth_name(ClientAuth auth);
std::optional<ClientAuth> parse_client_auth(std::string_view text);

// One listener's files as configured. Empty cert_file: the listener is
// plaintext. `key` names the settings block in errors ("api.tls").
struct ServerTlsFiles {
  std::string key;
  std::string cert_file;       // <key>.certFile: the chain, leaf first (PEM)
  std::string key_file;        // <key>.keyFile: its private key (PEM, unencrypted)
  std::string client_ca_file;  // <key>.clientCaFile: CAs that sign client certificates
  ClientAuth client_auth = ClientAuth::kNone;  // <key>.clientAuth

  bool enabled() const { return !cert_file.empty(); }
  // Plaintext settings of the block named `key`.
  static ServerTlsFiles named(std::string key) {
    ServerTlsFiles files;
    files.key = std::move(key);
    return files;
  }
};

// The files' contents once checked, and what the logs may show of them.
struct ServerTlsMaterial {
  std::string cert_chain_pem;
  std::string key_pem;  // never logged or printed
  std::string client_ca_pem;
  std::string subject;    // the leaf certificate's subject, one line
  std::string not_after;  // its expiry, "Dec  6 01:10:00 2027 GMT"
};

// The largest certificate, key or CA file read (a bundle of a few hundred CAs fits).
inline constexpr size_t kTlsFileBytesMax = 4u << 20;

// Checks the combination of settings without reading files: a key file
// without a certificate (or the reverse), clientAuth optional/required
// without clientCaFile, clientCaFile with clientAuth none.
Status check_server_tls_settings(const ServerTlsFiles& files);

// Reads and checks every file of `files` (which must be enabled()).
// InvalidArgument naming "<key>.<field>" and the file otherwise.
StatusOr<ServerTlsMaterial> load_server_tls(const ServerTlsFiles& files);

// "api.tls: certificate <cert> (key <key>), client certificates required,
// CA <ca>" for startup logs and `serve --check`; "plaintext" when off.
std::string describe_server_tls(const ServerTlsFiles& files);

}  // namespace dex::tls
