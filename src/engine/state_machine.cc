#include "engine/state_machine.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <charconv>

#include "flow/record_time.h"
#include "engine/rocks_kv.h"
#include "flow/kv_txn.h"

namespace dex {
namespace {

// The store's own key (docs/engine.md, "What is in RocksDB"); the flow rules'
// keys are theirs (docs/flow-rules.md, "Keys") and never start with "m/".
constexpr std::string_view kLastAppliedKey = "m/last_applied";
// The greatest time an applied record carried: records are applied no earlier
// (record_time.h), also across a takeover to a process whose clock is behind.
constexpr std::string_view kTimeFloorKey = "m/time_floor_ms";

Status db_status(const rocksdb::Status& s, std::string_view what) {
  if (s.IsCorruption()) {
    return Status::corruption(fmt::format("local store: {}: {}", what, s.ToString()));
  }
  return Status::permanent(fmt::format("local store: {}: {}", what, s.ToString()));
}

StatusOr<std::optional<Slot>> read_last_applied(rocksdb::DB& db) {
  std::string value;
  auto s = db.Get(rocksdb::ReadOptions(), std::string(kLastAppliedKey), &value);
  if (s.IsNotFound()) return std::optional<Slot>();
  if (!s.ok()) return db_status(s, "reading the last applied slot");
  uint64_t slot = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), slot);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    return Status::corruption(
        fmt::format("local store: the last applied slot '{}' is not a number", value));
  }
  return std::optional<Slot>(Slot(slot));
}

StatusOr<int64_t> read_time_floor(rocksdb::DB& db) {
  std::string value;
  auto s = db.Get(rocksdb::ReadOptions(), std::string(kTimeFloorKey), &value);
  if (s.IsNotFound()) return int64_t{0};  // nothing applied, or a store of an older version
  if (!s.ok()) return db_status(s, "reading the time floor");
  int64_t ms = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty() || ms < 0) {
    return Status::corruption(
        fmt::format("local store: the time floor '{}' is not a time in ms", value));
  }
  return ms;
}

// Applies `record` no earlier than `time_floor`, and raises the floor to its time.
flow::ApplyResult apply_flow(flow::FlowTxn& txn, const flow::FlowRecord& record,
                             int64_t& time_floor, flow::Effects& effects) {
  // The proposer stamps in log order and starts at this floor, so a record
  // below it is rare (a proposal racing the engine's start): it is applied at
  // the floor, the same on every replay.
  if (record_time(record) >= time_floor) {
    time_floor = record_time(record);
    return flow::apply_record(txn, record, effects);
  }
  flow::FlowRecord raised = record;
  time_floor = stamp_no_earlier(raised, time_floor);
  return flow::apply_record(txn, raised, effects);
}
}  // namespace

StateMachine::StateMachine(std::unique_ptr<rocksdb::DB> db) : db_(std::move(db)) {}
StateMachine::~StateMachine() = default;

StatusOr<std::unique_ptr<StateMachine>> StateMachine::open(const std::filesystem::path& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, path.string(), &raw);
  if (!s.ok()) return db_status(s, fmt::format("opening '{}'", path.string()));
  return std::unique_ptr<StateMachine>(new StateMachine(std::unique_ptr<rocksdb::DB>(raw)));
}

StatusOr<std::optional<Slot>> StateMachine::last_applied() const { return read_last_applied(*db_); }

StatusOr<int64_t> StateMachine::time_floor_ms() const { return read_time_floor(*db_); }

StatusOr<std::optional<Slot>> StateMachine::checkpoint(const std::filesystem::path& dir) {
  rocksdb::Checkpoint* raw = nullptr;
  auto s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  if (!s.ok()) return db_status(s, "preparing a checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // Flushes the memtable first (log_size_for_flush 0), so the files hold everything.
  s = checkpoint->CreateCheckpoint(dir.string(), /*log_size_for_flush=*/0);
  if (!s.ok()) return db_status(s, fmt::format("creating a checkpoint in '{}'", dir.string()));
  // Applies go on meanwhile: the checkpoint itself says which slot it holds.
  rocksdb::DB* ro = nullptr;
  s = rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir.string(), &ro);
  if (!s.ok()) return db_status(s, fmt::format("opening the checkpoint '{}'", dir.string()));
  std::unique_ptr<rocksdb::DB> db(ro);
  return read_last_applied(*db);
}

