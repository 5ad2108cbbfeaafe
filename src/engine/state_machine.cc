#include "engine/state_machine.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <charconv>

#include "engine/rocks_kv.h"
#include "flow/kv_txn.h"

namespace dex {
namespace {

// The store's own key (docs/engine.md, "What is in RocksDB"); the flow rules'
// keys are theirs (docs/flow-rules.md, "Keys") and never start with "m/".
constexpr std::string_view kLastAppliedKey = "m/last_applied";

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
  auto flows = RocksKv::overlay(*db_);
  flow::KvFlowTxn flow_txn(*flows);
  // Bounded by the batch's records (the log writer's batch limit).
  for (int i = 0; i < batch.records_size(); ++i) {
    const proto::LogRecord& record = batch.records(i);
    switch (record.kind_case()) {
      case proto::LogRecord::kEpochStart:
        // Recovery: docs/flow-rules.md, "Failures, retries and recovery".
        flow::recover_attempts(flow_txn, record.epoch_start().at_unix_ms(), outcome.flow_effects);
        break;
      case proto::LogRecord::kFlow:
        outcome.flow_results.push_back(
            {record.flow().proposal_id(),
             flow::apply_record(flow_txn, record.flow(), outcome.flow_effects)});
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
  // Not synced: the log is the durable copy; a store that lost its tail
  // replays it (docs/engine.md, "What is in RocksDB").
  auto s = db_->Write(rocksdb::WriteOptions(), &write);
  if (!s.ok()) return db_status(s, fmt::format("writing the batch of slot {}", slot.value));
  return outcome;
}

std::unique_ptr<RocksKv> StateMachine::flow_view() const { return RocksKv::snapshot(*db_); }
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
