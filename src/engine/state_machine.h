// The engine's deterministic state machine over a local RocksDB store
// (docs/engine.md, "The state machine" and "Apply rules").
//
// apply(slot, batch) applies every flow record of a log batch (the rules of
// src/flow over the store, docs/flow-rules.md), and an EpochStart's recovery, together with the new
// last applied slot in ONE RocksDB WriteBatch: after a crash the store holds either all of a batch
// or none of it, and replaying from last_applied() + 1 yields the same state. A slot at or below
// the last applied one is skipped, so replaying a batch twice changes nothing. apply reads no clock
// (every time comes inside the records) and does no I/O beyond the store.
//
// Thread contract: apply() from one thread at a time (the log writer's thread,
// or the replaying thread before it); the readers from any thread. A reader sees
// every batch entirely or not at all.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"
#include "dex/records.pb.h"
#include "flow/flow_rules.h"

namespace rocksdb {
class DB;
}

namespace dex {

class RocksKv;

// What applying one flow record did (docs/flow-rules.md).
struct FlowRecordResult {
  uint64_t proposal_id = 0;  // FlowRecord.proposal_id
  flow::ApplyResult result;
};

struct ApplyOutcome {
  bool skipped = false;                        // the slot was at or below the last applied one
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
  // The greatest time an applied record carried (0: none): a flow record whose
  // times are lower is applied at this time, so a run's history never goes
  // back in log order, also after a takeover (flow/record_time.h).
  StatusOr<int64_t> time_floor_ms() const;

  // Creates a RocksDB checkpoint of the store in `dir` (which must not exist;
  // SST files are hard-linked when on the same filesystem) and returns the last
  // slot the checkpoint has applied (nullopt: none). Safe during applies.
  StatusOr<std::optional<Slot>> checkpoint(const std::filesystem::path& dir);

  // Applies `batch` (the batch at `slot`) in one atomic write. An error means
  // the store could not be written; nothing of the batch was applied.
  StatusOr<ApplyOutcome> apply(Slot slot, const proto::LogBatch& batch);

  // ------------------------------------------------------------------ reads
  // A read-only view of the flow rules' state (flow/kv_txn.h) as it is now:
  // one consistent snapshot. Check its status() after reading.
  std::unique_ptr<RocksKv> flow_view() const;
  // The last slot applied in `view` (a flow_view): the slot whose state it
  // shows; 0 for a store that applied nothing.
  static StatusOr<uint64_t> applied_slot(RocksKv& view);
  // A writable scratch copy of the flow state (never committed), for the
  // proposer to see what a record will do before it appends it.
  std::unique_ptr<RocksKv> flow_scratch() const;

  // Every key and value of the store: tests compare states with it.
  StatusOr<std::map<std::string, std::string>> dump() const;

 private:
  explicit StateMachine(std::unique_ptr<rocksdb::DB> db);
  std::unique_ptr<rocksdb::DB> db_;
  std::mutex apply_mu_;  // one apply at a time
};

}  // namespace dex
