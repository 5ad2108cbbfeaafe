// One libpq connection driven in non-blocking mode, so that every call waits
// at most until its deadline (a frozen server or a dead network cannot hold
// the caller): connect with PQconnectPoll, statements with PQsendQueryParams
// and poll(2). On a timeout or a broken connection it closes the connection;
// the next connect() opens a new one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

struct pg_conn;

namespace dex::attrstore {

class PgConnection {
 public:
  PgConnection() = default;
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Opens a connection with libpq's `dsn` (URI or key=value) plus dex's
  // settings (application_name, client_encoding UTF8, keepalives).
  Status connect(const std::string& dsn, const std::string& password, TimePoint deadline);
  bool is_open() const;
  // False (and closed) if an idle connection has anything to read: the
  // server ended it (an error, then EOF). No round trip.
  bool check_alive();
  // Inside a transaction block (idle in it, or failed in it).
  bool in_transaction() const;
  void close();
  int server_version() const;
  std::string server_encoding() const;

  // Names kept in sanitized server messages (tables, columns).
  void set_known_names(std::vector<std::string> names) { known_names_ = std::move(names); }

  struct Param {
    std::optional<std::string> value;  // nullopt: NULL
    bool binary = false;               // value holds the type's binary form
    uint32_t type_oid = 0;             // 0: the server infers the type
  };
  struct Result {
    std::vector<std::vector<std::optional<std::string>>> rows;  // text form
    int64_t affected = 0;  // rows an INSERT/UPDATE/DELETE touched
    std::string command;   // the last command tag ("COMMIT")
  };
  // One statement with parameters (the extended protocol).
  StatusOr<Result> exec(const std::string& sql, const std::vector<Param>& params,
                        TimePoint deadline);
  // Statements without parameters, separated by ';' (the simple protocol).
  Status exec_script(const std::string& sql, TimePoint deadline);

 private:
  Status wait_socket(bool for_write, TimePoint deadline);
  Status flush(TimePoint deadline);
  StatusOr<Result> collect(TimePoint deadline);
  // The connection's error as a Transient status (it is then closed).
  Status connection_lost(std::string_view what);

  pg_conn* conn_ = nullptr;
  std::string password_;  // removed from messages
  std::vector<std::string> known_names_;
};

}  // namespace dex::attrstore
