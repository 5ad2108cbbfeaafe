#include "auth/access_rules.h"

#include <fmt/format.h>

namespace dex::auth {

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kClient:
      return "client";
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::optional<Role> parse_role(std::string_view name) {
  for (Role role : kRoles) {
    if (role_name(role) == name) return role;
  }
  return std::nullopt;
}

bool role_implies(Role held, Role needed) {
  if (held == needed || held == Role::kAdmin) return true;
  return held == Role::kClient && needed == Role::kViewer;
}

bool RoleSet::grants(Role needed) const {
  for (Role role : kRoles) {
    if (has(role) && role_implies(role, needed)) return true;
  }
  return false;
}

std::string RoleSet::describe() const {
  std::string out;
  for (Role role : kRoles) {
    if (!has(role)) continue;
    if (!out.empty()) out += " and ";
    out += role_name(role);
  }
  return out.empty() ? "no role" : out;
}

namespace {

constexpr std::string_view kFlow = "dex.FlowService";
constexpr std::string_view kWorker = "dex.WorkerTaskService";
constexpr std::string_view kAdmin = "dex.AdminService";

// viewer: what only reads (describe, state, history, Attributes, search and
// the long polls that wait for a change without making one). client: what
// starts, stops, publishes, skips a Timer, time-travels, continues as new,
// changes a FlowConfig, sets Attributes or invokes an RPC (an RPC handler
// may change the Flow). worker: the task stream. admin: the node.
constexpr MethodRule kTable[] = {
    {kFlow, "StartFlow", Role::kClient},
    {kFlow, "StopFlow", Role::kClient},
    {kFlow, "PublishToChannel", Role::kClient},
    {kFlow, "WaitForFlow", Role::kViewer},
    {kFlow, "DescribeFlow", Role::kViewer},
    {kFlow, "GetFlowState", Role::kViewer},
    {kFlow, "GetHistoryEvents", Role::kViewer},
    {kFlow, "WaitForHistoryEvent", Role::kViewer},
    {kFlow, "SkipTimer", Role::kClient},
    {kFlow, "TimeTravel", Role::kClient},
    {kFlow, "TriggerContinueAsNew", Role::kClient},
    {kFlow, "UpdateFlowConfig", Role::kClient},
    {kFlow, "WaitForStepCompletion", Role::kViewer},
    {kFlow, "GetAttributes", Role::kViewer},
    {kFlow, "SetAttributes", Role::kClient},
    {kFlow, "WaitForAttribute", Role::kViewer},
    {kFlow, "InvokeRpc", Role::kClient},
    {kFlow, "SearchFlows", Role::kViewer},
    {kFlow, "ListSearchKeys", Role::kViewer},
    {kFlow, "ListSearchValues", Role::kViewer},
    {kWorker, "PollWorkerTask", Role::kWorker},
    {kAdmin, "Describe", Role::kAdmin},
    {kAdmin, "StepDown", Role::kAdmin},
};

// "the client role (or admin)": the roles that grant `needed`.
std::string needed_text(Role needed) {
  std::string others;
  for (Role role : kRoles) {
    if (role == needed || !role_implies(role, needed)) continue;
    others += others.empty() ? "" : " or ";
    others += role_name(role);
  }
  if (others.empty()) return fmt::format("the {} role", role_name(needed));
  return fmt::format("the {} role (or {})", role_name(needed), others);
}

}  // namespace

std::span<const MethodRule> access_table() { return kTable; }

std::optional<Role> role_needed(std::string_view service, std::string_view method) {
  for (const MethodRule& rule : kTable) {
    if (rule.service == service && rule.method == method) return rule.needs;
  }
  return std::nullopt;
}

Decision decide_access(const AccessPolicy& policy, std::string_view service,
                       std::string_view method, const Caller& caller) {
  const std::optional<Role> needed = role_needed(service, method);
  if (!needed) {
    // Fail closed: a method added to the API but not to the table is refused
    // for everyone until the table says who may call it.
    return {Verdict::kPermissionDenied,
            fmt::format("{}/{} is not in dex's access table: refused for every caller", service,
                        method)};
  }
  if (caller.presented_token && caller.token_roles.empty()) {
    return {Verdict::kUnauthenticated,
            "the credential was refused: it matches no configured token (authorization: Bearer "
            "<token>)"};
  }
  RoleSet held = policy.anonymous;
  held.add(caller.token_roles);
  held.add(caller.certificate_roles);
  if (held.grants(*needed)) return {Verdict::kAllowed, {}};
  RoleSet credentialed = caller.token_roles;
  credentialed.add(caller.certificate_roles);
  if (credentialed.empty()) {
    return {Verdict::kUnauthenticated,
            fmt::format("this call needs a credential (authorization: Bearer <token>): {}/{} "
                        "needs {}",
                        service, method, needed_text(*needed))};
  }
  return {Verdict::kPermissionDenied,
          fmt::format("{}/{} needs {}; this caller holds {}", service, method, needed_text(*needed),
                      credentialed.describe())};
}

RoleSet certificate_roles(bool peer_authenticated,
                          const std::vector<std::pair<std::string, std::string>>& properties,
                          std::span<const CertificateRole> mapping) {
  RoleSet roles;
  if (!peer_authenticated) return roles;
  for (const auto& [name, value] : properties) {
    if (name != "x509_common_name" && name != "x509_subject_alternative_name") continue;
    for (const CertificateRole& entry : mapping) {
      if (entry.identity == value) roles.add(entry.role);
    }
  }
  return roles;
}

}  // namespace dex::auth
