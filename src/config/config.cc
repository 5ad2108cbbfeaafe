#include "config/config.h"

#include "common/digest.h"
#include "config/attribute_store_config.h"
#include "config/auth_config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace dex {

uint64_t values_message_bytes_max(const ValueSettings& values) {
  return 2 * values.max_size_bytes + (16u << 20);
}

std::string_view subcommand_name(Subcommand command) {
  switch (command) {
    case Subcommand::kDev:
      return "dev";
    case Subcommand::kLocal:
      return "local";
    case Subcommand::kServe:
      return "serve";
  }
  return "unknown";
}

std::string_view standby_mode_name(StandbyMode mode) {
  switch (mode) {
    case StandbyMode::kCold:
      return "cold";
    case StandbyMode::kHot:
      return "hot";
  }
  return "unknown";
}

std::optional<StandbyMode> parse_standby_mode(std::string_view text) {
  if (text == "cold") return StandbyMode::kCold;
  if (text == "hot") return StandbyMode::kHot;
  return std::nullopt;
}

NodeSettings NodeSettings::defaults(Subcommand command) {
  NodeSettings s;
  if (command != Subcommand::kServe) {
    // One node on local disk (spec: lease 30 s, strict, cold standby only).
    s.node_id = "dev";
    s.data_dir = ".dex-data";
    s.listen = "127.0.0.1:8801";
    s.lease_duration = seconds(30);
  }
  // dev serves dex-web beside its API; local and serve only when web.listen says so.
  if (command == Subcommand::kDev) {
    s.web_listen = "127.0.0.1:8802";
    s.web_listen_is_default = true;
  }
  return s;
}

ObjectStoreSettings data_dir_object_store(const std::filesystem::path& data_dir,
                                          Durability durability) {
  ObjectStoreSettings objects;
  objects.type = ObjectStoreType::kFilesystem;
  objects.path = data_dir / "objects";
  objects.durability = durability;
  return objects;
}

Status check_web_listen(const NodeSettings& settings) {
  const std::string& web = settings.web_listen;
  // Port 0 picks a free port for each, so two of them never collide.
  if (web.empty() || web.ends_with(":0")) return Status::ok();
  if (web == settings.listen) {
    return Status::invalid_argument(
        fmt::format("web.listen must differ from api.listen (both {})", web));
  }
  if (web == settings.metrics_listen) {
    return Status::invalid_argument(
        fmt::format("web.listen must differ from metrics.listen (both {})", web));
  }
  return Status::ok();
}

Status validate_listen_address(std::string_view listen) {
  auto colon = listen.rfind(':');
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument(fmt::format("invalid listen address '{}': {}", listen, why));
  };
  if (colon == std::string_view::npos || colon == 0)
    return bad("use host:port, e.g. 127.0.0.1:8801");
  std::string_view port = listen.substr(colon + 1);
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value > 65535) {
    return bad("the port must be a number from 0 to 65535");
  }
  return Status::ok();
}

