// Accepted tokens (src/auth/token_set.h, token_store.h): token files, digests,
// the constant-time match over every digest, refused files at start, and a
// rotation on disk picked up without a restart (a bad new file keeps the old
// tokens).
#include "auth/token_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/digest.h"

namespace dex::auth {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/dex-auth-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p.string();
  }
  fs::path path() const { return path_; }

 private:
  fs::path path_;
};

TEST(TokenFile, OneTokenALineTrimmedAndEmptyLinesSkipped) {
  EXPECT_EQ(parse_token_file("  abc \n"), std::vector<std::string>{"abc"});
  EXPECT_EQ(parse_token_file("old\r\n\n  new\n"), (std::vector<std::string>{"old", "new"}));
  EXPECT_TRUE(parse_token_file(" \n\t\n").empty());
  EXPECT_EQ(parse_token_file("last-without-newline"),
            std::vector<std::string>{"last-without-newline"});
}

TEST(TokenDigest, SixtyFourHexDigitsEitherCase) {
  const std::string hex = sha256_hex("t");
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(normalize_sha256(upper), hex);
  EXPECT_EQ(normalize_sha256(hex.substr(1)), std::nullopt);
  EXPECT_EQ(normalize_sha256(std::string(64, 'g')), std::nullopt);
}

TEST(TokenSet, EveryDigestIsComparedWhereverTheMatchIs) {
  TokenSet set;
  set.add(Role::kViewer, sha256_hex("view"));
  set.add(Role::kClient, sha256_hex("drive"));
  set.add(Role::kAdmin, sha256_hex("drive"));  // one token in two roles: both held
  set.add(Role::kWorker, sha256_hex("host"));
  for (const char* token : {"view", "drive", "host", "nothing", ""}) {
    EXPECT_EQ(set.match(token).compared, 4u) << token << ": an early exit";
  }
  EXPECT_TRUE(set.match("view").roles.has(Role::kViewer));
  RoleSet both = set.match("drive").roles;
  EXPECT_TRUE(both.has(Role::kClient) && both.has(Role::kAdmin) && !both.has(Role::kViewer));
  EXPECT_TRUE(set.match("nothing").roles.empty());
  // A digest is not a token: sending the configured digest itself matches nothing.
  EXPECT_TRUE(set.match(sha256_hex("view")).roles.empty());
  EXPECT_EQ(set.count(Role::kClient), 1u);
}

