// Large values as blobs in the node's object store (docs/engine.md, "Large
// values"). A value over the threshold (an input, output, Channel message,
// locals or Attribute value) is written as its own object before the log
// record that references it, and the record carries a flow::BlobRef {key,
// size, SHA-256} instead of the bytes. Keys:
//
//   nodes/<nodeId>/blobs/<flow scope>/<sha256 of the value>
//
// where the flow scope is the first 32 hex digits of the SHA-256 of the Flow
// ID: every blob of a Flow ID (all its runs) lists and deletes together, and
// the content address makes a repeated write of the same value idempotent.
// Every read checks the length and the SHA-256; a missing or corrupt blob is
// Corruption naming the key, never a crash. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "blob/blob_cache.h"
#include "blob/sweep_pass.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "dex/flow.pb.h"
#include "objstore/object_store.h"

namespace dex {

struct BlobSettings {
  uint64_t threshold_bytes = 256u << 10;  // a longer value becomes a blob (values.blobThreshold)
  uint64_t value_bytes_max = 64u << 20;   // a longer value is refused (values.maxSize)
  uint64_t cache_bytes_max = 64u << 20;   // values read or written lately (values.blobCacheSize)
  // One task or answer with its values in place may be at most this long
  // (the server's gRPC message limit; config: values_message_bytes_max).
  uint64_t message_bytes_max = (2 * (64ull << 20)) + (16u << 20);
  // Collection of the blobs no run references (sweep_pass.h, blob_sweep.cc): the engine runs
  // a pass this often (values.blobCollectInterval; 0: never, and puts are not
  // tracked for it), deleting only blobs written at least collect_min_age ago
  // (values.blobMinAge).
  Duration collect_interval{0};
  Duration collect_min_age = std::chrono::hours(1);
};

// Attempts of one object-store request before its transient error is returned.
inline constexpr int kBlobRequestAttemptsMax = 3;

class BlobStore {
 public:
  // `store` and `clock` must outlive this. The clock times the backoff
  // between attempts of a request that failed Transient.
  BlobStore(ObjectStore& store, Clock& clock, NodeId node_id, BlobSettings settings);

  const BlobSettings& settings() const { return settings_; }

  // "nodes/<nodeId>/blobs/": every blob of the node.
  static std::string node_prefix(const NodeId& node_id);
  // node_prefix() of this store's node.
  const std::string& prefix() const { return prefix_; }
  // "nodes/<nodeId>/blobs/<flow scope>/": every blob of one Flow ID.
  std::string flow_prefix(std::string_view flow_id) const;

  // Writes `value` under `flow_id`'s prefix, unless it is there already (a
  // create: an existing object with the same content address is the same
  // value), and returns its reference. Transient errors are retried up to
  // kBlobRequestAttemptsMax attempts in all.
  StatusOr<flow::BlobRef> put(std::string_view flow_id, std::string_view value);

  // The value `ref` names, read from the cache or the object store, its
  // length and SHA-256 checked. Corruption (naming the key) when the
  // reference is not one of this node's blobs, or the object is missing or
  // does not match; Transient after kBlobRequestAttemptsMax attempts.
  StatusOr<std::shared_ptr<const std::string>> get(const flow::BlobRef& ref);

  // Requests that reached the object store (tests, metrics).
  struct Counts {
    uint64_t puts = 0, gets = 0, cache_hits = 0;
  };
  Counts counts() const;

  // ------------------------------------------- collection (blob_sweep.cc)
  // Begins a pass: the keys put since the previous begin_sweep become this
  // pass's protected set, and the node's blobs are listed (at most
  // kSweepListedMax, going on after the previous pass's last key); those
  // written at least `min_age` before `now_unix_ms` (the engine's wall clock)
  // are the candidates. A pass without candidates is done at once.
  // InvalidArgument when collection is off (settings().collect_interval 0);
  // PreconditionFailed while another pass is open; the list's error otherwise.
  StatusOr<SweepPass> begin_sweep(Duration min_age, int64_t now_unix_ms);
  // Decides the pass's next candidates, trying at most `deletes_max` deletes:
  // a candidate is deleted (and evicted from the cache) unless it is in
  // `referenced`, was put since the previous begin_sweep, or the pass's limit
  // on deletes is reached. A failed delete is counted and the blob left for a
  // later pass. Call again until pass.done(); returns the pass's counts.
  SweepCounts finish_sweep(SweepPass& pass, const std::unordered_set<std::string>& referenced,
                           size_t deletes_max = kSweepDeletesMax);

 private:
  friend class SweepPass;
  // Remembers a key put() is about to return, before its cache check and its
  // create; waits while a delete of that key is in progress or may still land.
  void register_put(const std::string& key);
  // Keeps `value` in the cache unless a delete of `key` ended since
  // `generation` was read, or one is in progress (a read that overlapped a
  // delete must not leave the deleted value cached for put() to trust).
  void cache_insert(const std::string& key, std::shared_ptr<const std::string> value,
                    uint64_t generation);
  void end_pass();  // the open pass ended (SweepPass)
  // One candidate of `pass`, not referenced: deletes it unless put lately.
  void sweep_one(SweepPass& pass, size_t i);
  bool is_blob_key(std::string_view key) const;
  // `op` until it succeeds, fails other than Transient, or the attempts run out.
  template <typename T, typename Op>
  StatusOr<T> with_retries(Op op);
  Status validate_ref(const flow::BlobRef& ref) const;

  // Constant after construction.
  ObjectStore& store_;
  Clock& clock_;
  const NodeId node_id_;
  const BlobSettings settings_;
  const std::string prefix_;  // node_prefix(node_id_)

  BlobCache cache_;
  mutable std::mutex mu_;
  std::condition_variable backoff_cv_;  // never notified: the backoff waits on the clock
  Counts counts_;                       // guarded by mu_

  // Collection. Lock order: sweep_mu_ before the cache's own mutex.
  const bool track_puts_;  // settings_.collect_interval > 0; constant after construction
  std::mutex sweep_mu_;
  std::condition_variable held_cv_;      // a key's hold ended
  std::unordered_set<uint64_t> recent_;  // guarded by sweep_mu_: hashes put since begin_sweep
  bool recent_overflow_ = false;         // guarded by sweep_mu_: over kRecentPutsMax
  // Guarded by sweep_mu_: hashes of keys whose put must wait, until when
  // (TimePoint::max(): being deleted; else the end of a failed delete's hold).
  std::unordered_map<uint64_t, TimePoint> held_;
  uint64_t delete_generation_ = 0;  // guarded by sweep_mu_: bumped as each delete ends
  bool pass_open_ = false;          // guarded by sweep_mu_
  std::string sweep_cursor_;        // guarded by sweep_mu_: where the next listing begins
};

}  // namespace dex
