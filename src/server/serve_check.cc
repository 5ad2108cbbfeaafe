#include "server/serve_check.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>

namespace dex {

StatusOr<S3Options> serve_s3_options(const ServeConfig::ObjectStore& c) {
  S3Options options;
  options.bucket = c.bucket;
  options.prefix = c.prefix;
  options.endpoint = c.endpoint;
  options.region = c.region;
  options.addressing =
      c.addressing == "virtualHost" ? S3Addressing::kVirtualHost : S3Addressing::kPath;
  auto credentials = c.credentials_file.empty()
                         ? s3_credentials_from_environment()
                         : s3_credentials_from_file(c.credentials_file, c.credentials_profile);
  if (!credentials.is_ok()) return credentials.status();
  options.credentials = std::move(credentials).value();
  return options;
}

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

Status check_serve_config(const ServeConfig& config) {
  const auto& os = config.object_store;
  if (os.type == "s3") {
    auto options = serve_s3_options(os);
    if (!options.is_ok()) {
      return Status::invalid_argument(
          fmt::format("{}: {}",
                      os.credentials_file.empty()
                          ? "objectStore.credentials (not set: taken from the environment)"
                          : "objectStore.credentials.file/profile",
                      options.status().message()));
    }
    // open() validates bucket, region, prefix, endpoint and credentials and
    // sends nothing; the store is dropped at once. Its messages start with
    // what they are about, which names the key here.
    auto store = S3ObjectStore::open(std::move(options).value());
    if (!store.is_ok()) {
      const std::string& message = store.status().message();
      std::string_view key = "objectStore";
      static constexpr std::pair<std::string_view, std::string_view> kKeys[] = {
          {"S3 bucket", "objectStore.bucket"},
          {"S3 region", "objectStore.region"},
          {"S3 prefix", "objectStore.prefix"},
          {"S3 endpoint", "objectStore.endpoint"},
          {"S3 credentials", "objectStore.credentials"}};
      for (const auto& [start, name] : kKeys) {
        if (message.starts_with(start)) key = name;
      }
      return Status::invalid_argument(fmt::format("{}: {}", key, message));
    }
  } else {
    if (auto s = check_directory(os.path, "objectStore.path"); !s.is_ok()) return s;
  }
  return check_directory(config.local_store_path, "localStore.path");
}

}  // namespace dex
