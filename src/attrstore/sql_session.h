// The database-specific half of an AttributeTable: one connection and the
// statements of one dialect. SqlAttributeTable (sql_table.cc) holds the rules
// (checks, fencing, the order of a transaction); a session only talks SQL.
//
// Messages of a session's statuses hold no value and no DSN (the server's own
// text goes through sanitize_server_message) and no store prefix (the table
// adds it). Every call is bounded by its deadline: on a timeout the session
// drops its connection and answers Transient. A session is not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attrstore/attribute_table.h"
#include "attrstore/table_name.h"
#include "attrstore/transaction_bound.h"
#include "common/clock.h"
#include "common/status.h"

namespace dex::attrstore {

// What describe found.
struct DescribedTable {
  std::string schema;  // the resolved schema (PostgreSQL) / database (MySQL)
  std::string table;   // the name as the database spells it
  std::vector<Column> columns;
  std::string unusable;  // why the table cannot be written ("is a view"); empty: it can
};

// The row of dex_attribute_sync_watermark this table writes.
struct WatermarkKey {
  std::string node_id;
  std::string store;
};

class SqlSession {
 public:
  virtual ~SqlSession() = default;

  // Connects unless connected. A connection that broke is dropped first.
  virtual Status connect(TimePoint deadline) = 0;
  virtual void disconnect() = 0;
  virtual Status ping(TimePoint deadline) = 0;

  // The table `name` (unqualified: the connection's search_path / database);
  // NotFound if there is none.
  virtual StatusOr<DescribedTable> describe(const TableName& name, TimePoint deadline) = 0;
  virtual Status create_watermark_table(const std::string& schema, TimePoint deadline) = 0;
  // The table and watermark table every later statement writes; names known
  // here are kept in the server's messages.
  virtual void set_target(const TableName& table, const TableName& watermark,
                          std::vector<std::string> known_names) = 0;

  // The transaction (after set_target). begin sets the server-side timeouts of
  // `bound` and starts the clock that every later statement's guard checks; a
  // statement past the guard fails Transient ("ran past its budget").
  virtual Status begin(const TransactionBound& bound, TimePoint deadline) = 0;
  // Creates the watermark row at (epoch, slot 0, process) unless it exists.
  virtual Status insert_watermark_if_absent(const WatermarkKey& key, const Watermark& initial,
                                            TimePoint deadline) = 0;
  // SELECT ... FOR UPDATE of the watermark row; nullopt if there is none.
  virtual StatusOr<std::optional<Watermark>> lock_watermark(const WatermarkKey& key,
                                                            TimePoint deadline) = 0;
  virtual Status write_row(const RowWrite& row, const TableSchema& schema, TimePoint deadline) = 0;
  virtual Status update_watermark(const WatermarkKey& key, const Watermark& to,
                                  TimePoint deadline) = 0;
  virtual Status commit(TimePoint deadline) = 0;
  // Best effort; a session that cannot roll back drops its connection (the
  // server then rolls back).
  virtual void rollback(TimePoint deadline) = 0;

  // Outside a transaction.
  virtual StatusOr<std::optional<Watermark>> read_watermark(const WatermarkKey& key,
                                                            TimePoint deadline) = 0;
};

// The sessions (postgres_session.cc, mysql_session.cc). Nothing connects yet.
// `dsn` is checked here (InvalidArgument: a malformed DSN, never echoed).
StatusOr<std::unique_ptr<SqlSession>> make_postgres_session(const std::string& dsn,
                                                            Duration connect_timeout);
StatusOr<std::unique_ptr<SqlSession>> make_mysql_session(const std::string& dsn,
                                                         Duration connect_timeout);

}  // namespace dex::attrstore
