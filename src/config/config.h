// Settings from YAML files and flags, validated before anything starts.
// Unknown keys are refused with their path, so a typo never silently falls
// back to a default (Restate ignores unknown keys; dex does not).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/durability.h"
#include "common/node_id.h"
#include "common/status.h"
#include "common/units.h"

namespace dex {

// snapshots.*: how often the active process snapshots its local store to
// object storage (docs/snapshots.md). A snapshot is taken when `every_records`
// records were applied since the last one, or `interval` passed and something
// was applied. 0 turns a trigger off.
struct SnapshotSettings {
  Duration interval = std::chrono::minutes(10);  // snapshots.interval
  uint64_t every_records = 100'000;              // snapshots.everyRecords
  uint32_t keep = 2;                             // snapshots.keep (1..100)
};
inline constexpr uint32_t kSnapshotsKeepMax = 100;

// values.*: large values (docs/configuration.md; docs/engine.md, "Large
// values"). An input, output, Channel message, locals or Attribute value
// longer than the blob threshold is kept as a blob in the node's object store
// and its log record references it; one longer than the maximum is refused.
struct ValueSettings {
  uint64_t blob_threshold_bytes = 256u << 10;  // values.blobThreshold
  uint64_t max_size_bytes = 64u << 20;         // values.maxSize
  uint64_t blob_cache_bytes = 64u << 20;       // values.blobCacheSize (0: no cache)
  // The active process collects blobs no run references this often (0: never),
  // each at least blob_min_age old (docs/engine.md, "Large values").
  Duration blob_collect_interval = std::chrono::hours(1);  // values.blobCollectInterval
  Duration blob_min_age = std::chrono::hours(1);           // values.blobMinAge
};
inline constexpr Duration kBlobCollectIntervalMax = std::chrono::hours(24 * 7);
inline constexpr Duration kBlobMinAgeMax = std::chrono::hours(24 * 30);

// flows.*: a closed run (with its history, Attributes and messages) is deleted
// this long after it closed for good (docs/flow-rules.md, "Retention"); a run
// keeps the retention it started with.
struct FlowSettings {
  Duration retention = std::chrono::hours(24 * 7);  // flows.retention
  // How long the attempts of a Worker whose stream ended wait for it to come
  // back under its ID before they end NOT_COMPLETED and are retried
  // (docs/engine.md, "Workers that vanish").
  Duration worker_reconnect_grace = std::chrono::seconds(5);  // flows.workerReconnectGrace
};
inline constexpr Duration kWorkerReconnectGraceMin = std::chrono::milliseconds(100);
inline constexpr Duration kWorkerReconnectGraceMax = std::chrono::minutes(10);
inline constexpr Duration kFlowRetentionMin = std::chrono::seconds(1);
inline constexpr Duration kFlowRetentionMax = std::chrono::hours(24 * 3650);
// The threshold's bounds: the upper one is the flow rules' limit on a value
// held in a record (flow::kPayloadBytesMax).
inline constexpr uint64_t kBlobThresholdBytesMin = 1u << 10;
inline constexpr uint64_t kBlobThresholdBytesMax = 1u << 20;
inline constexpr uint64_t kValueMaxSizeBytesMax = 512u << 20;
inline constexpr uint64_t kBlobCacheBytesMax = 16ull << 30;
// The largest gRPC message the server takes (a request, a Worker result) and
// the budget of one task or answer with its values in place: two values at
// the maximum plus 16 MiB for the rest.
uint64_t values_message_bytes_max(const ValueSettings& values);

// One node on local disk: what `dex-server-zd dev` and `local` run with
// (spec: lease 30 s, strict, cold standby only).
struct DevConfig {
  std::string node_id = "dev";
  std::filesystem::path data_dir = ".dex-data";
  std::string listen = "127.0.0.1:8801";  // api.listen
  Duration lease_duration = seconds(30);
  bool lease_fail_if_held = false;
  Durability durability = Durability::kStrict;
  SnapshotSettings snapshots;
  ValueSettings values;
  FlowSettings flows;
  // lifecycle.attemptDrainTimeout: how long SIGTERM/SIGINT let running attempts finish.
  Duration attempt_drain_timeout = seconds(30);
  // admin.enabled and auth.*: the same keys and meaning as in ServeConfig.
  bool admin_enabled = true;
  std::vector<std::string> admin_token_sha256;
};

inline constexpr Duration kLeaseDurationMin = seconds(3);
inline constexpr Duration kLeaseDurationMax = std::chrono::hours(1);

// Applies a dev override file on top of `config`. Accepted keys: nodeId,
// api.listen, lease.duration, lease.failIfHeld, dev.durabilityMode,
// standby.mode (cold only), snapshots.*, values.*, flows.retention, lifecycle.attemptDrainTimeout,
// admin.enabled, auth.adminTokenFiles, auth.adminTokenSha256. A bad file
// changes nothing.
Status apply_dev_override_file(const std::filesystem::path& file, DevConfig& config);
// The same from YAML text; `source` names it in errors.
Status apply_dev_override_yaml(std::string_view yaml, std::string_view source, DevConfig& config);

// `dex-server-zd local --config FILE`: nodeId and local.dataDir are required;
// api.listen, local.durabilityMode, lease.duration, lease.failIfHeld,
// standby.mode (cold only), snapshots.*, values.*, flows.retention, lifecycle.attemptDrainTimeout,
// admin.enabled and auth.* are optional,
// with the dev defaults.
StatusOr<DevConfig> load_local_config_file(const std::filesystem::path& file);
StatusOr<DevConfig> load_local_config_yaml(std::string_view yaml, std::string_view source);

// "host:port" with a port in 0..65535 (0: any free port).
Status validate_listen_address(std::string_view listen);

// True when the host of a valid listen address is loopback only: localhost,
// 127.0.0.0/8 or ::1. 0.0.0.0, :: and every other host are reachable beyond.
bool listen_is_loopback(std::string_view listen);

// The startup warning when AdminService is served beyond loopback without an
// admin credential (anyone who reaches `listen` can step the node down);
// empty when there is nothing to warn about.
std::string admin_exposure_warning(std::string_view listen, bool admin_enabled,
                                   size_t admin_token_count);

// `dex-server-zd serve --config FILE`: production settings (docs/configuration.md).
struct ServeConfig {
  std::string node_id;                  // nodeId (required)
  std::string listen = "0.0.0.0:8801";  // api.listen
  struct ObjectStore {
    std::string type;                      // objectStore.type: "s3" or "filesystem" (required)
    std::string bucket, prefix, endpoint;  // s3
    std::string region = "us-east-1";
    std::string addressing = "path";  // "path" or "virtualHost"
    std::string credentials_file;     // empty: AWS_* environment variables
    std::string credentials_profile = "default";
    std::filesystem::path path;  // filesystem
    Durability durability = Durability::kStrict;
  } object_store;
  std::filesystem::path local_store_path;  // localStore.path (required)
  Duration lease_duration = seconds(10);   // lease.duration
  bool lease_fail_if_held = false;         // lease.failIfHeld
  std::string standby_mode = "cold";       // standby.mode: cold or hot
  // standby.* (spec: Hot standby). heldLeasePollInterval, laggingTakeoverDelay
  // and behindLagThreshold apply in hot mode only.
  Duration held_lease_poll_interval = milliseconds(250);  // standby.heldLeasePollInterval
  Duration step_down_hold_off = seconds(5);               // standby.stepDownHoldOff
  Duration lagging_takeover_delay = milliseconds(1500);   // standby.laggingTakeoverDelay
  Duration behind_lag_threshold = seconds(10);            // standby.behindLagThreshold
  std::string metrics_listen;  // metrics.listen: host:port of /metrics; empty: no endpoint
  Duration attempt_drain_timeout = seconds(30);  // lifecycle.attemptDrainTimeout
  SnapshotSettings snapshots;                    // snapshots.*
  ValueSettings values;                          // values.*
  FlowSettings flows;                            // flows.*
  // admin.enabled: false removes dex.AdminService (calls answer UNIMPLEMENTED).
  bool admin_enabled = true;
  // auth.adminTokenFiles / auth.adminTokenSha256: SHA-256 (hex) of every accepted
  // admin token. Empty: admin calls need no credential (the server warns when
  // api.listen is beyond loopback).
  std::vector<std::string> admin_token_sha256;
  // Where those came from, for `serve --check`: the token files as written, and
  // how many digests auth.adminTokenSha256 listed.
  std::vector<std::string> admin_token_files;
  size_t admin_token_sha256_entries = 0;
};

StatusOr<ServeConfig> load_serve_config_file(const std::filesystem::path& file);
StatusOr<ServeConfig> load_serve_config_yaml(std::string_view yaml, std::string_view source);
// The effective settings as a YAML document that load_serve_config_yaml accepts
// again with the same settings, for `serve --check`. No secrets: the S3
// credentials and admin tokens appear as file paths, and auth.adminTokenSha256
// digests are replaced by a placeholder that is refused when read back (so a
// copy never silently drops the credential).
std::string describe_serve_config(const ServeConfig& config);

}  // namespace dex
