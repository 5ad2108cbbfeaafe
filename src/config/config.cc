#include "config/config.h"

#include "common/digest.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace dex {

uint64_t values_message_bytes_max(const ValueSettings& values) {
  return 2 * values.max_size_bytes + (16u << 20);
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

StatusOr<std::string> scalar(const YAML::Node& node, std::string_view key,
                             std::string_view source) {
  if (!node.IsScalar()) {
    return Status::invalid_argument(fmt::format("{}: '{}' must be a single value", source, key));
  }
  return node.as<std::string>();
}

}  // namespace

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

// snapshots.* of any config file (all optional).
Status read_snapshot_settings(const YAML::Node& root, std::string_view source,
                              SnapshotSettings& out) {
  const YAML::Node section = root["snapshots"];
  if (!section) return Status::ok();
  auto bad = [&](std::string msg) {
    return Status::invalid_argument(fmt::format("{}: {}", source, msg));
  };
  SnapshotSettings next = out;
  if (const YAML::Node n = section["interval"]) {
    auto v = scalar(n, "snapshots.interval", source);
    if (!v.is_ok()) return v.status();
    if (v.value() == "0") {
      next.interval = Duration(0);
    } else {
      auto d = parse_duration(v.value());
      if (!d.is_ok()) return bad(fmt::format("snapshots.interval: {}", d.status().message()));
      next.interval = d.value();
    }
  }
  auto number = [&](const char* key, const YAML::Node& n, uint64_t lo,
                    uint64_t hi) -> StatusOr<uint64_t> {
    auto v = scalar(n, key, source);
    if (!v.is_ok()) return v.status();
    uint64_t value = 0;
    const std::string& t = v.value();
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || value < lo || value > hi) {
      return bad(fmt::format("{} must be a whole number from {} to {}, not '{}'", key, lo, hi, t));
    }
    return value;
  };
  if (const YAML::Node n = section["everyRecords"]) {
    auto v = number("snapshots.everyRecords", n, 0, 1'000'000'000'000);
    if (!v.is_ok()) return v.status();
    next.every_records = v.value();
  }
  if (const YAML::Node n = section["keep"]) {
    auto v = number("snapshots.keep", n, 1, kSnapshotsKeepMax);
    if (!v.is_ok()) return v.status();
    next.keep = static_cast<uint32_t>(v.value());
  }
  out = next;
  return Status::ok();
}

// A duration at `key` within lo..hi; "0" is 0 (allowed when lo is 0).
Status parse_duration_in(const std::string& text, const char* key, std::string_view source,
                         Duration lo, Duration hi, Duration& value) {
  Duration d(0);
  if (text != "0") {
    auto parsed = parse_duration(text);
    if (!parsed.is_ok())
      return Status::invalid_argument(
          fmt::format("{}: {}: {}", source, key, parsed.status().message()));
    d = parsed.value();
  }
  if (d < lo || d > hi) {
    return Status::invalid_argument(fmt::format("{}: {} {} is outside {}..{}", source, key, text,
                                                format_duration(lo), format_duration(hi)));
  }
  value = d;
  return Status::ok();
}

// flows.* of any config file (all optional).
Status read_flow_settings(const YAML::Node& root, std::string_view source, FlowSettings& out) {
  const YAML::Node section = root["flows"];
  if (!section) return Status::ok();
  FlowSettings next = out;
  if (const YAML::Node n = section["retention"]) {
    auto v = scalar(n, "flows.retention", source);
    if (!v.is_ok()) return v.status();
    if (auto s = parse_duration_in(v.value(), "flows.retention", source, kFlowRetentionMin,
                                   kFlowRetentionMax, next.retention);
        !s.is_ok())
      return s;
  }
  if (const YAML::Node n = section["workerReconnectGrace"]) {
    auto v = scalar(n, "flows.workerReconnectGrace", source);
    if (!v.is_ok()) return v.status();
    if (auto s = parse_duration_in(v.value(), "flows.workerReconnectGrace", source,
                                   kWorkerReconnectGraceMin, kWorkerReconnectGraceMax,
                                   next.worker_reconnect_grace);
        !s.is_ok())
      return s;
  }
  out = next;
  return Status::ok();
}

