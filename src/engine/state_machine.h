// The engine's deterministic state machine over a local RocksDB store
// (docs/engine.md, "The state machine" and "Apply rules").
//
// apply(slot, batch) applies every engine record of a log batch, and an
// EpochStart's recovery, together with the new last applied slot in ONE
// RocksDB WriteBatch: after a crash the store holds either all of a batch or
// none of it, and replaying from last_applied() + 1 yields the same state. A
// slot at or below the last applied one is skipped, so replaying a batch twice
// changes nothing. apply reads no clock (every time comes inside the records)
// and does no I/O beyond the store.
//
// Thread contract: apply() from one thread at a time (the log writer's thread,
// or the replaying thread before it); the readers from any thread. A reader sees
// every batch entirely or not at all.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/types.h"
#include "dex/api.pb.h"
#include "dex/engine.pb.h"
#include "dex/records.pb.h"
#include "flow/flow_rules.h"

namespace rocksdb {
class DB;
}

namespace dex {

class RocksKv;

// What applying one engine record did (docs/engine.md, "Apply rules").
enum class ApplyKind {
  kApplied,    // it changed the state: flow created, result accepted, timer fired, ...
  kUnchanged,  // an idempotent repeat: the flow already existed, the same flow type, already ended
  kStale,      // refused: the attempt or timer it names is no longer current; changes nothing
  kRejected,   // refused: invalid (unknown flow type or flow, bad definition); changes nothing
};
std::string_view apply_kind_name(ApplyKind kind);

struct RecordResult {
  uint64_t proposal_id = 0;  // EngineRecord.proposal_id
  ApplyKind kind = ApplyKind::kApplied;
  std::string message;  // why, for kStale / kRejected / kUnchanged
};

// What the scheduler must learn from a batch.
struct ApplyEffects {
  struct StepRef {
    std::string flow_id, step;
  };
  struct Ended {
    std::string flow_id, step, task_id;
    AttemptOutcome outcome = ATTEMPT_OUTCOME_UNSPECIFIED;
  };
  std::vector<StepRef> ready;                   // Steps that became READY (in their queue order)
  std::vector<int64_t> timers_set;              // wake_at_ms of new durable timers
  std::vector<std::string> attempts_started;    // task ids
  std::vector<Ended> attempts_ended;            // including the ones a flow's end ended
  std::vector<std::string> attempts_withdrawn;  // task ids
  std::vector<std::string> flows_ended;
};

// What applying one flow record did (docs/flow-rules.md).
struct FlowRecordResult {
  uint64_t proposal_id = 0;  // FlowRecord.proposal_id
  flow::ApplyResult result;
};

struct ApplyOutcome {
  bool skipped = false;               // the slot was at or below the last applied one
  std::vector<RecordResult> results;  // one per engine record, in batch order
  ApplyEffects effects;
  std::vector<FlowRecordResult> flow_results;  // one per flow record, in batch order
  flow::Effects flow_effects;                  // of the flow records and the EpochStart's recovery
};

class StateMachine {
 public:
  // Opens (creating if missing) the RocksDB store at `path`.
  static StatusOr<std::unique_ptr<StateMachine>> open(const std::filesystem::path& path);
  ~StateMachine();
  StateMachine(const StateMachine&) = delete;
  StateMachine& operator=(const StateMachine&) = delete;

  // The last slot applied; nullopt for a store that applied nothing yet.
  StatusOr<std::optional<Slot>> last_applied() const;

  // Creates a RocksDB checkpoint of the store in `dir` (which must not exist;
  // SST files are hard-linked when on the same filesystem) and returns the last
  // slot the checkpoint has applied (nullopt: none). Safe during applies.
  StatusOr<std::optional<Slot>> checkpoint(const std::filesystem::path& dir);

  // Applies `batch` (the batch at `slot`) in one atomic write. An error means
  // the store could not be written; nothing of the batch was applied.
  StatusOr<ApplyOutcome> apply(Slot slot, const proto::LogBatch& batch);

  // ------------------------------------------------------------------ reads
  StatusOr<std::optional<FlowType>> flow_type(std::string_view name) const;
  StatusOr<std::vector<FlowType>> flow_types() const;
  StatusOr<std::optional<proto::StoredFlow>> flow(std::string_view flow_id) const;
  // Flows in flow-id order, filtered by `status` (UNSPECIFIED: all), after the
  // flow id `page_token` (empty: from the start). next_page_token is set when
  // more may follow.
  StatusOr<ListFlowsResponse> list_flows(FlowStatus status, size_t page_size,
                                         std::string_view page_token) const;

  // READY Steps of `task_queue` in FIFO order, skipping those `skip` names (the
  // scheduler's in-flight dispatches), at most `limit`.
  StatusOr<std::vector<ApplyEffects::StepRef>> ready_steps(
      std::string_view task_queue, size_t limit,
      const std::function<bool(const std::string& flow_id, const std::string& step)>& skip) const;
  struct Timer {
    int64_t wake_at_ms = 0;
    std::string flow_id, step;
  };
  // Durable timers in due order, at most `limit`, up to and including `until_ms`.
  StatusOr<std::vector<Timer>> timers(int64_t until_ms, size_t limit) const;
  // The earliest durable timer's wake time, if any.
  StatusOr<std::optional<int64_t>> next_timer_ms() const;
  struct Running {
    std::string flow_id, step, task_id;
  };
  // Every attempt that is still running (recovery ended them all at the EpochStart).
  StatusOr<std::vector<Running>> running_attempts() const;

  // A read-only view of the flow rules' state (flow/kv_txn.h) as it is now:
  // one consistent snapshot. Check its status() after reading.
  std::unique_ptr<RocksKv> flow_view() const;
  // A writable scratch copy of the flow state (never committed), for the
  // proposer to see what a record will do before it appends it.
  std::unique_ptr<RocksKv> flow_scratch() const;

  // Every key and value of the store: tests compare states with it.
  StatusOr<std::map<std::string, std::string>> dump() const;

 private:
  // Where a prefix scan may start (docs/engine.md, "Scans skip deleted entries").
  // Ready-queue, timer and running-attempt entries are deleted as fast as they
  // are added; RocksDB keeps the deletions as tombstones until compaction, and a
  // scan from the prefix would step over every one of them (it made dispatch cost
  // grow with the number of flows ever run). Invariant: every live key under a
  // prefix is >= its hint. A scan raises the hint to the first live key it saw
  // (to the prefix's end when it saw none), unless an apply inserted under the
  // prefix meanwhile (the generation moved);
  // an insert lowers it. The hints are a cache, not state: replay ignores them.
  class ScanHints {
   public:
    // The key to Seek to, and the generation to hand back to scanned().
    std::string start(const std::string& prefix, uint64_t* generation) const;
    void scanned(const std::string& prefix, uint64_t generation, const std::string* first_key);
    void inserted(const std::string& prefix, const std::string& key);

   private:
    struct Hint {
      std::string from;  // empty: scan from the prefix
      uint64_t generation = 0;
    };
    mutable std::mutex mu_;
    std::map<std::string, Hint> hints_;  // guarded by mu_; one per scanned prefix
  };

  explicit StateMachine(std::unique_ptr<rocksdb::DB> db);
  std::unique_ptr<rocksdb::DB> db_;
  std::mutex apply_mu_;  // one apply at a time
  mutable ScanHints hints_;
};

}  // namespace dex
