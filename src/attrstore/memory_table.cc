#include "attrstore/memory_table.h"

namespace dex::attrstore {

TableSchema memory_schema(std::string key, std::vector<Column> columns) {
  Column k;
  k.name = key;
  k.sql_type = "text";
  k.base_type = "text";
  k.kind = ColumnKind::kString;
  k.nullable = false;
  k.primary_key = true;
  TableSchema schema;
  schema.key_column = std::move(key);
  schema.columns.push_back(std::move(k));
  for (Column& c : columns) schema.columns.push_back(std::move(c));
  return schema;
}

MemoryAttributeTable::MemoryAttributeTable(std::shared_ptr<MemoryDatabase> db, std::string node_id,
                                           std::string store)
    : db_(std::move(db)), key_(std::move(node_id), store), store_(store) {
  std::lock_guard lock(db_->mu);
  schema_ = db_->schema;
}

void MemoryAttributeTable::fail_next(Status status, int times) {
  std::lock_guard lock(db_->mu);
  for (int i = 0; i < times; ++i) db_->failures.push_back(status);
}

std::optional<Status> MemoryAttributeTable::take_failure() {
  if (db_->failures.empty()) return std::nullopt;
  Status s = db_->failures.front();
  db_->failures.erase(db_->failures.begin());
  return s;
}

Status MemoryAttributeTable::refresh_schema() {
  std::lock_guard lock(db_->mu);
  if (auto f = take_failure()) return *f;
  schema_ = db_->schema;
  return Status::ok();
}

Status MemoryAttributeTable::ping() {
  std::lock_guard lock(db_->mu);
  if (auto f = take_failure()) return *f;
  return Status::ok();
}

StatusOr<CommitResult> MemoryAttributeTable::claim(uint64_t epoch, std::string_view process,
                                                   Duration /*budget*/) {
  std::lock_guard lock(db_->mu);
  if (auto f = take_failure()) return *f;
  auto [it, created] = db_->watermarks.try_emplace(key_, Watermark{epoch, 0, std::string(process)});
  if (it->second.epoch > epoch) return CommitResult{CommitOutcome::kFenced, it->second};
  it->second.epoch = epoch;
  it->second.process = std::string(process);
  return CommitResult{CommitOutcome::kCommitted, it->second};
}

Status MemoryAttributeTable::apply(const std::vector<RowWrite>& rows) {
  // Checked first: a refused value leaves every row as it was.
  for (const RowWrite& row : rows) {
    if (row.delete_row) continue;
    for (const Field& f : row.fields) {
      const Column* c = db_->schema.find(f.column);
      if (c == nullptr) return Status::invalid_argument("no column " + f.column);
      if (auto why = misfit(*c, f.value)) {
        return Status::permanent("column " + f.column + " refused a value: " + *why);
      }
    }
  }
  for (const RowWrite& row : rows) {
    if (row.delete_row) {
      db_->rows.erase(row.flow_id);
      continue;
    }
    auto& stored = db_->rows[row.flow_id];
    for (const Field& f : row.fields) stored[f.column] = f.value;
  }
  return Status::ok();
}

StatusOr<CommitResult> MemoryAttributeTable::commit(uint64_t epoch, std::string_view process,
                                                    uint64_t after_slot, uint64_t through_slot,
                                                    const std::vector<RowWrite>& rows,
                                                    Duration /*budget*/) {
  if (through_slot <= after_slot) {
    return Status::invalid_argument("commit needs through_slot > after_slot");
  }
  std::lock_guard lock(db_->mu);
  if (auto f = take_failure()) return *f;
  auto it = db_->watermarks.find(key_);
  if (it == db_->watermarks.end()) {
    return Status::not_found("there is no watermark row for this node and store; claim() first");
  }
  if (it->second.epoch > epoch) return CommitResult{CommitOutcome::kFenced, it->second};
  if (it->second.slot != after_slot) return CommitResult{CommitOutcome::kMoved, it->second};
  if (Status s = apply(rows); !s.is_ok()) return s;
  it->second = Watermark{epoch, through_slot, std::string(process)};
  return CommitResult{CommitOutcome::kCommitted, it->second};
}

StatusOr<std::optional<Watermark>> MemoryAttributeTable::read_watermark() {
  std::lock_guard lock(db_->mu);
  if (auto f = take_failure()) return *f;
  auto it = db_->watermarks.find(key_);
  if (it == db_->watermarks.end()) return std::optional<Watermark>();
  return std::optional<Watermark>(it->second);
}

}  // namespace dex::attrstore