// values.* of any config file (all optional), checked together: the maximum
// is at least the threshold.
Status read_value_settings(const YAML::Node& root, std::string_view source, ValueSettings& out) {
  const YAML::Node section = root["values"];
  if (!section) return Status::ok();
  ValueSettings next = out;
  auto size = [&](const char* name, const char* key, uint64_t lo, uint64_t hi,
                  uint64_t& value) -> Status {
    const YAML::Node n = section[name];
    if (!n) return Status::ok();
    auto v = scalar(n, key, source);
    if (!v.is_ok()) return v.status();
    auto bytes = parse_bytes(v.value());
    if (!bytes.is_ok())
      return Status::invalid_argument(
          fmt::format("{}: {}: {}", source, key, bytes.status().message()));
    if (bytes.value() < lo || bytes.value() > hi) {
      return Status::invalid_argument(fmt::format("{}: {} {} is outside {}..{}", source, key,
                                                  v.value(), format_bytes(lo), format_bytes(hi)));
    }
    value = bytes.value();
    return Status::ok();
  };
  if (auto s = size("blobThreshold", "values.blobThreshold", kBlobThresholdBytesMin,
                    kBlobThresholdBytesMax, next.blob_threshold_bytes);
      !s.is_ok())
    return s;
  if (auto s = size("maxSize", "values.maxSize", kBlobThresholdBytesMin, kValueMaxSizeBytesMax,
                    next.max_size_bytes);
      !s.is_ok())
    return s;
  if (auto s = size("blobCacheSize", "values.blobCacheSize", 0, kBlobCacheBytesMax,
                    next.blob_cache_bytes);
      !s.is_ok())
    return s;
  auto duration = [&](const char* name, const char* key, Duration lo, Duration hi,
                      Duration& value) -> Status {
    const YAML::Node n = section[name];
    if (!n) return Status::ok();
    auto v = scalar(n, key, source);
    if (!v.is_ok()) return v.status();
    return parse_duration_in(v.value(), key, source, lo, hi, value);
  };
  if (auto s = duration("blobCollectInterval", "values.blobCollectInterval", Duration(0),
                        kBlobCollectIntervalMax, next.blob_collect_interval);
      !s.is_ok())
    return s;
  if (auto s = duration("blobMinAge", "values.blobMinAge", Duration(0), kBlobMinAgeMax,
                        next.blob_min_age);
      !s.is_ok())
    return s;
  if (next.max_size_bytes < next.blob_threshold_bytes) {
    return Status::invalid_argument(
        fmt::format("{}: values.maxSize ({}) must be at least values.blobThreshold ({})", source,
                    format_bytes(next.max_size_bytes), format_bytes(next.blob_threshold_bytes)));
  }
  out = next;
  return Status::ok();
}

// Which keys a file may carry, and where durability and the data directory live.
struct Schema {
  std::set<std::string> allowed;
  std::string durability_key;
  std::string data_dir_key;  // empty: not settable
  const char* program;
};

// auth.* of any config file; defined below.
Status read_admin_tokens(const YAML::Node& root, std::string_view source,
                         std::vector<std::string>& digests, std::vector<std::string>* files,
                         size_t* inline_digests);

