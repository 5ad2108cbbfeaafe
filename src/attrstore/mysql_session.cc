// The MySQL/MariaDB dialect of SqlSession (libmariadb: mysql_connection.h).
//
// The transaction bound (transaction_bound.h): before START TRANSACTION one
// SET sets max_statement_time, innodb_lock_wait_timeout, lock_wait_timeout and
// idle_transaction_timeout (MariaDB; MySQL has no idle-in-transaction timeout:
// wait_timeout instead, restored after the transaction), the guard in
// @dex_guard_us and the start in @dex_tx_start (SYSDATE(6): the time of
// execution, not of the statement's start). Every later statement filters on
// kGuard; a statement that the guard stops touches no row, which the session
// sees in its row count and answers Transient, then rolls back.
#include "attrstore/column_types.h"
#include "attrstore/dsn.h"
#include "attrstore/mysql_connection.h"
#include "attrstore/mysql_values.h"
#include "attrstore/sql_session.h"

namespace dex::attrstore {
namespace {

constexpr std::string_view kGuard =
    "TIMESTAMPDIFF(MICROSECOND, @dex_tx_start, SYSDATE(6)) < @dex_guard_us";
constexpr std::string_view kMysqlIdleDefault = "28800";  // MySQL's default wait_timeout, seconds
constexpr Duration kIoMargin = seconds(1);

using Row = std::vector<std::optional<std::string>>;
using P = MysqlConnection::Param;

P text(std::string s) {
  P p;
  p.type = P::Type::kString;
  p.text = std::move(s);
  return p;
}
P number(uint64_t v) {
  P p;
  p.type = P::Type::kInt;
  p.integer = static_cast<int64_t>(v);
  return p;
}

std::string whole_s(Duration d) {
  return std::to_string(std::chrono::duration_cast<seconds>(d).count());
}
std::string fraction_s(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count() / 1e6);
}

Status over_budget() {
  return Status::transient("the transaction ran past its budget (checked by the server)");
}

StatusOr<Watermark> watermark_of(const Row& row) {
  try {
    const int64_t epoch = std::stoll(row.at(0).value()), slot = std::stoll(row.at(1).value());
    if (epoch < 0 || slot < 0)
      return Status::corruption("the watermark row holds a negative epoch or slot");
    return Watermark{static_cast<uint64_t>(epoch), static_cast<uint64_t>(slot),
                     row.at(2).value_or("")};
  } catch (const std::exception&) {
    return Status::corruption("the watermark row cannot be read");
  }
}

std::optional<int64_t> int_of(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  return std::stoll(*v);
}

// "json_valid(`doc`)": the column a MariaDB JSON column's CHECK names, else "".
std::string json_check_column(const std::string& clause) {
  constexpr std::string_view kOpen = "json_valid(`", kClose = "`)";
  if (!clause.starts_with(kOpen) || !clause.ends_with(kClose)) return "";
  std::string name;
  const std::string_view inner =
      std::string_view(clause).substr(kOpen.size(), clause.size() - kOpen.size() - kClose.size());
  for (size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] == '`' && i + 1 < inner.size() && inner[i + 1] == '`') ++i;
    name += inner[i];
  }
  return name;
}

class MysqlSession final : public SqlSession {
 public:
  MysqlSession(MysqlDsn dsn, Duration connect_timeout)
      : dsn_(std::move(dsn)), connect_timeout_(connect_timeout), io_timeout_(connect_timeout) {}

  Status connect(TimePoint deadline) override {
    if (my_.check_alive() && !my_.in_transaction() && my_.io_timeout() == round_io(io_timeout_))
      return Status::ok();
    const Duration left = std::min(connect_timeout_, deadline - SystemClock::instance().now());
    if (left <= Duration::zero()) return Status::transient("cannot connect to MySQL: no time left");
    if (Status s = my_.connect(dsn_, left, io_timeout_); !s.is_ok()) return s;
    my_.set_known_names(known_names_);
    return Status::ok();
  }

  void disconnect() override { my_.close(); }

  Status ping(TimePoint) override { return my_.exec("SELECT 1", {}).status(); }

