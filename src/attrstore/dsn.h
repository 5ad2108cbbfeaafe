// Data source names of the Attribute Store's databases. A DSN is a secret: it
// may hold a password, so nothing here puts one into a message; redact_dsn
// gives a form that may be printed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dex::attrstore {

// A MySQL/MariaDB connection, from either
//   mysql://user:password@host:port/database?tls=true      (URI, percent-encoded)
//   user:password@tcp(host:port)/database?tls=true         (the Go driver's form)
//   user:password@unix(/run/mysqld/mysqld.sock)/database
struct MysqlDsn {
  std::string user, password;
  std::string host = "127.0.0.1";  // tcp
  uint16_t port = 3306;
  std::string unix_socket;  // unix(...): used instead of host and port
  std::string database;     // empty: none (tableName must then name one)
  enum class Tls { kOff, kPreferred, kVerify, kSkipVerify } tls = Tls::kOff;
};

// InvalidArgument naming the part that is wrong ("mysql DSN: the port ... is
// not a number"), never holding the password.
StatusOr<MysqlDsn> parse_mysql_dsn(std::string_view dsn);

// The DSN with its password replaced by ***: URIs (postgres://, mysql://: the
// user info and any password= parameter), libpq's key=value form, and the Go
// driver's user:password@tcp(...)/db.
std::string redact_dsn(std::string_view dsn);

// Percent-decoding of a URI part; false if an escape is malformed.
bool percent_decode(std::string_view in, std::string* out);

}  // namespace dex::attrstore
