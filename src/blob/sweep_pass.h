// Collecting the blobs no run references (docs/engine.md, "Large values"): a
// mark and sweep that the engine drives in three steps, passing data down:
//
//   auto pass = blobs.begin_sweep(min_age, now_unix_ms);  // list: old blobs are candidates
//   referenced = <the candidates the flow state names>;    // the engine's scan
//   while (!pass->done()) blobs.finish_sweep(*pass, referenced, 1);  // delete the rest
//
// The types of a pass; the calls are BlobStore's (blob_store.h), implemented
// in blob_sweep.cc, where the safety argument is written out. A header of its
// own: blob_store.h includes these types, and blob_sweep.cc includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/clock.h"

namespace dex {

class BlobStore;

// What one pass did, for its log line, metrics and tests.
struct SweepCounts {
  uint64_t listed = 0;         // blobs listed
  uint64_t candidates = 0;     // of them, last written at least min_age ago
  uint64_t referenced = 0;     // candidates the flow state references: kept
  uint64_t recently_put = 0;   // candidates put lately by this process: kept this pass
  uint64_t deleted = 0;        // candidates deleted
  uint64_t delete_errors = 0;  // deletes that failed: the blob is left for a later pass
  uint64_t bytes_freed = 0;    // the deleted blobs' sizes, summed
  bool capped = false;         // a limit below stopped the pass: the rest waits for the next
};

// Limits of one pass (each loop of a pass is bounded by them).
inline constexpr size_t kSweepListedMax = 200'000;  // keys listed; the next pass lists on
inline constexpr size_t kSweepDeletesMax = 10'000;  // deletes tried; the next pass redoes the range
// Keys put between two passes that are remembered one by one; past it, the
// next pass deletes nothing (it cannot tell which keys were put lately).
inline constexpr size_t kRecentPutsMax = size_t{1} << 21;
// A DELETE's request timeout, and how long after a DELETE that failed (and so
// may still land) a put of the same key waits before it writes.
inline constexpr Duration kSweepDeleteTimeout = seconds(5);
inline constexpr Duration kLateDeleteHold = std::chrono::minutes(2);

// One pass, from begin_sweep until it is done or destroyed. Move-only; at
// most one pass of a BlobStore is open at a time, and it must not outlive its
// BlobStore.
class SweepPass {
 public:
  SweepPass(SweepPass&& other) noexcept;
  SweepPass& operator=(SweepPass&& other) noexcept;
  SweepPass(const SweepPass&) = delete;
  SweepPass& operator=(const SweepPass&) = delete;
  ~SweepPass();  // ends the pass if it is still open (nothing more is deleted)

  // The blobs the flow state must be searched for: keys, ascending.
  const std::vector<std::string>& candidates() const { return candidates_; }
  const SweepCounts& counts() const { return counts_; }
  // Every candidate decided (kept, deleted or failed), or a limit reached.
  bool done() const { return next_ >= candidates_.size(); }

 private:
  friend class BlobStore;
  SweepPass() = default;

  BlobStore* owner_ = nullptr;  // null once the pass ended (or was moved from)
  std::vector<std::string> candidates_;
  std::vector<uint64_t> sizes_;  // per candidate
  // Hashes of the keys put between the previous begin_sweep and this one.
  std::unordered_set<uint64_t> protected_;
  bool protected_overflow_ = false;  // more than kRecentPutsMax: nothing is deleted
  std::string started_after_;        // where this pass's listing began
  size_t next_ = 0;                  // the candidates before it are decided
  SweepCounts counts_;
};

}  // namespace dex
