#include "raw_sql.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <mysql.h>

#include <cstdlib>

#include "attrstore/dsn.h"

namespace dex::attrstore::testing {
namespace {

class PgRaw final : public RawSql {
 public:
  explicit PgRaw(PGconn* conn) : conn_(conn) {}
  ~PgRaw() override { PQfinish(conn_); }

  Status run(const std::string& sql) override { return query(sql).status(); }

  StatusOr<Rows> query(const std::string& sql) override {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      std::string msg = PQresultErrorMessage(r);
      PQclear(r);
      return Status::permanent(msg);
    }
    Rows rows;
    for (int i = 0; i < PQntuples(r); ++i) {
      auto& row = rows.emplace_back();
      for (int j = 0; j < PQnfields(r); ++j) {
        if (PQgetisnull(r, i, j))
          row.emplace_back();
        else
          row.emplace_back(std::string(PQgetvalue(r, i, j), PQgetlength(r, i, j)));
      }
    }
    PQclear(r);
    return rows;
  }

 private:
  PGconn* conn_;
};

class MysqlRaw final : public RawSql {
 public:
  explicit MysqlRaw(MYSQL* mysql) : mysql_(mysql) {}
  ~MysqlRaw() override { mysql_close(mysql_); }

  Status run(const std::string& sql) override { return query(sql).status(); }

  StatusOr<Rows> query(const std::string& sql) override {
    if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0)
      return Status::permanent(mysql_error(mysql_));
    Rows rows;
    MYSQL_RES* res = mysql_store_result(mysql_);
    if (res == nullptr) return rows;
    const unsigned n = mysql_num_fields(res);
    while (MYSQL_ROW row = mysql_fetch_row(res)) {
      unsigned long* lengths = mysql_fetch_lengths(res);
      auto& out = rows.emplace_back();
      for (unsigned j = 0; j < n; ++j) {
        if (row[j] == nullptr)
          out.emplace_back();
        else
          out.emplace_back(std::string(row[j], lengths[j]));
      }
    }
    mysql_free_result(res);
    return rows;
  }

 private:
  MYSQL* mysql_;
};

std::unique_ptr<RawSql> connect_postgres(const std::string& dsn) {
  PGconn* conn = PQconnectdb(dsn.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    ADD_FAILURE() << "raw PostgreSQL connection failed: " << PQerrorMessage(conn);
    PQfinish(conn);
    return nullptr;
  }
  auto raw = std::make_unique<PgRaw>(conn);
  raw->exec("SET TimeZone = 'UTC'");
  return raw;
}

std::unique_ptr<RawSql> connect_mysql(const std::string& dsn) {
  auto parsed = parse_mysql_dsn(dsn);
  if (!parsed.is_ok()) {
    ADD_FAILURE() << parsed.status().to_string();
    return nullptr;
  }
  MYSQL* mysql = mysql_init(nullptr);
  const unsigned protocol = MYSQL_PROTOCOL_TCP;
  mysql_options(mysql, MYSQL_OPT_PROTOCOL, &protocol);
  mysql_options(mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  if (mysql_real_connect(mysql, parsed->host.c_str(), parsed->user.c_str(),
                         parsed->password.c_str(), parsed->database.c_str(), parsed->port, nullptr,
                         0) == nullptr) {
    ADD_FAILURE() << "raw MySQL connection failed: " << mysql_error(mysql);
    mysql_close(mysql);
    return nullptr;
  }
  auto raw = std::make_unique<MysqlRaw>(mysql);
  raw->exec("SET time_zone = '+00:00'");
  return raw;
}

}  // namespace

std::unique_ptr<RawSql> RawSql::connect(StoreType type, const std::string& dsn) {
  return type == StoreType::kPostgres ? connect_postgres(dsn) : connect_mysql(dsn);
}

void RawSql::exec(const std::string& sql) {
  Status s = run(sql);
  EXPECT_TRUE(s.is_ok()) << sql << ": " << s.message();
}

std::optional<std::string> RawSql::scalar(const std::string& sql) {
  auto rows = query(sql);
  EXPECT_TRUE(rows.is_ok()) << sql << ": " << rows.status().message();
  if (!rows.is_ok() || rows->empty() || rows->front().empty()) return std::nullopt;
  return rows->front().front();
}

std::string test_dsn(StoreType type) {
  const char* name = type == StoreType::kPostgres ? "DEX_TEST_POSTGRES_DSN" : "DEX_TEST_MYSQL_DSN";
  const char* dsn = std::getenv(name);
  if (dsn == nullptr || *dsn == '\0') {
    ADD_FAILURE() << name << " is not set: run this test through tests/support/sql_servers.py "
                  << "(ctest -R '^attrstore\\.' does)";
    return "";
  }
  return dsn;
}

}  // namespace dex::attrstore::testing
