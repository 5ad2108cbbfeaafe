// Collecting the blobs no run references, in the active process
// (docs/engine.md, "Large values"; the blob store's side and the safety
// argument: src/blob/blob_sweep.cc). Every interval one pass:
//  1. BlobStore::begin_sweep lists the node's blobs; those written at least
//     min_age ago are candidates (none: the pass ends, costing one list);
//  2. one consistent view of the local store is searched for the candidates'
//     keys: a byte search of every value, since a BlobRef's key is a plain
//     string field of the serialized record (a false match only keeps a blob
//     longer);
//  3. BlobStore::finish_sweep deletes the others one by one, each only while
//     the lease is valid.
// A BlobSweeper exists only inside an Engine, which the active process opens
// after replaying the log through its EpochStart (never on a standby); the
// engine stops it before it closes the local store. Internal to src/engine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "blob/blob_store.h"
#include "common/clock.h"
#include "common/status.h"
#include "engine/shared_store.h"

namespace dex {

struct BlobSweepOptions {
  Duration interval{0};                  // between the starts of two passes; 0: never
  Duration min_age{0};                   // a blob written more lately is not a candidate
  std::function<int64_t()> now_unix_ms;  // the wall clock the blobs' times are compared with
  std::function<bool()> lease_valid;     // checked before every delete
  // Optional (metrics, tests): told of every pass that ran to its end.
  std::function<void(const SweepCounts&)> on_pass;
};

// Keys of the local store read per page of the search (each page a seek on
// the same snapshot; values are at most values.blobThreshold each).
inline constexpr size_t kSweepScanPageKeys = 128;

class BlobSweeper {
 public:
  // `blobs`, `local` and `clock` must outlive this.
  BlobSweeper(BlobStore& blobs, SharedStore& local, Clock& clock, BlobSweepOptions options);
  ~BlobSweeper();  // stop()
  BlobSweeper(const BlobSweeper&) = delete;
  BlobSweeper& operator=(const BlobSweeper&) = delete;

  // Starts the thread that runs a pass every interval (none when it is 0).
  void start();
  // Stops the thread; a pass in progress ends at its next page or delete.
  // Idempotent.
  void stop();

  // One pass now, on the caller's thread. Stopped once stop() was called or
  // the lease is not valid (what it deleted until then stays deleted).
  StatusOr<SweepCounts> run_pass();

 private:
  void run(TimePoint first);  // the thread: passes from first on, until stop()
  // The candidates that a value of the local store names.
  StatusOr<std::unordered_set<std::string>> find_references(
      const std::vector<std::string>& candidates);

  // Constant after construction.
  BlobStore& blobs_;
  SharedStore& local_;
  Clock& clock_;
  const BlobSweepOptions options_;
  const std::string prefix_;  // the node's blob prefix, which every key searched for starts with

  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;  // stopping_
  std::thread thread_;
  std::once_flag stop_once_;
};

}  // namespace dex
