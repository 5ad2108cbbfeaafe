// What the settings file says about access (docs/configuration.md, "auth"):
// per role, token files and SHA-256 digests, and client certificate
// identities mapped to roles. Plain data, filled by the config reader and
// opened by TokenStore (token_store.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "auth/access_rules.h"

namespace dex::auth {

struct TokenFileSource {
  Role role;
  std::string path;  // as written in the file
  std::string key;   // the key that named it, for messages: "auth.tokens.client.files"
};

struct TokenDigestSource {
  Role role;
  std::string digest_hex;  // normalize_sha256'd
  std::string key;         // "auth.tokens.client.sha256", "auth.adminTokenSha256"
};

struct AccessSettings {
  std::vector<TokenFileSource> files;
  std::vector<TokenDigestSource> digests;
  std::vector<CertificateRole> certificate_roles;  // auth.certificateRoles
  // auth.tokens or auth.certificateRoles is set: every call needs a
  // credential. Without them, the admin keys (auth.adminTokenFiles,
  // auth.adminTokenSha256) guard AdminService only, as they always did.
  bool every_call_needs_credential = false;

  // Whether anything is configured at all (otherwise everything is open).
  bool any() const { return !files.empty() || !digests.empty() || !certificate_roles.empty(); }
  // The roles of a caller without a credential (access_rules.h, AccessPolicy).
  AccessPolicy policy() const;
  // Token files and digests of `role`.
  size_t file_count(Role role) const;
  size_t digest_count(Role role) const;
  size_t identity_count(Role role) const;
};

// One line for the startup log, `serve --check` and docs: whether calls need
// a credential, and per role the token files (paths), digests and
// certificate identities configured. Never a token or a digest.
std::string describe_access(const AccessSettings& settings);

// The startup warning when the API is reachable beyond loopback and not
// every call needs a credential (anyone who reaches it can drive every Flow
// and receive every task); empty otherwise. `beyond_loopback` is the
// caller's reading of `listen`.
std::string access_exposure_warning(std::string_view listen, bool beyond_loopback,
                                    const AccessSettings& settings);

}  // namespace dex::auth
