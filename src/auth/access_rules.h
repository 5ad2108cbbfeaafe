// Who may call what (docs/api.md, "Access"): the roles a credential carries,
// the table from every RPC method of dex.FlowService, dex.WorkerTaskService
// and dex.AdminService to the role it needs, and the decision for one call.
// Pure: no clock, socket, file or lock; the API server's shell gathers the
// caller's credential and asks decide_access.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dex::auth {

// The roles of docs/configuration.md ("auth.tokens"). viewer reads; client
// drives Flows (FlowService); worker hosts Flows (WorkerTaskService); admin
// may do everything, and alone describes the node and steps it down.
enum class Role : uint8_t { kViewer, kClient, kWorker, kAdmin };
inline constexpr Role kRoles[] = {Role::kViewer, Role::kClient, Role::kWorker, Role::kAdmin};
inline constexpr size_t kRoleCount = 4;

// "viewer", "client", "worker", "admin".
std::string_view role_name(Role role);
std::optional<Role> parse_role(std::string_view name);

// Whether holding `held` grants what `needed` grants: admin implies every
// role, client implies viewer; worker implies only itself (a Worker's
// credential cannot read or change Flows through FlowService).
bool role_implies(Role held, Role needed);

// A small set of roles (a bit per Role).
class RoleSet {
 public:
  constexpr RoleSet() = default;
  static constexpr RoleSet all() { return RoleSet(0xF); }
  void add(Role role) { bits_ |= bit(role); }
  void add(RoleSet other) { bits_ |= other.bits_; }
  bool has(Role role) const { return (bits_ & bit(role)) != 0; }
  bool empty() const { return bits_ == 0; }
  // True when some role held implies `needed`.
  bool grants(Role needed) const;
  // "viewer and client", "admin", "no role".
  std::string describe() const;
  bool operator==(const RoleSet&) const = default;

 private:
  constexpr explicit RoleSet(uint8_t bits) : bits_(bits) {}
  static constexpr uint8_t bit(Role role) { return uint8_t(1u << static_cast<unsigned>(role)); }
  uint8_t bits_ = 0;
};

// One row of the access table: a method by service and name, and the least
// role that may call it.
struct MethodRule {
  std::string_view service;  // "dex.FlowService"
  std::string_view method;   // "StartFlow"
  Role needs;
};

// Every method dex serves (the health service aside, which is always open),
// in the order of proto/dex/api.proto. A test checks it against the
// services' descriptors and docs/api.md against it.
std::span<const MethodRule> access_table();

// The least role a method needs; nullopt for a method not in the table
// (refused: access fails closed).
std::optional<Role> role_needed(std::string_view service, std::string_view method);

// What the shell knows of one call's caller.
struct Caller {
  // The call carried "authorization: Bearer <token>" (or another value).
  bool presented_token = false;
  // The roles of the token presented (empty: it matched no configured token),
  // and of the client certificate's identity (auth.certificateRoles).
  RoleSet token_roles;
  RoleSet certificate_roles;
};

// How access is configured: `anonymous` are the roles a caller holds without
// any credential. No token configured at all: every role (everything open,
// today's behaviour). Only the admin keys (auth.adminTokenFiles/-Sha256):
// viewer, client and worker (AdminService alone is guarded, as before
// auth.tokens existed). auth.tokens or auth.certificateRoles set: none.
struct AccessPolicy {
  RoleSet anonymous = RoleSet::all();
};

enum class Verdict { kAllowed, kUnauthenticated, kPermissionDenied };

struct Decision {
  Verdict verdict = Verdict::kAllowed;
  // For a refusal: what to say to the caller (never the token).
  std::string message;
};

// The decision for one call of `service`/`method` by `caller`. A token that
// matches nothing is refused whatever the method needs (a caller who sends a
// wrong token learns it at once instead of being treated as anonymous).
Decision decide_access(const AccessPolicy& policy, std::string_view service,
                       std::string_view method, const Caller& caller);

// The roles of a client certificate: its subject common name and subject
// alternative names, as gRPC's auth context lists them (properties
// "x509_common_name" and "x509_subject_alternative_name"), looked up in
// auth.certificateRoles (identity -> role). Only a peer gRPC authenticated
// (its certificate verified against the client CA) counts.
struct CertificateRole {
  std::string identity;
  Role role;
};
RoleSet certificate_roles(bool peer_authenticated,
                          const std::vector<std::pair<std::string, std::string>>& properties,
                          std::span<const CertificateRole> mapping);

}  // namespace dex::auth