bool listen_is_loopback(std::string_view listen) {
  auto colon = listen.rfind(':');
  std::string_view host = listen.substr(0, colon == std::string_view::npos ? 0 : colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8: four decimal octets, the first 127.
  if (!host.starts_with("127.")) return false;
  int octets = 0;
  size_t start = 0;
  while (start <= host.size() && octets < 5) {
    size_t dot = host.find('.', start);
    std::string_view part =
        host.substr(start, dot == std::string_view::npos ? host.npos : dot - start);
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || part.size() > 3 || ec != std::errc() || ptr != part.data() + part.size() ||
        value > 255) {
      return false;
    }
    ++octets;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return octets == 4;
}

std::string plaintext_exposure_warning(std::string_view key, std::string_view listen,
                                       const tls::ServerTlsFiles& tls) {
  if (tls.enabled() || listen.empty() || listen_is_loopback(listen)) return "";
  return fmt::format(
      "{} {} is reachable beyond loopback without TLS: anyone on the network path can read and "
      "change its calls, credentials included. Set {}.tls.certFile and {}.tls.keyFile (and "
      "clientCaFile for client certificates; docs/operations.md, \"TLS\"), or listen on "
      "127.0.0.1",
      key, listen, key.substr(0, key.find('.')), key.substr(0, key.find('.')));
}

std::string admin_exposure_warning(std::string_view listen, bool admin_enabled,
                                   size_t admin_token_count) {
  if (!admin_enabled || admin_token_count > 0 || listen_is_loopback(listen)) return {};
  return fmt::format(
      "AdminService is reachable beyond loopback on {} without an admin credential: anyone who "
      "can reach it can describe this node and step it down. Set auth.adminTokenFiles (or "
      "auth.adminTokenSha256), set admin.enabled: false, or listen on 127.0.0.1",
      listen);
}

namespace {

// Walks a YAML mapping and refuses keys outside `allowed` (dotted paths).
Status check_keys(const YAML::Node& node, const std::string& path,
                  const std::set<std::string>& allowed, std::string_view source) {
  if (!node.IsMap()) {
    return Status::invalid_argument(
        fmt::format("{}: '{}' must be a mapping", source, path.empty() ? "<top>" : path));
  }
  for (const auto& entry : node) {
    // A key that is a list or mapping ("? [a]") has no name; as<string>() would
    // throw (found by tests/fuzz).
    if (!entry.first.IsScalar()) {
      return Status::invalid_argument(
          fmt::format("{}: a key of '{}' is not a name", source, path.empty() ? "<top>" : path));
    }
    std::string key = entry.first.as<std::string>();
    std::string full = path.empty() ? key : path + "." + key;
    bool is_section = false;
    for (const auto& a : allowed) {
      if (a.starts_with(full + ".")) is_section = true;
    }
    if (is_section) {
      if (auto s = check_keys(entry.second, full, allowed, source); !s.is_ok()) return s;
    } else if (!allowed.contains(full)) {
      return Status::invalid_argument(fmt::format("{}: unknown key '{}'", source, full));
    }
  }
  return Status::ok();
}

// Every key of a settings file, with the subcommands that accept it.
constexpr unsigned kDevKey = 1u << static_cast<unsigned>(Subcommand::kDev);
constexpr unsigned kLocalKey = 1u << static_cast<unsigned>(Subcommand::kLocal);
constexpr unsigned kServeKey = 1u << static_cast<unsigned>(Subcommand::kServe);
constexpr unsigned kEveryKey = kDevKey | kLocalKey | kServeKey;
struct KeyRule {
  std::string_view path;
  unsigned commands;
};
constexpr KeyRule kKeys[] = {
    {"nodeId", kEveryKey},
    {"api.listen", kEveryKey},
    {"dev.durabilityMode", kDevKey},
    {"local.dataDir", kLocalKey},
    {"local.durabilityMode", kLocalKey},
    {"objectStore.type", kServeKey},
    {"objectStore.bucket", kServeKey},
    {"objectStore.prefix", kServeKey},
    {"objectStore.endpoint", kServeKey},
    {"objectStore.region", kServeKey},
    {"objectStore.addressing", kServeKey},
    {"objectStore.credentials.file", kServeKey},
    {"objectStore.credentials.profile", kServeKey},
    {"objectStore.caFile", kServeKey},
    {"objectStore.path", kServeKey},
    {"objectStore.durability", kServeKey},
    {"localStore.path", kServeKey},
    {"lease.duration", kEveryKey},
    {"lease.failIfHeld", kEveryKey},
    {"standby.mode", kEveryKey},
    {"standby.heldLeasePollInterval", kServeKey},
    {"standby.stepDownHoldOff", kServeKey},
    {"standby.laggingTakeoverDelay", kServeKey},
    {"standby.behindLagThreshold", kServeKey},
    {"metrics.listen", kServeKey},
    {"metrics.typeLabelsMax", kServeKey},
    {"web.listen", kEveryKey},
    {"web.assets", kEveryKey},
    {"api.healthListen", kEveryKey},
    {"api.tls.certFile", kEveryKey},
    {"api.tls.keyFile", kEveryKey},
    {"api.tls.clientCaFile", kEveryKey},
    {"api.tls.clientAuth", kEveryKey},
    {"web.tls.certFile", kEveryKey},
    {"web.tls.keyFile", kEveryKey},
    {"web.tls.clientCaFile", kEveryKey},
    {"web.tls.clientAuth", kEveryKey},
    {"metrics.tls.certFile", kServeKey},
    {"metrics.tls.keyFile", kServeKey},
    {"metrics.tls.clientCaFile", kServeKey},
    {"metrics.tls.clientAuth", kServeKey},
    {"lifecycle.attemptDrainTimeout", kEveryKey},
    {"snapshots.interval", kEveryKey},
    {"snapshots.everyRecords", kEveryKey},
    {"snapshots.keep", kEveryKey},
    {"values.blobThreshold", kEveryKey},
    {"values.maxSize", kEveryKey},
    {"values.blobCacheSize", kEveryKey},
    {"values.blobCollectInterval", kEveryKey},
    {"values.blobMinAge", kEveryKey},
    {"flows.retention", kEveryKey},
    {"flows.workerReconnectGrace", kEveryKey},
    {"admin.enabled", kEveryKey},
    {"auth.adminTokenFiles", kEveryKey},
    {"auth.adminTokenSha256", kEveryKey},
    // auth.tokens.<role>.* and auth.certificateRoles.<identity>: checked by
    // their reader (auth_config.cc), as the roles and identities are names.
    {"auth.tokens", kEveryKey},
    {"auth.certificateRoles", kEveryKey},
    // attributeStore.*: the stores' own keys are checked by their reader
    // (attribute_store_config.cc), which knows the names are the user's.
    {"attributeStore.stores", kEveryKey},
    {"attributeStore.schemaSyncInterval", kEveryKey},
    {"attributeStore.syncBatchSize", kEveryKey},
    {"attributeStore.syncAttemptTimeout", kEveryKey},
    {"attributeStore.syncRetryPolicy", kEveryKey},
    {"attributeStore.createWatermarkTable", kEveryKey},
};

std::set<std::string> allowed_keys(Subcommand command) {
  std::set<std::string> allowed;
  for (const KeyRule& key : kKeys) {
    if ((key.commands & (1u << static_cast<unsigned>(command))) != 0) {
      allowed.emplace(key.path);
    }
  }
  return allowed;
}

// The bounds of a duration key. "0" reads as zero (every other duration needs
// a unit), then the bounds decide; hi == Duration::max(): no upper bound.
struct DurationRange {
  Duration lo;
  Duration hi;
};
constexpr DurationRange kPositive{Duration(1), Duration::max()};
constexpr DurationRange kZeroOrMore{Duration(0), Duration::max()};

// auth.* of any settings file; defined below.
Status read_admin_tokens(const YAML::Node& root, std::string_view source,
                         std::vector<std::string>& digests, std::vector<std::string>* files,
                         size_t* inline_digests);

// The values of one YAML document, by dotted key, each turned into its type
// the same way for every key of that type; every refusal names the source and
// the key.
class Reader {
 public:
  Reader(const YAML::Node& root, std::string_view source) : root_(root), source_(source) {}

  std::string_view source() const { return source_; }

  Status bad(std::string_view message) const {
    return Status::invalid_argument(fmt::format("{}: {}", source_, message));
  }

  // The node at a dotted key, if the file has it (const lookups only:
  // operator[] on a scalar throws, and a non-const one inserts).
  std::optional<YAML::Node> node(std::string_view dotted) const { return find(root_, dotted); }

  // The text at `key`, if set; a list or mapping there is refused.
  StatusOr<std::optional<std::string>> text(std::string_view key) const {
    auto n = node(key);
    if (!n) return std::optional<std::string>();
    if (!n->IsScalar()) return bad(fmt::format("'{}' must be a single value", key));
    return std::optional<std::string>(n->as<std::string>());
  }

  // True when `key` is set to something other than empty text.
  bool set(std::string_view key) const {
    auto v = text(key);
    return v.is_ok() && v.value() && !v.value()->empty();
  }

  Status string(std::string_view key, std::string& out) const {
    auto v = text(key);
    if (!v.is_ok()) return v.status();
    if (v.value()) out = *v.value();
    return Status::ok();
  }

  // A key without which the subcommand cannot run.
  Status required(std::string_view key, std::string& out) const {
    auto v = text(key);
    if (!v.is_ok()) return v.status();
    if (!v.value()) return bad(fmt::format("'{}' is required", key));
    if (v.value()->empty()) return bad(fmt::format("'{}' is empty", key));
    out = *v.value();
    return Status::ok();
  }

  Status boolean(std::string_view key, bool& out) const {
    auto v = text(key);
    if (!v.is_ok() || !v.value()) return v.status();
    const std::string& t = *v.value();
    if (t != "true" && t != "false") {
      return bad(fmt::format("{} must be true or false, not '{}'", key, t));
    }
    out = t == "true";
    return Status::ok();
  }

  // Every duration of every subcommand is read here.
  Status duration(std::string_view key, DurationRange range, Duration& out) const {
    auto v = text(key);
    if (!v.is_ok() || !v.value()) return v.status();
    const std::string& t = *v.value();
    Duration d(0);
    if (t != "0") {
      auto parsed = parse_duration(t);
      if (!parsed.is_ok()) return bad(fmt::format("{}: {}", key, parsed.status().message()));
      d = parsed.value();
    }
    if (d < range.lo || d > range.hi) {
      if (range.hi == Duration::max()) {
        return bad(fmt::format("{} must be longer than 0, not '{}'", key, t));
      }
      return bad(fmt::format("{} {} is outside {}..{}", key, t, format_duration(range.lo),
                             format_duration(range.hi)));
    }
    out = d;
    return Status::ok();
  }

  // A whole number within lo..hi.
  Status whole(std::string_view key, uint64_t lo, uint64_t hi, uint64_t& out) const {
    auto v = text(key);
    if (!v.is_ok() || !v.value()) return v.status();
    const std::string& t = *v.value();
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || value < lo || value > hi) {
      return bad(fmt::format("{} must be a whole number from {} to {}, not '{}'", key, lo, hi, t));
    }
    out = value;
    return Status::ok();
  }

  // A size ("64MiB") within lo..hi.
  Status size(std::string_view key, uint64_t lo, uint64_t hi, uint64_t& out) const {
    auto v = text(key);
    if (!v.is_ok() || !v.value()) return v.status();
    const std::string& t = *v.value();
    auto bytes = parse_bytes(t);
    if (!bytes.is_ok()) return bad(fmt::format("{}: {}", key, bytes.status().message()));
    if (bytes.value() < lo || bytes.value() > hi) {
      return bad(
          fmt::format("{} {} is outside {}..{}", key, t, format_bytes(lo), format_bytes(hi)));
    }
    out = bytes.value();
    return Status::ok();
  }

  // One of a mode's names: `parse` knows them, `names` lists them for the error.
  template <typename T>
  Status choice(std::string_view key, std::optional<T> (*parse)(std::string_view),
                std::string_view names, T& out) const {
    auto v = text(key);
    if (!v.is_ok() || !v.value()) return v.status();
    std::optional<T> parsed = parse(*v.value());
    if (!parsed) return bad(fmt::format("{} must be {}, not '{}'", key, names, *v.value()));
    out = *parsed;
    return Status::ok();
  }

  Status listen(std::string_view key, std::string& out) const {
    auto v = text(key);
    if (!v.is_ok() || !v.value()) return v.status();
    if (auto s = validate_listen_address(*v.value()); !s.is_ok()) {
      return bad(fmt::format("{}: {}", key, s.message()));
    }
    out = *v.value();
    return Status::ok();
  }

 private:
  static std::optional<YAML::Node> find(const YAML::Node& node, std::string_view dotted) {
    if (!node.IsMap()) return std::nullopt;
    const size_t dot = dotted.find('.');
    const YAML::Node child = node[std::string(dotted.substr(0, dot))];
    if (!child) return std::nullopt;
    if (dot == std::string_view::npos) return child;
    return find(child, dotted.substr(dot + 1));
  }

  const YAML::Node& root_;
  std::string_view source_;
};

// A sequence of reads: the first refusal stops it.
#define DEX_READ(expr)                     \
  do {                                     \
    if (Status s_ = (expr); !s_.is_ok()) { \
      return s_;                           \
    }                                      \
  } while (false)

// <files.key>.*: a listener's TLS files and client certificate policy. A file
// that sets the block replaces the whole block. clientAuth defaults to
// required when clientCaFile is set (a CA given is a CA meant to be enforced)
// and to none otherwise.
Status read_listener_tls(const Reader& in, tls::ServerTlsFiles& files) {
  if (!in.node(files.key)) return Status::ok();
  tls::ServerTlsFiles next = tls::ServerTlsFiles::named(files.key);
  DEX_READ(in.string(files.key + ".certFile", next.cert_file));
  DEX_READ(in.string(files.key + ".keyFile", next.key_file));
  DEX_READ(in.string(files.key + ".clientCaFile", next.client_ca_file));
  next.client_auth =
      next.client_ca_file.empty() ? tls::ClientAuth::kNone : tls::ClientAuth::kRequired;
  DEX_READ(in.choice(files.key + ".clientAuth", tls::parse_client_auth,
                     "none, optional or required", next.client_auth));
  if (Status s = tls::check_server_tls_settings(next); !s.is_ok()) return in.bad(s.message());
  files = std::move(next);
  return Status::ok();
}

// Reads every key `command` accepts into `next`, then the rules that join keys.
Status read_keys(const Reader& in, const YAML::Node& root, Subcommand command, NodeSettings& next) {
  const bool serve = command == Subcommand::kServe;
  // nodeId, api.listen, and where the data lives.
  if (serve) DEX_READ(in.required("nodeId", next.node_id));
  DEX_READ(in.string("nodeId", next.node_id));
  if (in.node("nodeId")) {
    if (auto s = validate_node_id(next.node_id); !s.is_ok()) return in.bad(s.message());
  }
  DEX_READ(in.listen("api.listen", next.listen));
  if (command == Subcommand::kLocal) {
    std::string data_dir = next.data_dir.string();
    DEX_READ(in.string("local.dataDir", data_dir));
    if (data_dir.empty()) return in.bad("local.dataDir is empty");
    next.data_dir = data_dir;
  }
  if (!serve) {
    const std::string key = fmt::format("{}.durabilityMode", subcommand_name(command));
    DEX_READ(
        in.choice(key, parse_durability, "strict, processCrashSafe or relaxed", next.durability));
  }
  ObjectStoreSettings& os = next.object_store;
  if (serve) {
    std::string type;
    DEX_READ(in.required("objectStore.type", type));
    DEX_READ(in.choice("objectStore.type", parse_object_store_type, "s3 or filesystem", os.type));
  }
  DEX_READ(in.string("objectStore.bucket", os.bucket));
  DEX_READ(in.string("objectStore.prefix", os.prefix));
  DEX_READ(in.string("objectStore.endpoint", os.endpoint));
  DEX_READ(in.string("objectStore.region", os.region));
  DEX_READ(in.choice("objectStore.addressing", parse_s3_addressing, "path or virtualHost",
                     os.addressing));
  DEX_READ(in.string("objectStore.credentials.file", os.credentials_file));
  DEX_READ(in.string("objectStore.credentials.profile", os.credentials_profile));
  DEX_READ(in.string("objectStore.caFile", os.ca_file));
  std::string path = os.path.string();
  DEX_READ(in.string("objectStore.path", path));
  os.path = path;
  Durability store_durability = os.durability;
  DEX_READ(in.choice("objectStore.durability", parse_durability, "strict or processCrashSafe",
                     store_durability));
  if (store_durability == Durability::kRelaxed) {
    return in.bad("objectStore.durability must be strict or processCrashSafe, not 'relaxed'");
  }
  os.durability = store_durability;
  if (serve) {
    std::string local_store;
    DEX_READ(in.required("localStore.path", local_store));
    next.local_store_path = local_store;
  }

  // The lease and the standby.
  DEX_READ(
      in.duration("lease.duration", {kLeaseDurationMin, kLeaseDurationMax}, next.lease_duration));
  DEX_READ(in.boolean("lease.failIfHeld", next.lease_fail_if_held));
  if (!serve) {
    // dev and local hold the dev lock: one process, no standby to keep hot.
    auto v = in.text("standby.mode");
    if (!v.is_ok()) return v.status();
    if (v.value() && *v.value() != "cold") {
      return in.bad(
          fmt::format("standby.mode '{}' is not allowed: dex-server-zd {} accepts only "
                      "cold",
                      *v.value(), subcommand_name(command)));
    }
  }
  DEX_READ(in.choice("standby.mode", parse_standby_mode, "cold or hot", next.standby_mode));
  DEX_READ(in.duration("standby.heldLeasePollInterval",
                       {milliseconds(1), kHeldLeasePollIntervalMax},
                       next.held_lease_poll_interval));
  DEX_READ(in.duration("standby.stepDownHoldOff", kPositive, next.step_down_hold_off));
  DEX_READ(in.duration("standby.laggingTakeoverDelay", kPositive, next.lagging_takeover_delay));
  DEX_READ(in.duration("standby.behindLagThreshold", kPositive, next.behind_lag_threshold));
  DEX_READ(in.string("metrics.listen", next.metrics_listen));
  if (!next.metrics_listen.empty()) {
    if (auto s = validate_listen_address(next.metrics_listen); !s.is_ok()) {
      return in.bad("metrics.listen: " + s.message());
    }
  }
  DEX_READ(in.whole("metrics.typeLabelsMax", 0, kMetricsTypeLabelsMaxLimit,
                    next.metrics_type_labels_max));
  DEX_READ(in.duration("lifecycle.attemptDrainTimeout", kPositive, next.attempt_drain_timeout));
  // web.*: dex-web (docs/dex-web.md); an empty web.listen turns it off.
  DEX_READ(in.string("web.listen", next.web_listen));
  if (in.node("web.listen")) next.web_listen_is_default = false;
  if (!next.web_listen.empty()) {
    if (auto s = validate_listen_address(next.web_listen); !s.is_ok()) {
      return in.bad("web.listen: " + s.message());
    }
  }
  std::string web_assets = next.web_assets.string();
  DEX_READ(in.string("web.assets", web_assets));
  next.web_assets = web_assets;
  DEX_READ(in.listen("api.healthListen", next.health_listen));
  DEX_READ(read_listener_tls(in, next.api_tls));
  DEX_READ(read_listener_tls(in, next.web_tls));
  DEX_READ(read_listener_tls(in, next.metrics_tls));

  // snapshots.*, values.*, flows.* (docs/configuration.md).
  SnapshotSettings& snapshots = next.snapshots;
  DEX_READ(in.duration("snapshots.interval", kZeroOrMore, snapshots.interval));
  DEX_READ(in.whole("snapshots.everyRecords", 0, 1'000'000'000'000, snapshots.every_records));
  uint64_t keep = snapshots.keep;
  DEX_READ(in.whole("snapshots.keep", 1, kSnapshotsKeepMax, keep));
  snapshots.keep = static_cast<uint32_t>(keep);
  ValueSettings& values = next.values;
  DEX_READ(in.size("values.blobThreshold", kBlobThresholdBytesMin, kBlobThresholdBytesMax,
                   values.blob_threshold_bytes));
  DEX_READ(in.size("values.maxSize", kBlobThresholdBytesMin, kValueMaxSizeBytesMax,
                   values.max_size_bytes));
  DEX_READ(in.size("values.blobCacheSize", 0, kBlobCacheBytesMax, values.blob_cache_bytes));
  DEX_READ(in.duration("values.blobCollectInterval", {Duration(0), kBlobCollectIntervalMax},
                       values.blob_collect_interval));
  DEX_READ(in.duration("values.blobMinAge", {Duration(0), kBlobMinAgeMax}, values.blob_min_age));
  if (values.max_size_bytes < values.blob_threshold_bytes) {
    return in.bad(fmt::format("values.maxSize ({}) must be at least values.blobThreshold ({})",
                              format_bytes(values.max_size_bytes),
                              format_bytes(values.blob_threshold_bytes)));
  }
  DEX_READ(
      in.duration("flows.retention", {kFlowRetentionMin, kFlowRetentionMax}, next.flows.retention));
  DEX_READ(in.duration("flows.workerReconnectGrace",
                       {kWorkerReconnectGraceMin, kWorkerReconnectGraceMax},
                       next.flows.worker_reconnect_grace));

  // admin.enabled and auth.*: the file's tokens replace any earlier ones (what
  // it lists is what is accepted).
  DEX_READ(in.boolean("admin.enabled", next.admin_enabled));
  if (in.node("auth")) {
    next.admin_token_sha256.clear();
    next.admin_token_files.clear();
    next.admin_token_sha256_entries = 0;
    DEX_READ(read_admin_tokens(root, in.source(), next.admin_token_sha256, &next.admin_token_files,
                               &next.admin_token_sha256_entries));
    DEX_READ(read_access_settings(*in.node("auth"), in.source(), next.access));
  }

  if (auto section = in.node("attributeStore")) {
    DEX_READ(read_attribute_store_settings(*section, in.source(), next.attribute_store));
  }

  // Rules that join keys.
  if (next.standby_mode == StandbyMode::kHot) {
    if (next.lease_fail_if_held) {
      return in.bad(
          "standby.mode hot needs lease.failIfHeld false: a hot standby waits while another "
          "process holds the lease");
    }
    if (next.step_down_hold_off <= next.lagging_takeover_delay + next.held_lease_poll_interval) {
      return in.bad(fmt::format(
          "standby.stepDownHoldOff ({}) must be longer than standby.laggingTakeoverDelay ({}) "
          "plus standby.heldLeasePollInterval ({}) in hot mode, so that a standby takes over "
          "before the stepped-down process competes again",
          format_duration(next.step_down_hold_off), format_duration(next.lagging_takeover_delay),
          format_duration(next.held_lease_poll_interval)));
    }
  }
  if (!next.metrics_listen.empty() && next.metrics_listen == next.listen) {
    return in.bad("metrics.listen must differ from api.listen");
  }
  if (!next.health_listen.empty() &&
      (next.health_listen == next.listen || next.health_listen == next.metrics_listen ||
       next.health_listen == next.web_listen)) {
    return in.bad("api.healthListen must differ from api.listen, metrics.listen and web.listen");
  }
  if (Status s = check_web_listen(next); !s.is_ok()) return in.bad(s.message());
  if (serve && os.type == ObjectStoreType::kS3) {
    if (os.bucket.empty()) return in.bad("objectStore.bucket is required with objectStore.type s3");
    if (in.set("objectStore.path") || in.set("objectStore.durability")) {
      return in.bad(
          "objectStore.path and objectStore.durability belong to objectStore.type filesystem");
    }
  } else if (serve) {
    if (os.path.empty()) {
      return in.bad("objectStore.path is required with objectStore.type filesystem");
    }
    if (in.set("objectStore.bucket") || in.set("objectStore.endpoint")) {
      return in.bad("objectStore.bucket and objectStore.endpoint belong to objectStore.type s3");
    }
  }
  return Status::ok();
}

#undef DEX_READ

StatusOr<YAML::Node> load_yaml(std::string_view yaml, std::string_view source) {
  try {
    return YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(fmt::format("{}: not valid YAML: {}", source, e.what()));
  }
}

StatusOr<std::string> read_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in)
    return Status::invalid_argument(fmt::format("cannot read config file '{}'", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// auth.adminTokenFiles and auth.adminTokenSha256: the accepted admin tokens as
// SHA-256 digests. A token file holds one token (surrounding whitespace is
// trimmed); its content is never logged or printed.
Status read_admin_tokens(const YAML::Node& root, std::string_view source,
                         std::vector<std::string>& digests, std::vector<std::string>* files_out,
                         size_t* inline_digests) {
  const YAML::Node auth = root["auth"];
  if (!auth) return Status::ok();
  auto bad = [&](std::string msg) {
    return Status::invalid_argument(fmt::format("{}: {}", source, msg));
  };
  auto list = [&](const char* key) -> StatusOr<std::vector<std::string>> {
    const YAML::Node node = auth[key];
    std::vector<std::string> out;
    if (!node) return out;
    if (!node.IsSequence()) return bad(fmt::format("auth.{} must be a list", key));
    for (const auto& item : node) {
      if (!item.IsScalar() || item.as<std::string>().empty()) {
        return bad(fmt::format("auth.{} entries must be non-empty strings", key));
      }
      out.push_back(item.as<std::string>());
    }
    return out;
  };
  auto files = list("adminTokenFiles");
  if (!files.is_ok()) return files.status();
  auto hashes = list("adminTokenSha256");
  if (!hashes.is_ok()) return hashes.status();
  // A token file is small and regular (a mounted Secret is a symlink to one);
  // anything else (a device such as /dev/zero, a FIFO) could block or never end.
  constexpr uintmax_t kTokenFileBytesMax = 64 * 1024;
  for (const auto& file : files.value()) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      return bad(fmt::format("auth.adminTokenFiles: cannot read '{}': no such file", file));
    }
    if (!std::filesystem::is_regular_file(file, ec)) {
      return bad(fmt::format("auth.adminTokenFiles: '{}' is not a regular file", file));
    }
    if (std::filesystem::file_size(file, ec) > kTokenFileBytesMax || ec) {
      return bad(
          fmt::format("auth.adminTokenFiles: '{}' is larger than {} bytes (a token file "
                      "holds one token)",
                      file, kTokenFileBytesMax));
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) return bad(fmt::format("auth.adminTokenFiles: cannot read '{}'", file));
    std::stringstream text;
    text << in.rdbuf();
    std::string token = text.str();
    token.erase(token.find_last_not_of(" \t\r\n") + 1);
    token.erase(0, token.find_first_not_of(" \t\r\n"));
    if (token.empty()) return bad(fmt::format("auth.adminTokenFiles: '{}' is empty", file));
    digests.push_back(sha256_hex(token));
  }
  for (std::string hash : hashes.value()) {
    for (char& c : hash) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (hash.size() != 64 || hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return bad("auth.adminTokenSha256 entries must be 64 hex digits (the SHA-256 of a token)");
    }
    digests.push_back(hash);
  }
  if (files_out != nullptr) *files_out = files.value();
  if (inline_digests != nullptr) *inline_digests = hashes.value().size();
  return Status::ok();
}

}  // namespace

