// auth.* of a settings file (docs/configuration.md, "auth"): per role token
// files and SHA-256 digests (auth.tokens), client certificate identities
// mapped to roles (auth.certificateRoles), and the older admin keys
// (auth.adminTokenFiles, auth.adminTokenSha256) as the admin role. Read by
// config.cc's reader, in a file of its own as the roles are names under
// auth.tokens. Private to src/config.
#pragma once

#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "auth/access_settings.h"
#include "common/status.h"

namespace dex {

// Reads `auth` (the auth mapping) into `out`, replacing what it held; all or
// nothing. Every token file is read once here, so that a missing, empty or
// unreadable one fails the settings naming its key and path (never its
// content). Errors start with `source`.
Status read_access_settings(const YAML::Node& auth, std::string_view source,
                            auth::AccessSettings& out);

// The auth.tokens and auth.certificateRoles part of `serve --check`'s output:
// per role the token files (paths) and how many digests, which are shown as
// a placeholder that reading back refuses. Empty when neither is set.
std::string describe_access_settings(const auth::AccessSettings& settings);

}  // namespace dex