StatusOr<ApplyOutcome> StateMachine::apply(Slot slot, const proto::LogBatch& batch) {
  std::lock_guard<std::mutex> lock(apply_mu_);
  ApplyOutcome outcome;
  auto last = last_applied();
  if (!last.is_ok()) return last.status();
  if (last->has_value() && slot <= last->value()) {
    // Idempotent replay: this batch is already in the store.
    outcome.skipped = true;
    return outcome;
  }
  auto floor = time_floor_ms();
  if (!floor.is_ok()) return floor.status();
  int64_t time_floor = *floor;
  auto flows = RocksKv::overlay(*db_);
  flow::KvFlowTxn flow_txn(*flows, slot.value);
  // Bounded by the batch's records (the log writer's batch limit).
  for (int i = 0; i < batch.records_size(); ++i) {
    const proto::LogRecord& record = batch.records(i);
    switch (record.kind_case()) {
      case proto::LogRecord::kEpochStart:
        // Recovery: docs/flow-rules.md, "Failures, retries and recovery".
        time_floor = std::max(time_floor, record.epoch_start().at_unix_ms());
        flow::recover_attempts(flow_txn, time_floor, outcome.flow_effects);
        break;
      case proto::LogRecord::kFlow:
        outcome.flow_results.push_back(
            {record.flow().proposal_id(),
             apply_flow(flow_txn, record.flow(), time_floor, outcome.flow_effects)});
        break;
      case proto::LogRecord::kOpaque:
        break;  // a layer above the log that the engine does not run (tests)
      default:
        // A kind this build does not know: a log of another version (the DAG
        // model's records were removed) or a damaged one. Applying around it
        // would diverge from the process that wrote it.
        return Status::corruption(fmt::format(
            "log slot {} record {} is of a kind this dex-server-zd does not know (a log written "
            "by another version?): the local store cannot be built from this log",
            slot.value, i));
    }
  }
  // A failed read may have misled the rules: nothing of this batch is written.
  if (!flows->status().is_ok()) return flows->status();
  rocksdb::WriteBatch write;
  flows->write_into(write);
  write.Put(std::string(kLastAppliedKey), std::to_string(slot.value));
  write.Put(std::string(kTimeFloorKey), std::to_string(time_floor));
  // Not synced: the log is the durable copy; a store that lost its tail
  // replays it (docs/engine.md, "What is in RocksDB").
  auto s = db_->Write(rocksdb::WriteOptions(), &write);
  if (!s.ok()) return db_status(s, fmt::format("writing the batch of slot {}", slot.value));
  return outcome;
}

std::unique_ptr<RocksKv> StateMachine::flow_view() const { return RocksKv::snapshot(*db_); }

StatusOr<uint64_t> StateMachine::applied_slot(RocksKv& view) {
  auto value = view.get(kLastAppliedKey);
  if (!view.status().is_ok()) return view.status();
  if (!value) return uint64_t{0};
  uint64_t slot = 0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), slot);
  if (ec != std::errc() || end != value->data() + value->size() || value->empty())
    return Status::corruption(
        fmt::format("local store: the last applied slot '{}' is not a number", *value));
  return slot;
}
std::unique_ptr<RocksKv> StateMachine::flow_scratch() const { return RocksKv::scratch(*db_); }

StatusOr<std::map<std::string, std::string>> StateMachine::dump() const {
  std::map<std::string, std::string> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next())
    out[it->key().ToString()] = it->value().ToString();
  if (!it->status().ok()) return db_status(it->status(), "dumping");
  return out;
}

}  // namespace dex