Status read_node_settings_yaml(std::string_view yaml, std::string_view source, Subcommand command,
                               NodeSettings& settings) {
  auto root = load_yaml(yaml, source);
  if (!root.is_ok()) return root.status();
  const YAML::Node& doc = root.value();
  switch (command) {
    case Subcommand::kDev:
      if (doc.IsNull()) return Status::ok();  // an empty file overrides nothing
      break;
    case Subcommand::kLocal:
      // Const lookups, and local.dataDir only inside a mapping: operator[] on a
      // scalar throws (a 'local: 5' file did; found by tests/fuzz). A 'local'
      // that is not a mapping is refused by the key check, naming it.
      if (doc.IsNull() || !doc.IsMap() || !doc["nodeId"] || !doc["local"] ||
          (doc["local"].IsMap() && !doc["local"]["dataDir"])) {
        return Status::invalid_argument(fmt::format(
            "{}: dex-server-zd local needs nodeId and local.dataDir (see docs/configuration.md)",
            source));
      }
      break;
    case Subcommand::kServe:
      if (!doc.IsMap()) {
        return Status::invalid_argument(
            fmt::format("{}: the config must be a YAML mapping", source));
      }
      break;
  }
  NodeSettings next = settings;  // all or nothing: a refused file changes nothing
  try {
    if (auto s = check_keys(doc, "", allowed_keys(command), source); !s.is_ok()) return s;
    if (auto s = read_keys(Reader(doc, source), doc, command, next); !s.is_ok()) return s;
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(fmt::format("{}: {}", source, e.what()));
  }
  settings = std::move(next);
  return Status::ok();
}

