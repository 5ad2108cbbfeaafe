// The access rules (src/auth/access_rules.h): the table covers every method
// of the three services and nothing else, what each role may and may not
// call, the errors' words, and the certificate identity mapping.
#include "auth/access_rules.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "dex/api.pb.h"

namespace dex::auth {
namespace {

namespace pb = google::protobuf;

constexpr const char* kServices[] = {"dex.FlowService", "dex.WorkerTaskService",
                                     "dex.AdminService"};

std::set<std::string> descriptor_methods() {
  // Make sure the generated file is linked and registered.
  (void)DescribeRequest::descriptor();
  std::set<std::string> out;
  for (const char* name : kServices) {
    const pb::ServiceDescriptor* service =
        pb::DescriptorPool::generated_pool()->FindServiceByName(name);
    EXPECT_NE(service, nullptr) << name;
    if (service == nullptr) continue;
    for (int i = 0; i < service->method_count(); ++i) {
      out.insert(std::string(name) + "/" + service->method(i)->name());
    }
  }
  return out;
}

TEST(AccessTable, CoversEveryMethodOfTheServicesAndNoOther) {
  std::set<std::string> table;
  for (const MethodRule& rule : access_table()) {
    EXPECT_TRUE(table.insert(std::string(rule.service) + "/" + std::string(rule.method)).second)
        << rule.method << " is listed twice";
  }
  const std::set<std::string> methods = descriptor_methods();
  EXPECT_GE(methods.size(), 23u);
  for (const std::string& m : methods) EXPECT_TRUE(table.contains(m)) << m << " has no row";
  for (const std::string& m : table) EXPECT_TRUE(methods.contains(m)) << m << " is not served";
}

TEST(AccessTable, DocsApiListsEveryMethodWithItsRole) {
  std::ifstream in(std::string(DEX_SOURCE_DIR) + "/docs/api.md");
  ASSERT_TRUE(in) << "docs/api.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const MethodRule& rule : access_table()) {
    // One row per method: | `Service/Method` | role |
    const std::string row = "| `" + std::string(rule.service) + "/" + std::string(rule.method) +
                            "` | " + std::string(role_name(rule.needs)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/api.md lacks the row " << row;
  }
}

TEST(AccessTable, AMethodOutsideTheTableIsRefusedForEveryone) {
  AccessPolicy open;  // even with everything open
  Caller admin;
  admin.presented_token = true;
  admin.token_roles.add(Role::kAdmin);
  for (const Caller& caller : {Caller{}, admin}) {
    Decision d = decide_access(open, "dex.FlowService", "DeleteEverything", caller);
    EXPECT_EQ(d.verdict, Verdict::kPermissionDenied);
    EXPECT_NE(d.message.find("not in dex's access table"), std::string::npos) << d.message;
  }
  EXPECT_EQ(role_needed("dex.AdminService", "StartFlow"), std::nullopt);
}

Caller holding(Role role) {
  Caller c;
  c.presented_token = true;
  c.token_roles.add(role);
  return c;
}

AccessPolicy closed() { return AccessPolicy{RoleSet()}; }

TEST(AccessRules, EachRoleReachesExactlyWhatItsRowsAllow) {
  for (const MethodRule& rule : access_table()) {
    for (Role role : kRoles) {
      Decision d = decide_access(closed(), rule.service, rule.method, holding(role));
      const bool allowed = role_implies(role, rule.needs);
      EXPECT_EQ(d.verdict, allowed ? Verdict::kAllowed : Verdict::kPermissionDenied)
          << role_name(role) << " " << rule.method << ": " << d.message;
    }
  }
}

TEST(AccessRules, AViewerReadsButNeverChangesAFlow) {
  for (const char* write :
       {"StartFlow", "StopFlow", "PublishToChannel", "SkipTimer", "TimeTravel",
        "TriggerContinueAsNew", "UpdateFlowConfig", "SetAttributes", "InvokeRpc"}) {
    EXPECT_EQ(decide_access(closed(), "dex.FlowService", write, holding(Role::kViewer)).verdict,
              Verdict::kPermissionDenied)
        << write;
  }
  for (const char* read : {"DescribeFlow", "GetFlowState", "GetHistoryEvents", "SearchFlows",
                           "WaitForFlow", "GetAttributes", "ListSearchKeys"}) {
    EXPECT_EQ(decide_access(closed(), "dex.FlowService", read, holding(Role::kViewer)).verdict,
              Verdict::kAllowed)
        << read;
  }
}

TEST(AccessRules, StepDownNeedsAdminWhateverElseIsHeld) {
  Caller everything_but_admin = holding(Role::kClient);
  everything_but_admin.token_roles.add(Role::kWorker);
  everything_but_admin.token_roles.add(Role::kViewer);
  Decision d = decide_access(closed(), "dex.AdminService", "StepDown", everything_but_admin);
  EXPECT_EQ(d.verdict, Verdict::kPermissionDenied);
  EXPECT_EQ(d.message,
            "dex.AdminService/StepDown needs the admin role; this caller holds viewer and client "
            "and worker");
  EXPECT_EQ(decide_access(closed(), "dex.AdminService", "StepDown", holding(Role::kAdmin)).verdict,
            Verdict::kAllowed);
}

TEST(AccessRules, AWorkerCredentialHostsFlowsOnly) {
  EXPECT_EQ(
      decide_access(closed(), "dex.WorkerTaskService", "PollWorkerTask", holding(Role::kWorker))
          .verdict,
      Verdict::kAllowed);
  Decision d = decide_access(closed(), "dex.FlowService", "GetFlowState", holding(Role::kWorker));
  EXPECT_EQ(d.verdict, Verdict::kPermissionDenied);
  EXPECT_EQ(d.message,
            "dex.FlowService/GetFlowState needs the viewer role (or client or admin); this "
            "caller holds worker");
  d = decide_access(closed(), "dex.WorkerTaskService", "PollWorkerTask", holding(Role::kClient));
  EXPECT_EQ(d.verdict, Verdict::kPermissionDenied);
}

TEST(AccessRules, NoCredentialOrAnUnknownOneIsUnauthenticatedAndNamesTheHeader) {
  Decision none = decide_access(closed(), "dex.FlowService", "StartFlow", Caller{});
  EXPECT_EQ(none.verdict, Verdict::kUnauthenticated);
  EXPECT_EQ(none.message,
            "this call needs a credential (authorization: Bearer <token>): "
            "dex.FlowService/StartFlow needs the client role (or admin)");
  Caller unknown;
  unknown.presented_token = true;  // matched nothing
  Decision bad = decide_access(closed(), "dex.FlowService", "GetFlowState", unknown);
  EXPECT_EQ(bad.verdict, Verdict::kUnauthenticated);
  EXPECT_NE(bad.message.find("matches no configured token"), std::string::npos);
  // Even where anonymous callers are let in (admin keys only), a wrong token is refused.
  AccessPolicy admin_keys_only{RoleSet()};
  admin_keys_only.anonymous.add(Role::kClient);
  admin_keys_only.anonymous.add(Role::kViewer);
  admin_keys_only.anonymous.add(Role::kWorker);
  EXPECT_EQ(decide_access(admin_keys_only, "dex.FlowService", "GetFlowState", unknown).verdict,
            Verdict::kUnauthenticated);
  EXPECT_EQ(decide_access(admin_keys_only, "dex.FlowService", "StartFlow", Caller{}).verdict,
            Verdict::kAllowed);
  EXPECT_EQ(decide_access(admin_keys_only, "dex.AdminService", "Describe", Caller{}).verdict,
            Verdict::kUnauthenticated);
}

TEST(AccessRules, NothingConfiguredLeavesEveryCallOpen) {
  for (const MethodRule& rule : access_table()) {
    EXPECT_EQ(decide_access(AccessPolicy{}, rule.service, rule.method, Caller{}).verdict,
              Verdict::kAllowed);
  }
}

TEST(AccessRules, RolesParseByNameOnly) {
  for (Role role : kRoles) EXPECT_EQ(parse_role(role_name(role)), role);
  EXPECT_EQ(parse_role("Admin"), std::nullopt);
  EXPECT_EQ(parse_role("operator"), std::nullopt);
  EXPECT_TRUE(role_implies(Role::kAdmin, Role::kWorker));
  EXPECT_TRUE(role_implies(Role::kClient, Role::kViewer));
  EXPECT_FALSE(role_implies(Role::kViewer, Role::kClient));
  EXPECT_FALSE(role_implies(Role::kWorker, Role::kViewer));
  EXPECT_FALSE(role_implies(Role::kClient, Role::kWorker));
}

TEST(CertificateRoles, AVerifiedPeersCommonNameOrSanMapsToItsRoles) {
  const std::vector<CertificateRole> mapping = {
      {"worker-1.dex.internal", Role::kWorker},
      {"ops@example.com", Role::kAdmin},
      {"dashboard", Role::kViewer},
  };
  const std::vector<std::pair<std::string, std::string>> worker = {
      {"x509_common_name", "worker-1"},
      {"x509_subject_alternative_name", "worker-1.dex.internal"},
      {"transport_security_type", "ssl"}};
  RoleSet roles = certificate_roles(true, worker, mapping);
  EXPECT_TRUE(roles.has(Role::kWorker));
  EXPECT_FALSE(roles.has(Role::kAdmin));
  EXPECT_TRUE(
      certificate_roles(true, {{"x509_common_name", "dashboard"}}, mapping).has(Role::kViewer));
  // Not verified (no client CA, or an insecure connection): nothing.
  EXPECT_TRUE(certificate_roles(false, worker, mapping).empty());
  // Another property that happens to hold a mapped value does not count.
  EXPECT_TRUE(certificate_roles(true, {{"x509_pem_cert", "dashboard"}}, mapping).empty());
  // Case matters: identities are compared exactly.
  EXPECT_TRUE(certificate_roles(true, {{"x509_common_name", "Dashboard"}}, mapping).empty());

  Caller by_certificate;
  by_certificate.certificate_roles = roles;
  EXPECT_EQ(
      decide_access(closed(), "dex.WorkerTaskService", "PollWorkerTask", by_certificate).verdict,
      Verdict::kAllowed);
  Decision d = decide_access(closed(), "dex.FlowService", "StartFlow", by_certificate);
  EXPECT_EQ(d.verdict, Verdict::kPermissionDenied) << d.message;
}

}  // namespace
}  // namespace dex::auth
