#include "config/auth_config.h"

#include <fmt/format.h>

#include "auth/token_set.h"
#include "auth/token_store.h"

namespace dex {

namespace {

// `text` as a double-quoted YAML scalar.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A list of non-empty strings at `node` (absent: empty).
Status string_list(const YAML::Node& node, const std::string& key, std::string_view source,
                   std::vector<std::string>& out) {
  out.clear();
  if (!node) return Status::ok();
  if (!node.IsSequence()) {
    return Status::invalid_argument(fmt::format("{}: {} must be a list", source, key));
  }
  for (const auto& item : node) {
    if (!item.IsScalar() || item.as<std::string>().empty()) {
      return Status::invalid_argument(
          fmt::format("{}: {} entries must be non-empty strings", source, key));
    }
    out.push_back(item.as<std::string>());
  }
  return Status::ok();
}

// Files (each read once now, so a bad one fails startup) and digests of one role.
Status read_role_tokens(auth::Role role, const YAML::Node& files, const std::string& files_key,
                        const YAML::Node& digests, const std::string& digests_key,
                        std::string_view source, auth::AccessSettings& out) {
  std::vector<std::string> list;
  if (Status s = string_list(files, files_key, source, list); !s.is_ok()) return s;
  for (const std::string& path : list) {
    auto read = auth::read_token_file_digests(path);
    if (!read.is_ok()) {
      return Status::invalid_argument(
          fmt::format("{}: {}: {}", source, files_key, read.status().message()));
    }
    out.files.push_back({role, path, files_key});
  }
  if (Status s = string_list(digests, digests_key, source, list); !s.is_ok()) return s;
  for (const std::string& text : list) {
    auto digest = auth::normalize_sha256(text);
    if (!digest) {
      return Status::invalid_argument(fmt::format(
          "{}: {} entries must be 64 hex digits (the SHA-256 of a token)", source, digests_key));
    }
    out.digests.push_back({role, *digest, digests_key});
  }
  return Status::ok();
}

// auth.tokens: {<role>: {files: [...], sha256: [...]}}.
Status read_tokens(const YAML::Node& tokens, std::string_view source, auth::AccessSettings& out) {
  if (!tokens.IsMap()) {
    return Status::invalid_argument(fmt::format(
        "{}: auth.tokens must be a mapping of roles (viewer, client, worker, admin)", source));
  }
  for (const auto& entry : tokens) {
    const std::string name = entry.first.IsScalar() ? entry.first.as<std::string>() : "";
    const std::optional<auth::Role> role = auth::parse_role(name);
    if (!role) {
      return Status::invalid_argument(fmt::format(
          "{}: auth.tokens: unknown role '{}' (viewer, client, worker or admin)", source, name));
    }
    const std::string key = "auth.tokens." + name;
    const YAML::Node& body = entry.second;
    if (!body.IsMap()) {
      return Status::invalid_argument(
          fmt::format("{}: {} must be a mapping with files and/or sha256", source, key));
    }
    for (const auto& field : body) {
      const std::string f = field.first.IsScalar() ? field.first.as<std::string>() : "";
      if (f != "files" && f != "sha256") {
        return Status::invalid_argument(fmt::format("{}: unknown key '{}.{}'", source, key, f));
      }
    }
    if (Status s = read_role_tokens(*role, body["files"], key + ".files", body["sha256"],
                                    key + ".sha256", source, out);
        !s.is_ok()) {
      return s;
    }
  }
  return Status::ok();
}

// auth.certificateRoles: {<subject CN or SAN>: <role>}.
Status read_certificate_roles(const YAML::Node& node, std::string_view source,
                              auth::AccessSettings& out) {
  if (!node.IsMap()) {
    return Status::invalid_argument(fmt::format(
        "{}: auth.certificateRoles must be a mapping of certificate identities (subject CN or "
        "SAN) to roles",
        source));
  }
  for (const auto& entry : node) {
    const std::string identity = entry.first.IsScalar() ? entry.first.as<std::string>() : "";
    if (identity.empty()) {
      return Status::invalid_argument(
          fmt::format("{}: auth.certificateRoles: an identity must be non-empty text", source));
    }
    const std::string name = entry.second.IsScalar() ? entry.second.as<std::string>() : "";
    const std::optional<auth::Role> role = auth::parse_role(name);
    if (!role) {
      return Status::invalid_argument(fmt::format(
          "{}: auth.certificateRoles.{}: unknown role '{}' (viewer, client, worker or admin)",
          source, identity, name));
    }
    out.certificate_roles.push_back({identity, *role});
  }
  return Status::ok();
}

}  // namespace

Status read_access_settings(const YAML::Node& auth, std::string_view source,
                            auth::AccessSettings& out) {
  auth::AccessSettings next;
  if (Status s =
          read_role_tokens(auth::Role::kAdmin, auth["adminTokenFiles"], "auth.adminTokenFiles",
                           auth["adminTokenSha256"], "auth.adminTokenSha256", source, next);
      !s.is_ok()) {
    return s;
  }
  // An empty auth.tokens or auth.certificateRoles is refused: it would say
  // "every call needs a credential" while accepting none, or be read as
  // "nothing configured" and leave everything open. Neither is what was meant.
  if (const YAML::Node tokens = auth["tokens"]) {
    const size_t before = next.files.size() + next.digests.size();
    if (Status s = read_tokens(tokens, source, next); !s.is_ok()) return s;
    if (next.files.size() + next.digests.size() == before) {
      return Status::invalid_argument(fmt::format(
          "{}: auth.tokens lists no token: give a role's files or sha256, or remove auth.tokens",
          source));
    }
    next.every_call_needs_credential = true;
  }
  if (const YAML::Node roles = auth["certificateRoles"]) {
    if (Status s = read_certificate_roles(roles, source, next); !s.is_ok()) return s;
    if (next.certificate_roles.empty()) {
      return Status::invalid_argument(fmt::format(
          "{}: auth.certificateRoles lists no identity: map one, or remove the key", source));
    }
    next.every_call_needs_credential = true;
  }
  out = std::move(next);
  return Status::ok();
}

std::string describe_access_settings(const auth::AccessSettings& settings) {
  std::string out;
  bool any_tokens = false;
  for (const auto& f : settings.files) any_tokens |= f.key.starts_with("auth.tokens.");
  for (const auto& d : settings.digests) any_tokens |= d.key.starts_with("auth.tokens.");
  if (any_tokens || (settings.every_call_needs_credential && settings.certificate_roles.empty())) {
    out += "  # every call needs a credential (docs/api.md, \"Access\")\n  tokens:\n";
    for (auth::Role role : auth::kRoles) {
      const std::string key = "auth.tokens." + std::string(auth::role_name(role));
      std::string files;
      size_t digests = 0;
      for (const auto& f : settings.files) {
        if (f.key == key + ".files") files += fmt::format("        - {}\n", quoted(f.path));
      }
      for (const auto& d : settings.digests) digests += d.key == key + ".sha256" ? 1 : 0;
      if (files.empty() && digests == 0) continue;
      out += fmt::format("    {}:\n", auth::role_name(role));
      if (!files.empty()) out += "      files:\n" + files;
      if (digests > 0) {
        out += fmt::format(
            "      # {} digest(s) not shown: copy them from the config file\n"
            "      sha256:\n        - \"(not shown)\"\n",
            digests);
      }
    }
  }
  if (!settings.certificate_roles.empty()) {
    out += "  certificateRoles:\n";
    for (const auto& c : settings.certificate_roles) {
      out += fmt::format("    {}: {}\n", quoted(c.identity), auth::role_name(c.role));
    }
  }
  return out;
}

}  // namespace dex
