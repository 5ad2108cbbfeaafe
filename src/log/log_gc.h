// Log garbage collection (docs/log.md, "GC safety").
//
// Deletes the slots below a point that a snapshot covers. Run only by the lease
// holder, and never near the log end: a fenced writer must never re-create a
// deleted slot and have it acknowledged, which is how SlateDB lost acknowledged
// writes (slatedb/slatedb#352, #1622).
#pragma once

#include <functional>

#include "common/status.h"
#include "common/types.h"
#include "log/log_writer.h"
#include "objstore/object_store.h"

namespace dex {

// GC keeps at least this many slots below the log end.
inline constexpr uint64_t kGcKeepSlotsMin = 1000;

// How long after its epoch started (by the holder's local clock) the holder may
// collect its own EpochStart (docs/log.md, "GC safety", "A settled epoch"). The
// previous holder stopped writing within its 10 s log write limit of an attempt
// begun before its lease ended, which was before this epoch began; 10 minutes
// leaves a 60-fold margin for clock-rate differences and slow answers.
inline constexpr Duration kEpochSettleTime = std::chrono::minutes(10);

struct GcGuard {
  Slot log_end;           // the holder's LogWriter::next_slot()
  Slot epoch_start_slot;  // the holder's LogWriter::epoch_start_slot(): kept unless
                          // the epoch is settled
  // True once kEpochSettleTime has passed since the holder's epoch started: no
  // older writer can still have a write in flight, so the EpochStart that
  // fenced it may go too (a long-lived epoch must not keep its whole log).
  bool epoch_settled = false;
  std::function<bool()> lease_valid;          // the holder's lease; checked before every delete
  uint64_t keep_slots_min = kGcKeepSlotsMin;  // at least kGcKeepSlotsMin
  RequestOptions request;
};

// Deletes every slot below `below_slot`, lowest first, so that the log stays a
// contiguous range. Returns the number of slots deleted. InvalidArgument (nothing
// deleted) when below_slot > guard.epoch_start_slot (unless guard.epoch_settled) or
// below_slot + keep_slots_min
// > guard.log_end; Stopped when the lease is not valid. A store error stops the
// collection where it is; calling again continues it.
StatusOr<uint64_t> collect_garbage(ObjectStore& store, const NodeId& node_id, Slot below_slot,
                                   const GcGuard& guard);

// The same, guarded by an open writer's log end, epoch start and lease.
StatusOr<uint64_t> collect_garbage(ObjectStore& store, const LogWriter& holder, Slot below_slot);

}  // namespace dex