  StatusOr<DescribedTable> describe(const TableName& name, TimePoint deadline) override;

  Status create_watermark_table(const std::string& schema, TimePoint) override {
    return my_.query(watermark_table_ddl(StoreType::kMysql, schema));
  }

  void set_target(const TableName& table, const TableName& watermark,
                  std::vector<std::string> names) override {
    table_ = quoted_table(table, StoreType::kMysql);
    watermark_ = quoted_table(watermark, StoreType::kMysql);
    known_names_ = std::move(names);
    my_.set_known_names(known_names_);
  }

  Status begin(const TransactionBound& b, TimePoint deadline) override {
    // A read may wait out a statement or a lock wait, not more.
    io_timeout_ = std::max(b.statement, b.lock) + kIoMargin;
    if (Status s = connect(deadline); !s.is_ok()) return s;
    const std::string idle = my_.is_mariadb() ? "idle_transaction_timeout = " : "wait_timeout = ";
    const std::string statement =
        my_.is_mariadb()
            ? "max_statement_time = " + fraction_s(b.statement)
            : "max_execution_time = " +
                  std::to_string(std::max<int64_t>(
                      1, std::chrono::duration_cast<milliseconds>(b.statement).count()));
    const std::string set =
        "SET SESSION " + statement + ", innodb_lock_wait_timeout = " + whole_s(b.lock) +
        ", lock_wait_timeout = " + whole_s(b.lock) + ", " + idle + whole_s(b.idle) +
        ", @dex_guard_us = " +
        std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(b.guard).count()) +
        ", @dex_tx_start = SYSDATE(6)";
    if (Status s = my_.query(set); !s.is_ok()) return s;
    return my_.query("START TRANSACTION");
  }

  Status insert_watermark_if_absent(const WatermarkKey& key, const Watermark& w,
                                    TimePoint) override {
    const std::string sql =
        "INSERT INTO " + watermark_ +
        " (node_id, store, epoch, last_slot, process, updated_at) SELECT ?, ?, ?, ?, ?, "
        "UTC_TIMESTAMP(6) FROM DUAL WHERE " +
        std::string(kGuard) + " ON DUPLICATE KEY UPDATE node_id = node_id";
    auto r = my_.exec(sql, {text(key.node_id), text(key.store), number(w.epoch), number(w.slot),
                            text(w.process)});
    if (!r.is_ok()) return r.status();
    return r->affected == 0 ? over_budget() : Status::ok();
  }

  StatusOr<std::optional<Watermark>> lock_watermark(const WatermarkKey& key, TimePoint) override {
    auto r = my_.exec("SELECT epoch, last_slot, process, " + std::string(kGuard) + " FROM " +
                          watermark_ + " WHERE node_id = ? AND store = ? FOR UPDATE",
                      {text(key.node_id), text(key.store)});
    if (!r.is_ok()) return r.status();
    if (r->rows.empty()) return std::optional<Watermark>();
    if (r->rows[0].at(3).value_or("0") != "1") return over_budget();
    auto w = watermark_of(r->rows[0]);
    if (!w.is_ok()) return w.status();
    return std::optional<Watermark>(std::move(w).value());
  }

  Status write_row(const RowWrite& row, const TableSchema& schema, TimePoint deadline) override;

  Status update_watermark(const WatermarkKey& key, const Watermark& w, TimePoint) override {
    auto r = my_.exec(
        "UPDATE " + watermark_ +
            " SET epoch = ?, last_slot = ?, process = ?, updated_at = UTC_TIMESTAMP(6) "
            "WHERE node_id = ? AND store = ? AND " +
            std::string(kGuard),
        {number(w.epoch), number(w.slot), text(w.process), text(key.node_id), text(key.store)});
    if (!r.is_ok()) return r.status();
    return r->affected == 1 ? Status::ok() : over_budget();
  }

  Status commit(TimePoint) override {
    if (Status s = my_.query("COMMIT"); !s.is_ok()) {
      return Status(s.code(),
                    "COMMIT failed, its outcome is unknown (read the watermark): " + s.message());
    }
    after_transaction();
    return Status::ok();
  }

  void rollback(TimePoint deadline) override {
    if (!my_.is_open()) return;
    if (!my_.in_transaction()) {  // failed before START TRANSACTION took effect
      after_transaction();
      return;
    }
    if (SystemClock::instance().now() >= deadline || !my_.query("ROLLBACK").is_ok()) {
      my_.close();  // the server rolls back when it sees the connection gone
      return;
    }
    after_transaction();
  }

  StatusOr<std::optional<Watermark>> read_watermark(const WatermarkKey& key, TimePoint) override {
    auto r = my_.exec(
        "SELECT epoch, last_slot, process FROM " + watermark_ + " WHERE node_id = ? AND store = ?",
        {text(key.node_id), text(key.store)});
    if (!r.is_ok()) return r.status();
    if (r->rows.empty()) return std::optional<Watermark>();
    auto w = watermark_of(r->rows[0]);
    if (!w.is_ok()) return w.status();
    return std::optional<Watermark>(std::move(w).value());
  }

 private:
  static Duration round_io(Duration d) {
    return seconds(std::max<int64_t>(1, std::chrono::ceil<seconds>(d).count()));
  }

  // MySQL: the idle timeout was wait_timeout, which would also end the idle
  // connection between transactions.
  void after_transaction() {
    if (!my_.is_mariadb() && my_.is_open()) {
      (void)my_.query("SET SESSION wait_timeout = " + std::string(kMysqlIdleDefault));
    }
  }

  StatusOr<std::string> resolve_schema(const TableName& name);
  StatusOr<std::vector<std::string>> json_columns(const std::string& schema,
                                                  const std::string& table);
  Status upsert(const RowWrite& row, const TableSchema& schema);

  const MysqlDsn dsn_;
  const Duration connect_timeout_;
  Duration io_timeout_;
  MysqlConnection my_;
  std::string table_, watermark_;  // quoted
  std::vector<std::string> known_names_;
};

