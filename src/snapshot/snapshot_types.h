// The snapshot types that callers of the engine see (its options and its
// answers), apart from snapshot.h so that they do not pull in the log, the
// object store's machinery or threads (docs/snapshots.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/clock.h"
#include "common/types.h"

namespace dex {

// What one snapshot upload did.
struct SnapshotInfo {
  Slot slot;
  uint64_t files = 0;           // files in the snapshot
  uint64_t bytes = 0;           // their total size
  uint64_t uploaded_files = 0;  // files this upload wrote (the others were already there)
  uint64_t uploaded_bytes = 0;
  bool manifest_existed = false;  // a manifest for this slot was already there
};

// The snapshot policy of the active process (docs/configuration.md, snapshots.*).
struct SnapshotPolicy {
  Duration interval = std::chrono::minutes(10);  // 0: no time trigger
  uint64_t every_records = 10'000;               // 0: no record-count trigger
  size_t keep = 2;                               // snapshots kept (>= 1)
  bool enabled() const { return interval > Duration(0) || every_records > 0; }
};

// What a Snapshotter did since it started.
struct SnapshotStats {
  uint64_t snapshots = 0;
  uint64_t failures = 0;
  uint64_t log_slots_collected = 0;
  std::optional<Slot> last_slot;
};

}  // namespace dex
