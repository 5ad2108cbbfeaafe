// Attribute Store sync, the deciding part (docs/attribute-store.md): which
// SyncEntries one transaction carries and what each becomes, how long to wait
// after a failure, and whether the lease leaves room to begin a transaction.
// Pure: no clock, thread, socket or database; the sync shell
// (attribute_sync.h) feeds it what it read and carries out the answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attrstore/attribute_table.h"
#include "attrstore/store_settings.h"
#include "common/clock.h"
#include "dex/flow_records.pb.h"

namespace dex {

// One SyncEntry as the local store keeps it: its key (which orders it) and
// the entry, its blob values already in place.
struct PendingEntry {
  std::string key;
  flow::SyncEntry entry;
};

// A write that cannot go to its column: logged (never the value) and counted.
struct SyncMisfit {
  std::string flow_id, attribute, reason;
};

// What one transaction does: the rows in log order, and the watermark it moves
// to. through_slot 0: nothing to do.
struct SyncPlan {
  std::vector<attrstore::RowWrite> rows;
  uint64_t through_slot = 0;
  std::string last_key;  // the last entry the plan covers (the reader's cursor)
  size_t entries = 0;    // entries covered, rows or not
  std::vector<SyncMisfit> misfits;
};

// Plans one transaction over `entries` (oldest first, each after the
// watermark, whole slots only: every entry of each slot they reach). Takes
// slots while fewer than `max_rows` rows are planned (at least one slot). A
// field whose column is missing or does not fit (attrstore::misfit) is left
// out and reported, and so is a row whose Flow ID the key column cannot hold;
// a row left with no field is dropped; a row removal is
// kept only when `delete_rows`. The plan may cover entries and carry no rows:
// its transaction still moves the watermark.
SyncPlan plan_sync(const std::vector<PendingEntry>& entries, const attrstore::TableSchema& schema,
                   bool delete_rows, size_t max_rows);

// The wait before the next try after `failures` failures in a row (1, 2,
// ...): initial × coefficient^(failures-1), at most the maximum.
Duration sync_backoff(const attrstore::SyncRetryPolicy& policy, uint32_t failures);

// Whether a transaction may begin: it must end (`budget`, which the database
// enforces) before this process's lease could have expired.
inline bool sync_may_begin(Duration lease_remaining, Duration budget) {
  return lease_remaining > budget;
}

// `interval` scaled by 90–110 % (`unit` in [0, 1)): schema refreshes of many
// processes do not line up.
Duration jittered(Duration interval, double unit);

}  // namespace dex
