// ObjectStore over a local directory: the backend of `dev` and `local`.
//
// Atomic across processes on one host:
//  - kCreate writes a temp file and link()s it into place; link fails if the
//    name exists, so exactly one creator wins.
//  - kReplace / kOverwrite / remove hold an flock on a lock file striped by key
//    hash, compare the current ETag, and rename() the temp file into place.
//  - Readers open the final name, which always points at a complete file
//    (link and rename are atomic), so they never see a torn object.
// Durability::kStrict fsyncs the temp file before it becomes visible and the
// directory after; the other modes skip fsync.
#pragma once

#include <filesystem>
#include <memory>

#include "common/durability.h"
#include "objstore/object_store.h"

namespace dex {

class FilesystemObjectStore final : public ObjectStore {
 public:
  // Creates `root` if missing. Fails with Permanent if it cannot be created or used.
  static StatusOr<std::unique_ptr<FilesystemObjectStore>> open(const std::filesystem::path& root,
                                                               Durability durability);

  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override;
  Status remove(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax,
                            const RequestOptions& options = {}) override;
  std::string describe() const override;

 private:
  FilesystemObjectStore(std::filesystem::path root, Durability durability);

  const std::filesystem::path root_;  // constant after construction
  const Durability durability_;       // constant after construction
};

}  // namespace dex
