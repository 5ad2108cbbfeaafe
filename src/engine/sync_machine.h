// Attribute Store sync of one store, the deciding part (docs/attribute-store.md,
// "Delivery"): a pure machine — no clock, thread, socket or database — that
// answers what the sync shell (attribute_sync.h) does next: take the
// watermark, read the pending SyncEntries, commit one planned transaction,
// record the watermark in the log, refresh the schema, or wait. The shell
// performs the action and feeds the outcome back. Run under a seeded
// simulation (tests/engine/sync_sim_test.cc) with failures, lost commits,
// takeovers and stale processes: the table never skips a write and its
// watermark never goes back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attrstore/attribute_table.h"
#include "attrstore/store_settings.h"
#include "common/clock.h"
#include "common/random.h"
#include "engine/attribute_sync_report.h"
#include "engine/sync_plan.h"

namespace dex {

// What one read of the local store found (the shell's read_pending).
struct PendingRead {
  std::vector<PendingEntry> entries;  // after the cursor, above the watermark, whole slots
  // The last entry key passed over because the table holds it already (empty: none).
  std::string skipped_to;
  // The slot of the oldest entry the local store keeps (0: none): a trim is
  // due while it is at or below the watermark.
  uint64_t oldest_kept_slot = 0;
};

struct SyncAction {
  enum class Kind {
    kClaim,    // table.claim(epoch)
    kRead,     // read the pending entries after `cursor` above `watermark`
    kCommit,   // table.commit(epoch, watermark, plan.through_slot, plan.rows)
    kTrim,     // propose AttributeStoreSynced through `watermark`
    kRefresh,  // table.refresh_schema()
    kWait,     // until `until`; `wakeable`: new entries end it early
    kStop,     // fenced or stopped: sync no more
  };
  Kind kind = Kind::kWait;
  uint64_t watermark = 0;
  std::string cursor;
  const SyncPlan* plan = nullptr;  // kCommit: valid until the next call
  TimePoint until{};
  bool wakeable = false;
};

class SyncMachine {
 public:
  struct Config {
    Duration budget = milliseconds(2500);  // a transaction's bound
    attrstore::SyncRetryPolicy retry;
    Duration schema_sync_interval = std::chrono::minutes(1);
    size_t batch_size = 100;
    bool delete_rows = false;
    Duration idle_poll = milliseconds(200);  // an idle sync looks again this often
    Duration trim_interval = seconds(1);     // AttributeStoreSynced at most this often
    Duration lease_wait = milliseconds(50);  // looks again at a lease too short
    uint64_t seed = 1;                       // the refresh jitter
  };
  SyncMachine(Config config, AttributeSyncReport report, TimePoint now);

  // What to do now; `lease_remaining` is how long this process's lease stays valid.
  SyncAction next(TimePoint now, Duration lease_remaining);

  void claimed(const StatusOr<attrstore::CommitResult>& result, TimePoint now);
  void read(StatusOr<PendingRead> result, const attrstore::TableSchema& schema, TimePoint now,
            int64_t now_unix_ms);
  void committed(const StatusOr<attrstore::CommitResult>& result, TimePoint now);
  void trimmed(TimePoint now);
  void refreshed(TimePoint now);
  void stop() { phase_ = Phase::kStopped; }

  const AttributeSyncReport& report() const { return report_; }
  uint64_t watermark() const { return watermark_; }
  // The plan's filtered fields since the last call (to log; never values).
  std::vector<SyncMisfit> take_misfits();

 private:
  enum class Phase { kClaiming, kSyncing, kFenced, kStopped };
  void failed(std::string what, const Status& status, TimePoint now);
  void fenced(const attrstore::Watermark& found);

  const Config config_;
  Random random_;
  Phase phase_ = Phase::kClaiming;
  uint64_t watermark_ = 0;
  std::string cursor_;             // the last entry key carried or passed over
  std::optional<SyncPlan> plan_;   // read, not committed yet
  bool idle_ = false;              // the last read found nothing
  uint64_t oldest_kept_slot_ = 0;  // as the last read saw it
  uint32_t failures_in_row_ = 0;
  TimePoint retry_at_{};
  TimePoint last_trim_{};
  bool trimmed_once_ = false;
  TimePoint next_refresh_;
  std::vector<SyncMisfit> misfits_;
  AttributeSyncReport report_;
};

}  // namespace dex
