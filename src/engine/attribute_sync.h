// Attribute Store sync of one store on the active process (docs/attribute-store.md):
// a thread that takes the store's watermark for this epoch, then carries the
// SyncEntries the flow rules left in the local store to the table, in log
// order, one bounded transaction at a time (plan_sync decides what each
// carries), and tells the log what the table holds (AttributeStoreSynced) so
// every replica drops those entries. It never skips an entry: a failure waits
// (sync_backoff) and tries the same entries again. What to do next is the
// pure SyncMachine's answer; this is its thin shell. Internal to src/engine;
// the Engine owns it and calls down into it, never the reverse.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "attrstore/attribute_table.h"
#include "attrstore/store_settings.h"
#include "common/clock.h"
#include "common/types.h"
#include "engine/attribute_sync_report.h"
#include "engine/shared_store.h"
#include "engine/sync_machine.h"

namespace dex {

class BlobStore;
class FlowEngine;

struct AttributeSyncOptions {
  attrstore::StoreSettings store;
  attrstore::AttributeStoreSettings common;
  Epoch epoch;
  std::string process;  // this process's ID, written with the watermark
  // A quarter of lease.duration: every transaction ends within it (the spec's rule).
  Duration budget = milliseconds(2500);
  // How long this process's lease stays valid by its own clock (0: not valid).
  std::function<Duration()> lease_remaining;
  std::function<int64_t()> now_unix_ms;
  // After every try, on the sync thread (metrics). Must not block.
  std::function<void(const AttributeSyncReport&)> on_report;
  uint64_t seed = 1;  // the schema refresh's jitter
};

class AttributeSync {
 public:
  // All references must outlive this; `blobs` may be null (no large values).
  AttributeSync(AttributeSyncOptions options, attrstore::AttributeTable& table,
                const SharedStore& store, FlowEngine& flows, BlobStore* blobs, Clock& clock);
  ~AttributeSync();
  AttributeSync(const AttributeSync&) = delete;
  AttributeSync& operator=(const AttributeSync&) = delete;

  void start();
  // Asks the thread to end, without waiting: it ends at its next action (a
  // transaction in flight ends within its budget; a proposal in flight is
  // answered once the flow engine stops). Idempotent.
  void request_stop();
  // request_stop(), then waits for the thread. Idempotent.
  void stop();
  // New entries may be in the local store (after every applied batch).
  void wake();
  AttributeSyncReport report() const;

 private:
  void run();
  // Carries out one action of the machine; false once the sync must end.
  bool perform(const SyncAction& action);
  // The pending entries after `cursor` above `watermark`, whole slots, with
  // their values in place; and the oldest entry kept.
  StatusOr<PendingRead> read_pending(const std::string& cursor, uint64_t watermark);
  Status propose_trim(uint64_t through_slot);
  // Sleeps until `until` or stop() (or wake(), when `wakeable`); false once stopped.
  bool pause(TimePoint until, bool wakeable);
  void publish();

  const AttributeSyncOptions options_;
  attrstore::AttributeTable& table_;
  const SharedStore& store_;
  FlowEngine& flows_;
  BlobStore* const blobs_;
  Clock& clock_;

  SyncMachine machine_;  // the sync thread's only
  std::string last_logged_error_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;        // guarded by mu_
  bool woken_ = false;          // guarded by mu_
  AttributeSyncReport report_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace dex
