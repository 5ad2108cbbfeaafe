// auth.tokens and auth.certificateRoles (src/config/auth_config.h): per role
// token files and digests, the admin keys as the admin role, what each
// refusal names, and what `serve --check` shows (never a token or a digest).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/digest.h"
#include "config/config.h"

namespace dex {
namespace {

namespace fs = std::filesystem;

constexpr const char* kServe =
    "nodeId: node-a\nobjectStore:\n  type: filesystem\n  path: /o\nlocalStore:\n  path: /l\n";

class Secrets {
 public:
  Secrets() {
    char pattern[] = "/tmp/dex-auth-config-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  ~Secrets() { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::string dir() const { return dir_.string(); }

 private:
  fs::path dir_;
};

StatusOr<NodeSettings> serve(const std::string& auth_yaml) {
  return load_serve_config_yaml(std::string(kServe) + auth_yaml, "serve.yaml");
}

TEST(AuthConfig, TokensOfEveryRoleFromFilesAndDigests) {
  Secrets s;
  const std::string client = s.file("client", "client-secret\n");
  const std::string worker = s.file("worker", "worker-secret\n");
  const std::string admin = s.file("admin", "admin-secret\n");
  auto c = serve(
      "auth:\n  adminTokenFiles: [" + admin + "]\n  tokens:\n    client:\n      files: [" + client +
      "]\n    worker:\n      files: [" + worker + "]\n      sha256: [" + std::string(64, 'A') +
      "]\n    viewer:\n      sha256: [" + sha256_hex("viewer-secret") + "]\n");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const auth::AccessSettings& a = c->access;
  EXPECT_TRUE(a.every_call_needs_credential);
  EXPECT_EQ(a.file_count(auth::Role::kClient), 1u);
  EXPECT_EQ(a.file_count(auth::Role::kWorker), 1u);
  EXPECT_EQ(a.digest_count(auth::Role::kWorker), 1u);
  EXPECT_EQ(a.digest_count(auth::Role::kViewer), 1u);
  EXPECT_EQ(a.file_count(auth::Role::kAdmin), 1u);           // the admin keys are the admin role
  EXPECT_EQ(a.digests[0].digest_hex, std::string(64, 'a'));  // normalized to lower case
  EXPECT_TRUE(a.policy().anonymous.empty());
}

TEST(AuthConfig, TheAdminKeysAloneKeepTheirMeaning) {
  Secrets s;
  auto c = serve("auth:\n  adminTokenFiles: [" + s.file("admin", "a\n") + "]\n");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_FALSE(c->access.every_call_needs_credential);
  EXPECT_EQ(c->access.file_count(auth::Role::kAdmin), 1u);
  EXPECT_TRUE(c->access.policy().anonymous.has(auth::Role::kClient));
  EXPECT_FALSE(c->access.policy().anonymous.has(auth::Role::kAdmin));
  auto none = serve("");
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->access.any());
}

TEST(AuthConfig, RefusalsNameTheKeyAndTheFileAndNothingStarts) {
  Secrets s;
  const std::string empty = s.file("empty", "\n  \n");
  struct Case {
    std::string yaml, needle;
  };
  const Case cases[] = {
      {"auth:\n  tokens:\n    operator:\n      files: [/x]\n",
       "auth.tokens: unknown role 'operator' (viewer, client, worker or admin)"},
      {"auth:\n  tokens:\n    client:\n      files: [" + empty + "]\n",
       "auth.tokens.client.files: '" + empty + "' is empty"},
      {"auth:\n  tokens:\n    worker:\n      files: [" + s.dir() + "/missing]\n",
       "auth.tokens.worker.files: cannot read '" + s.dir() + "/missing': no such file"},
      {"auth:\n  tokens:\n    viewer:\n      files: [" + s.dir() + "]\n",
       "auth.tokens.viewer.files: '" + s.dir() + "' is not a regular file"},
      {"auth:\n  tokens:\n    admin:\n      sha256: [abc]\n",
       "auth.tokens.admin.sha256 entries must be 64 hex digits"},
      {"auth:\n  tokens:\n    client:\n      file: [/x]\n",
       "unknown key 'auth.tokens.client.file'"},
      {"auth:\n  tokens:\n    client:\n      files: /x\n",
       "auth.tokens.client.files must be a list"},
      {"auth:\n  tokens: [client]\n", "auth.tokens must be a mapping of roles"},
      {"auth:\n  tokens:\n    client: [/x]\n", "auth.tokens.client must be a mapping"},
      {"auth:\n  certificateRoles:\n    worker-1: boss\n",
       "auth.certificateRoles.worker-1: unknown role 'boss'"},
      {"auth:\n  certificateRoles: [worker-1]\n", "auth.certificateRoles must be a mapping"},
      {"auth:\n  adminTokenFiles: [" + empty + "]\n", "auth.adminTokenFiles: '" + empty},
      {"auth:\n  tokens: {}\n", "auth.tokens lists no token"},
      {"auth:\n  tokens:\n    client: {}\n", "auth.tokens lists no token"},
      {"auth:\n  tokens:\n    client:\n      files: []\n", "auth.tokens lists no token"},
      {"auth:\n  certificateRoles: {}\n", "auth.certificateRoles lists no identity"},
  };
  for (const Case& c : cases) {
    auto read = serve(c.yaml);
    ASSERT_FALSE(read.is_ok()) << c.yaml;
    EXPECT_NE(read.status().message().find(c.needle), std::string::npos)
        << read.status().message() << "\nwanted: " << c.needle;
    // dev reads the same keys the same way.
    NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
    EXPECT_FALSE(apply_dev_override_yaml(c.yaml, "dev.yaml", dev).is_ok()) << c.yaml;
    EXPECT_FALSE(dev.access.any());
  }
}

TEST(AuthConfig, CertificateIdentitiesMapToRoles) {
  auto c = serve(
      "auth:\n  certificateRoles:\n    worker-1.dex.internal: worker\n    ops@example.com: "
      "admin\n");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ASSERT_EQ(c->access.certificate_roles.size(), 2u);
  EXPECT_EQ(c->access.certificate_roles[0].identity, "worker-1.dex.internal");
  EXPECT_EQ(c->access.certificate_roles[0].role, auth::Role::kWorker);
  EXPECT_TRUE(c->access.every_call_needs_credential);
}

TEST(AuthConfig, ServeCheckShowsRolesFilesAndCountsButNoSecret) {
  Secrets s;
  const std::string client = s.file("client", "client-secret-xyz\n");
  const std::string digest = sha256_hex("viewer-secret");
  auto c = serve("auth:\n  tokens:\n    client:\n      files: [" + client +
                 "]\n    viewer:\n      sha256: [" + digest +
                 "]\n  certificateRoles:\n    dash: viewer\n");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const std::string described = describe_serve_config(c.value());
  EXPECT_NE(described.find("  tokens:\n    viewer:\n"), std::string::npos) << described;
  EXPECT_NE(described.find("    client:\n      files:\n        - \"" + client + "\"\n"),
            std::string::npos)
      << described;
  EXPECT_NE(described.find("# 1 digest(s) not shown"), std::string::npos) << described;
  EXPECT_NE(described.find("\"dash\": viewer"), std::string::npos) << described;
  EXPECT_EQ(described.find(digest), std::string::npos) << described;
  EXPECT_EQ(described.find("client-secret-xyz"), std::string::npos) << described;
  // Read back, the digest's placeholder is refused by its key.
  auto again = load_serve_config_yaml(described, "check-output.yaml");
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("auth.tokens.viewer.sha256"), std::string::npos)
      << again.status().message();
  // Without the digest, the copy reads back to the same settings.
  auto files_only = serve("auth:\n  tokens:\n    client:\n      files: [" + client + "]\n");
  ASSERT_TRUE(files_only.is_ok());
  const std::string copy = describe_serve_config(files_only.value());
  auto back = load_serve_config_yaml(copy, "check-output.yaml");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string() << "\n" << copy;
  EXPECT_EQ(describe_serve_config(back.value()), copy);
  EXPECT_TRUE(back->access.every_call_needs_credential);
}

}  // namespace
}  // namespace dex
