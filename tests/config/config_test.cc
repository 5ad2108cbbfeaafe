#include "config/config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace dex {
namespace {

TEST(ParseDuration, AcceptsTheSpecForms) {
  EXPECT_EQ(parse_duration("250ms").value(), milliseconds(250));
  EXPECT_EQ(parse_duration("10s").value(), seconds(10));
  EXPECT_EQ(parse_duration("2m").value(), seconds(120));
  EXPECT_EQ(parse_duration("1h").value(), seconds(3600));
}

TEST(ParseDuration, RefusesBadInputNamingIt) {
  for (const char* bad : {"", "10", "s", "-1s", "1.5s", "10 s", "10sec", "0s",
                          "99999999999999999999s", "9999999999999h"}) {
    auto d = parse_duration(bad);
    ASSERT_FALSE(d.is_ok()) << bad;
    EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
    EXPECT_NE(d.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << d.status().message();
  }
}

TEST(FormatDuration, ShortestExactForm) {
  EXPECT_EQ(format_duration(seconds(30)), "30s");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(seconds(120)), "2m");
}

TEST(DevConfig, DefaultsFollowTheSpec) {
  DevConfig c;
  EXPECT_EQ(c.lease_duration, seconds(30));  // dev defaults lease.duration to 30 s
  EXPECT_EQ(c.durability, Durability::kStrict);
  EXPECT_FALSE(c.lease_fail_if_held);
}

TEST(DevConfig, OverrideFileSetsLeaseDuration) {
  DevConfig c;
  ASSERT_TRUE(
      apply_dev_override_yaml("lease:\n  duration: 5s\ndev:\n  durabilityMode: processCrashSafe\n",
                              "test.yaml", c)
          .is_ok());
  EXPECT_EQ(c.lease_duration, seconds(5));
  EXPECT_EQ(c.durability, Durability::kProcessCrashSafe);
}

TEST(DevConfig, EmptyOverrideChangesNothing) {
  DevConfig c;
  ASSERT_TRUE(apply_dev_override_yaml("", "empty.yaml", c).is_ok());
  EXPECT_EQ(c.lease_duration, seconds(30));
}

TEST(DevConfig, UnknownKeyIsRefusedWithItsPath) {
  DevConfig c;
  auto s = apply_dev_override_yaml("lease:\n  durration: 5s\n", "test.yaml", c);
  ASSERT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("lease.durration"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("test.yaml"), std::string::npos);
}

TEST(DevConfig, BadFileChangesNothing) {
  DevConfig c;
  auto s = apply_dev_override_yaml("nodeId: other\nlease:\n  duration: soon\n", "test.yaml", c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("lease.duration"), std::string::npos);
  EXPECT_EQ(c.node_id, "dev");
  EXPECT_EQ(c.lease_duration, seconds(30));
}

TEST(DevConfig, DevAcceptsOnlyColdStandby) {
  DevConfig c;
  EXPECT_TRUE(apply_dev_override_yaml("standby:\n  mode: cold\n", "t", c).is_ok());
  auto s = apply_dev_override_yaml("standby:\n  mode: hot\n", "t", c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("only cold"), std::string::npos);
}

TEST(DevConfig, RefusesOutOfRangeLeaseAndBadValues) {
  DevConfig c;
  EXPECT_FALSE(apply_dev_override_yaml("lease:\n  duration: 1s\n", "t", c).is_ok());
  EXPECT_FALSE(apply_dev_override_yaml("lease:\n  failIfHeld: maybe\n", "t", c).is_ok());
  EXPECT_FALSE(apply_dev_override_yaml("dev:\n  durabilityMode: fast\n", "t", c).is_ok());
  EXPECT_FALSE(apply_dev_override_yaml("nodeId: ../etc\n", "t", c).is_ok());
  EXPECT_FALSE(apply_dev_override_yaml("lease: [1, 2]\n", "t", c).is_ok());
  EXPECT_FALSE(apply_dev_override_yaml("{{{", "t", c).is_ok());
  EXPECT_EQ(c.node_id, "dev");
}

TEST(NodeId, Validation) {
  EXPECT_TRUE(validate_node_id("node-a_1.x").is_ok());
  EXPECT_FALSE(validate_node_id("").is_ok());
  EXPECT_FALSE(validate_node_id("a/b").is_ok());
  EXPECT_FALSE(validate_node_id(".hidden").is_ok());
  EXPECT_FALSE(validate_node_id(std::string(65, 'a')).is_ok());
}

}  // namespace
}  // namespace dex