StatusOr<std::string> MysqlSession::resolve_schema(const TableName& name) {
  if (!name.schema.empty()) return name.schema;
  auto r = my_.exec("SELECT DATABASE()", {});
  if (!r.is_ok()) return r.status();
  if (r->rows.empty() || !r->rows[0][0]) {
    return Status::permanent("table " + name.display() +
                             " names no database and the DSN names none; write "
                             "database.table");
  }
  return *r->rows[0][0];
}

StatusOr<std::vector<std::string>> MysqlSession::json_columns(const std::string& schema,
                                                              const std::string& table) {
  std::vector<std::string> names;
  if (!my_.is_mariadb()) return names;  // MySQL has a json type of its own
  auto r = my_.exec(
      "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? "
      "AND TABLE_NAME = ?",
      {text(schema), text(table)});
  if (!r.is_ok()) return r.status();
  for (const Row& row : r->rows) {
    if (std::string name = json_check_column(row[0].value_or("")); !name.empty())
      names.push_back(name);
  }
  return names;
}

StatusOr<DescribedTable> MysqlSession::describe(const TableName& name, TimePoint) {
  auto schema = resolve_schema(name);
  if (!schema.is_ok()) return schema.status();
  auto tables = my_.exec(
      "SELECT TABLE_NAME, TABLE_TYPE, ENGINE FROM information_schema.TABLES WHERE "
      "TABLE_SCHEMA = ? AND TABLE_NAME = ?",
      {text(*schema), text(name.table)});
  if (!tables.is_ok()) return tables.status();
  const Row* found =
      nullptr;  // information_schema may match regardless of case: prefer the exact name
  for (const Row& row : tables->rows) {
    if (found == nullptr || row[0] == name.table) found = &row;
  }
  if (found == nullptr) return Status::not_found("no table " + name.display());
  DescribedTable t{*schema, (*found)[0].value_or(name.table), {}, ""};
  if ((*found)[1].value_or("") != "BASE TABLE")
    t.unusable = "is a view; it needs a table";
  else if ((*found)[2].value_or("") != "InnoDB") {
    t.unusable = "uses the " + (*found)[2].value_or("?") +
                 " engine, which has no transactions; it needs InnoDB";
  }
  auto columns = my_.exec(
      "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, IS_NULLABLE, COLUMN_DEFAULT IS NOT NULL, EXTRA, "
      "CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, "
      "CHARACTER_SET_NAME, "
      "COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? "
      "ORDER BY ORDINAL_POSITION",
      {text(*schema), text(t.table)});
  if (!columns.is_ok()) return columns.status();
  auto keys = my_.exec(
      "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND "
      "TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY'",
      {text(*schema), text(t.table)});
  if (!keys.is_ok()) return keys.status();
  auto json = json_columns(*schema, t.table);
  if (!json.is_ok()) return json.status();
  for (const Row& r : columns->rows) {
    MysqlColumnFacts f;
    f.name = r[0].value_or("");
    f.column_type = r[1].value_or("");
    f.data_type = r[2].value_or("");
    f.nullable = r[3].value_or("") == "YES";
    f.has_default = r[4].value_or("0") == "1";
    f.extra = r[5].value_or("");
    f.char_max_length = int_of(r[6]);
    f.numeric_precision = int_of(r[7]);
    f.numeric_scale = int_of(r[8]);
    f.datetime_precision = int_of(r[9]);
    f.charset = r[10].value_or("");
    f.collation = r[11].value_or("");
    for (const Row& k : keys->rows) f.primary_key |= k[0] == f.name;
    for (const std::string& j : *json) f.json_check |= j == f.name;
    t.columns.push_back(classify_mysql_column(f));
  }
  return t;
}