StatusOr<NodeSettings> load_node_settings_yaml(Subcommand command, std::string_view yaml,
                                               std::string_view source) {
  NodeSettings settings = NodeSettings::defaults(command);
  if (auto s = read_node_settings_yaml(yaml, source, command, settings); !s.is_ok()) return s;
  return settings;
}

StatusOr<NodeSettings> load_node_settings_file(Subcommand command,
                                               const std::filesystem::path& file) {
  auto text = read_file(file);
  if (!text.is_ok()) return text.status();
  return load_node_settings_yaml(command, text.value(), file.string());
}

Status apply_dev_override_yaml(std::string_view yaml, std::string_view source,
                               NodeSettings& settings) {
  return read_node_settings_yaml(yaml, source, Subcommand::kDev, settings);
}

Status apply_dev_override_file(const std::filesystem::path& file, NodeSettings& settings) {
  auto text = read_file(file);
  if (!text.is_ok()) return text.status();
  return apply_dev_override_yaml(text.value(), file.string(), settings);
}

StatusOr<NodeSettings> load_local_config_yaml(std::string_view yaml, std::string_view source) {
  return load_node_settings_yaml(Subcommand::kLocal, yaml, source);
}

StatusOr<NodeSettings> load_local_config_file(const std::filesystem::path& file) {
  return load_node_settings_file(Subcommand::kLocal, file);
}

