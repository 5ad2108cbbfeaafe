#include "config/config.h"

#include <gtest/gtest.h>

#include <functional>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace dex {
namespace {

// The settings every subcommand has, equal in `a` and `b`.
void expect_same_shared_settings(const NodeSettings& a, const NodeSettings& b) {
  EXPECT_EQ(a.node_id, b.node_id);
  EXPECT_EQ(a.listen, b.listen);
  EXPECT_EQ(a.lease_duration, b.lease_duration);
  EXPECT_EQ(a.lease_fail_if_held, b.lease_fail_if_held);
  EXPECT_EQ(a.standby_mode, b.standby_mode);
  EXPECT_EQ(a.attempt_drain_timeout, b.attempt_drain_timeout);
  EXPECT_EQ(a.snapshots.interval, b.snapshots.interval);
  EXPECT_EQ(a.snapshots.every_records, b.snapshots.every_records);
  EXPECT_EQ(a.snapshots.keep, b.snapshots.keep);
  EXPECT_EQ(a.values.blob_threshold_bytes, b.values.blob_threshold_bytes);
  EXPECT_EQ(a.values.max_size_bytes, b.values.max_size_bytes);
  EXPECT_EQ(a.values.blob_cache_bytes, b.values.blob_cache_bytes);
  EXPECT_EQ(a.values.blob_collect_interval, b.values.blob_collect_interval);
  EXPECT_EQ(a.values.blob_min_age, b.values.blob_min_age);
  EXPECT_EQ(a.flows.retention, b.flows.retention);
  EXPECT_EQ(a.flows.worker_reconnect_grace, b.flows.worker_reconnect_grace);
  EXPECT_EQ(a.admin_enabled, b.admin_enabled);
  EXPECT_EQ(a.admin_token_sha256, b.admin_token_sha256);
  EXPECT_EQ(a.admin_token_files, b.admin_token_files);
}

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
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
  EXPECT_EQ(c.lease_duration, seconds(30));  // dev defaults lease.duration to 30 s
  EXPECT_EQ(c.durability, Durability::kStrict);
  EXPECT_FALSE(c.lease_fail_if_held);
}

TEST(DevConfig, OverrideFileSetsLeaseDuration) {
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
  ASSERT_TRUE(
      apply_dev_override_yaml("lease:\n  duration: 5s\ndev:\n  durabilityMode: processCrashSafe\n",
                              "test.yaml", c)
          .is_ok());
  EXPECT_EQ(c.lease_duration, seconds(5));
  EXPECT_EQ(c.durability, Durability::kProcessCrashSafe);
}

// Graceful shutdown drains in every mode (docs/node.md): dev and local accept the key.
TEST(DevConfig, AttemptDrainTimeoutDefaultsTo30sAndDevAndLocalAcceptIt) {
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
  EXPECT_EQ(c.attempt_drain_timeout, seconds(30));
  ASSERT_TRUE(
      apply_dev_override_yaml("lifecycle:\n  attemptDrainTimeout: 2s\n", "test.yaml", c).is_ok());
  EXPECT_EQ(c.attempt_drain_timeout, seconds(2));
  Status bad = apply_dev_override_yaml("lifecycle:\n  attemptDrainTimeout: soon\n", "t.yaml", c);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("lifecycle.attemptDrainTimeout"), std::string::npos)
      << bad.message();
  EXPECT_EQ(c.attempt_drain_timeout, seconds(2));  // a bad file changes nothing
  auto local = load_local_config_yaml(
      "nodeId: n\nlocal:\n  dataDir: /tmp/x\nlifecycle:\n  attemptDrainTimeout: 1s\n", "l.yaml");
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  EXPECT_EQ(local->attempt_drain_timeout, seconds(1));
}

TEST(DevConfig, EmptyOverrideChangesNothing) {
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
  ASSERT_TRUE(apply_dev_override_yaml("", "empty.yaml", c).is_ok());
  EXPECT_EQ(c.lease_duration, seconds(30));
}

TEST(DevConfig, UnknownKeyIsRefusedWithItsPath) {
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
  auto s = apply_dev_override_yaml("lease:\n  durration: 5s\n", "test.yaml", c);
  ASSERT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("lease.durration"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("test.yaml"), std::string::npos);
}

TEST(DevConfig, BadFileChangesNothing) {
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
  auto s = apply_dev_override_yaml("nodeId: other\nlease:\n  duration: soon\n", "test.yaml", c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("lease.duration"), std::string::npos);
  EXPECT_EQ(c.node_id, "dev");
  EXPECT_EQ(c.lease_duration, seconds(30));
}

TEST(DevConfig, DevAcceptsOnlyColdStandby) {
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
  EXPECT_TRUE(apply_dev_override_yaml("standby:\n  mode: cold\n", "t", c).is_ok());
  auto s = apply_dev_override_yaml("standby:\n  mode: hot\n", "t", c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("only cold"), std::string::npos);
}

