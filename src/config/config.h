// Settings from YAML files and flags, validated before anything starts: one
// NodeSettings for every subcommand of dex-server-zd, read by one reader.
// Unknown keys are refused with their path, so a typo never silently falls
// back to a default (Restate ignores unknown keys; dex does not).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attrstore/store_settings.h"
#include "auth/access_settings.h"
#include "common/clock.h"
#include "common/durability.h"
#include "common/node_id.h"
#include "common/status.h"
#include "common/units.h"
#include "objstore/store_settings.h"
#include "tls/server_tls.h"

namespace dex {

// snapshots.*: how often the active process snapshots its local store to
// object storage (docs/snapshots.md). A snapshot is taken when `every_records`
// records were applied since the last one, or `interval` passed and something
// was applied. 0 turns a trigger off.
struct SnapshotSettings {
  Duration interval = std::chrono::minutes(10);  // snapshots.interval
  uint64_t every_records = 10'000;               // snapshots.everyRecords
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

// metrics.typeLabelsMax: how many distinct values of each type label
// (flow_type, step_type, rpc_name) get series of their own; later ones count
// under "other" (docs/metrics.md, "Flows, Steps and RPCs by type"). The
// maximum is src/metrics' LabelLimit::kDistinctMaxLimit.
inline constexpr uint64_t kMetricsTypeLabelsMaxDefault = 100;
inline constexpr uint64_t kMetricsTypeLabelsMaxLimit = 10'000;
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

inline constexpr Duration kLeaseDurationMin = seconds(3);
inline constexpr Duration kLeaseDurationMax = std::chrono::hours(1);
inline constexpr Duration kHeldLeasePollIntervalMax = seconds(10);

// The subcommand of dex-server-zd a settings file is for: it selects the
// defaults and the keys a file may carry (docs/configuration.md).
//  - dev: one node on local disk with zero configuration; an override file
//    may set nodeId, api.listen, lease.*, dev.durabilityMode, standby.mode
//    (cold only), snapshots.*, values.*, flows.*, lifecycle.*, admin.enabled
//    and auth.*; --data-dir, --listen and --durability win over it.
//  - local: the same on a configured directory: nodeId and local.dataDir are
//    required, local.durabilityMode instead of dev.durabilityMode.
//  - serve: production shape: nodeId, objectStore.type and localStore.path are
//    required; objectStore.*, standby.* (cold or hot) and metrics.* too.
enum class Subcommand { kDev, kLocal, kServe };
// "dev", "local", "serve".
std::string_view subcommand_name(Subcommand command);

// standby.mode (spec: Hot standby): cold waits idle and replays the log after it
// takes the lease; hot follows the log while it waits (docs/standby.md).
enum class StandbyMode { kCold, kHot };
// "cold", "hot".
std::string_view standby_mode_name(StandbyMode mode);
std::optional<StandbyMode> parse_standby_mode(std::string_view text);

// The settings of one node process, whatever its subcommand: what the YAML
// file gave, over the subcommand's defaults (NodeSettings::defaults). The
// member defaults are the spec's (serve's); the comments name the keys.
struct NodeSettings {
  std::string node_id;                  // nodeId (dev: "dev"; local, serve: required)
  std::string listen = "0.0.0.0:8801";  // api.listen (dev, local: 127.0.0.1:8801)
  // dev and local: the data directory (dev.lock, objects/, local/) and how hard
  // its writes are pushed to disk.
  std::filesystem::path data_dir;               // local.dataDir, --data-dir
  Durability durability = Durability::kStrict;  // dev.durabilityMode, local.durabilityMode
  // serve: the object store (objectStore.*) and the local store's directory.
  ObjectStoreSettings object_store;
  std::filesystem::path local_store_path;         // localStore.path (required)
  Duration lease_duration = seconds(10);          // lease.duration (dev, local: 30s)
  bool lease_fail_if_held = false;                // lease.failIfHeld
  StandbyMode standby_mode = StandbyMode::kCold;  // standby.mode (dev, local: cold only)
  // standby.* (serve; spec: Hot standby). heldLeasePollInterval,
  // laggingTakeoverDelay and behindLagThreshold apply in hot mode only.
  Duration held_lease_poll_interval = milliseconds(250);  // standby.heldLeasePollInterval
  Duration step_down_hold_off = seconds(5);               // standby.stepDownHoldOff
  Duration lagging_takeover_delay = milliseconds(1500);   // standby.laggingTakeoverDelay
  Duration behind_lag_threshold = seconds(10);            // standby.behindLagThreshold
  std::string metrics_listen;  // metrics.listen: host:port of /metrics; empty: no endpoint
  // web.listen: host:port of dex-web (docs/dex-web.md); empty: not served
  // (dev: 127.0.0.1:8802, --web-listen, --no-web). web.assets: the app's built
  // files; empty: <directory of the binary>/../share/dex-web (--web-assets).
  std::string web_listen;
  std::filesystem::path web_assets;
  // api.tls.* and web.tls.*: each listener's certificate, key and client CA
  // (docs/configuration.md, "TLS"); no certFile: plaintext. The reader checks
  // how the keys combine; the files are read and checked at startup and by
  // `serve --check` (tls::load_server_tls), and reloaded when they change.
  tls::ServerTlsFiles api_tls = tls::ServerTlsFiles::named("api.tls");
  tls::ServerTlsFiles web_tls = tls::ServerTlsFiles::named("web.tls");
  tls::ServerTlsFiles metrics_tls = tls::ServerTlsFiles::named("metrics.tls");  // serve only
  // api.healthListen: host:port of a plaintext listener that serves only
  // grpc.health.v1.Health, for probes that cannot speak TLS; empty: none.
  std::string health_listen;
  // True while web_listen is dev's default, not asked for by a flag or a
  // file: if that port is in use (another dev process), dev runs without
  // dex-web and warns instead of refusing to start (docs/dex-web.md).
  bool web_listen_is_default = false;
  uint64_t metrics_type_labels_max = kMetricsTypeLabelsMaxDefault;  // metrics.typeLabelsMax
  // lifecycle.attemptDrainTimeout: how long a step down or SIGTERM/SIGINT let
  // running attempts finish.
  Duration attempt_drain_timeout = seconds(30);
  // attributeStore.* (docs/attribute-store.md): the tables synced Attributes
  // go to. A store's DSN is read here (dsn, dsnFile or dsnEnv) and never shown.
  attrstore::AttributeStoreSettings attribute_store;
  SnapshotSettings snapshots;  // snapshots.*
  ValueSettings values;        // values.*
  FlowSettings flows;          // flows.*
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
  // auth.*: every credential by role (auth.tokens, auth.certificateRoles, and
  // the admin keys above as the admin role; docs/configuration.md, "auth"),
  // opened at startup by auth::TokenStore.
  auth::AccessSettings access;

