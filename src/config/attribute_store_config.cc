#include "config/attribute_store_config.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/units.h"

namespace dex {

namespace {

constexpr size_t kStoreNameMax = 64;
constexpr size_t kStoresMax = 16;
constexpr size_t kDsnFileBytesMax = 64 * 1024;
constexpr uint64_t kSyncBatchSizeMax = 10'000;
// What describe prints for an inline DSN; reading it back is refused, so a
// copy of `serve --check` output never runs without the real DSN.
constexpr std::string_view kDsnNotShown = "(not shown)";

Status bad(std::string_view source, const std::string& message) {
  return Status::invalid_argument(fmt::format("{}: {}", source, message));
}

// A scalar's text; a list or mapping is refused naming `key`.
StatusOr<std::string> scalar(const YAML::Node& node, std::string_view source,
                             std::string_view key) {
  if (!node.IsScalar()) return bad(source, fmt::format("'{}' must be a single value", key));
  return node.as<std::string>();
}

Status check_store_name(std::string_view name, std::string_view source) {
  bool ok = !name.empty() && name.size() <= kStoreNameMax;
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
  }
  if (!ok) {
    return bad(source, fmt::format("attributeStore.stores: '{}' is not a store name (1 to {} "
                                   "letters, digits, '_', '-' or '.')",
                                   name, kStoreNameMax));
  }
  return Status::ok();
}

// The DSN from exactly one of dsn, dsnFile and dsnEnv. Errors never hold it.
StatusOr<std::string> read_dsn(const YAML::Node& store, std::string_view source,
                               const std::string& where, attrstore::StoreSettings& out) {
  int given = 0;
  for (const char* key : {"dsn", "dsnFile", "dsnEnv"}) given += store[key] ? 1 : 0;
  if (given != 1)
    return bad(source, fmt::format("{} needs exactly one of dsn, dsnFile and dsnEnv", where));
  std::string dsn;
  for (const char* key : {"dsn", "dsnFile", "dsnEnv"}) {
    if (!store[key]) continue;
    auto text = scalar(store[key], source, where + "." + key);
    if (!text.is_ok()) return text.status();
    if (text->empty()) return bad(source, fmt::format("{}.{} is empty", where, key));
    if (std::string_view(key) == "dsn") {
      if (*text == kDsnNotShown)
        return bad(source, fmt::format("{}.dsn is the placeholder that serve --check prints: copy "
                                       "the DSN from the original config",
                                       where));
      dsn = *text;
    } else if (std::string_view(key) == "dsnFile") {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(*text, ec))
        return bad(source, fmt::format("{}.dsnFile: '{}' is not a readable file", where, *text));
      if (std::filesystem::file_size(*text, ec) > kDsnFileBytesMax)
        return bad(source, fmt::format("{}.dsnFile: '{}' is larger than {} bytes", where, *text,
                                       kDsnFileBytesMax));
      std::ifstream in(*text);
      std::stringstream all;
      all << in.rdbuf();
      if (!in) return bad(source, fmt::format("{}.dsnFile: cannot read '{}'", where, *text));
      dsn = all.str();
      out.dsn_file = *text;
      while (!dsn.empty() && (dsn.back() == '\n' || dsn.back() == '\r' || dsn.back() == ' '))
        dsn.pop_back();
      if (dsn.empty()) return bad(source, fmt::format("{}.dsnFile: '{}' is empty", where, *text));
    } else {
      const char* value = std::getenv(text->c_str());
      if (value == nullptr || *value == '\0')
        return bad(source,
                   fmt::format("{}.dsnEnv: the environment variable {} is not set", where, *text));
      dsn = value;
      out.dsn_env = *text;
    }
  }
  return dsn;
}

