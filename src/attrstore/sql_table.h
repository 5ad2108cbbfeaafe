// The AttributeTable of both databases: the rules (checks at open, fencing by
// epoch, the watermark moving forward only, the order of a transaction) over
// a SqlSession that speaks the dialect. sql_table.cc: open, describe, reads;
// sql_transactions.cc: claim and commit.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "attrstore/attribute_table.h"
#include "attrstore/sql_session.h"
#include "attrstore/table_name.h"
#include "attrstore/transaction_bound.h"

namespace dex::attrstore {

class SqlAttributeTable final : public AttributeTable {
 public:
  // Everything is checked already (AttributeTable::open).
  SqlAttributeTable(StoreSettings store, WatermarkKey key, TableName target, TableName watermark,
                    TableSchema schema, std::unique_ptr<SqlSession> session, Duration op_timeout);

  const TableSchema& schema() const override;
  Status refresh_schema() override;
  Status ping() override;
  StatusOr<CommitResult> claim(uint64_t epoch, std::string_view process, Duration budget) override;
  StatusOr<CommitResult> commit(uint64_t epoch, std::string_view process, uint64_t after_slot,
                                uint64_t through_slot, const std::vector<RowWrite>& rows,
                                Duration budget) override;
  StatusOr<std::optional<Watermark>> read_watermark() override;
  std::string describe_target() const override;
  void set_test_hooks(TableTestHooks hooks) override;

 private:
  // One transaction's clock: the local deadline and the guard's.
  struct Txn {
    TimePoint start;
    TimePoint deadline;  // start + budget: no call waits past it
    TransactionBound bound;
  };
  Txn start_txn(Duration budget) const;
  // Transient if the guard has passed on the local clock (the server checks too).
  Status within_guard(const Txn& txn) const;
  // Connects if needed, then begins. REQUIRES: mu_ held.
  Status begin_txn(const Txn& txn);
  StatusOr<CommitResult> claim_locked(uint64_t epoch, const std::string& process, const Txn& txn);
  StatusOr<CommitResult> commit_locked(const Watermark& to, uint64_t after_slot,
                                       const std::vector<RowWrite>& rows, const Txn& txn);
  Status apply_rows(const std::vector<RowWrite>& rows, const Txn& txn);
  // "Attribute Store "name": <what> <table>: <message>", same code.
  Status annotate(const Status& status, std::string_view what) const;
  TimePoint op_deadline() const;
  std::vector<std::string> known_names() const;

  // Constant after construction.
  const StoreSettings store_;
  const WatermarkKey key_;
  const TableName target_;
  const TableName watermark_;
  const Duration op_timeout_;

  mutable std::mutex mu_;
  TableSchema schema_;                   // GUARDED_BY(mu_)
  std::unique_ptr<SqlSession> session_;  // GUARDED_BY(mu_)
  TableTestHooks hooks_;                 // GUARDED_BY(mu_)
};

// "Attribute Store "name": "
std::string store_prefix(std::string_view store_name);

}  // namespace dex::attrstore
