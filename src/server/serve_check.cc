#include "server/serve_check.h"

#include "server/attribute_tables.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "objstore/store_settings.h"
#include "tls/server_tls.h"

namespace dex {

namespace {

// A directory that startup creates if missing: refused only when something
// else is in its place.
Status check_directory(const std::filesystem::path& path, std::string_view key) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_directory(status)) {
    return Status::invalid_argument(
        fmt::format("{}: '{}' exists and is not a directory", key, path.string()));
  }
  return Status::ok();
}

}  // namespace

Status check_serve_config(const NodeSettings& settings) {
  const auto& os = settings.object_store;
  if (os.type == ObjectStoreType::kS3) {
    // Loads the credentials and validates bucket, region, prefix and endpoint,
    // as startup does, and sends nothing; the store is dropped at once. Its
    // messages start with what they are about, which names the key here.
    auto store = open_object_store(os);
    if (!store.is_ok()) {
      const std::string& message = store.status().message();
      std::string_view key = "objectStore";
      const std::pair<std::string_view, std::string_view> keys[] = {
          {"S3 bucket", "objectStore.bucket"},
          {"S3 region", "objectStore.region"},
          {"S3 prefix", "objectStore.prefix"},
          {"S3 endpoint", "objectStore.endpoint"},
          {"S3 CA file", "objectStore.caFile"},
          {"S3 credentials", os.credentials_file.empty()
                                 ? "objectStore.credentials (not set: taken from the environment)"
                                 : "objectStore.credentials.file/profile"}};
      for (const auto& [start, name] : keys) {
        if (message.starts_with(start)) key = name;
      }
      return Status::invalid_argument(fmt::format("{}: {}", key, message));
    }
  } else {
    if (auto s = check_directory(os.path, "objectStore.path"); !s.is_ok()) return s;
  }
  if (auto s = check_directory(settings.local_store_path, "localStore.path"); !s.is_ok()) return s;
  // Each listener's certificate, key and client CA, checked as startup does.
  for (const tls::ServerTlsFiles* files :
       {&settings.api_tls, &settings.web_tls, &settings.metrics_tls}) {
    if (!files->enabled()) continue;
    if (auto m = tls::load_server_tls(*files); !m.is_ok()) return m.status();
  }
  // Each Attribute Store is reached, pinged and described as startup does.
  if (auto tables = open_attribute_tables(settings); !tables.is_ok()) return tables.status();
  return Status::ok();
}

}  // namespace dex