  // What `command` runs with when its file sets nothing.
  static NodeSettings defaults(Subcommand command);
};

// The one reader of settings files: applies YAML text to `settings`, accepting
// the keys of `command` only (an unknown key is refused with its path), each
// value checked the same way whatever the subcommand. All or nothing: a
// refused file changes nothing. `source` names the text in errors. dev: an
// empty text sets nothing; local and serve: their required keys must be set.
Status read_node_settings_yaml(std::string_view yaml, std::string_view source, Subcommand command,
                               NodeSettings& settings);
// NodeSettings::defaults(command) with the file or text read over them.
StatusOr<NodeSettings> load_node_settings_yaml(Subcommand command, std::string_view yaml,
                                               std::string_view source);
StatusOr<NodeSettings> load_node_settings_file(Subcommand command,
                                               const std::filesystem::path& file);

// The same, by subcommand. `dex-server-zd dev --config FILE` applies FILE over
// `settings` (its flags then win over it).
Status apply_dev_override_file(const std::filesystem::path& file, NodeSettings& settings);
Status apply_dev_override_yaml(std::string_view yaml, std::string_view source,
                               NodeSettings& settings);
// `dex-server-zd local --config FILE`.
StatusOr<NodeSettings> load_local_config_file(const std::filesystem::path& file);
StatusOr<NodeSettings> load_local_config_yaml(std::string_view yaml, std::string_view source);
// `dex-server-zd serve --config FILE`: production settings (docs/configuration.md).
StatusOr<NodeSettings> load_serve_config_file(const std::filesystem::path& file);
StatusOr<NodeSettings> load_serve_config_yaml(std::string_view yaml, std::string_view source);

// The object store of a dev or local data directory: <data-dir>/objects, a
// filesystem store with the data directory's durability.
ObjectStoreSettings data_dir_object_store(const std::filesystem::path& data_dir,
                                          Durability durability);

// "host:port" with a port in 0..65535 (0: any free port).
Status validate_listen_address(std::string_view listen);

// web.listen against the process's other listen addresses (api.listen,
// metrics.listen): InvalidArgument naming both when it equals one. Empty
// (dex-web off) and port 0 always pass.
Status check_web_listen(const NodeSettings& settings);

// True when the host of a valid listen address is loopback only: localhost,
// 127.0.0.0/8 or ::1. 0.0.0.0, :: and every other host are reachable beyond.
bool listen_is_loopback(std::string_view listen);

// The startup warning when AdminService is served beyond loopback without an
// admin credential (anyone who reaches `listen` can step the node down);
// empty when there is nothing to warn about.
std::string admin_exposure_warning(std::string_view listen, bool admin_enabled,
                                   size_t admin_token_count);

// The startup warning when `listen` (api.listen, web.listen, under `key`) is
// reachable beyond loopback without TLS: its traffic, tokens included, can be
// read and changed on the way. Empty when there is nothing to warn about.
std::string plaintext_exposure_warning(std::string_view key, std::string_view listen,
                                       const tls::ServerTlsFiles& tls);

// The effective settings of `serve` as a YAML document that load_serve_config_yaml
// accepts again with the same settings, for `serve --check`. No secrets: the S3
// credentials and admin tokens appear as file paths, and auth.adminTokenSha256
// digests are replaced by a placeholder that is refused when read back (so a
// copy never silently drops the credential).
std::string describe_serve_config(const NodeSettings& settings);

}  // namespace dex
