// The listener TLS reader and watcher (src/tls): each bad file is refused
// naming the key and the file, a good rotation replaces the material, a bad
// one keeps it; and the api.tls/web.tls settings as the config reader takes
// them. Certificates are made by the openssl command at test time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "config/config.h"
#include "tls/server_tls.h"
#include "tls/tls_watcher.h"

namespace dex::tls {
namespace {

namespace fs = std::filesystem;

// A CA, two server certificates it signed and an expired one, in a fresh
// directory per test suite run.
class TlsFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        fmt::format("dex-tls-test-{}", static_cast<long>(::getpid())));
    fs::create_directories(*dir_);
    const std::string d = dir_->string();
    auto sh = [&](const std::string& cmd) {
      ASSERT_EQ(std::system(fmt::format("cd {} && {} >/dev/null 2>&1", d, cmd).c_str()), 0) << cmd;
    };
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    sh("openssl req -x509 " + ec +
       " -keyout ca.key -out ca.pem -days 30 -subj /CN=ca -addext "
       "basicConstraints=critical,CA:TRUE");
    for (const char* name : {"a", "b"}) {
      sh(fmt::format("openssl req {} -keyout {}.key -out {}.csr -subj /CN=server-{}", ec, name,
                     name, name));
      sh(
          fmt::format("openssl x509 -req -in {}.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                      "-days 30 -out {}.pem",
                      name, name));
    }
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }
  static ServerTlsFiles files(const std::string& cert, const std::string& key) {
    ServerTlsFiles f = ServerTlsFiles::named("api.tls");
    f.cert_file = cert;
    f.key_file = key;
    return f;
  }
  static fs::path* dir_;
};
fs::path* TlsFiles::dir_ = nullptr;

TEST_F(TlsFiles, GoodFilesLoadWithTheLeafsSubject) {
  auto m = load_server_tls(files(path("a.pem"), path("a.key")));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->subject, "/CN=server-a");
  EXPECT_FALSE(m->not_after.empty());
}

