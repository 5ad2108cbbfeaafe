// Snapshots of a node's local store in object storage (docs/snapshots.md).
//
// A snapshot is the set of files of a RocksDB checkpoint of the local store,
// each uploaded once under a content-addressed key, plus a manifest written last
// (create-only) that names them and the log slot the store has applied:
//
//   nodes/<nodeId>/snapshots/files/<sha256 of the file>
//   nodes/<nodeId>/snapshots/manifests/<slot as 20 digits>
//
// A manifest exists only once every file it names exists, so a reader that finds
// a manifest finds a whole snapshot, unless a newer holder's trim deleted the
// files of an old one meanwhile; a restore then falls back to the next snapshot.
// Only the lease holder writes and trims (every write and delete checks the lease
// first); anyone may read.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "dex/records.pb.h"
#include "log/log_gc.h"
#include "objstore/object_store.h"
#include "snapshot/snapshot_types.h"

namespace dex {

// "nodes/<nodeId>/snapshots/manifests/".
std::string snapshot_manifest_prefix(const NodeId& node_id);
// "nodes/<nodeId>/snapshots/manifests/<slot, 20 digits>".
std::string snapshot_manifest_key(const NodeId& node_id, Slot slot);
// "nodes/<nodeId>/snapshots/files/".
std::string snapshot_file_prefix(const NodeId& node_id);
// The slot of a manifest key; InvalidArgument naming the key otherwise.
StatusOr<Slot> parse_snapshot_manifest_key(const NodeId& node_id, std::string_view key);

// The framed bytes of a manifest (kSnapshotManifestMagic).
std::string encode_snapshot_manifest(const proto::SnapshotManifest& manifest);
// Unframes, parses and checks a manifest read from `key`: the node, the slot of
// the key, and every file entry (a plain file name, a key under this node's
// files prefix, a 64-digit hex sha256). Corruption naming the key otherwise.
StatusOr<proto::SnapshotManifest> decode_snapshot_manifest(const NodeId& node_id,
                                                           std::string_view key,
                                                           std::string_view bytes);

// The slots of the node's snapshots, oldest first. Keys under the manifests
// prefix that are not manifest keys are Corruption (only dex writes there).
StatusOr<std::vector<Slot>> list_snapshots(ObjectStore& store, const NodeId& node_id,
                                           const RequestOptions& request = {});


// Writes snapshots for the lease holder. Remembers the SHA-256 of each
// immutable RocksDB file (*.sst, *.blob) by name and size, so that a file kept
// from one checkpoint to the next is neither re-read nor re-uploaded. One
// thread at a time.
class SnapshotUploader {
 public:
  struct Options {
    NodeId node_id;
    ProcessId process_id;
    Epoch epoch;
    RequestOptions request;  // per object request
  };
  SnapshotUploader(ObjectStore& store, Options options, std::function<bool()> lease_valid);

  // Uploads the files of the checkpoint in `dir`, whose store has applied the
  // log through `slot`, then its manifest. Stopped (nothing more written) when
  // the lease is not valid before a write.
  StatusOr<SnapshotInfo> upload(const std::filesystem::path& dir, Slot slot,
                                int64_t created_unix_ms);

 private:
  ObjectStore& store_;
  Options options_;
  std::function<bool()> lease_valid_;
  struct Known {
    uint64_t size;
    std::string sha256;
  };
  std::map<std::string, Known> immutable_;  // file name → its hash
};

// Keeps the newest `keep` (>= 1) snapshots: deletes older manifests, then every
// file that no kept manifest names. The lease is checked before every delete
// (Stopped). Returns the oldest kept snapshot's slot (nullopt: there is none).
struct TrimResult {
  std::optional<Slot> oldest_kept;
  uint64_t manifests_deleted = 0;
  uint64_t files_deleted = 0;
};
StatusOr<TrimResult> trim_snapshots(ObjectStore& store, const NodeId& node_id, size_t keep,
                                    const std::function<bool()>& lease_valid,
                                    const RequestOptions& request = {});

// Downloads the snapshot at `slot` into the directory `dest`, which must not
// exist, checking each file's size and SHA-256, and syncs every file and the
// directory. NotFound when the manifest or one of its files is gone (trimmed);
// Corruption when a file does not match its manifest. On error `dest` is removed.
StatusOr<proto::SnapshotManifest> download_snapshot(ObjectStore& store, const NodeId& node_id,
                                                    Slot slot, const std::filesystem::path& dest,
                                                    const RequestOptions& request = {});


// Deterministic: is a snapshot due? `records` counts the records applied since
// the last snapshot (or since the store was opened), `since` the time since then.
bool snapshot_due(const SnapshotPolicy& policy, uint64_t records, Duration since);

// Takes snapshots on the policy's triggers on its own thread, trims old ones and
// collects the log behind the oldest kept one (docs/log.md, "GC safety": never
// within kGcKeepSlotsMin of the log end, never the current EpochStart). Errors
// are logged and retried later: the log stays the source of truth.
class Snapshotter {
 public:
  struct Source {
    // Records applied to the local store since it was opened (monotonic).
    std::function<uint64_t()> records_applied;
    // Creates a RocksDB checkpoint in `dir` (which must not exist); returns the
    // last slot the checkpoint has applied, or nullopt for an empty store.
    std::function<StatusOr<std::optional<Slot>>(const std::filesystem::path& dir)> checkpoint;
    // The log holder's GC guard (log end, EpochStart slot, lease validity).
    std::function<GcGuard()> gc_guard;
    std::function<int64_t()> now_unix_ms;
  };
  struct Options {
    NodeId node_id;
    ProcessId process_id;
    Epoch epoch;
    SnapshotPolicy policy;
    std::filesystem::path scratch_dir;   // checkpoints go here; same filesystem as the store
    Duration retry_after = seconds(10);  // after a failed snapshot
    Duration poll = seconds(1);          // how often the triggers are checked
    RequestOptions request = {seconds(30)};
  };
  using Stats = SnapshotStats;

  Snapshotter(ObjectStore& store, Clock& clock, Options options, Source source);
  ~Snapshotter();  // stops
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  // Starts the trigger thread (only when the policy is enabled).
  void start();
  // Stops the thread; a snapshot in progress finishes its current request first.
  void stop();
  // Takes a snapshot now (tests, operators), then trims and collects like the
  // thread does. Serialised with the thread's snapshots.
  StatusOr<SnapshotInfo> snapshot_now();
  Stats stats() const;

 private:
  void run();
  StatusOr<SnapshotInfo> take();  // REQUIRES: run_mu_
  // Writes and deletes only while the lease is valid and no stop was asked for.
  bool may_write() const { return !stop_requested_ && source_.gc_guard().lease_valid(); }

  ObjectStore& store_;
  Clock& clock_;
  Options options_;
  Source source_;
  SnapshotUploader uploader_;
  std::mutex run_mu_;  // one snapshot at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::atomic<bool> stop_requested_{false};
  Stats stats_;  // guarded by mu_
  uint64_t records_at_last_ = 0;
  TimePoint last_time_;
  std::thread thread_;
};

}  // namespace dex