StatusOr<attrstore::StoreSettings> read_store(const std::string& name, const YAML::Node& store,
                                              std::string_view source) {
  const std::string where = "attributeStore.stores." + name;
  if (!store.IsMap()) return bad(source, fmt::format("'{}' must be a mapping", where));
  static const std::set<std::string> kKeys = {"type",   "dsn",       "dsnFile",
                                              "dsnEnv", "tableName", "deleteRows"};
  for (const auto& entry : store) {
    if (!entry.first.IsScalar())
      return bad(source, fmt::format("a key of '{}' is not a name", where));
    const std::string key = entry.first.as<std::string>();
    if (!kKeys.contains(key)) return bad(source, fmt::format("unknown key '{}.{}'", where, key));
  }
  attrstore::StoreSettings out;
  out.name = name;
  if (!store["type"]) return bad(source, fmt::format("'{}.type' is required", where));
  auto type = scalar(store["type"], source, where + ".type");
  if (!type.is_ok()) return type.status();
  auto parsed = attrstore::parse_store_type(*type);
  if (!parsed)
    return bad(source, fmt::format("{}.type must be postgres or mysql, not '{}'", where, *type));
  out.type = *parsed;
  auto dsn = read_dsn(store, source, where, out);
  if (!dsn.is_ok()) return dsn.status();
  out.dsn = std::move(dsn.value());
  if (!store["tableName"]) return bad(source, fmt::format("'{}.tableName' is required", where));
  auto table = scalar(store["tableName"], source, where + ".tableName");
  if (!table.is_ok()) return table.status();
  if (table->empty()) return bad(source, fmt::format("{}.tableName is empty", where));
  out.table_name = *table;
  if (store["deleteRows"]) {
    auto flag = scalar(store["deleteRows"], source, where + ".deleteRows");
    if (!flag.is_ok()) return flag.status();
    if (*flag != "true" && *flag != "false")
      return bad(source, fmt::format("{}.deleteRows must be true or false", where));
    out.delete_rows = *flag == "true";
  }
  return out;
}

// `prefix` + `key` names the key in errors.
Status read_duration(const YAML::Node& section, std::string_view prefix, std::string_view key,
                     std::string_view source, Duration& out) {
  const YAML::Node node = section[std::string(key)];
  if (!node) return Status::ok();
  const std::string where = fmt::format("{}{}", prefix, key);
  auto text = scalar(node, source, where);
  if (!text.is_ok()) return text.status();
  auto d = parse_duration(*text);
  if (!d.is_ok()) return bad(source, fmt::format("{}: {}", where, d.status().message()));
  if (*d <= Duration(0)) return bad(source, fmt::format("{} must be longer than 0", where));
  out = *d;
  return Status::ok();
}

Status read_retry(const YAML::Node& retry, std::string_view source,
                  attrstore::SyncRetryPolicy& out) {
  if (!retry.IsMap()) return bad(source, "'attributeStore.syncRetryPolicy' must be a mapping");
  for (const auto& entry : retry) {
    const std::string key = entry.first.IsScalar() ? entry.first.as<std::string>() : "";
    if (key == "maximumAttempts" || key == "totalDuration") {
      return bad(source,
                 fmt::format("attributeStore.syncRetryPolicy.{}: dex never gives up on a batch "
                             "(it would skip Attribute writes); retries last until the database "
                             "takes it. Remove the key",
                             key));
    }
    if (key != "initialInterval" && key != "maximumInterval" && key != "backoffCoefficient")
      return bad(source, fmt::format("unknown key 'attributeStore.syncRetryPolicy.{}'", key));
  }
  constexpr std::string_view kRetry = "attributeStore.syncRetryPolicy.";
  if (auto s = read_duration(retry, kRetry, "initialInterval", source, out.initial_interval);
      !s.is_ok())
    return s;
  if (auto s = read_duration(retry, kRetry, "maximumInterval", source, out.maximum_interval);
      !s.is_ok())
    return s;
  if (retry["backoffCoefficient"]) {
    auto text = scalar(retry["backoffCoefficient"], source,
                       "attributeStore.syncRetryPolicy.backoffCoefficient");
    if (!text.is_ok()) return text.status();
    char* end = nullptr;
    const double c = std::strtod(text->c_str(), &end);
    if (text->empty() || *end != '\0' || !(c >= 1.0 && c <= 100.0))
      return bad(source, fmt::format("attributeStore.syncRetryPolicy.backoffCoefficient must be "
                                     "a number from 1 to 100, not '{}'",
                                     *text));
    out.backoff_coefficient = c;
  }
  if (out.maximum_interval < out.initial_interval)
    return bad(source,
               "attributeStore.syncRetryPolicy.maximumInterval must be at least its "
               "initialInterval");
  return Status::ok();
}