TEST(DevConfig, RefusesOutOfRangeLeaseAndBadValues) {
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
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
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
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

// Each case's YAML (added to a valid serve file, and as a dev override) is
// refused with a message holding its needle, and the dev config is untouched.
struct BadCase {
  std::string yaml, needle;
};
void expect_refused_by_key(const std::vector<BadCase>& cases,
                           const std::function<void(const NodeSettings&)>& unchanged) {
  for (const auto& c : cases) {
    auto r = load_serve_config_yaml(std::string(kServeS3) + c.yaml, "serve.yaml");
    ASSERT_FALSE(r.is_ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.needle << " not in: " << r.status().message();
    NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
    Status s = apply_dev_override_yaml("lease:\n  duration: 45s\n" + c.yaml, "o.yaml", dev);
    EXPECT_FALSE(s.is_ok()) << c.yaml;
    EXPECT_EQ(dev.lease_duration, seconds(30)) << "a bad file changed something";
    unchanged(dev);
  }
}

TEST(ServeConfig, DefaultsFollowTheSpec) {
  auto c = load_serve_config_yaml(kServeS3, "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->listen, "0.0.0.0:8801");
  EXPECT_EQ(c->lease_duration, seconds(10));
  EXPECT_FALSE(c->lease_fail_if_held);
  EXPECT_EQ(c->standby_mode, StandbyMode::kCold);
  EXPECT_EQ(c->attempt_drain_timeout, seconds(30));
  EXPECT_EQ(c->object_store.region, "us-east-1");
  EXPECT_EQ(c->object_store.addressing, S3Addressing::kPath);
  std::string described = describe_serve_config(c.value());
  EXPECT_NE(described.find("duration: 10s"), std::string::npos) << described;
  EXPECT_NE(described.find("bucket: \"b\""), std::string::npos) << described;
}

TEST(ServeConfig, TypoIsRefusedByItsPathNotIgnored) {
  auto c = load_serve_config_yaml(std::string(kServeS3) + "standby:\n  mod: hot\n", "serve.yaml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("standby.mod"), std::string::npos) << c.status().message();
}

TEST(ServeConfig, RefusalsNameTheKey) {
  std::vector<BadCase> cases = {
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
  EXPECT_EQ(c->standby_mode, StandbyMode::kHot);
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

// metrics.typeLabelsMax (docs/metrics.md, "Flows, Steps and RPCs by type"):
// 100 by default, a whole number from 0 to 10000, refused otherwise with its name.
TEST(ServeConfig, MetricsTypeLabelsMaxDefaultsTo100AndRefusesBadValuesByName) {
  auto d = load_serve_config_yaml(kServeS3, "serve.yaml");
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->metrics_type_labels_max, 100u);
  for (const auto& [text, value] : std::vector<std::pair<std::string, uint64_t>>{
           {"0", 0}, {"1", 1}, {"250", 250}, {"10000", 10'000}}) {
    auto c = load_serve_config_yaml(
        std::string(kServeS3) + "metrics:\n  typeLabelsMax: " + text + "\n", "serve.yaml");
    ASSERT_TRUE(c.is_ok()) << text << ": " << c.status().to_string();
    EXPECT_EQ(c->metrics_type_labels_max, value);
    EXPECT_NE(describe_serve_config(*c).find("typeLabelsMax: " + text + "\n"), std::string::npos);
  }
  for (const std::string bad : {"-1", "10001", "many", "1.5", "\"\"", "[1]"}) {
    auto c = load_serve_config_yaml(
        std::string(kServeS3) + "metrics:\n  typeLabelsMax: " + bad + "\n", "serve.yaml");
    ASSERT_FALSE(c.is_ok()) << bad;
    EXPECT_NE(c.status().message().find("metrics.typeLabelsMax"), std::string::npos)
        << c.status().message();
  }
  // Like metrics.listen, a setting of serve's only (dev and local serve no /metrics).
  NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
  auto s = apply_dev_override_yaml("metrics:\n  typeLabelsMax: 5\n", "d", dev);
  EXPECT_FALSE(s.is_ok());
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
  // The file by its path, the inline digest by a placeholder.
  EXPECT_NE(described.find("adminTokenFiles:\n    - \"" + file.string() + "\""), std::string::npos)
      << described;
  EXPECT_NE(described.find("1 digest(s) not shown"), std::string::npos) << described;
  EXPECT_EQ(described.find(std::string(64, 'a')), std::string::npos) << described;
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
  EXPECT_EQ(d->snapshots.every_records, 10'000u);
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

  NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
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

TEST(ValueSettings, SizesParseWithUnitsAndFormatBack) {
  EXPECT_EQ(parse_bytes("262144").value(), 262144u);
  EXPECT_EQ(parse_bytes("512B").value(), 512u);
  EXPECT_EQ(parse_bytes("256KiB").value(), 256u << 10);
  EXPECT_EQ(parse_bytes("64MiB").value(), 64u << 20);
  EXPECT_EQ(parse_bytes("2GiB").value(), 2ull << 30);
  for (const char* bad : {"", "MiB", "64 MiB", "64mb", "64M", "-1", "1.5MiB", "64MiBs",
                          "99999999999999999999", "20000000000GiB"}) {
    auto r = parse_bytes(bad);
    EXPECT_FALSE(r.is_ok()) << bad;
    if (!r.is_ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    }
  }
  EXPECT_EQ(format_bytes(256u << 10), "256KiB");
  EXPECT_EQ(format_bytes(64u << 20), "64MiB");
  EXPECT_EQ(format_bytes(1ull << 30), "1GiB");
  EXPECT_EQ(format_bytes(1000), "1000B");
  EXPECT_EQ(format_bytes(0), "0B");
}

TEST(ValueSettings, DefaultsAndEveryKeyInServeDevAndLocal) {
  auto d = load_serve_config_yaml(kServeS3, "serve.yaml");
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->values.blob_threshold_bytes, 256u << 10);
  EXPECT_EQ(d->values.max_size_bytes, 64u << 20);
  EXPECT_EQ(d->values.blob_cache_bytes, 64u << 20);
  EXPECT_EQ(values_message_bytes_max(d->values), 144u << 20);
  auto c = load_serve_config_yaml(std::string(kServeS3) +
                                      "values:\n  blobThreshold: 64KiB\n  maxSize: 128MiB\n"
                                      "  blobCacheSize: 0\n",
                                  "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->values.blob_threshold_bytes, 64u << 10);
  EXPECT_EQ(c->values.max_size_bytes, 128u << 20);
  EXPECT_EQ(c->values.blob_cache_bytes, 0u);
  const std::string described = describe_serve_config(c.value());
  EXPECT_NE(described.find("values:\n  blobThreshold: 64KiB\n  maxSize: 128MiB\n"
                           "  blobCacheSize: 0B\n"),
            std::string::npos)
      << described;
  auto again = load_serve_config_yaml(described, "described.yaml");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again->values.max_size_bytes, 128u << 20);

  NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
  ASSERT_TRUE(apply_dev_override_yaml("values:\n  maxSize: 1MiB\n", "o.yaml", dev).is_ok());
  EXPECT_EQ(dev.values.max_size_bytes, 1u << 20);
  EXPECT_EQ(dev.values.blob_threshold_bytes, 256u << 10);
  auto local = load_local_config_yaml(
      "nodeId: a\nlocal:\n  dataDir: /d\nvalues:\n  blobThreshold: 1MiB\n", "local.yaml");
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  EXPECT_EQ(local->values.blob_threshold_bytes, 1u << 20);
}

TEST(ValueSettings, BadValuesAreRefusedByKeyAndChangeNothing) {
  std::vector<BadCase> cases = {
      {"values:\n  blobThreshold: big\n", "values.blobThreshold"},
      {"values:\n  blobThreshold: 512B\n", "values.blobThreshold 512B is outside 1KiB..1MiB"},
      {"values:\n  blobThreshold: 2MiB\n", "values.blobThreshold"},
      {"values:\n  maxSize: 1GiB\n", "values.maxSize 1GiB is outside 1KiB..512MiB"},
      {"values:\n  maxSize: 64 MB\n", "values.maxSize"},
      {"values:\n  maxSize: 128KiB\n",
       "values.maxSize (128KiB) must be at least values.blobThreshold (256KiB)"},
      {"values:\n  blobCacheSize: -1\n", "values.blobCacheSize"},
      {"values:\n  maxsize: 1MiB\n", "values.maxsize"},
      {"values:\n  maxSize: [1, 2]\n", "values.maxSize"},
  };
  expect_refused_by_key(
      cases, [](const NodeSettings& dev) { EXPECT_EQ(dev.values.max_size_bytes, 64u << 20); });
}

TEST(FlowSettings, RetentionAndBlobCollectionDefaultsAndKeys) {
  auto d = load_serve_config_yaml(kServeS3, "serve.yaml");
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->flows.retention, std::chrono::hours(24 * 7));
  EXPECT_EQ(d->values.blob_collect_interval, std::chrono::hours(1));
  EXPECT_EQ(d->values.blob_min_age, std::chrono::hours(1));
  auto c = load_serve_config_yaml(std::string(kServeS3) +
                                      "values:\n  blobCollectInterval: 0\n  blobMinAge: 30s\n"
                                      "flows:\n  retention: 2d\n",
                                  "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->values.blob_collect_interval, Duration(0));
  EXPECT_EQ(c->values.blob_min_age, seconds(30));
  EXPECT_EQ(c->flows.retention, std::chrono::hours(48));
  const std::string described = describe_serve_config(c.value());
  EXPECT_NE(
      described.find("  blobCollectInterval: 0\n  blobMinAge: 30s\nflows:\n  retention: 2d\n"),
      std::string::npos)
      << described;
  auto again = load_serve_config_yaml(described, "described.yaml");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again->flows.retention, std::chrono::hours(48));
  EXPECT_EQ(again->values.blob_collect_interval, Duration(0));

  NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
  ASSERT_TRUE(
      apply_dev_override_yaml("flows:\n  retention: 3s\nvalues:\n  blobMinAge: 0\n", "o.yaml", dev)
          .is_ok());
  EXPECT_EQ(dev.flows.retention, seconds(3));
  EXPECT_EQ(dev.values.blob_min_age, Duration(0));
  auto local = load_local_config_yaml(
      "nodeId: a\nlocal:\n  dataDir: /d\nflows:\n  retention: 90m\n", "local.yaml");
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  EXPECT_EQ(local->flows.retention, std::chrono::minutes(90));
}

TEST(FlowSettings, BadValuesAreRefusedByKeyAndChangeNothing) {
  std::vector<BadCase> cases = {
      {"flows:\n  retention: 0\n", "flows.retention 0 is outside 1s..3650d"},
      {"flows:\n  retention: 500ms\n", "flows.retention 500ms is outside 1s..3650d"},
      {"flows:\n  retention: 3651d\n", "flows.retention"},
      {"flows:\n  retention: forever\n", "flows.retention: invalid duration 'forever'"},
      {"flows:\n  retension: 7d\n", "flows.retension"},
      {"values:\n  blobCollectInterval: 8d\n", "values.blobCollectInterval 8d is outside 0s..7d"},
      {"values:\n  blobMinAge: soon\n", "values.blobMinAge"},
      {"values:\n  blobMinAge: 31d\n", "values.blobMinAge"},
  };
  expect_refused_by_key(cases, [](const NodeSettings& dev) {
    EXPECT_EQ(dev.flows.retention, std::chrono::hours(24 * 7));
  });
}

TEST(SnapshotSettings, BadValuesAreRefusedByKeyAndChangeNothing) {
  std::vector<BadCase> cases = {
      {"snapshots:\n  interval: often\n", "snapshots.interval"},
      {"snapshots:\n  interval: -5s\n", "snapshots.interval"},
      {"snapshots:\n  everyRecords: lots\n", "snapshots.everyRecords"},
      {"snapshots:\n  everyRecords: -1\n", "snapshots.everyRecords"},
      {"snapshots:\n  keep: 0\n", "snapshots.keep"},
      {"snapshots:\n  keep: 101\n", "snapshots.keep"},
      {"snapshots:\n  kep: 2\n", "snapshots.kep"},
      {"snapshots:\n  keep: [1, 2]\n", "snapshots.keep"},
  };
  expect_refused_by_key(cases, [](const NodeSettings& dev) { EXPECT_EQ(dev.snapshots.keep, 2u); });
}

}  // namespace
}  // namespace dex

namespace dex {
namespace {

// A token file for the admin tests, removed at the end of the test.
class TokenFile {
 public:
  explicit TokenFile(const std::string& token)
      : path_(std::filesystem::temp_directory_path() /
              ("dex-config-test-token-" + std::to_string(::getpid()) + "-" +
               std::to_string(counter_++))) {
    std::ofstream(path_) << token << "\n";
  }
  ~TokenFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

// Issue 13 item 5: dev and local accept admin.enabled and auth.* like serve.
TEST(DevConfig, OverrideFileAcceptsAdminEnabledAndAdminTokens) {
  TokenFile token("dev-secret-token");
  NodeSettings c = NodeSettings::defaults(Subcommand::kDev);
  EXPECT_TRUE(c.admin_enabled);
  EXPECT_TRUE(c.admin_token_sha256.empty());
  ASSERT_TRUE(apply_dev_override_yaml("auth:\n  adminTokenFiles: [" + token.path() +
                                          "]\n  adminTokenSha256: [" + std::string(64, 'B') + "]\n",
                                      "dev.yaml", c)
                  .is_ok());
  ASSERT_EQ(c.admin_token_sha256.size(), 2u);
  EXPECT_EQ(c.admin_token_sha256[1], std::string(64, 'b'));
  EXPECT_TRUE(c.admin_enabled);
  ASSERT_TRUE(apply_dev_override_yaml("admin:\n  enabled: false\n", "dev.yaml", c).is_ok());
  EXPECT_FALSE(c.admin_enabled);
}

TEST(LocalConfig, AcceptsAdminEnabledAndAdminTokens) {
  TokenFile token("local-secret-token");
  auto c = load_local_config_yaml("nodeId: n1\nlocal:\n  dataDir: /d\nauth:\n  adminTokenFiles: [" +
                                      token.path() + "]\nadmin:\n  enabled: true\n",
                                  "local.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->admin_token_sha256.size(), 1u);
  EXPECT_TRUE(c->admin_enabled);
  auto off = load_local_config_yaml("nodeId: n1\nlocal:\n  dataDir: /d\nadmin:\n  enabled: false\n",
                                    "local.yaml");
  ASSERT_TRUE(off.is_ok()) << off.status().to_string();
  EXPECT_FALSE(off->admin_enabled);
  EXPECT_TRUE(off->admin_token_sha256.empty());
}

TEST(DevAndLocalConfig, AdminRefusalsNameTheKeyNeverTheDigestAndChangeNothing) {
  TokenFile empty(" ");
  const std::string digest_like = std::string(63, 'c') + "x";  // not hex: refused
  std::vector<BadCase> cases = {
      {"admin:\n  enabled: maybe\n", "admin.enabled"},
      {"admin:\n  enable: false\n", "admin.enable"},
      {"auth:\n  adminTokens: []\n", "auth.adminTokens"},
      {"auth: open\n", "'auth' must be a mapping"},
      {"auth:\n  adminTokenFiles: /one/file\n", "auth.adminTokenFiles must be a list"},
      {"auth:\n  adminTokenFiles: [/no/such/token]\n", "cannot read '/no/such/token'"},
      {"auth:\n  adminTokenFiles: [/dev/zero]\n", "'/dev/zero' is not a regular file"},
      {"auth:\n  adminTokenFiles: [" + empty.path() + "]\n", "is empty"},
      {"auth:\n  adminTokenSha256: [" + digest_like + "]\n",
       "auth.adminTokenSha256 entries must be 64 hex digits"},
  };
  for (const auto& c : cases) {
    NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
    Status s = apply_dev_override_yaml("lease:\n  duration: 45s\n" + c.yaml, "dev.yaml", dev);
    ASSERT_FALSE(s.is_ok()) << c.yaml;
    EXPECT_NE(s.message().find(c.needle), std::string::npos)
        << c.needle << " not in: " << s.message();
    EXPECT_NE(s.message().find("dev.yaml"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find(digest_like), std::string::npos) << s.message();
    EXPECT_EQ(dev.lease_duration, seconds(30)) << "a bad file changed something";
    EXPECT_TRUE(dev.admin_enabled);
    EXPECT_TRUE(dev.admin_token_sha256.empty());
    auto local =
        load_local_config_yaml("nodeId: n1\nlocal:\n  dataDir: /d\n" + c.yaml, "local.yaml");
    ASSERT_FALSE(local.is_ok()) << c.yaml;
    EXPECT_NE(local.status().message().find(c.needle), std::string::npos)
        << c.needle << " not in: " << local.status().message();
    EXPECT_EQ(local.status().message().find(digest_like), std::string::npos);
  }
}

TEST(ListenAddress, LoopbackIs127Slash8AndIpv6LoopbackAndLocalhost) {
  for (const char* loopback :
       {"127.0.0.1:8801", "127.1.2.3:0", "127.255.255.255:1", "localhost:8801", "[::1]:8801"}) {
    EXPECT_TRUE(listen_is_loopback(loopback)) << loopback;
  }
  for (const char* beyond : {"0.0.0.0:8801", "[::]:8801", "10.0.0.5:8801", "dex.internal:8801",
                             "127.0.0:8801", "127.0.0.1.5:8801", "127.0.0.256:8801",
                             "128.0.0.1:8801", "localhost.example.com:8801", "[::2]:8801"}) {
    EXPECT_FALSE(listen_is_loopback(beyond)) << beyond;
  }
}

TEST(AdminExposureWarning, OnlyBeyondLoopbackWithoutACredential) {
  std::string warning = admin_exposure_warning("0.0.0.0:8801", true, 0);
  EXPECT_NE(warning.find("AdminService is reachable beyond loopback on 0.0.0.0:8801"),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("auth.adminTokenFiles"), std::string::npos) << warning;
  EXPECT_FALSE(admin_exposure_warning("[::]:8801", true, 0).empty());
  EXPECT_TRUE(admin_exposure_warning("127.0.0.1:8801", true, 0).empty());
  EXPECT_TRUE(admin_exposure_warning("[::1]:8801", true, 0).empty());
  EXPECT_TRUE(admin_exposure_warning("0.0.0.0:8801", true, 1).empty());
  EXPECT_TRUE(admin_exposure_warning("0.0.0.0:8801", false, 0).empty());
}

// Issue 13 item 8: `serve --check` prints a config that reads back with the
// same effective settings.
TEST(ServeConfig, DescribedSettingsReadBackAsTheSameConfig) {
  TokenFile token("serve-secret-token");
  const std::vector<std::string> configs = {
      std::string(kServeS3),
      "nodeId: node-b\napi:\n  listen: \"[::1]:9001\"\nobjectStore:\n  type: s3\n  bucket: "
      "dex-bucket\n  prefix: \"a b/\\\"q\\\"\"\n  region: eu-west-1\n  addressing: virtualHost\n"
      "  credentials:\n    file: /etc/dex/aws credentials\n    profile: prod\n"
      "localStore:\n  path: \"/var/lib/dex #1\"\nlease:\n  duration: 90s\n  failIfHeld: false\n"
      "standby:\n  mode: hot\n  heldLeasePollInterval: 100ms\n  stepDownHoldOff: 7s\n"
      "  laggingTakeoverDelay: 2s\n  behindLagThreshold: 20s\nmetrics:\n  listen: 0.0.0.0:9090\n"
      "  typeLabelsMax: 7\n"
      "lifecycle:\n  attemptDrainTimeout: 1m\nsnapshots:\n  interval: 0\n  everyRecords: 7\n"
      "  keep: 5\nadmin:\n  enabled: false\nauth:\n  adminTokenFiles: [" +
          token.path() + "]\n",
      "nodeId: fs\nobjectStore:\n  type: filesystem\n  path: /srv/objects\n  durability: "
      "processCrashSafe\nlocalStore:\n  path: /srv/local\nlease:\n  failIfHeld: true\n",
  };
  for (const auto& yaml : configs) {
    auto first = load_serve_config_yaml(yaml, "serve.yaml");
    ASSERT_TRUE(first.is_ok()) << first.status().to_string() << "\n" << yaml;
    const std::string described = describe_serve_config(first.value());
    auto again = load_serve_config_yaml(described, "check-output.yaml");
    ASSERT_TRUE(again.is_ok()) << again.status().to_string() << "\n" << described;
    EXPECT_EQ(describe_serve_config(again.value()), described);
    const NodeSettings& a = first.value();
    const NodeSettings& b = again.value();
    expect_same_shared_settings(a, b);
    EXPECT_EQ(a.object_store.type, b.object_store.type);
    EXPECT_EQ(a.object_store.bucket, b.object_store.bucket);
    EXPECT_EQ(a.object_store.prefix, b.object_store.prefix);
    EXPECT_EQ(a.object_store.endpoint, b.object_store.endpoint);
    EXPECT_EQ(a.object_store.region, b.object_store.region);
    EXPECT_EQ(a.object_store.addressing, b.object_store.addressing);
    EXPECT_EQ(a.object_store.credentials_file, b.object_store.credentials_file);
    EXPECT_EQ(a.object_store.credentials_profile, b.object_store.credentials_profile);
    EXPECT_EQ(a.object_store.path, b.object_store.path);
    EXPECT_EQ(a.object_store.durability, b.object_store.durability);
    EXPECT_EQ(a.local_store_path, b.local_store_path);
    EXPECT_EQ(a.held_lease_poll_interval, b.held_lease_poll_interval);
    EXPECT_EQ(a.step_down_hold_off, b.step_down_hold_off);
    EXPECT_EQ(a.lagging_takeover_delay, b.lagging_takeover_delay);
    EXPECT_EQ(a.behind_lag_threshold, b.behind_lag_threshold);
    EXPECT_EQ(a.metrics_listen, b.metrics_listen);
    EXPECT_EQ(a.metrics_type_labels_max, b.metrics_type_labels_max);
    // Never the token or its digest.
    EXPECT_EQ(described.find("serve-secret-token"), std::string::npos) << described;
    for (const auto& digest : a.admin_token_sha256) {
      EXPECT_EQ(described.find(digest), std::string::npos) << described;
    }
  }
}

TEST(ServeConfig, InlineDigestsAreNotShownAndTheCopyIsRefusedNotOpened) {
  const std::string digest(64, 'd');
  auto c = load_serve_config_yaml(
      std::string(kServeS3) + "auth:\n  adminTokenSha256: [" + digest + "]\n", "serve.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const std::string described = describe_serve_config(c.value());
  EXPECT_EQ(described.find(digest), std::string::npos) << described;
  // Read back, the placeholder is refused by its key: a copy never runs
  // without the credential the original had.
  auto again = load_serve_config_yaml(described, "check-output.yaml");
  ASSERT_FALSE(again.is_ok()) << described;
  EXPECT_NE(again.status().message().find("auth.adminTokenSha256"), std::string::npos)
      << again.status().message();
}

}  // namespace
}  // namespace dex

namespace dex {
namespace {

// One reader: a key that local and serve (and dev) both accept gives the same
// setting whichever subcommand reads it.
TEST(NodeSettings, TheKeysLocalAndServeShareGiveTheSameSettings) {
  TokenFile token("shared-secret-token");
  const std::string shared =
      "nodeId: shared-node\napi:\n  listen: 127.0.0.1:9100\nlease:\n  duration: 45s\n"
      "  failIfHeld: true\nstandby:\n  mode: cold\nlifecycle:\n  attemptDrainTimeout: 7s\n"
      "snapshots:\n  interval: 0\n  everyRecords: 123\n  keep: 4\n"
      "values:\n  blobThreshold: 2KiB\n  maxSize: 3MiB\n  blobCacheSize: 0\n"
      "  blobCollectInterval: 5m\n  blobMinAge: 0\nflows:\n  retention: 36h\n"
      "  workerReconnectGrace: 250ms\nadmin:\n  enabled: false\nauth:\n  adminTokenFiles: [" +
      token.path() + "]\n  adminTokenSha256: [" + std::string(64, 'e') + "]\n";
  auto local = load_local_config_yaml(shared + "local:\n  dataDir: /d\n", "local.yaml");
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  auto serve = load_serve_config_yaml(
      shared + "objectStore:\n  type: filesystem\n  path: /o\nlocalStore:\n  path: /l\n",
      "serve.yaml");
  ASSERT_TRUE(serve.is_ok()) << serve.status().to_string();
  NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
  ASSERT_TRUE(apply_dev_override_yaml(shared, "dev.yaml", dev).is_ok());
  for (const NodeSettings* other : {&serve.value(), &dev}) {
    const NodeSettings& a = local.value();
    const NodeSettings& b = *other;
    expect_same_shared_settings(a, b);
    EXPECT_EQ(a.admin_token_sha256_entries, b.admin_token_sha256_entries);
  }
  // And the values are the file's, not a default.
  EXPECT_EQ(local->lease_duration, seconds(45));
  EXPECT_TRUE(local->lease_fail_if_held);
  EXPECT_EQ(local->snapshots.keep, 4u);
  EXPECT_EQ(local->values.max_size_bytes, 3u << 20);
  EXPECT_EQ(local->flows.retention, std::chrono::hours(36));
  EXPECT_FALSE(local->admin_enabled);
  EXPECT_EQ(local->admin_token_sha256.size(), 2u);
  // Only the defaults differ, by subcommand.
  EXPECT_EQ(NodeSettings::defaults(Subcommand::kServe).lease_duration, seconds(10));
  EXPECT_EQ(NodeSettings::defaults(Subcommand::kLocal).lease_duration, seconds(30));
  EXPECT_EQ(NodeSettings::defaults(Subcommand::kServe).listen, "0.0.0.0:8801");
  EXPECT_EQ(NodeSettings::defaults(Subcommand::kLocal).listen, "127.0.0.1:8801");
}

TEST(NodeSettings, EachSubcommandRefusesTheKeysOfTheOthersByTheirPath) {
  auto local =
      load_local_config_yaml("nodeId: n\nlocal:\n  dataDir: /d\nlocalStore:\n  path: /l\n", "l");
  ASSERT_FALSE(local.is_ok());
  EXPECT_NE(local.status().message().find("unknown key 'localStore'"), std::string::npos)
      << local.status().message();
  auto serve = load_serve_config_yaml(std::string(kServeS3) + "local:\n  dataDir: /d\n", "s");
  ASSERT_FALSE(serve.is_ok());
  EXPECT_NE(serve.status().message().find("unknown key 'local'"), std::string::npos)
      << serve.status().message();
  NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
  Status s = apply_dev_override_yaml("standby:\n  stepDownHoldOff: 9s\n", "d", dev);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unknown key 'standby.stepDownHoldOff'"), std::string::npos)
      << s.message();
  s = apply_dev_override_yaml("metrics:\n  listen: 127.0.0.1:9090\n", "d", dev);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unknown key 'metrics'"), std::string::npos) << s.message();
}

// Modes are enums: a word the reader does not know is refused, naming the key
// and the word, never taken as a default.
TEST(NodeSettings, AModeGivenAsAnUnknownWordIsRefusedNamingTheKey) {
  std::vector<BadCase> serve_cases = {
      {std::string(kServeS3) + "standby:\n  mode: Hot\n",
       "serve.yaml: standby.mode must be cold or hot, not 'Hot'"},
      {"nodeId: a\nobjectStore:\n  type: S3\n  bucket: b\nlocalStore:\n  path: /l\n",
       "serve.yaml: objectStore.type must be s3 or filesystem, not 'S3'"},
      {"nodeId: a\nobjectStore:\n  type: s3\n  bucket: b\n  addressing: virtual\n"
       "localStore:\n  path: /l\n",
       "serve.yaml: objectStore.addressing must be path or virtualHost, not 'virtual'"},
      {"nodeId: a\nobjectStore:\n  type: filesystem\n  path: /o\n  durability: fast\n"
       "localStore:\n  path: /l\n",
       "serve.yaml: objectStore.durability must be strict or processCrashSafe, not 'fast'"},
      {"nodeId: a\nobjectStore:\n  type: filesystem\n  path: /o\n  durability: relaxed\n"
       "localStore:\n  path: /l\n",
       "serve.yaml: objectStore.durability must be strict or processCrashSafe, not 'relaxed'"},
  };
  for (const auto& c : serve_cases) {
    auto r = load_serve_config_yaml(c.yaml, "serve.yaml");
    ASSERT_FALSE(r.is_ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.needle << " not in: " << r.status().message();
  }
  NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
  Status s = apply_dev_override_yaml("dev:\n  durabilityMode: Strict\n", "dev.yaml", dev);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(
                "dev.yaml: dev.durabilityMode must be strict, processCrashSafe or relaxed, not "
                "'Strict'"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(dev.durability, Durability::kStrict);
  auto local = load_local_config_yaml("nodeId: n\nlocal:\n  dataDir: /d\n  durabilityMode: fsync\n",
                                      "local.yaml");
  ASSERT_FALSE(local.is_ok());
  EXPECT_NE(local.status().message().find(
                "local.yaml: local.durabilityMode must be strict, processCrashSafe or relaxed, "
                "not 'fsync'"),
            std::string::npos)
      << local.status().message();
  auto warm =
      load_local_config_yaml("nodeId: n\nlocal:\n  dataDir: /d\nstandby:\n  mode: warm\n", "l");
  ASSERT_FALSE(warm.is_ok());
  EXPECT_NE(warm.status().message().find("standby.mode 'warm' is not allowed"), std::string::npos)
      << warm.status().message();
}

}  // namespace
}  // namespace dex

// web.* (docs/dex-web.md, docs/configuration.md): dev serves dex-web on
// 127.0.0.1:8802 by default; local and serve only when web.listen is set.
namespace dex {
namespace {

TEST(WebSettings, DevServesByDefaultLocalAndServeOnlyWhenAsked) {
  const NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
  EXPECT_EQ(dev.web_listen, "127.0.0.1:8802");
  EXPECT_TRUE(dev.web_listen_is_default);
  EXPECT_TRUE(NodeSettings::defaults(Subcommand::kLocal).web_listen.empty());
  auto serve = load_serve_config_yaml(kServeS3, "serve.yaml");
  ASSERT_TRUE(serve.is_ok()) << serve.status().to_string();
  EXPECT_TRUE(serve->web_listen.empty());
  EXPECT_TRUE(serve->web_assets.empty());

  auto on = load_serve_config_yaml(
      std::string(kServeS3) + "web:\n  listen: 0.0.0.0:8802\n  assets: /opt/dex/web\n",
      "serve.yaml");
  ASSERT_TRUE(on.is_ok()) << on.status().to_string();
  EXPECT_EQ(on->web_listen, "0.0.0.0:8802");
  EXPECT_EQ(on->web_assets, "/opt/dex/web");
  EXPECT_FALSE(on->web_listen_is_default);
  // serve --check prints them, and they read back the same.
  auto again = load_serve_config_yaml(describe_serve_config(*on), "described.yaml");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again->web_listen, "0.0.0.0:8802");
  EXPECT_EQ(again->web_assets, "/opt/dex/web");

  auto local = load_local_config_yaml(
      "nodeId: n1\nlocal:\n  dataDir: /tmp/d\nweb:\n  listen: 127.0.0.1:9802\n", "local.yaml");
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  EXPECT_EQ(local->web_listen, "127.0.0.1:9802");

  // A dev override file may move it (no longer the default) or turn it off.
  NodeSettings moved = NodeSettings::defaults(Subcommand::kDev);
  ASSERT_TRUE(apply_dev_override_yaml("web:\n  listen: 127.0.0.1:9902\n", "d", moved).is_ok());
  EXPECT_EQ(moved.web_listen, "127.0.0.1:9902");
  EXPECT_FALSE(moved.web_listen_is_default);
  NodeSettings off = NodeSettings::defaults(Subcommand::kDev);
  ASSERT_TRUE(apply_dev_override_yaml("web:\n  listen: \"\"\n", "d", off).is_ok());
  EXPECT_TRUE(off.web_listen.empty());
}

TEST(WebSettings, ABadOrCollidingAddressIsRefusedNamingTheKey) {
  auto bad =
      load_serve_config_yaml(std::string(kServeS3) + "web:\n  listen: nowhere\n", "serve.yaml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("web.listen"), std::string::npos) << bad.status().message();
  auto same = load_serve_config_yaml(
      std::string(kServeS3) + "api:\n  listen: 0.0.0.0:8801\nweb:\n  listen: 0.0.0.0:8801\n",
      "serve.yaml");
  ASSERT_FALSE(same.is_ok());
  EXPECT_NE(same.status().message().find("web.listen must differ from api.listen"),
            std::string::npos)
      << same.status().message();
  auto unknown =
      load_serve_config_yaml(std::string(kServeS3) + "web:\n  port: 8802\n", "serve.yaml");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("web.port"), std::string::npos);
}

}  // namespace
}  // namespace dex
