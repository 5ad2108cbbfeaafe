// ObjectStore over a local directory: the backend of `dev` and `local`.
//
// Layout: key "a/b/c" is the file root/a/b/c (parent directories are created on
// demand and removed again when a remove() empties them). Two names under root
// are the backend's own and never listed: root/.dex-tmp/ (temp files being
// written) and root/.dex-locks/ (striped lock files). Keys whose first segment
// starts with ".dex-" are therefore refused (Permanent).
//
// Atomic across processes on one host:
//  - kCreate writes a temp file and link()s it into place; link fails if the
//    name exists, so exactly one creator wins.
//  - kReplace / kOverwrite / remove hold an flock on a lock file striped by key
//    hash (FNV-1a, so every process picks the same stripe), compare the current
//    ETag, and rename() the temp file into place.
//  - Readers open the final name, which always points at a complete file
//    (link and rename are atomic), so they never see a torn object.
// Durability::kStrict fsyncs the temp file before it becomes visible, every newly
// created directory's parent, and the object's directory after the link, rename
// or unlink; the other modes skip fsync.
//
// Errors carry the operation, the path and strerror. Classification:
//  - ENOSPC, EDQUOT, EAGAIN, EINTR, EMFILE, ENFILE, ENOMEM, EBUSY, ETIMEDOUT → Transient
//    (space or descriptors may be freed; the caller's retry budget bounds the wait);
//  - EIO → Permanent (a device error is not expected to clear within a retry
//    window, and after a failed fsync the page cache cannot be trusted);
//  - everything else (EACCES, EPERM, EROFS, ENAMETOOLONG, ...) → Permanent.
// Limitations, unlike S3: a key cannot also be a "directory" of other keys (key
// "a" and key "a/b" cannot coexist; the second write answers Permanent), and a
// segment is limited to the filesystem's NAME_MAX. RequestOptions::timeout is
// ignored: local calls are not cut off. flock must work (not on some NFS mounts).
// Temp files left by a crashed process are deleted by open() once they are older
// than kTempFileAgeMax.
//
// The log's slot objects (keys "<dir>/log/<20 digits>") are not files of their own: they are
// appended to segment files under root/.dex-segments/ (slot_segments.h), one append and one
// fdatasync each. They can only be created (kCreate) and removed; a slot file of the earlier
// layout (root/<key>) is still read, listed and removed, and a create over it fails.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>

#include "common/durability.h"
#include "objstore/object_store.h"

namespace dex {

class SlotSegments;
struct SlotObjectKey;

struct FilesystemStoreOptions {
  // A log segment is sealed and the next one begun once it holds this many bytes.
  uint64_t segment_bytes_max = 16u << 20;
};

class FilesystemObjectStore final : public ObjectStore {
 public:
  static constexpr size_t kLockStripes = 64;
  static constexpr std::string_view kTempDirName = ".dex-tmp";
  static constexpr std::string_view kLockDirName = ".dex-locks";
  static constexpr Duration kTempFileAgeMax = std::chrono::minutes(10);

  // Creates `root` if missing. Fails with Permanent if it cannot be created or used.
  static StatusOr<std::unique_ptr<FilesystemObjectStore>> open(
      const std::filesystem::path& root, Durability durability,
      const FilesystemStoreOptions& options = {});
  ~FilesystemObjectStore() override;

  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override;
  Status remove(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax,
                            const RequestOptions& options = {}) override;
  std::string describe() const override;

  const std::filesystem::path& root() const { return root_; }
  Durability durability() const { return durability_; }
  // fsync calls made so far by this instance (files and directories): lets tests
  // check that kStrict syncs and the other modes do not.
  uint64_t fsyncs() const { return fsyncs_.load(); }

 private:
  FilesystemObjectStore(std::filesystem::path root, Durability durability,
                        const FilesystemStoreOptions& options);

  Status fsync_fd(int fd, const std::filesystem::path& path);
  Status fsync_dir(const std::filesystem::path& dir);
  // Writes `body` to a new temp file (fsynced under kStrict); returns its path.
  StatusOr<std::filesystem::path> write_temp(std::string_view body);
  // Creates the missing parent directories of `path` (fsyncing under kStrict).
  Status make_parents(const std::filesystem::path& path);
  StatusOr<std::string> create(std::string_view key, const std::filesystem::path& temp,
                               std::string_view etag);
  StatusOr<std::string> replace(std::string_view key, const std::filesystem::path& temp,
                                std::string_view new_etag, const PutCondition& condition);
  StatusOr<std::string> create_slot(std::string_view key, const SlotObjectKey& slot,
                                    std::string_view body, const PutCondition& condition);
  // Removes the now empty directories between `path`'s parent and root_.
  void remove_empty_parents(const std::filesystem::path& path);

  const std::filesystem::path root_;  // constant after construction
  const Durability durability_;       // constant after construction
  std::atomic<uint64_t> fsyncs_{0};
  std::unique_ptr<SlotSegments> segments_;  // the log's slot objects
};

}  // namespace dex