namespace dex {
namespace {

TEST(DevConfig, OverrideSetsListenAndRefusesABadOne) {
  DevConfig c;
  ASSERT_TRUE(apply_dev_override_yaml("api:\n  listen: 127.0.0.1:9000\n", "t", c).is_ok());
  EXPECT_EQ(c.listen, "127.0.0.1:9000");
  auto s = apply_dev_override_yaml("api:\n  listen: nowhere\n", "t", c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("api.listen"), std::string::npos) << s.message();
  EXPECT_EQ(c.listen, "127.0.0.1:9000");
}

TEST(LocalConfig, NeedsNodeIdAndDataDir) {
  auto c = load_local_config_yaml("nodeId: n1\n", "local.yaml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("local.dataDir"), std::string::npos);
  EXPECT_FALSE(load_local_config_yaml("", "local.yaml").is_ok());
}

TEST(LocalConfig, ReadsEveryKeyWithDevDefaults) {
  auto c = load_local_config_yaml(
      "nodeId: n1\nlocal:\n  dataDir: /var/lib/dex\n  durabilityMode: processCrashSafe\n"
      "api:\n  listen: 0.0.0.0:8801\nstandby:\n  mode: cold\n",
      "local.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->node_id, "n1");
  EXPECT_EQ(c->data_dir, "/var/lib/dex");
  EXPECT_EQ(c->durability, Durability::kProcessCrashSafe);
  EXPECT_EQ(c->listen, "0.0.0.0:8801");
  EXPECT_EQ(c->lease_duration, seconds(30));  // local uses the dev lease default
}

TEST(LocalConfig, RefusesDevOnlyKeysAndHotStandby) {
  auto c = load_local_config_yaml(
      "nodeId: n1\nlocal:\n  dataDir: d\ndev:\n  durabilityMode: strict\n", "l");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("unknown key 'dev'"), std::string::npos);
  c = load_local_config_yaml("nodeId: n1\nlocal:\n  dataDir: d\nstandby:\n  mode: hot\n", "l");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("dex-server-zd local accepts only cold"), std::string::npos);
}

TEST(ListenAddress, Validation) {
  EXPECT_TRUE(validate_listen_address("127.0.0.1:8801").is_ok());
  EXPECT_TRUE(validate_listen_address("[::1]:0").is_ok());
  EXPECT_FALSE(validate_listen_address("8801").is_ok());
  EXPECT_FALSE(validate_listen_address("host:").is_ok());
  EXPECT_FALSE(validate_listen_address("host:70000").is_ok());
  EXPECT_FALSE(validate_listen_address(":80").is_ok());
}

}  // namespace
}  // namespace dex

