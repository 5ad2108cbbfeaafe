// Where a node's durable state lives (the objectStore.* settings of
// docs/configuration.md), and the one way every program opens it:
// `dex-server-zd dev`, `local` and `serve`, `serve --check` and `dexcli inspect`
// all call open_object_store. src/config fills ObjectStoreSettings from YAML;
// nothing here reads a file of settings.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/durability.h"
#include "common/status.h"
#include "objstore/object_store.h"
#include "objstore/s3_store.h"

namespace dex {

enum class ObjectStoreType { kS3, kFilesystem };

// "s3" / "filesystem", as objectStore.type spells them.
std::string_view object_store_type_name(ObjectStoreType type);
std::optional<ObjectStoreType> parse_object_store_type(std::string_view text);
// "path" / "virtualHost", as objectStore.addressing spells them.
std::string_view s3_addressing_name(S3Addressing addressing);
std::optional<S3Addressing> parse_s3_addressing(std::string_view text);

struct ObjectStoreSettings {
  ObjectStoreType type = ObjectStoreType::kFilesystem;  // objectStore.type
  // S3 (objectStore.bucket, .prefix, .endpoint, .region, .addressing).
  std::string bucket, prefix, endpoint;
  std::string region = "us-east-1";
  S3Addressing addressing = S3Addressing::kPath;
  std::string credentials_file;                 // empty: the AWS_* environment variables
  std::string credentials_profile = "default";  // objectStore.credentials.profile
  // objectStore.caFile: a PEM bundle of the CAs that sign an https endpoint's
  // certificate (a MinIO with a private CA); empty: the system's CAs.
  std::string ca_file;
  // Filesystem (objectStore.path, objectStore.durability).
  std::filesystem::path path;
  Durability durability = Durability::kStrict;
};

// How a program uses the store it opens.
enum class StoreAccess {
  kReadWrite,  // a server: a missing filesystem directory is created
  // An inspector: only reads. A filesystem store must exist already (nothing is
  // created) and is opened without fsync (Durability::kProcessCrashSafe), as
  // nothing is written through it.
  kReadOnly,
};

// The S3 options of `settings`, with the credentials loaded from
// credentials_file/profile or the AWS_* environment (messages start with "S3
// credentials" and never hold a secret). open_object_store uses it.
StatusOr<S3Options> s3_options(const ObjectStoreSettings& settings);

// Opens the store `settings` names. S3: validates the options (bucket name,
// region, prefix, endpoint, credentials) and sends no request, so `serve
// --check` may call it; its messages start with what they are about ("S3
// bucket", "S3 credentials", ...). Filesystem: FilesystemObjectStore::open, or
// NotFound naming the path when kReadOnly finds no directory there.
StatusOr<std::unique_ptr<ObjectStore>> open_object_store(
    const ObjectStoreSettings& settings, StoreAccess access = StoreAccess::kReadWrite);

}  // namespace dex
