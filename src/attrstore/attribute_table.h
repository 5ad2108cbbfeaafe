// The SQL side of the Attribute Store (docs/attribute-store-types.md): one
// user table per store, one row per Flow ID, one column per synced Attribute,
// and dex's watermark row (dex_attribute_sync_watermark) written in the same
// transaction as the rows it covers.
//
// Thread contract: an AttributeTable is used by one thread at a time (the
// sync loop of its store); calls are serialized by an internal mutex, so a
// second thread waits rather than corrupting the connection. Every call that
// talks to the database is bounded: connect by connect_timeout, transactions
// by their budget (see commit), other calls by the connect timeout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attrstore/store_settings.h"
#include "common/clock.h"
#include "common/status.h"
#include "dex/flow.pb.h"

namespace dex::attrstore {

// What an Attribute type may be written into (misfit decides from the kind and
// the limits below).
enum class ColumnKind { kString, kInt, kDouble, kBool, kDatetime, kJson, kBytes, kOther };

// One column of the target table, as the last describe found it.
struct Column {
  std::string name;
  std::string
      sql_type;  // as the database describes it: "character varying(64)", "int(10) unsigned"
  std::string base_type;  // without modifiers: "character varying", "jsonb" (PostgreSQL);
                          // DATA_TYPE "varchar", "longtext" (MySQL)
  ColumnKind kind = ColumnKind::kOther;
  bool nullable = true, has_default = false, primary_key = false;
  bool generated = false;  // computed by the database (generated, identity ALWAYS): never written
  int64_t max_length = 0;  // strings (characters) and bytes (bytes); 0: unlimited
  int64_t max_bytes = 0;   // strings: a limit in bytes (MySQL tinytext/text/mediumtext); 0: none
  // Strings and JSON: the column's character set ("utf8mb4", "latin1"; for
  // messages) and the largest code point it stores (utf8mb3: U+FFFF).
  std::string charset;
  char32_t max_code_point = 0x10FFFF;
  bool nul_allowed = true;  // strings and JSON: U+0000 can be stored (not in PostgreSQL)
  int64_t int_min = 0,
          int_max = 0;  // kInt: the range the column holds (incl. numeric(p,0), unsigned)
  // numeric/decimal columns (kind kInt for scale 0, else kDouble): digits in
  // all and after the point; precision 0: PostgreSQL's unconstrained numeric.
  bool is_decimal = false;
  int decimal_precision = 0, decimal_scale = 0;
  // kDouble floating point: the largest finite magnitude (FLT_MAX for real/
  // float), whether NaN and infinities are stored, whether negatives are refused.
  double double_max = 0;
  bool non_finite_allowed = false;
  bool is_unsigned = false;
  // kDatetime: the range the column holds, Unix milliseconds inclusive (MySQL
  // timestamp: 1970-01-01 00:00:01 .. 2038-01-19 03:14:07.999 UTC), and the
  // fractional-second digits it keeps (the writer truncates to them).
  int64_t datetime_min_ms = 0, datetime_max_ms = 0;
  int fraction_digits = 6;
  // MySQL strings: the collation (COLLATION_NAME); the key column needs a
  // binary one, or Flow IDs that differ in case would share a row.
  std::string collation;
};

struct TableSchema {
  std::string key_column;  // the primary-key column: the Flow ID
  std::vector<Column> columns;
  // nullptr if the table has no column `name` (exact, case-sensitive).
  const Column* find(std::string_view name) const;
};

// One field of one row: a column and its value; nullopt sets NULL.
struct Field {
  std::string column;
  std::optional<flow::AttributeValue> value;
};

// The row of one Flow ID: an upsert of `fields` (the other columns keep their
// values), or its removal when delete_row (fields are then ignored).
struct RowWrite {
  std::string flow_id;
  std::vector<Field> fields;
  bool delete_row = false;
};

// dex's row in dex_attribute_sync_watermark for (node ID, store name).
struct Watermark {
  uint64_t epoch = 0;
  uint64_t slot = 0;    // the last log slot whose writes the table holds
  std::string process;  // who wrote it (free text, e.g. the process ID)
  bool operator==(const Watermark&) const = default;
};

enum class CommitOutcome { kCommitted, kFenced, kMoved };
struct CommitResult {
  CommitOutcome outcome = CommitOutcome::kCommitted;
  Watermark found;  // the watermark as the transaction read it (kCommitted: as written)
};

// The type contract (docs/attribute-store-types.md). nullopt if `value` fits
// `column`, else the reason, which never holds the value: "longer than the
// column's 16 characters", "a string into an integer column", "NULL into a NOT
// NULL column", "the primary key column". Pure: no database.
std::optional<std::string> misfit(const Column& column,
                                  const std::optional<flow::AttributeValue>& value);
// Whether a Flow ID fits the key column (its length and character set): a
// row whose Flow ID does not fit cannot be written. nullopt: it fits.
std::optional<std::string> key_misfit(const Column& key_column, std::string_view flow_id);

// TEST ONLY: seams into a transaction.
struct TableTestHooks {
  // Runs inside commit() after the watermark update, before COMMIT is sent:
  // a test sleeps here to play a client frozen mid-transaction.
  std::function<void()> before_commit;
};

class AttributeTable {
 public:
  // Connects (within connect_timeout), pings, describes the table and checks
  // it: exactly one primary-key column, character-compatible (char/varchar/
  // text), every other NOT NULL column with a default (or generated); MySQL:
  // a transactional engine. Creates the watermark table in the table's schema
  // (database) if common.create_watermark_table, and checks its columns either
  // way. Errors name the store, the table and the reason, never the DSN:
  //   Attribute Store "reporting": table public.orders has 2 primary-key
  //   columns (id, region); it needs exactly one character column (the Flow ID)
  // Transient for a server that cannot be reached, InvalidArgument for a bad
  // DSN or table name, Permanent for a table that does not qualify.
  static StatusOr<std::unique_ptr<AttributeTable>> open(const StoreSettings& store,
                                                        const AttributeStoreSettings& common,
                                                        std::string_view node_id,
                                                        Duration connect_timeout);
  virtual ~AttributeTable();