// A YAML double-quoted scalar.
std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

Status read_attribute_store_settings(const YAML::Node& section, std::string_view source,
                                     attrstore::AttributeStoreSettings& out) {
  if (!section.IsMap()) return bad(source, "'attributeStore' must be a mapping");
  attrstore::AttributeStoreSettings next = out;
  if (const YAML::Node stores = section["stores"]) {
    if (!stores.IsMap()) return bad(source, "'attributeStore.stores' must be a mapping of names");
    if (stores.size() > kStoresMax)
      return bad(source,
                 fmt::format("attributeStore.stores lists more than {} stores", kStoresMax));
    next.stores.clear();
    for (const auto& entry : stores) {  // bounded by kStoresMax
      if (!entry.first.IsScalar())
        return bad(source, "a key of 'attributeStore.stores' is not a name");
      const std::string name = entry.first.as<std::string>();
      if (auto s = check_store_name(name, source); !s.is_ok()) return s;
      auto store = read_store(name, entry.second, source);
      if (!store.is_ok()) return store.status();
      next.stores.push_back(std::move(store.value()));
    }
  }
  if (auto s = read_duration(section, "attributeStore.", "schemaSyncInterval", source,
                             next.schema_sync_interval);
      !s.is_ok())
    return s;
  if (auto s = read_duration(section, "attributeStore.", "syncAttemptTimeout", source,
                             next.sync_attempt_timeout);
      !s.is_ok())
    return s;
  if (const YAML::Node n = section["syncBatchSize"]) {
    auto text = scalar(n, source, "attributeStore.syncBatchSize");
    if (!text.is_ok()) return text.status();
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (text->empty() || ec != std::errc() || ptr != text->data() + text->size() || v < 1 ||
        v > kSyncBatchSizeMax)
      return bad(source, fmt::format("attributeStore.syncBatchSize must be a whole number from 1 "
                                     "to {}, not '{}'",
                                     kSyncBatchSizeMax, *text));
    next.sync_batch_size = static_cast<uint32_t>(v);
  }
  if (const YAML::Node n = section["createWatermarkTable"]) {
    auto text = scalar(n, source, "attributeStore.createWatermarkTable");
    if (!text.is_ok()) return text.status();
    if (*text != "true" && *text != "false")
      return bad(source, "attributeStore.createWatermarkTable must be true or false");
    next.create_watermark_table = *text == "true";
  }
  if (const YAML::Node n = section["syncRetryPolicy"]) {
    if (auto s = read_retry(n, source, next.sync_retry_policy); !s.is_ok()) return s;
  }
  out = std::move(next);
  return Status::ok();
}

std::string describe_attribute_store_settings(const attrstore::AttributeStoreSettings& c) {
  if (c.stores.empty()) return "# attributeStore: no store configured\n";
  std::string out = "attributeStore:\n  stores:\n";
  for (const auto& s : c.stores) {
    out +=
        fmt::format("    {}:\n      type: {}\n      tableName: {}\n      deleteRows: {}\n", s.name,
                    attrstore::store_type_name(s.type), quote(s.table_name), s.delete_rows);
    if (!s.dsn_file.empty()) {
      out += fmt::format("      dsnFile: {}\n", quote(s.dsn_file));
    } else if (!s.dsn_env.empty()) {
      out += fmt::format("      dsnEnv: {}\n", quote(s.dsn_env));
    } else {
      out += fmt::format(
          "      # the DSN is not shown: copy it from the config file\n"
          "      dsn: \"{}\"\n",
          kDsnNotShown);
    }
  }
  out += fmt::format(
      "  schemaSyncInterval: {}\n  syncBatchSize: {}\n  syncAttemptTimeout: {}\n"
      "  syncRetryPolicy:\n    initialInterval: {}\n    maximumInterval: {}\n"
      "    backoffCoefficient: {}\n  createWatermarkTable: {}\n",
      format_duration(c.schema_sync_interval), c.sync_batch_size,
      format_duration(c.sync_attempt_timeout),
      format_duration(c.sync_retry_policy.initial_interval),
      format_duration(c.sync_retry_policy.maximum_interval),
      c.sync_retry_policy.backoff_coefficient, c.create_watermark_table);
  return out;
}

}  // namespace dex
