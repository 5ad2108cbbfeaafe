#include "auth/access_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dex::auth {

AccessPolicy AccessSettings::policy() const {
  AccessPolicy policy;
  if (every_call_needs_credential) {
    policy.anonymous = RoleSet();
  } else if (any()) {
    // The admin keys alone: AdminService is guarded, the rest stays open.
    policy.anonymous = RoleSet();
    policy.anonymous.add(Role::kViewer);
    policy.anonymous.add(Role::kClient);
    policy.anonymous.add(Role::kWorker);
  }
  return policy;
}

size_t AccessSettings::file_count(Role role) const {
  size_t n = 0;
  for (const auto& f : files) n += f.role == role ? 1 : 0;
  return n;
}

size_t AccessSettings::digest_count(Role role) const {
  size_t n = 0;
  for (const auto& d : digests) n += d.role == role ? 1 : 0;
  return n;
}

size_t AccessSettings::identity_count(Role role) const {
  size_t n = 0;
  for (const auto& c : certificate_roles) n += c.role == role ? 1 : 0;
  return n;
}

std::string describe_access(const AccessSettings& settings) {
  if (!settings.any()) return "no credential configured: every call is open";
  std::string out = settings.every_call_needs_credential
                        ? "every call needs a credential"
                        : "only dex.AdminService needs a credential (the admin keys alone)";
  for (Role role : kRoles) {
    std::vector<std::string> paths;
    for (const auto& f : settings.files) {
      if (f.role == role) paths.push_back(f.path);
    }
    const size_t identities = settings.identity_count(role);
    out += fmt::format("; {}: {} token file(s){}, {} digest(s), {} certificate identit{}",
                       role_name(role), paths.size(),
                       paths.empty() ? "" : fmt::format(" ({})", fmt::join(paths, ", ")),
                       settings.digest_count(role), identities, identities == 1 ? "y" : "ies");
  }
  return out;
}

std::string access_exposure_warning(std::string_view listen, bool beyond_loopback,
                                    const AccessSettings& settings) {
  if (!beyond_loopback || settings.every_call_needs_credential) return {};
  return fmt::format(
      "dex.FlowService and dex.WorkerTaskService are reachable beyond loopback on {} without a "
      "credential: anyone who can reach it can start, stop, read and change any Flow, or connect "
      "as a Worker and receive every task's input. Set auth.tokens (a token file per role: "
      "client, worker, admin, viewer; docs/configuration.md, \"auth\") or listen on 127.0.0.1",
      listen);
}

}  // namespace dex::auth
