// The flow rules' key-value store (flow/kv_txn.h) over the local RocksDB
// store (docs/flow-rules.md, "Keys"). Two uses:
//  - in StateMachine::apply: reads see the batch's own earlier writes (an
//    overlay), and the writes join the batch's one atomic WriteBatch;
//  - for queries: a read-only view of one consistent RocksDB snapshot.
// A failed RocksDB read cannot be answered through KvStore: the first error is
// kept in status(), reads return nothing from then on, and the caller discards
// the transaction (nothing of it is written).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "flow/kv_txn.h"

namespace rocksdb {
class DB;
class Snapshot;
class WriteBatch;
}  // namespace rocksdb

namespace dex {

class RocksKv final : public flow::KvStore {
 public:
  // A writable overlay over the current state of `db`.
  static std::unique_ptr<RocksKv> overlay(rocksdb::DB& db);
  // A read-only view of `db` as it is now; puts and deletes are refused.
  static std::unique_ptr<RocksKv> snapshot(rocksdb::DB& db);
  // A writable overlay over one consistent snapshot of `db`, never committed:
  // the proposer applies a record to it to see what the record will do.
  static std::unique_ptr<RocksKv> scratch(rocksdb::DB& db);
  ~RocksKv() override;
  RocksKv(const RocksKv&) = delete;
  RocksKv& operator=(const RocksKv&) = delete;

  std::optional<std::string> get(std::string_view key) override;
  void put(std::string_view key, std::string_view value) override;
  void del(std::string_view key) override;
  std::vector<std::pair<std::string, std::string>> scan(std::string_view prefix) override;
  std::vector<std::pair<std::string, std::string>> scan_first(std::string_view prefix, size_t limit,
                                                              std::string_view from) override;

  // Visits the keys k with from <= k < to (to empty: no bound) in order, or
  // in reverse, until `visit` returns false: for reading a large range of a
  // view without holding it in memory (the search planner). A view with
  // writes of its own cannot be visited.
  void visit(std::string_view from, std::string_view to, bool reverse,
             const std::function<bool(std::string_view, std::string_view)>& visit);

  // Ok, or the first RocksDB error a read met.
  const Status& status() const { return status_; }
  // Adds every write of the overlay to `batch`.
  void write_into(rocksdb::WriteBatch& batch) const;
  bool empty() const { return writes_.empty(); }

 private:
  RocksKv(rocksdb::DB& db, const rocksdb::Snapshot* snapshot, bool writable);
  rocksdb::DB& db_;
  const rocksdb::Snapshot* snapshot_;  // null: reads the current state
  const bool writable_;
  std::map<std::string, std::optional<std::string>, std::less<>> writes_;  // nullopt: deleted
  Status status_;
};

}  // namespace dex