Status MysqlSession::write_row(const RowWrite& row, const TableSchema& schema, TimePoint) {
  if (!row.delete_row) return upsert(row, schema);
  // A guard that stops a DELETE cannot be told from a missing row here; the
  // watermark update that ends the transaction checks the guard again.
  return my_
      .exec("DELETE FROM " + table_ + " WHERE " +
                quote_identifier(schema.key_column, StoreType::kMysql) + " = ? AND " +
                std::string(kGuard),
            {text(row.flow_id)})
      .status();
}

// INSERT ... SELECT ... FROM DUAL WHERE guard (so that the guard can stop it)
// ON DUPLICATE KEY UPDATE of the given columns only; a column named twice
// takes its last value.
Status MysqlSession::upsert(const RowWrite& row, const TableSchema& schema) {
  std::vector<const Field*> fields;
  for (const Field& f : row.fields) {
    if (schema.find(f.column) == nullptr) return Status::invalid_argument("no column " + f.column);
    std::erase_if(fields, [&](const Field* g) { return g->column == f.column; });
    fields.push_back(&f);
  }
  const std::string key = quote_identifier(schema.key_column, StoreType::kMysql);
  std::string columns = key, marks = "?", updates;
  std::vector<P> params = {text(row.flow_id)};
  for (const Field* f : fields) {
    const Column* c = schema.find(f->column);
    const std::string name = quote_identifier(c->name, StoreType::kMysql);
    params.push_back(mysql_param(*c, f->value));
    columns += ", " + name;
    marks += ", ?";
    updates += (updates.empty() ? "" : ", ") + name + " = VALUES(" + name + ")";
  }
  const std::string sql = "INSERT INTO " + table_ + " (" + columns + ") SELECT " + marks +
                          " FROM DUAL WHERE " + std::string(kGuard) + " ON DUPLICATE KEY UPDATE " +
                          (updates.empty() ? key + " = " + key : updates);
  auto r = my_.exec(sql, params);
  if (!r.is_ok()) return r.status();
  return r->affected == 0 ? over_budget() : Status::ok();
}

}  // namespace

StatusOr<std::unique_ptr<SqlSession>> make_mysql_session(const std::string& dsn,
                                                         Duration connect_timeout) {
  auto parsed = parse_mysql_dsn(dsn);
  if (!parsed.is_ok()) return parsed.status();
  return std::unique_ptr<SqlSession>(
      std::make_unique<MysqlSession>(std::move(parsed).value(), connect_timeout));
}

}  // namespace dex::attrstore