TEST_F(TlsFiles, EachBadFileIsRefusedNamingTheKeyAndTheFile) {
  auto missing = load_server_tls(files("/nonexistent.pem", path("a.key")));
  EXPECT_EQ(missing.status().message(), "api.tls.certFile: '/nonexistent.pem' does not exist");
  auto mismatch = load_server_tls(files(path("a.pem"), path("b.key")));
  EXPECT_NE(mismatch.status().message().find(fmt::format(
                "api.tls.keyFile: '{}' does not match the certificate in api.tls.certFile '{}'",
                path("b.key"), path("a.pem"))),
            std::string::npos)
      << mismatch.status().message();
  auto no_cert = load_server_tls(files(path("a.key"), path("a.key")));
  EXPECT_NE(no_cert.status().message().find("holds no PEM certificate"), std::string::npos);
  auto no_key = load_server_tls(files(path("a.pem"), path("a.pem")));
  EXPECT_NE(no_key.status().message().find("api.tls.keyFile"), std::string::npos);
  // Never the key's content.
  std::ifstream key_in(path("a.key"));
  std::string key((std::istreambuf_iterator<char>(key_in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(mismatch.status().message().find(key.substr(30, 20)), std::string::npos);
}

TEST_F(TlsFiles, TheSettingsMustCombine) {
  ServerTlsFiles f = files(path("a.pem"), "");
  EXPECT_FALSE(check_server_tls_settings(f).is_ok());
  f = files(path("a.pem"), path("a.key"));
  f.client_auth = ClientAuth::kRequired;
  EXPECT_EQ(check_server_tls_settings(f).message(),
            "api.tls.clientAuth required needs api.tls.clientCaFile: the CAs that sign client "
            "certificates");
  f.client_ca_file = path("ca.pem");
  EXPECT_TRUE(check_server_tls_settings(f).is_ok());
  f.client_auth = ClientAuth::kNone;
  EXPECT_FALSE(check_server_tls_settings(f).is_ok());
}

TEST_F(TlsFiles, TheWatcherTakesAGoodRotationAndKeepsTheOldOnABadOne) {
  const fs::path live = *dir_ / "live";
  fs::create_directories(live);
  fs::copy_file(path("a.pem"), live / "c.pem", fs::copy_options::overwrite_existing);
  fs::copy_file(path("a.key"), live / "c.key", fs::copy_options::overwrite_existing);
  // A long poll: the test drives the checks itself.
  auto w = TlsWatcher::start(files((live / "c.pem").string(), (live / "c.key").string()),
                             std::chrono::hours(1));
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  uint64_t changes = 0;
  w.value()->set_on_change([&](const ServerTlsMaterial&, uint64_t) { ++changes; });
  EXPECT_FALSE(w.value()->check_now());  // nothing changed

  // Half a rotation (the new key, the old certificate): refused, the old stays.
  fs::copy_file(path("b.key"), live / "c.key", fs::copy_options::overwrite_existing);
  EXPECT_FALSE(w.value()->check_now());
  EXPECT_EQ(w.value()->current()->subject, "/CN=server-a");
  EXPECT_EQ(w.value()->generation(), 1u);
  // The other half: accepted.
  fs::copy_file(path("b.pem"), live / "c.pem", fs::copy_options::overwrite_existing);
  EXPECT_TRUE(w.value()->check_now());
  EXPECT_EQ(w.value()->current()->subject, "/CN=server-b");
  EXPECT_EQ(w.value()->generation(), 2u);
  // A file gone: the current one stays.
  fs::remove(live / "c.pem");
  EXPECT_FALSE(w.value()->check_now());
  EXPECT_EQ(w.value()->current()->subject, "/CN=server-b");
  EXPECT_EQ(changes, 1u);
}

TEST(TlsSettings, ConfigReadsTheBlocksAndDefaultsClientAuthToRequiredWithACa) {
  auto s = load_node_settings_yaml(Subcommand::kDev,
                                   "api:\n  tls:\n    certFile: /c.pem\n    keyFile: /k.pem\n"
                                   "    clientCaFile: /ca.pem\n"
                                   "web:\n  tls:\n    certFile: /w.pem\n    keyFile: /wk.pem\n",
                                   "test.yaml");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->api_tls.client_auth, ClientAuth::kRequired);
  EXPECT_EQ(s->api_tls.client_ca_file, "/ca.pem");
  EXPECT_EQ(s->web_tls.client_auth, ClientAuth::kNone);
  EXPECT_EQ(s->web_tls.cert_file, "/w.pem");
  auto bad = load_node_settings_yaml(Subcommand::kDev,
                                     "api:\n  tls:\n    certFile: /c.pem\n    keyFile: /k.pem\n"
                                     "    clientAuth: optional\n",
                                     "test.yaml");
  EXPECT_EQ(bad.status().message(),
            "test.yaml: api.tls.clientAuth optional needs api.tls.clientCaFile: the CAs that "
            "sign client certificates");
  auto typo = load_node_settings_yaml(Subcommand::kDev, "api:\n  tls:\n    certfile: /c.pem\n",
                                      "test.yaml");
  EXPECT_FALSE(typo.is_ok());
}

TEST(TlsSettings, ServeCheckOutputReadsBackWithTheSameTls) {
  const std::string yaml =
      "nodeId: n\nobjectStore:\n  type: filesystem\n  path: /tmp/x\nlocalStore:\n  path: /tmp/y\n"
      "api:\n  tls:\n    certFile: /c.pem\n    keyFile: /k.pem\n    clientCaFile: /ca.pem\n"
      "    clientAuth: optional\n";
  auto s = load_serve_config_yaml(yaml, "serve.yaml");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const std::string described = describe_serve_config(s.value());
  auto again = load_serve_config_yaml(described, "described");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string() << "\n" << described;
  EXPECT_EQ(again->api_tls.cert_file, "/c.pem");
  EXPECT_EQ(again->api_tls.key_file, "/k.pem");
  EXPECT_EQ(again->api_tls.client_ca_file, "/ca.pem");
  EXPECT_EQ(again->api_tls.client_auth, ClientAuth::kOptional);
  EXPECT_FALSE(again->web_tls.enabled());
}

}  // namespace
}  // namespace dex::tls