StatusOr<NodeSettings> load_serve_config_yaml(std::string_view yaml, std::string_view source) {
  return load_node_settings_yaml(Subcommand::kServe, yaml, source);
}

StatusOr<NodeSettings> load_serve_config_file(const std::filesystem::path& file) {
  return load_node_settings_file(Subcommand::kServe, file);
}

namespace {

// A YAML double-quoted scalar: any path or name reads back unchanged.
std::string yaml_quote(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A listener's TLS block, indented under its api: or web: block, as the
// reader reads it back: file paths only, never the files' contents.
std::string listener_tls_yaml(const tls::ServerTlsFiles& t) {
  if (!t.enabled()) return fmt::format("  # tls: off (plaintext)\n");
  std::string out = fmt::format("  tls:\n    certFile: {}\n    keyFile: {}\n",
                                yaml_quote(t.cert_file), yaml_quote(t.key_file));
  if (!t.client_ca_file.empty()) {
    out += fmt::format("    clientCaFile: {}\n", yaml_quote(t.client_ca_file));
  }
  return out + fmt::format("    clientAuth: {}\n", tls::client_auth_name(t.client_auth));
}

}  // namespace

std::string describe_serve_config(const NodeSettings& c) {
  // A duration that may be 0 is written as the reader reads it back.
  auto zero_or = [](Duration d) {
    return d == Duration(0) ? std::string("0") : format_duration(d);
  };
  const auto& os = c.object_store;
  std::string out =
      "# The effective settings of dex-server-zd serve. This is a config: `serve --config` reads\n"
      "# it back with the same settings. Secrets appear only as the paths of their files.\n";
  out += fmt::format("nodeId: {}\napi:\n  listen: {}\n{}{}objectStore:\n  type: {}\n",
                     yaml_quote(c.node_id), yaml_quote(c.listen),
                     c.health_listen.empty()
                         ? ""
                         : fmt::format("  healthListen: {}\n", yaml_quote(c.health_listen)),
                     listener_tls_yaml(c.api_tls), object_store_type_name(os.type));
  if (os.type == ObjectStoreType::kS3) {
    out +=
        fmt::format("  bucket: {}\n  prefix: {}\n  endpoint: {}\n  region: {}\n  addressing: {}\n",
                    yaml_quote(os.bucket), yaml_quote(os.prefix), yaml_quote(os.endpoint),
                    yaml_quote(os.region), yaml_quote(s3_addressing_name(os.addressing)));
    out += os.credentials_file.empty()
               ? std::string(
                     "  # credentials: from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
                     "(/ AWS_SESSION_TOKEN)\n")
               : fmt::format("  credentials:\n    file: {}\n    profile: {}\n",
                             yaml_quote(os.credentials_file), yaml_quote(os.credentials_profile));
    if (!os.ca_file.empty()) out += fmt::format("  caFile: {}\n", yaml_quote(os.ca_file));
  } else {
    out += fmt::format("  path: {}\n  durability: {}\n", yaml_quote(os.path.string()),
                       durability_name(os.durability));
  }
  out += fmt::format(
      "localStore:\n  path: {}\nlease:\n  duration: {}\n  failIfHeld: {}\nstandby:\n  mode: {}\n"
      "  heldLeasePollInterval: {}\n  stepDownHoldOff: {}\n  laggingTakeoverDelay: {}\n"
      "  behindLagThreshold: {}\nmetrics:\n  listen: {}\n  typeLabelsMax: {}\n{}"
      "lifecycle:\n  attemptDrainTimeout: {}\nsnapshots:\n  interval: {}\n  everyRecords: {}\n"
      "  keep: {}\n",
      yaml_quote(c.local_store_path.string()), format_duration(c.lease_duration),
      c.lease_fail_if_held, standby_mode_name(c.standby_mode),
      format_duration(c.held_lease_poll_interval), format_duration(c.step_down_hold_off),
      format_duration(c.lagging_takeover_delay), format_duration(c.behind_lag_threshold),
      yaml_quote(c.metrics_listen), c.metrics_type_labels_max, listener_tls_yaml(c.metrics_tls),
      format_duration(c.attempt_drain_timeout), zero_or(c.snapshots.interval),
      c.snapshots.every_records, c.snapshots.keep);
  out +=
      fmt::format("values:\n  blobThreshold: {}\n  maxSize: {}\n  blobCacheSize: {}\n",
                  format_bytes(c.values.blob_threshold_bytes),
                  format_bytes(c.values.max_size_bytes), format_bytes(c.values.blob_cache_bytes));
  out += fmt::format(
      "  blobCollectInterval: {}\n  blobMinAge: {}\nflows:\n  retention: {}\n"
      "  workerReconnectGrace: {}\n",
      zero_or(c.values.blob_collect_interval), zero_or(c.values.blob_min_age),
      format_duration(c.flows.retention), format_duration(c.flows.worker_reconnect_grace));
  out += describe_attribute_store_settings(c.attribute_store);
  out += fmt::format("web:\n  listen: {}\n  assets: {}\n{}", yaml_quote(c.web_listen),
                     yaml_quote(c.web_assets.string()), listener_tls_yaml(c.web_tls));
  out += fmt::format("admin:\n  enabled: {}\n", c.admin_enabled);
  // Never a token or its digest. Digests given inline are replaced by a value
  // that reading back refuses, so a copy of this output cannot silently run
  // without the credential.
  // What each role has, counted (never a token or a digest).
  out += "# access: " + auth::describe_access(c.access) + "\n";
  const std::string access = describe_access_settings(c.access);
  if (c.admin_token_files.empty() && c.admin_token_sha256_entries == 0 && access.empty()) {
    out += "# auth: no credential: anyone who reaches api.listen can call everything\n";
    return out;
  }
  out += "auth:\n" + access;
  if (!c.admin_token_files.empty()) {
    out += "  adminTokenFiles:\n";
    for (const auto& file : c.admin_token_files) out += fmt::format("    - {}\n", yaml_quote(file));
  }
  if (c.admin_token_sha256_entries > 0) {
    out += fmt::format(
        "  # {} digest(s) not shown: copy them from the config file\n  adminTokenSha256:\n"
        "    - \"(not shown)\"\n",
        c.admin_token_sha256_entries);
  }
  return out;
}

}  // namespace dex
