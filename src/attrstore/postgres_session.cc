// The PostgreSQL dialect of SqlSession (libpq, non-blocking: pg_connection.h).
//
// The transaction bound (transaction_bound.h): BEGIN sets statement_timeout,
// lock_timeout and idle_in_transaction_session_timeout with SET LOCAL, and two
// custom settings: dex.tx_guard (the guard) and dex.tx_over_budget (the text
// of the guard's error). Every later statement evaluates kGuard, which raises
// an error once clock_timestamp() - now() (now(): the transaction's start)
// reaches the guard; an error aborts the transaction on the spot and releases
// its locks, even if this process then freezes before ROLLBACK.
#include <libpq-fe.h>

#include "attrstore/column_types.h"
#include "attrstore/pg_connection.h"
#include "attrstore/pg_values.h"
#include "attrstore/server_message.h"
#include "attrstore/sql_session.h"

namespace dex::attrstore {
namespace {

constexpr std::string_view kGuard =
    "(CASE WHEN pg_catalog.clock_timestamp() - pg_catalog.now() < "
    "pg_catalog.current_setting('dex.tx_guard')::interval THEN true "
    "ELSE pg_catalog.current_setting('dex.tx_over_budget')::boolean END)";
constexpr int kCheckIntervalVersion = 140000;  // client_connection_check_interval
constexpr Duration kRollbackWaitMax = seconds(1);

constexpr std::string_view kResolveTable =
    "SELECT c.oid::text, n.nspname, c.relname, c.relkind::text FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = "
    "pg_catalog.to_regclass($1)";
// One row per column, domains resolved to their base type (information_schema's helpers).
constexpr std::string_view kDescribeColumns =
    "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
    "pg_catalog.format_type(bt.oid, NULL), "
    "CASE WHEN bt.typnamespace = 'pg_catalog'::regnamespace THEN bt.typname::text ELSE '' END, "
    "information_schema._pg_truetypmod(a.*, t.*), a.attnotnull OR (t.typtype = 'd' AND "
    "t.typnotnull), "
    "a.atthasdef, a.attidentity::text, a.attgenerated::text, "
    "EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary "
    "AND a.attnum = ANY (i.indkey)) "
    "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
    "JOIN pg_catalog.pg_type bt ON bt.oid = information_schema._pg_truetypid(a.*, t.*) "
    "WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

std::string ms(Duration d) {
  return std::to_string(std::max<int64_t>(1, std::chrono::duration_cast<milliseconds>(d).count()));
}

bool truth(const std::optional<std::string>& v) { return v && *v == "t"; }

// The type a parameter is cast to: the column's base type without modifier,
// except character, which without a length is character(1) and would cut.
std::string cast_type(const Column& c) { return c.base_type == "character" ? "text" : c.base_type; }

std::string relkind_problem(const std::string& kind) {
  if (kind == "r" || kind == "p") return "";
  if (kind == "v") return "is a view; it needs a table";
  if (kind == "m") return "is a materialized view; it needs a table";
  if (kind == "f") return "is a foreign table; it needs a table";
  return "is not a table";
}

StatusOr<Watermark> watermark_of(const std::vector<std::optional<std::string>>& row) {
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

class PostgresSession final : public SqlSession {
 public:
  PostgresSession(std::string dsn, std::string password)
      : dsn_(std::move(dsn)), password_(std::move(password)) {}

  Status connect(TimePoint deadline) override {
    if (pg_.check_alive() && !pg_.in_transaction()) return Status::ok();
    pg_.close();
    if (Status s = pg_.connect(dsn_, password_, deadline); !s.is_ok()) return s;
    pg_.set_known_names(known_names_);
    // Lets the server notice a vanished client during a long statement.
    if (pg_.server_version() >= kCheckIntervalVersion) {
      return pg_.exec_script("SET client_connection_check_interval = 1000", deadline);
    }
    return Status::ok();
  }

  void disconnect() override { pg_.close(); }

  Status ping(TimePoint deadline) override { return pg_.exec("SELECT 1", {}, deadline).status(); }

  StatusOr<DescribedTable> describe(const TableName& name, TimePoint deadline) override {
    auto found = pg_.exec(std::string(kResolveTable), {{quoted_table(name, StoreType::kPostgres)}},
                          deadline);
    if (!found.is_ok()) return found.status();
    if (found->rows.empty()) return Status::not_found("no table " + name.display());
    const auto& row = found->rows[0];
    DescribedTable t{
        row[1].value_or(""), row[2].value_or(""), {}, relkind_problem(row[3].value_or(""))};
    auto columns = pg_.exec(std::string(kDescribeColumns), {{row[0]}}, deadline);
    if (!columns.is_ok()) return columns.status();
    for (const auto& c : columns->rows) {
      PostgresColumnFacts facts = facts_of(c);
      facts.server_encoding = pg_.server_encoding();
      t.columns.push_back(classify_postgres_column(facts));
    }
    return t;
  }

  Status create_watermark_table(const std::string& schema, TimePoint deadline) override {
    return pg_.exec_script(watermark_table_ddl(StoreType::kPostgres, schema), deadline);
  }

  void set_target(const TableName& table, const TableName& watermark,
                  std::vector<std::string> names) override {
    table_ = quoted_table(table, StoreType::kPostgres);
    watermark_ = quoted_table(watermark, StoreType::kPostgres);
    known_names_ = std::move(names);
    pg_.set_known_names(known_names_);
  }

  Status begin(const TransactionBound& b, TimePoint deadline) override {
    const std::string guard_us =
        std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(b.guard).count());
    return pg_.exec_script(
        "BEGIN; SET LOCAL statement_timeout = " + ms(b.statement) + "; SET LOCAL lock_timeout = " +
            ms(b.lock) + "; SET LOCAL idle_in_transaction_session_timeout = " + ms(b.idle) +
            "; SET LOCAL dex.tx_guard = '" + guard_us +
            " microseconds'; SET LOCAL dex.tx_over_budget = 'the transaction ran past its budget'",
        deadline);
  }

  Status insert_watermark_if_absent(const WatermarkKey& key, const Watermark& w,
                                    TimePoint deadline) override {
    const std::string sql =
        "INSERT INTO " + watermark_ +
        " (node_id, store, epoch, last_slot, process, updated_at) SELECT $1, $2, $3::bigint, "
        "$4::bigint, $5, pg_catalog.now() WHERE " +
        std::string(kGuard) + " ON CONFLICT (node_id, store) DO NOTHING";
    return pg_
        .exec(sql,
              {{key.node_id},
               {key.store},
               {std::to_string(w.epoch)},
               {std::to_string(w.slot)},
               {w.process}},
              deadline)
        .status();
  }

  StatusOr<std::optional<Watermark>> lock_watermark(const WatermarkKey& key,
                                                    TimePoint deadline) override {
    const std::string sql = "SELECT epoch, last_slot, process, " + std::string(kGuard) + " FROM " +
                            watermark_ + " WHERE node_id = $1 AND store = $2 FOR UPDATE";
    return read_row(sql, key, deadline);
  }

  Status write_row(const RowWrite& row, const TableSchema& schema, TimePoint deadline) override;

  Status update_watermark(const WatermarkKey& key, const Watermark& w,
                          TimePoint deadline) override {
    const std::string sql =
        "UPDATE " + watermark_ +
        " SET epoch = $3::bigint, last_slot = $4::bigint, process = $5, updated_at = "
        "pg_catalog.now() WHERE node_id = $1 AND store = $2 AND " +
        std::string(kGuard);
    auto r = pg_.exec(sql,
                      {{key.node_id},
                       {key.store},
                       {std::to_string(w.epoch)},
                       {std::to_string(w.slot)},
                       {w.process}},
                      deadline);
    if (!r.is_ok()) return r.status();
    if (r->affected != 1) return Status::transient("the watermark row vanished");
    return Status::ok();
  }

  Status commit(TimePoint deadline) override {
    auto r = pg_.exec("COMMIT", {}, deadline);
    if (!r.is_ok()) {
      return Status(
          r.status().code(),
          "COMMIT failed, its outcome is unknown (read the watermark): " + r.status().message());
    }
    // An aborted transaction answers COMMIT with ROLLBACK.
    if (r->command != "COMMIT")
      return Status::transient("the transaction was rolled back at COMMIT");
    return Status::ok();
  }

  void rollback(TimePoint deadline) override {
    if (!pg_.in_transaction()) return;
    const TimePoint now = SystemClock::instance().now();
    if (now >= deadline ||
        !pg_.exec("ROLLBACK", {}, std::min(deadline, now + kRollbackWaitMax)).is_ok()) {
      pg_.close();  // the server rolls back when it sees the connection gone
    }
  }

  StatusOr<std::optional<Watermark>> read_watermark(const WatermarkKey& key,
                                                    TimePoint deadline) override {
    const std::string sql = "SELECT epoch, last_slot, process FROM " + watermark_ +
                            " WHERE node_id = $1 AND store = $2";
    return read_row(sql, key, deadline);
  }

 private:
  static PostgresColumnFacts facts_of(const std::vector<std::optional<std::string>>& r);

  StatusOr<std::optional<Watermark>> read_row(const std::string& sql, const WatermarkKey& key,
                                              TimePoint deadline) {
    auto r = pg_.exec(sql, {{key.node_id}, {key.store}}, deadline);
    if (!r.is_ok()) return r.status();
    if (r->rows.empty()) return std::optional<Watermark>();
    auto w = watermark_of(r->rows[0]);
    if (!w.is_ok()) return w.status();
    return std::optional<Watermark>(std::move(w).value());
  }

  Status upsert(const RowWrite& row, const TableSchema& schema, TimePoint deadline);
  Status remove(const RowWrite& row, const TableSchema& schema, TimePoint deadline);

  const std::string dsn_;
  const std::string password_;
  PgConnection pg_;
  std::string table_, watermark_;  // quoted
  std::vector<std::string> known_names_;
};

PostgresColumnFacts PostgresSession::facts_of(const std::vector<std::optional<std::string>>& r) {
  PostgresColumnFacts f;
  f.name = r[0].value_or("");
  f.sql_type = r[1].value_or("");
  f.base_type = r[2].value_or("");
  f.type_name = r[3].value_or("");
  f.typmod = r[4] ? std::stoi(*r[4]) : -1;
  f.not_null = truth(r[5]);
  f.has_default = truth(r[6]);
  const std::string identity = r[7].value_or(""), generated = r[8].value_or("");
  f.identity = !identity.empty();
  f.generated = identity == "a" || !generated.empty();
  f.primary_key = truth(r[9]);
  return f;
}

Status PostgresSession::write_row(const RowWrite& row, const TableSchema& schema,
                                  TimePoint deadline) {
  return row.delete_row ? remove(row, schema, deadline) : upsert(row, schema, deadline);
}

// INSERT ... SELECT (so that the guard can stop it) ... ON CONFLICT DO UPDATE
// of the given columns only; a column named twice takes its last value.
Status PostgresSession::upsert(const RowWrite& row, const TableSchema& schema, TimePoint deadline) {
  const Column* key = schema.find(schema.key_column);
  std::vector<const Field*> fields;
  for (const Field& f : row.fields) {
    if (schema.find(f.column) == nullptr) return Status::invalid_argument("no column " + f.column);
    std::erase_if(fields, [&](const Field* g) { return g->column == f.column; });
    fields.push_back(&f);
  }
  const std::string quoted_key = quote_identifier(key->name, StoreType::kPostgres);
  std::string columns = quoted_key, select = "$1::" + cast_type(*key), updates;
  std::vector<PgConnection::Param> params = {{row.flow_id}};
  for (const Field* f : fields) {
    const Column* c = schema.find(f->column);
    const std::string name = quote_identifier(c->name, StoreType::kPostgres);
    params.push_back(pg_param(*c, f->value));
    columns += ", " + name;
    select += ", $" + std::to_string(params.size()) + "::" + cast_type(*c);
    updates += (updates.empty() ? "" : ", ") + name + " = EXCLUDED." + name;
  }
  const std::string sql = "INSERT INTO " + table_ + " (" + columns + ") SELECT " + select +
                          " WHERE " + std::string(kGuard) + " ON CONFLICT (" + quoted_key +
                          ") DO " + (updates.empty() ? "NOTHING" : "UPDATE SET " + updates);
  return pg_.exec(sql, params, deadline).status();
}

// The guard in the main query, the DELETE in a data-modifying CTE: the guard
// runs even when there is no row to delete.
Status PostgresSession::remove(const RowWrite& row, const TableSchema& schema, TimePoint deadline) {
  const std::string sql = "WITH dex_delete AS (DELETE FROM " + table_ + " WHERE " +
                          quote_identifier(schema.key_column, StoreType::kPostgres) +
                          " = $1) SELECT " + std::string(kGuard);
  return pg_.exec(sql, {{row.flow_id}}, deadline).status();
}

}  // namespace

StatusOr<std::unique_ptr<SqlSession>> make_postgres_session(const std::string& dsn,
                                                            Duration /*connect_timeout*/) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    std::string why = error ? sanitize_server_message(error, {}, "") : "out of memory";
    PQfreemem(error);
    return Status::invalid_argument("the postgres DSN is not valid: " + why);
  }
  std::string password;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (std::string_view(o->keyword) == "password" && o->val != nullptr) password = o->val;
  }
  PQconninfoFree(options);
  return std::unique_ptr<SqlSession>(std::make_unique<PostgresSession>(dsn, password));
}

}  // namespace dex::attrstore
