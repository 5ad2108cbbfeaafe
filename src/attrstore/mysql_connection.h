// One libmariadb connection (MySQL and MariaDB) with a cache of prepared
// statements. libmariadb blocks, so each call is bounded by the read and
// write timeouts set at connect (io_timeout): a frozen server or a dead
// network fails the call after that long. A connection-level error closes the
// connection; the next connect() opens a new one.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "attrstore/dsn.h"
#include "common/clock.h"
#include "common/status.h"

struct st_mysql;
struct st_mysql_stmt;

namespace dex::attrstore {

class MysqlConnection {
 public:
  MysqlConnection() = default;
  ~MysqlConnection();
  MysqlConnection(const MysqlConnection&) = delete;
  MysqlConnection& operator=(const MysqlConnection&) = delete;

  // Connects (whole seconds, at least 1) with utf8mb4, UTC timestamps, strict
  // SQL mode and found-rows counting (an UPDATE that matches a row counts it).
  Status connect(const MysqlDsn& dsn, Duration connect_timeout, Duration io_timeout);
  bool is_open() const { return mysql_ != nullptr; }
  void close();
  Duration io_timeout() const { return io_timeout_; }
  bool is_mariadb() const { return is_mariadb_; }
  bool in_transaction() const;
  // False (and closed) if an idle connection was ended by the server (it sent
  // an error or closed the socket). No round trip.
  bool check_alive();

  void set_known_names(std::vector<std::string> names) { known_names_ = std::move(names); }

  struct Param {
    enum class Type { kNull, kString, kBlob, kInt, kDouble, kTiny, kDatetime, kTimestamp };
    Type type = Type::kNull;
    std::string text;         // kString, kBlob
    int64_t integer = 0;      // kInt, kTiny; kDatetime/kTimestamp: Unix ms (UTC)
    double real = 0;          // kDouble
    int fraction_digits = 6;  // kDatetime/kTimestamp: digits kept (cut, not rounded)
  };
  struct Result {
    std::vector<std::vector<std::optional<std::string>>> rows;  // text form
    int64_t affected = 0;
  };
  // One statement, prepared once per connection and cached.
  StatusOr<Result> exec(const std::string& sql, const std::vector<Param>& params);
  // One statement without parameters or result (SET, START TRANSACTION, DDL).
  Status query(const std::string& sql);

 private:
  StatusOr<st_mysql_stmt*> prepared(const std::string& sql);
  StatusOr<Result> fetch_all(st_mysql_stmt* stmt);
  // A status for the connection's (or the statement's) last error; closes the
  // connection on a connection-level error.
  Status failure(unsigned error_number, const char* message, std::string_view what);

  st_mysql* mysql_ = nullptr;
  Duration io_timeout_{};
  bool is_mariadb_ = false;
  std::string password_;  // removed from messages
  std::vector<std::string> known_names_;
  // Prepared statements by SQL text, least recently used at the back.
  std::list<std::pair<std::string, st_mysql_stmt*>> lru_;
  std::unordered_map<std::string, std::list<std::pair<std::string, st_mysql_stmt*>>::iterator>
      statements_;
};

}  // namespace dex::attrstore