TEST(TokenSet, ConstantTimeEqualComparesWholeValues) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("xbc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

AccessSettings files_for(Role role, const std::string& path) {
  AccessSettings s;
  s.every_call_needs_credential = true;
  s.files.push_back(
      {role, path, std::string("auth.tokens.") + std::string(role_name(role)) + ".files"});
  return s;
}

TEST(TokenStore, AnUnusableFileFailsTheOpenNamingKeyAndPath) {
  TempDir dir;
  struct Case {
    std::string path;
    std::string says;
  };
  const std::string empty = dir.write("empty", " \n\n");
  const std::string big = dir.write("big", std::string(70 * 1024, 'x'));
  for (const Case& c :
       {Case{(dir.path() / "missing").string(), "no such file"}, Case{empty, "is empty"},
        Case{dir.path().string(), "not a regular file"}, Case{big, "larger than 65536 bytes"}}) {
    auto store = TokenStore::open(files_for(Role::kClient, c.path));
    ASSERT_FALSE(store.is_ok()) << c.path;
    const std::string message = store.status().message();
    EXPECT_NE(message.find("auth.tokens.client.files: "), std::string::npos) << message;
    EXPECT_NE(message.find(c.path), std::string::npos) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
    EXPECT_EQ(message.find("xxxx"), std::string::npos) << "content in the message";
  }
}

TEST(TokenStore, FilesAndDigestsOfEveryRoleAreAccepted) {
  TempDir dir;
  AccessSettings s = files_for(Role::kWorker, dir.write("worker", "w-1\n"));
  s.digests.push_back({Role::kViewer, sha256_hex("v-1"), "auth.tokens.viewer.sha256"});
  auto store = TokenStore::open(s);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_TRUE(store.value()->match("w-1").roles.has(Role::kWorker));
  EXPECT_TRUE(store.value()->match("v-1").roles.has(Role::kViewer));
  EXPECT_TRUE(store.value()->match("x").roles.empty());
  EXPECT_TRUE(store.value()->policy().anonymous.empty());
}

TEST(TokenStore, ARotatedFileIsReadAgainAndABadVersionKeepsTheOldTokens) {
  TempDir dir;
  const std::string path = dir.write("client", "old-token\n");
  auto opened = TokenStore::open(files_for(Role::kClient, path));
  ASSERT_TRUE(opened.is_ok());
  TokenStore& store = *opened.value();
  EXPECT_EQ(store.reload_changed(), 0u);  // nothing changed
  // Overlap: old and new for a while, then new alone.
  dir.write("client", "old-token\nnew-token\n");
  EXPECT_EQ(store.reload_changed(), 1u);
  EXPECT_FALSE(store.match("old-token").roles.empty());
  EXPECT_FALSE(store.match("new-token").roles.empty());
  dir.write("client", "new-token-only\n");
  EXPECT_EQ(store.reload_changed(), 1u);
  EXPECT_TRUE(store.match("old-token").roles.empty());
  EXPECT_FALSE(store.match("new-token-only").roles.empty());
  // Emptied (a half-written rotation), then removed: the last good tokens stay.
  dir.write("client", "");
  EXPECT_EQ(store.reload_changed(), 0u);
  EXPECT_FALSE(store.match("new-token-only").roles.empty());
  fs::remove(path);
  EXPECT_EQ(store.reload_changed(), 0u);
  EXPECT_FALSE(store.match("new-token-only").roles.empty());
  // A Secret-style swap: a new file renamed over the path.
  const std::string next = dir.write("client.next", "rotated\n");
  fs::rename(next, path);
  EXPECT_EQ(store.reload_changed(), 1u);
  EXPECT_TRUE(store.match("new-token-only").roles.empty());
  EXPECT_TRUE(store.match("rotated").roles.has(Role::kClient));
}

TEST(TokenStore, TheWatcherPicksUpARotationWithoutACall) {
  TempDir dir;
  const std::string path = dir.write("viewer", "first\n");
  auto opened = TokenStore::open(files_for(Role::kViewer, path));
  ASSERT_TRUE(opened.is_ok());
  TokenStore& store = *opened.value();
  store.watch(milliseconds(20));
  const std::string next = dir.write("viewer.next", "second\n");
  fs::rename(next, path);
  for (int i = 0; i < 500 && store.match("second").roles.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(store.match("second").roles.has(Role::kViewer));
  EXPECT_TRUE(store.match("first").roles.empty());
}

TEST(AccessSettings, TheAdminKeysAloneGuardAdminServiceOnly) {
  AccessSettings none;
  EXPECT_EQ(none.policy().anonymous, RoleSet::all());
  AccessSettings admin_only;
  admin_only.digests.push_back({Role::kAdmin, sha256_hex("a"), "auth.adminTokenSha256"});
  RoleSet anonymous = admin_only.policy().anonymous;
  EXPECT_TRUE(anonymous.has(Role::kClient) && anonymous.has(Role::kWorker) &&
              anonymous.has(Role::kViewer) && !anonymous.has(Role::kAdmin));
  admin_only.every_call_needs_credential = true;
  EXPECT_TRUE(admin_only.policy().anonymous.empty());
}

}  // namespace
}  // namespace dex::auth

namespace dex::auth {
namespace {

TEST(AccessSettings, TheSummaryNamesFilesAndCountsButNoSecret) {
  AccessSettings s;
  EXPECT_EQ(describe_access(s), "no credential configured: every call is open");
  s.every_call_needs_credential = true;
  s.files.push_back({Role::kClient, "/etc/dex/client", "auth.tokens.client.files"});
  s.digests.push_back({Role::kViewer, sha256_hex("v"), "auth.tokens.viewer.sha256"});
  s.certificate_roles.push_back({"worker-1", Role::kWorker});
  const std::string text = describe_access(s);
  EXPECT_EQ(text,
            "every call needs a credential; viewer: 0 token file(s), 1 digest(s), 0 certificate "
            "identities; client: 1 token file(s) (/etc/dex/client), 0 digest(s), 0 certificate "
            "identities; worker: 0 token file(s), 0 digest(s), 1 certificate identity; admin: 0 "
            "token file(s), 0 digest(s), 0 certificate identities");
  EXPECT_EQ(text.find(sha256_hex("v")), std::string::npos);
}

TEST(AccessSettings, BeyondLoopbackWithoutCredentialsOnEveryCallIsWarnedAbout) {
  AccessSettings open;
  const std::string warning = access_exposure_warning("0.0.0.0:8801", true, open);
  EXPECT_NE(warning.find("reachable beyond loopback on 0.0.0.0:8801 without a credential"),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("auth.tokens"), std::string::npos) << warning;
  EXPECT_TRUE(access_exposure_warning("127.0.0.1:8801", false, open).empty());
  AccessSettings admin_only;
  admin_only.digests.push_back({Role::kAdmin, sha256_hex("a"), "auth.adminTokenSha256"});
  EXPECT_FALSE(access_exposure_warning("0.0.0.0:8801", true, admin_only).empty());
  AccessSettings closed = admin_only;
  closed.every_call_needs_credential = true;
  EXPECT_TRUE(access_exposure_warning("0.0.0.0:8801", true, closed).empty());
}

}  // namespace
}  // namespace dex::auth