Status apply_yaml(const YAML::Node& root, std::string_view source, const Schema& schema,
                  DevConfig& config) {
  if (auto s = check_keys(root, "", schema.allowed, source); !s.is_ok()) return s;
  DevConfig next = config;  // all or nothing: a bad file changes nothing
  auto read = [&](const YAML::Node& node, std::string_view key) {
    return scalar(node, key, source);
  };
  auto wrap = [&](std::string_view key, const Status& s) {
    return Status::invalid_argument(fmt::format("{}: {}: {}", source, key, s.message()));
  };
  try {
    if (root["nodeId"]) {
      auto v = read(root["nodeId"], "nodeId");
      if (!v.is_ok()) return v.status();
      if (auto s = validate_node_id(v.value()); !s.is_ok()) {
        return Status::invalid_argument(fmt::format("{}: {}", source, s.message()));
      }
      next.node_id = v.value();
    }
    if (root["api"] && root["api"]["listen"]) {
      auto v = read(root["api"]["listen"], "api.listen");
      if (!v.is_ok()) return v.status();
      if (auto s = validate_listen_address(v.value()); !s.is_ok()) return wrap("api.listen", s);
      next.listen = v.value();
    }
    if (root["lease"] && root["lease"]["duration"]) {
      auto v = read(root["lease"]["duration"], "lease.duration");
      if (!v.is_ok()) return v.status();
      auto d = parse_duration(v.value());
      if (!d.is_ok()) return wrap("lease.duration", d.status());
      if (d.value() < kLeaseDurationMin || d.value() > kLeaseDurationMax) {
        return Status::invalid_argument(
            fmt::format("{}: lease.duration {} is outside {}..{}", source, v.value(),
                        format_duration(kLeaseDurationMin), format_duration(kLeaseDurationMax)));
      }
      next.lease_duration = d.value();
    }
    if (root["lease"] && root["lease"]["failIfHeld"]) {
      auto v = read(root["lease"]["failIfHeld"], "lease.failIfHeld");
      if (!v.is_ok()) return v.status();
      if (v.value() == "true") {
        next.lease_fail_if_held = true;
      } else if (v.value() == "false") {
        next.lease_fail_if_held = false;
      } else {
        return Status::invalid_argument(
            fmt::format("{}: lease.failIfHeld must be true or false, not '{}'", source, v.value()));
      }
    }
    // The node at "section.key", if present (without inserting anything).
    auto section_value = [&](const std::string& dotted) -> std::optional<YAML::Node> {
      auto dot = dotted.find('.');
      const YAML::Node section = root[dotted.substr(0, dot)];
      if (!section) return std::nullopt;
      const YAML::Node value = section[dotted.substr(dot + 1)];
      if (!value) return std::nullopt;
      return value;
    };
    if (auto node = section_value(schema.durability_key)) {
      auto v = read(*node, schema.durability_key);
      if (!v.is_ok()) return v.status();
      auto d = parse_durability(v.value());
      if (!d) {
        return Status::invalid_argument(
            fmt::format("{}: {} must be strict, processCrashSafe or relaxed, not '{}'", source,
                        schema.durability_key, v.value()));
      }
      next.durability = *d;
    }
    if (!schema.data_dir_key.empty()) {
      if (auto node = section_value(schema.data_dir_key)) {
        auto v = read(*node, schema.data_dir_key);
        if (!v.is_ok()) return v.status();
        if (v.value().empty()) {
          return Status::invalid_argument(
              fmt::format("{}: {} is empty", source, schema.data_dir_key));
        }
        next.data_dir = v.value();
      }
    }
    if (root["standby"] && root["standby"]["mode"]) {
      auto v = read(root["standby"]["mode"], "standby.mode");
      if (!v.is_ok()) return v.status();
      if (v.value() != "cold") {
        return Status::invalid_argument(
            fmt::format("{}: standby.mode '{}' is not allowed: {} accepts only cold", source,
                        v.value(), schema.program));
      }
    }
    if (auto s = read_snapshot_settings(root, source, next.snapshots); !s.is_ok()) return s;
    if (auto s = read_value_settings(root, source, next.values); !s.is_ok()) return s;
    if (auto s = read_flow_settings(root, source, next.flows); !s.is_ok()) return s;
    if (root["lifecycle"] && root["lifecycle"]["attemptDrainTimeout"]) {
      auto v = read(root["lifecycle"]["attemptDrainTimeout"], "lifecycle.attemptDrainTimeout");
      if (!v.is_ok()) return v.status();
      auto d = parse_duration(v.value());
      if (!d.is_ok()) return wrap("lifecycle.attemptDrainTimeout", d.status());
      next.attempt_drain_timeout = d.value();
    }
    if (root["admin"] && root["admin"]["enabled"]) {
      auto v = read(root["admin"]["enabled"], "admin.enabled");
      if (!v.is_ok()) return v.status();
      if (v.value() != "true" && v.value() != "false") {
        return Status::invalid_argument(
            fmt::format("{}: admin.enabled must be true or false, not '{}'", source, v.value()));
      }
      next.admin_enabled = v.value() == "true";
    }
    if (root["auth"]) {
      // The file's tokens replace any earlier ones: what it lists is what is accepted.
      next.admin_token_sha256.clear();
      if (auto s = read_admin_tokens(root, source, next.admin_token_sha256, nullptr, nullptr);
          !s.is_ok()) {
        return s;
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(fmt::format("{}: {}", source, e.what()));
  }
  config = next;
  return Status::ok();
}

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

const Schema kDevSchema{{"nodeId",
                         "api.listen",
                         "lease.duration",
                         "lease.failIfHeld",
                         "dev.durabilityMode",
                         "standby.mode",
                         "snapshots.interval",
                         "snapshots.everyRecords",
                         "snapshots.keep",
                         "values.blobThreshold",
                         "values.maxSize",
                         "values.blobCacheSize",
                         "values.blobCollectInterval",
                         "values.blobMinAge",
                         "flows.retention",
                         "flows.workerReconnectGrace",
                         "admin.enabled",
                         "auth.adminTokenFiles",
                         "auth.adminTokenSha256",
                         "lifecycle.attemptDrainTimeout"},
                        "dev.durabilityMode",
                        "",
                        "dex-server-zd dev"};
const Schema kLocalSchema{{"nodeId",
                           "api.listen",
                           "local.dataDir",
                           "local.durabilityMode",
                           "lease.duration",
                           "lease.failIfHeld",
                           "standby.mode",
                           "snapshots.interval",
                           "snapshots.everyRecords",
                           "snapshots.keep",
                           "values.blobThreshold",
                           "values.maxSize",
                           "values.blobCacheSize",
                           "values.blobCollectInterval",
                           "values.blobMinAge",
                           "flows.retention",
                           "flows.workerReconnectGrace",
                           "admin.enabled",
                           "auth.adminTokenFiles",
                           "auth.adminTokenSha256",
                           "lifecycle.attemptDrainTimeout"},
                          "local.durabilityMode",
                          "local.dataDir",
                          "dex-server-zd local"};

// Reads a scalar at a dotted path ("a.b.c"), if present.
std::optional<YAML::Node> at_path(const YAML::Node& root, std::string_view dotted) {
  YAML::Node node = YAML::Clone(root);
  size_t start = 0;
  while (true) {
    size_t dot = dotted.find('.', start);
    std::string key(
        dotted.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (!node.IsMap()) return std::nullopt;
    const YAML::Node& cnode = node;
    YAML::Node next = cnode[key];
    if (!next) return std::nullopt;
    node = next;
    if (dot == std::string_view::npos) return node;
    start = dot + 1;
  }
}

// Keys of later releases: refused with a message that says so, not as typos.
const std::map<std::string, std::string>& later_serve_keys() {
  static const std::map<std::string, std::string> keys = {};
  return keys;
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

StatusOr<ServeConfig> load_serve_config_yaml(std::string_view yaml, std::string_view source) {
  auto root = load_yaml(yaml, source);
  if (!root.is_ok()) return root.status();
  if (!root->IsMap()) {
    return Status::invalid_argument(fmt::format("{}: the config must be a YAML mapping", source));
  }
  for (const auto& [key, why] : later_serve_keys()) {
    if (root.value()[key]) {
      return Status::invalid_argument(
          fmt::format("{}: '{}' is not supported by this release: {}", source, key, why));
    }
  }
  static const std::set<std::string> allowed = {"nodeId",
                                                "api.listen",
                                                "objectStore.type",
                                                "objectStore.bucket",
                                                "objectStore.prefix",
                                                "objectStore.endpoint",
                                                "objectStore.region",
                                                "objectStore.addressing",
                                                "objectStore.credentials.file",
                                                "objectStore.credentials.profile",
                                                "objectStore.path",
                                                "objectStore.durability",
                                                "localStore.path",
                                                "lease.duration",
                                                "lease.failIfHeld",
                                                "standby.mode",
                                                "standby.heldLeasePollInterval",
                                                "standby.stepDownHoldOff",
                                                "standby.laggingTakeoverDelay",
                                                "standby.behindLagThreshold",
                                                "metrics.listen",
                                                "lifecycle.attemptDrainTimeout",
                                                "snapshots.interval",
                                                "snapshots.everyRecords",
                                                "snapshots.keep",
                                                "values.blobThreshold",
                                                "values.maxSize",
                                                "values.blobCacheSize",
                                                "values.blobCollectInterval",
                                                "values.blobMinAge",
                                                "flows.retention",
                                                "flows.workerReconnectGrace",
                                                "auth.adminTokenFiles",
                                                "auth.adminTokenSha256",
                                                "admin.enabled"};
  if (auto s = check_keys(root.value(), "", allowed, source); !s.is_ok()) return s;
  ServeConfig c;
  auto text = [&](std::string_view key, std::string& out, bool required) -> Status {
    auto node = at_path(root.value(), key);
    if (!node) {
      return required ? Status::invalid_argument(fmt::format("{}: '{}' is required", source, key))
                      : Status::ok();
    }
    auto v = scalar(*node, key, source);
    if (!v.is_ok()) return v.status();
    out = v.value();
    if (required && out.empty())
      return Status::invalid_argument(fmt::format("{}: '{}' is empty", source, key));
    return Status::ok();
  };
  auto duration = [&](std::string_view key, Duration& out) -> Status {
    std::string v;
    if (auto s = text(key, v, false); !s.is_ok() || v.empty()) return s;
    auto d = parse_duration(v);
    if (!d.is_ok())
      return Status::invalid_argument(fmt::format("{}: {}: {}", source, key, d.status().message()));
    out = d.value();
    return Status::ok();
  };
  auto boolean = [&](std::string_view key, bool& out) -> Status {
    std::string v;
    if (auto s = text(key, v, false); !s.is_ok() || v.empty()) return s;
    if (v != "true" && v != "false") {
      return Status::invalid_argument(
          fmt::format("{}: {} must be true or false, not '{}'", source, key, v));
    }
    out = v == "true";
    return Status::ok();
  };
  std::string local_store, fs_path, durability;
  std::vector<Status> steps;
  try {
    steps = {text("nodeId", c.node_id, true),
             text("api.listen", c.listen, false),
             text("objectStore.type", c.object_store.type, true),
             text("objectStore.bucket", c.object_store.bucket, false),
             text("objectStore.prefix", c.object_store.prefix, false),
             text("objectStore.endpoint", c.object_store.endpoint, false),
             text("objectStore.region", c.object_store.region, false),
             text("objectStore.addressing", c.object_store.addressing, false),
             text("objectStore.credentials.file", c.object_store.credentials_file, false),
             text("objectStore.credentials.profile", c.object_store.credentials_profile, false),
             text("objectStore.path", fs_path, false),
             text("objectStore.durability", durability, false),
             text("localStore.path", local_store, true),
             duration("lease.duration", c.lease_duration),
             boolean("lease.failIfHeld", c.lease_fail_if_held),
             text("standby.mode", c.standby_mode, false),
             duration("standby.heldLeasePollInterval", c.held_lease_poll_interval),
             duration("standby.stepDownHoldOff", c.step_down_hold_off),
             duration("standby.laggingTakeoverDelay", c.lagging_takeover_delay),
             duration("standby.behindLagThreshold", c.behind_lag_threshold),
             text("metrics.listen", c.metrics_listen, false),
             duration("lifecycle.attemptDrainTimeout", c.attempt_drain_timeout),
             read_snapshot_settings(root.value(), source, c.snapshots),
             read_value_settings(root.value(), source, c.values),
             read_flow_settings(root.value(), source, c.flows),
             boolean("admin.enabled", c.admin_enabled),
             read_admin_tokens(root.value(), source, c.admin_token_sha256, &c.admin_token_files,
                               &c.admin_token_sha256_entries)};
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(fmt::format("{}: {}", source, e.what()));
  }
  for (const Status& s : steps) {
    if (!s.is_ok()) return s;
  }
  auto bad = [&](std::string msg) {
    return Status::invalid_argument(fmt::format("{}: {}", source, msg));
  };
  if (auto s = validate_node_id(c.node_id); !s.is_ok()) return bad(s.message());
  if (auto s = validate_listen_address(c.listen); !s.is_ok())
    return bad("api.listen: " + s.message());
  c.local_store_path = local_store;
  if (c.lease_duration < kLeaseDurationMin || c.lease_duration > kLeaseDurationMax) {
    return bad(fmt::format("lease.duration {} is outside {}..{}", format_duration(c.lease_duration),
                           format_duration(kLeaseDurationMin), format_duration(kLeaseDurationMax)));
  }
  if (c.standby_mode != "cold" && c.standby_mode != "hot")
    return bad(fmt::format("standby.mode must be cold or hot, not '{}'", c.standby_mode));
  if (c.standby_mode == "hot") {
    if (c.lease_fail_if_held) {
      return bad(
          "standby.mode hot needs lease.failIfHeld false: a hot standby waits while another "
          "process holds the lease");
    }
    if (c.step_down_hold_off <= c.lagging_takeover_delay + c.held_lease_poll_interval) {
      return bad(fmt::format(
          "standby.stepDownHoldOff ({}) must be longer than standby.laggingTakeoverDelay ({}) "
          "plus standby.heldLeasePollInterval ({}) in hot mode, so that a standby takes over "
          "before the stepped-down process competes again",
          format_duration(c.step_down_hold_off), format_duration(c.lagging_takeover_delay),
          format_duration(c.held_lease_poll_interval)));
    }
  }
  if (c.held_lease_poll_interval > seconds(10)) {
    return bad(fmt::format("standby.heldLeasePollInterval {} is over 10s",
                           format_duration(c.held_lease_poll_interval)));
  }
  if (!c.metrics_listen.empty()) {
    if (auto s = validate_listen_address(c.metrics_listen); !s.is_ok())
      return bad("metrics.listen: " + s.message());
    if (c.metrics_listen == c.listen) return bad("metrics.listen must differ from api.listen");
  }
  auto& os = c.object_store;
  if (os.type == "s3") {
    if (os.bucket.empty()) return bad("objectStore.bucket is required with objectStore.type s3");
    if (!fs_path.empty() || !durability.empty()) {
      return bad(
          "objectStore.path and objectStore.durability belong to objectStore.type filesystem");
    }
    if (os.addressing != "path" && os.addressing != "virtualHost") {
      return bad(fmt::format("objectStore.addressing must be path or virtualHost, not '{}'",
                             os.addressing));
    }
  } else if (os.type == "filesystem") {
    if (fs_path.empty())
      return bad("objectStore.path is required with objectStore.type filesystem");
    if (!os.bucket.empty() || !os.endpoint.empty()) {
      return bad("objectStore.bucket and objectStore.endpoint belong to objectStore.type s3");
    }
    os.path = fs_path;
    if (!durability.empty()) {
      auto d = parse_durability(durability);
      if (!d || *d == Durability::kRelaxed) {
        return bad(fmt::format(
            "objectStore.durability must be strict or processCrashSafe, not '{}'", durability));
      }
      os.durability = *d;
    }
  } else {
    return bad(fmt::format("objectStore.type must be s3 or filesystem, not '{}'", os.type));
  }
  return c;
}

StatusOr<ServeConfig> load_serve_config_file(const std::filesystem::path& file) {
  auto text = read_file(file);
  if (!text.is_ok()) return text.status();
  return load_serve_config_yaml(text.value(), file.string());
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

}  // namespace

std::string describe_serve_config(const ServeConfig& c) {
  const auto& os = c.object_store;
  std::string out =
      "# The effective settings of dex-server-zd serve. This is a config: `serve --config` reads\n"
      "# it back with the same settings. Secrets appear only as the paths of their files.\n";
  out += fmt::format("nodeId: {}\napi:\n  listen: {}\nobjectStore:\n  type: {}\n",
                     yaml_quote(c.node_id), yaml_quote(c.listen), os.type);
  if (os.type == "s3") {
    out +=
        fmt::format("  bucket: {}\n  prefix: {}\n  endpoint: {}\n  region: {}\n  addressing: {}\n",
                    yaml_quote(os.bucket), yaml_quote(os.prefix), yaml_quote(os.endpoint),
                    yaml_quote(os.region), yaml_quote(os.addressing));
    out += os.credentials_file.empty()
               ? std::string(
                     "  # credentials: from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
                     "(/ AWS_SESSION_TOKEN)\n")
               : fmt::format("  credentials:\n    file: {}\n    profile: {}\n",
                             yaml_quote(os.credentials_file), yaml_quote(os.credentials_profile));
  } else {
    out += fmt::format("  path: {}\n  durability: {}\n", yaml_quote(os.path.string()),
                       durability_name(os.durability));
  }
  out += fmt::format(
      "localStore:\n  path: {}\nlease:\n  duration: {}\n  failIfHeld: {}\nstandby:\n  mode: {}\n"
      "  heldLeasePollInterval: {}\n  stepDownHoldOff: {}\n  laggingTakeoverDelay: {}\n"
      "  behindLagThreshold: {}\nmetrics:\n  listen: {}\n"
      "lifecycle:\n  attemptDrainTimeout: {}\nsnapshots:\n  interval: {}\n  everyRecords: {}\n"
      "  keep: {}\n",
      yaml_quote(c.local_store_path.string()), format_duration(c.lease_duration),
      c.lease_fail_if_held, c.standby_mode, format_duration(c.held_lease_poll_interval),
      format_duration(c.step_down_hold_off), format_duration(c.lagging_takeover_delay),
      format_duration(c.behind_lag_threshold), yaml_quote(c.metrics_listen),
      format_duration(c.attempt_drain_timeout),
      c.snapshots.interval == Duration(0) ? std::string("0")
                                          : format_duration(c.snapshots.interval),
      c.snapshots.every_records, c.snapshots.keep);
  out +=
      fmt::format("values:\n  blobThreshold: {}\n  maxSize: {}\n  blobCacheSize: {}\n",
                  format_bytes(c.values.blob_threshold_bytes),
                  format_bytes(c.values.max_size_bytes), format_bytes(c.values.blob_cache_bytes));
  auto zero_or = [](Duration d) {
    return d == Duration(0) ? std::string("0") : format_duration(d);
  };
  out += fmt::format(
      "  blobCollectInterval: {}\n  blobMinAge: {}\nflows:\n  retention: {}\n"
      "  workerReconnectGrace: {}\n",
      zero_or(c.values.blob_collect_interval), zero_or(c.values.blob_min_age),
      format_duration(c.flows.retention), format_duration(c.flows.worker_reconnect_grace));
  out += fmt::format("admin:\n  enabled: {}\n", c.admin_enabled);
  // Never a token or its digest. Digests given inline are replaced by a value
  // that reading back refuses, so a copy of this output cannot silently run
  // without the credential.
  if (c.admin_token_files.empty() && c.admin_token_sha256_entries == 0) {
    out += "# auth: no admin credential: anyone who reaches api.listen can step this node down\n";
    return out;
  }
  out += "auth:\n";
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

Status apply_dev_override_yaml(std::string_view yaml, std::string_view source, DevConfig& config) {
  auto root = load_yaml(yaml, source);
  if (!root.is_ok()) return root.status();
  if (root->IsNull()) return Status::ok();  // an empty file overrides nothing
  return apply_yaml(root.value(), source, kDevSchema, config);
}

StatusOr<DevConfig> load_local_config_yaml(std::string_view yaml, std::string_view source) {
  auto root = load_yaml(yaml, source);
  if (!root.is_ok()) return root.status();
  // Const lookups, and local.dataDir only inside a mapping: operator[] on a
  // scalar throws (a 'local: 5' file did; found by tests/fuzz). A 'local' that
  // is not a mapping is refused by apply_yaml's key check, naming it.
  const YAML::Node& doc = root.value();
  if (doc.IsNull() || !doc.IsMap() || !doc["nodeId"] || !doc["local"] ||
      (doc["local"].IsMap() && !doc["local"]["dataDir"])) {
    return Status::invalid_argument(fmt::format(
        "{}: dex-server-zd local needs nodeId and local.dataDir (see docs/configuration.md)",
        source));
  }
  DevConfig config;
  if (auto s = apply_yaml(root.value(), source, kLocalSchema, config); !s.is_ok()) return s;
  return config;
}

StatusOr<DevConfig> load_local_config_file(const std::filesystem::path& file) {
  auto text = read_file(file);
  if (!text.is_ok()) return text.status();
  return load_local_config_yaml(text.value(), file.string());
}

Status apply_dev_override_file(const std::filesystem::path& file, DevConfig& config) {
  auto text = read_file(file);
  if (!text.is_ok()) return text.status();
  return apply_dev_override_yaml(text.value(), file.string(), config);
}

}  // namespace dex
