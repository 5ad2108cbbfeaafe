#include "objstore/store_settings.h"

#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "objstore/filesystem_store.h"

namespace dex {

std::string_view object_store_type_name(ObjectStoreType type) {
  switch (type) {
    case ObjectStoreType::kS3:
      return "s3";
    case ObjectStoreType::kFilesystem:
      return "filesystem";
  }
  return "unknown";
}

std::optional<ObjectStoreType> parse_object_store_type(std::string_view text) {
  if (text == "s3") return ObjectStoreType::kS3;
  if (text == "filesystem") return ObjectStoreType::kFilesystem;
  return std::nullopt;
}

std::string_view s3_addressing_name(S3Addressing addressing) {
  switch (addressing) {
    case S3Addressing::kPath:
      return "path";
    case S3Addressing::kVirtualHost:
      return "virtualHost";
  }
  return "unknown";
}

std::optional<S3Addressing> parse_s3_addressing(std::string_view text) {
  if (text == "path") return S3Addressing::kPath;
  if (text == "virtualHost") return S3Addressing::kVirtualHost;
  return std::nullopt;
}

StatusOr<S3Options> s3_options(const ObjectStoreSettings& settings) {
  S3Options options;
  options.bucket = settings.bucket;
  options.prefix = settings.prefix;
  options.endpoint = settings.endpoint;
  options.region = settings.region;
  options.addressing = settings.addressing;
  auto credentials =
      settings.credentials_file.empty()
          ? s3_credentials_from_environment()
          : s3_credentials_from_file(settings.credentials_file, settings.credentials_profile);
  if (!credentials.is_ok()) return credentials.status();
  options.credentials = std::move(credentials).value();
  if (!settings.ca_file.empty()) {
    // Checked here so that `serve --check` names it; curl reads it per request.
    std::ifstream in(settings.ca_file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.is_open() || text.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return Status::invalid_argument(fmt::format(
          "S3 CA file '{}' cannot be read or holds no PEM certificate", settings.ca_file));
    }
    options.ca_file = settings.ca_file;
  }
  return options;
}

StatusOr<std::unique_ptr<ObjectStore>> open_object_store(const ObjectStoreSettings& settings,
                                                         StoreAccess access) {
  if (settings.type == ObjectStoreType::kFilesystem) {
    Durability durability = settings.durability;
    if (access == StoreAccess::kReadOnly) {
      std::error_code ec;
      if (!std::filesystem::is_directory(settings.path, ec)) {
        return Status::not_found("no object store at " + settings.path.string() +
                                 " (objectStore.path is not a directory)");
      }
      durability = Durability::kProcessCrashSafe;
    }
    auto store = FilesystemObjectStore::open(settings.path, durability);
    if (!store.is_ok()) return store.status();
    return std::unique_ptr<ObjectStore>(std::move(store).value());
  }
  auto options = s3_options(settings);
  if (!options.is_ok()) return options.status();
  auto store = S3ObjectStore::open(std::move(options).value());
  if (!store.is_ok()) return store.status();
  return std::unique_ptr<ObjectStore>(std::move(store).value());
}

}  // namespace dex