  virtual const TableSchema& schema() const = 0;  // the last successful describe
  // Describes the table again (a column added by ALTER TABLE appears); on
  // failure keeps the old schema and answers why.
  virtual Status refresh_schema() = 0;
  virtual Status ping() = 0;

  // Takes the watermark for `epoch` in one short transaction within `budget`:
  // kFenced (found: the row read) if a newer epoch wrote it; otherwise writes
  // epoch and process (slot unchanged; the row is created at slot 0 if absent)
  // and answers kCommitted with the row as written. A new active process calls
  // this first; from then on older epochs are refused.
  virtual StatusOr<CommitResult> claim(uint64_t epoch, std::string_view process,
                                       Duration budget) = 0;

  // ONE transaction: reads the watermark row FOR UPDATE; its epoch > epoch:
  // rollback, kFenced; its slot != after_slot: rollback, kMoved (found: the
  // row read); else applies `rows` in order (the same Flow ID may appear
  // twice: the later wins; upserts set only the given columns), then updates
  // the watermark to (epoch, through_slot, process) and commits.
  // REQUIRES: through_slot > after_slot; the watermark row exists (claim):
  // NotFound otherwise. Values are not checked here: the caller filters fields
  // with misfit(); a value the database refuses fails the whole transaction.
  //
  // The bound: the transaction ends, committed or rolled back by the server,
  // within `budget` even if this process freezes mid-transaction (server-side
  // statement, lock and idle-in-transaction timeouts, and a check of the time
  // since BEGIN in every statement; docs/attribute-store-types.md, "The
  // transaction bound"), and the call returns within about `budget`.
  // Errors: Transient for a lost connection, a timeout, a deadlock or a
  // serialization failure (and when a lost COMMIT leaves the outcome unknown:
  // read_watermark tells), Permanent for a statement the database refuses;
  // messages hold neither values nor the DSN.
  virtual StatusOr<CommitResult> commit(uint64_t epoch, std::string_view process,
                                        uint64_t after_slot, uint64_t through_slot,
                                        const std::vector<RowWrite>& rows, Duration budget) = 0;

  // The watermark row of this node and store; nullopt if there is none.
  virtual StatusOr<std::optional<Watermark>> read_watermark() = 0;

  // The table as "schema.table" (PostgreSQL) / "database.table" (MySQL), for logs.
  virtual std::string describe_target() const = 0;

  // TEST ONLY.
  virtual void set_test_hooks(TableTestHooks hooks) = 0;
};

// The watermark table, dex_attribute_sync_watermark, for an operator who
// creates it by hand (create_watermark_table: false). `schema` (PostgreSQL) or
// database (MySQL) qualifies it: the target table's; empty: unqualified.
std::string watermark_table_ddl(StoreType type, std::string_view schema = {});

// The watermark table's name.
inline constexpr std::string_view kWatermarkTable = "dex_attribute_sync_watermark";

}  // namespace dex::attrstore