namespace dex {
namespace {

constexpr const char* kServeS3 =
    "nodeId: node-a\nobjectStore:\n  type: s3\n  bucket: b\n  prefix: dex\n  endpoint: "
    "http://127.0.0.1:9000\n"
    "localStore:\n  path: /var/lib/dex\n";

TEST(ServeConfig, DefaultsFollowTheSpec) {
  auto c = load_serve_config_yaml(kServeS3, "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->listen, "0.0.0.0:8801");
  EXPECT_EQ(c->lease_duration, seconds(10));
  EXPECT_FALSE(c->lease_fail_if_held);
  EXPECT_EQ(c->standby_mode, "cold");
  EXPECT_EQ(c->attempt_drain_timeout, seconds(30));
  EXPECT_EQ(c->object_store.region, "us-east-1");
  EXPECT_EQ(c->object_store.addressing, "path");
  std::string described = describe_serve_config(c.value());
  EXPECT_NE(described.find("duration: 10s"), std::string::npos) << described;
  EXPECT_NE(described.find("bucket: b"), std::string::npos);
}

TEST(ServeConfig, TypoIsRefusedByItsPathNotIgnored) {
  auto c = load_serve_config_yaml(std::string(kServeS3) + "standby:\n  mod: hot\n", "serve.yaml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("standby.mod"), std::string::npos) << c.status().message();
}

TEST(ServeConfig, RefusalsNameTheKey) {
  struct Case {
    std::string yaml, needle;
  };
  std::vector<Case> cases = {
      {"objectStore:\n  type: s3\n  bucket: b\nlocalStore:\n  path: x\n", "nodeId"},
      {"nodeId: a\nobjectStore:\n  type: s3\nlocalStore:\n  path: x\n", "objectStore.bucket"},
      {"nodeId: a\nobjectStore:\n  type: gcs\nlocalStore:\n  path: x\n", "objectStore.type"},
      {"nodeId: a\nobjectStore:\n  type: filesystem\nlocalStore:\n  path: x\n", "objectStore.path"},
      {"nodeId: a\nobjectStore:\n  type: s3\n  bucket: b\n", "localStore.path"},
      {std::string(kServeS3) + "lease:\n  duration: soon\n", "lease.duration"},
      {std::string(kServeS3) + "lease:\n  failIfHeld: yes please\n", "lease.failIfHeld"},
      {std::string(kServeS3) + "standby:\n  mode: warm\n", "standby.mode"},
      {std::string(kServeS3) + "standby:\n  mode: hot\nlease:\n  failIfHeld: true\n",
       "lease.failIfHeld false"},
      {std::string(kServeS3) +
           "standby:\n  mode: hot\n  stepDownHoldOff: 1700ms\n  laggingTakeoverDelay: 1500ms\n",
       "standby.stepDownHoldOff (1700ms) must be longer than standby.laggingTakeoverDelay (1500ms) "
       "plus standby.heldLeasePollInterval (250ms)"},
      {std::string(kServeS3) + "standby:\n  heldLeasePollInterval: soon\n",
       "standby.heldLeasePollInterval"},
      {std::string(kServeS3) + "standby:\n  behindLagThreshold: 0s\n",
       "standby.behindLagThreshold"},
      {std::string(kServeS3) + "metrics:\n  listen: nowhere\n", "metrics.listen"},
      {std::string(kServeS3) + "metrics:\n  path: /m\n", "metrics.path"},
      {std::string(kServeS3) + "auth:\n  adminTokens: []\n", "auth.adminTokens"},
      {std::string(kServeS3) + "auth:\n  adminTokenFiles: /one/file\n",
       "auth.adminTokenFiles must be a list"},
      {std::string(kServeS3) + "auth:\n  adminTokenFiles: [/no/such/token]\n",
       "cannot read '/no/such/token'"},
      // A device would never end (found by the config fuzz target's author).
      {std::string(kServeS3) + "auth:\n  adminTokenFiles: [/dev/zero]\n",
       "'/dev/zero' is not a regular file"},
      {std::string(kServeS3) + "auth:\n  adminTokenSha256: [abc]\n", "64 hex digits"},
      {std::string(kServeS3) + "admin:\n  enabled: maybe\n", "admin.enabled"},
      {std::string(kServeS3) + "api:\n  listen: nowhere\n", "api.listen"},
      {"nodeId: a\nobjectStore:\n  type: s3\n  bucket: b\n  addressing: dns\nlocalStore:\n  path: "
       "x\n",
       "objectStore.addressing"},
  };
  for (const auto& c : cases) {
    auto r = load_serve_config_yaml(c.yaml, "serve.yaml");
    ASSERT_FALSE(r.is_ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.needle << " not in: " << r.status().message();
  }
}

TEST(ServeConfig, HotStandbyFieldsHaveTheSpecDefaultsAndAreShownByCheck) {
  auto c = load_serve_config_yaml(std::string(kServeS3) + "standby:\n  mode: hot\n", "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->standby_mode, "hot");
  EXPECT_EQ(c->held_lease_poll_interval, milliseconds(250));
  EXPECT_EQ(c->step_down_hold_off, seconds(5));
  EXPECT_EQ(c->lagging_takeover_delay, milliseconds(1500));
  EXPECT_EQ(c->behind_lag_threshold, seconds(10));
  std::string described = describe_serve_config(c.value());
  EXPECT_NE(described.find("mode: hot\n  heldLeasePollInterval: 250ms\n  stepDownHoldOff: 5s\n"
                           "  laggingTakeoverDelay: 1500ms\n  behindLagThreshold: 10s"),
            std::string::npos)
      << described;
  // 5s > 1500ms + 250ms holds by default; the boundary itself is refused.
  auto edge = load_serve_config_yaml(
      std::string(kServeS3) + "standby:\n  mode: hot\n  stepDownHoldOff: 1750ms\n", "serve.yaml");
  EXPECT_FALSE(edge.is_ok());
  auto over = load_serve_config_yaml(
      std::string(kServeS3) + "standby:\n  mode: hot\n  stepDownHoldOff: 1751ms\n", "serve.yaml");
  EXPECT_TRUE(over.is_ok()) << over.status().to_string();
  // The rule is a hot-mode rule: cold accepts any hold-off.
  EXPECT_TRUE(load_serve_config_yaml(std::string(kServeS3) + "standby:\n  stepDownHoldOff: 1s\n",
                                     "serve.yaml")
                  .is_ok());
  auto m = load_serve_config_yaml(std::string(kServeS3) + "metrics:\n  listen: 0.0.0.0:9090\n",
                                  "serve.yaml");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->metrics_listen, "0.0.0.0:9090");
}

TEST(ServeConfig, AdminTokensAreReadAsDigestsAndNeverShown) {
  const auto file =
      std::filesystem::temp_directory_path() / ("dex-admin-token-" + std::to_string(::getpid()));
  std::ofstream(file) << "  token-from-a-file\n";
  auto c =
      load_serve_config_yaml(std::string(kServeS3) + "auth:\n  adminTokenFiles: [" + file.string() +
                                 "]\n  adminTokenSha256: [" + std::string(64, 'A') + "]\n",
                             "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ASSERT_EQ(c->admin_token_sha256.size(), 2u);
  // sha256("token-from-a-file"): the file's content, trimmed.
  EXPECT_EQ(c->admin_token_sha256[0].size(), 64u);
  EXPECT_EQ(c->admin_token_sha256[1], std::string(64, 'a'));
  std::string described = describe_serve_config(c.value());
  EXPECT_NE(described.find("adminTokens: 2 accepted"), std::string::npos) << described;
  EXPECT_EQ(described.find("token-from-a-file"), std::string::npos);
  EXPECT_EQ(described.find(c->admin_token_sha256[0]), std::string::npos);
  std::ofstream(file, std::ios::trunc) << " \n";
  auto empty = load_serve_config_yaml(
      std::string(kServeS3) + "auth:\n  adminTokenFiles: [" + file.string() + "]\n", "serve.yaml");
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
  std::filesystem::remove(file);
  auto none = load_serve_config_yaml(kServeS3, "serve.yaml");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->admin_enabled);
  EXPECT_NE(describe_serve_config(none.value()).find("anyone who reaches api.listen"),
            std::string::npos);
}

TEST(ServeConfig, FilesystemStoreWithDurability) {
  auto c = load_serve_config_yaml(
      "nodeId: a\nobjectStore:\n  type: filesystem\n  path: /srv/objects\n  durability: "
      "processCrashSafe\n"
      "localStore:\n  path: /srv/local\nlease:\n  duration: 60s\n",
      "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->object_store.path, "/srv/objects");
  EXPECT_EQ(c->object_store.durability, Durability::kProcessCrashSafe);
  EXPECT_EQ(c->lease_duration, seconds(60));
}

TEST(SnapshotSettings, DefaultsAndEveryKeyInServeDevAndLocal) {
  auto d = load_serve_config_yaml(kServeS3, "serve.yaml");
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->snapshots.interval, std::chrono::minutes(10));
  EXPECT_EQ(d->snapshots.every_records, 100'000u);
  EXPECT_EQ(d->snapshots.keep, 2u);
  auto c = load_serve_config_yaml(
      std::string(kServeS3) + "snapshots:\n  interval: 30s\n  everyRecords: 0\n  keep: 3\n",
      "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->snapshots.interval, seconds(30));
  EXPECT_EQ(c->snapshots.every_records, 0u);
  EXPECT_EQ(c->snapshots.keep, 3u);
  std::string described = describe_serve_config(c.value());
  EXPECT_NE(described.find("snapshots:\n  interval: 30s\n  everyRecords: 0\n  keep: 3"),
            std::string::npos)
      << described;

  DevConfig dev;
  ASSERT_TRUE(apply_dev_override_yaml("snapshots:\n  interval: 0\n  everyRecords: 500\n",
                                      "override.yaml", dev)
                  .is_ok());
  EXPECT_EQ(dev.snapshots.interval, Duration(0));
  EXPECT_EQ(dev.snapshots.every_records, 500u);
  auto local = load_local_config_yaml("nodeId: a\nlocal:\n  dataDir: /d\nsnapshots:\n  keep: 1\n",
                                      "local.yaml");
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  EXPECT_EQ(local->snapshots.keep, 1u);
}

TEST(SnapshotSettings, BadValuesAreRefusedByKeyAndChangeNothing) {
  struct Case {
    std::string yaml, needle;
  };
  std::vector<Case> cases = {
      {"snapshots:\n  interval: often\n", "snapshots.interval"},
      {"snapshots:\n  interval: -5s\n", "snapshots.interval"},
      {"snapshots:\n  everyRecords: lots\n", "snapshots.everyRecords"},
      {"snapshots:\n  everyRecords: -1\n", "snapshots.everyRecords"},
      {"snapshots:\n  keep: 0\n", "snapshots.keep"},
      {"snapshots:\n  keep: 101\n", "snapshots.keep"},
      {"snapshots:\n  kep: 2\n", "snapshots.kep"},
      {"snapshots:\n  keep: [1, 2]\n", "snapshots.keep"},
  };
  for (const auto& c : cases) {
    auto r = load_serve_config_yaml(std::string(kServeS3) + c.yaml, "serve.yaml");
    ASSERT_FALSE(r.is_ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.needle << " not in: " << r.status().message();
    DevConfig dev;
    Status s = apply_dev_override_yaml("lease:\n  duration: 45s\n" + c.yaml, "o.yaml", dev);
    EXPECT_FALSE(s.is_ok()) << c.yaml;
    EXPECT_EQ(dev.lease_duration, seconds(30)) << "a bad file changed something";
    EXPECT_EQ(dev.snapshots.keep, 2u);
  }
}

}  // namespace
}  // namespace dex
