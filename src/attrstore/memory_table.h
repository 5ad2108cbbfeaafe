// TEST TOOL: an AttributeTable in memory, for the sync loop's tests and
// simulations (no database). It keeps the same rules as the SQL tables: the
// watermark row per (node ID, store), claim and commit fencing by epoch, the
// slot moving forward only from after_slot, rows upserted column by column in
// order; a field whose value misfits its column fails the whole commit as
// Permanent (as a strict database would). Faults: fail_next().
//
// Tables that share one MemoryDatabase see one set of rows and watermarks,
// like two processes writing the same database. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attrstore/attribute_table.h"

namespace dex::attrstore {

struct MemoryDatabase {
  explicit MemoryDatabase(TableSchema table_schema) : schema(std::move(table_schema)) {}

  std::mutex mu;
  TableSchema schema;  // GUARDED_BY(mu): what describe answers; a test may add columns
  // (node ID, store) -> the watermark row. GUARDED_BY(mu)
  std::map<std::pair<std::string, std::string>, Watermark> watermarks;
  // Flow ID -> column -> value (nullopt: NULL). GUARDED_BY(mu)
  std::map<std::string, std::map<std::string, std::optional<flow::AttributeValue>>> rows;
  // Fails the next calls of any table on this database (nothing is written). GUARDED_BY(mu)
  std::vector<Status> failures;
};

// A schema of a character key column `key` and the given columns.
TableSchema memory_schema(std::string key, std::vector<Column> columns);

class MemoryAttributeTable final : public AttributeTable {
 public:
  MemoryAttributeTable(std::shared_ptr<MemoryDatabase> db, std::string node_id, std::string store);

  // The next `times` calls that talk to the database (refresh_schema, ping,
  // claim, commit, read_watermark) fail with `status` and change nothing.
  void fail_next(Status status, int times = 1);

  const TableSchema& schema() const override { return schema_; }
  Status refresh_schema() override;
  Status ping() override;
  StatusOr<CommitResult> claim(uint64_t epoch, std::string_view process, Duration budget) override;
  StatusOr<CommitResult> commit(uint64_t epoch, std::string_view process, uint64_t after_slot,
                                uint64_t through_slot, const std::vector<RowWrite>& rows,
                                Duration budget) override;
  StatusOr<std::optional<Watermark>> read_watermark() override;
  std::string describe_target() const override { return "memory." + store_; }
  void set_test_hooks(TableTestHooks) override {}  // no transaction to freeze

 private:
  // The next injected failure, if any. REQUIRES: db_->mu held.
  std::optional<Status> take_failure();
  Status apply(const std::vector<RowWrite>& rows);  // REQUIRES: db_->mu held

  const std::shared_ptr<MemoryDatabase> db_;
  const std::pair<std::string, std::string> key_;
  const std::string store_;
  TableSchema schema_;  // the last refresh (the caller's thread)
};

}  // namespace dex::attrstore
