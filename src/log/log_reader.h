// LogReader: reads a node's log in slot order (docs/log.md, "Readers").
//
// Used for replay after taking the lease and, later, by a hot standby tailing the
// log: next() returns "nothing yet" at the current end and can be called again
// once more has been written. A reader delivers batches in slot order and skips
// (does not deliver) a batch whose epoch is lower than one it already delivered:
// such a batch comes from a writer fenced by a newer EpochStart.
//
// An error leaves the cursor at the slot that failed (fenced batches skipped on
// the way there stay skipped), so a transient error can be retried with next().
// Corruption names the slot key and the reason. A missing slot followed by a
// present one (a hole) is Corruption: writers never skip a slot, and GC deletes
// only a prefix of the log, below where readers start (a slot re-created below
// the GC point is outside the bounds find_log_bounds reports).
//
// Not thread-safe: one thread uses a reader at a time.
#pragma once

#include <functional>
#include <optional>

#include "common/status.h"
#include "common/types.h"
#include "dex/records.pb.h"
#include "log/log_format.h"
#include "objstore/object_store.h"

namespace dex {

struct LogEntry {
  Slot slot;
  proto::LogBatch batch;
};

class LogReader {
 public:
  // `store` must outlive the reader. Reading starts at `start`: the slot after the
  // last one a snapshot covers, or LogBounds::first for a full replay.
  LogReader(ObjectStore& store, NodeId node_id, Slot start);

  // One slot, without epoch skipping and without moving the cursor: the batch, or
  // nullopt if the slot does not exist (not yet written, or collected). A batch
  // whose frame, protobuf, node or slot does not match its key is Corruption.
  StatusOr<std::optional<proto::LogBatch>> read(Slot slot, const RequestOptions& options = {});

  // The next batch to deliver, skipping lower epochs; nullopt when the next slot
  // is not written yet and nothing follows it (the end of the log, for now).
  StatusOr<std::optional<LogEntry>> next(const RequestOptions& options = {});

  // Calls `visit` for every batch up to the current end of the log. Stops at the
  // first error, from the store or from `visit`.
  Status read_to_end(const std::function<Status(const LogEntry&)>& visit,
                     const RequestOptions& options = {});

  // The slot next() reads next.
  Slot next_slot() const { return next_slot_; }
  // The highest epoch delivered so far (0 before the first batch).
  Epoch highest_epoch() const { return highest_epoch_; }
  // Batches skipped because of a lower epoch.
  uint64_t skipped() const { return skipped_; }

 private:
  ObjectStore& store_;
  const NodeId node_id_;
  Slot next_slot_;
  Epoch highest_epoch_{0};
  uint64_t skipped_ = 0;
  uint64_t delivered_ = 0;
};

}  // namespace dex
