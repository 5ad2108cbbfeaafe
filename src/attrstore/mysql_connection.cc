#include "attrstore/mysql_connection.h"

#include <errmsg.h>
#include <mysql.h>

#include <poll.h>

#include <cmath>
#include <cstring>

#include "attrstore/server_message.h"

namespace dex::attrstore {
namespace {

constexpr size_t kStatementsCached = 64;
constexpr unsigned long kNumberBuffer = 64;  // any number's text form fits
constexpr int kMicrosDigits = 6;

// Server errors a retry may get past: lock wait timeout, deadlock, statement
// timeouts (MariaDB 1969, MySQL 3024), interruptions and killed connections,
// too many connections, shutdowns, network errors seen by the server.
bool transient_server_error(unsigned e) {
  switch (e) {
    case 1040:
    case 1053:
    case 1158:
    case 1159:
    case 1160:
    case 1161:
    case 1180:
    case 1203:
    case 1205:
    case 1213:
    case 1317:
    case 1927:
    case 1969:
    case 3024:
    case 4031:
      return true;
    default:
      return false;
  }
}

// Client errors (2000..2999): the connection is gone or never came.
bool client_error(unsigned e) { return e >= CR_MIN_ERROR && e <= 2999; }

unsigned whole_seconds(Duration d) {
  const double s = std::ceil(std::chrono::duration<double>(d).count());
  return static_cast<unsigned>(std::max(1.0, s));
}

// Days since 1970-01-01 into a proleptic Gregorian date (H. Hinnant's algorithm).
void civil_from_days(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

MYSQL_TIME mysql_time(int64_t unix_ms, int fraction_digits) {
  MYSQL_TIME t;
  std::memset(&t, 0, sizeof(t));
  const int64_t days = floor_div(unix_ms, 86'400'000);
  const int64_t ms_of_day = unix_ms - days * 86'400'000;
  int64_t year = 0;
  civil_from_days(days, &year, &t.month, &t.day);
  t.year = static_cast<unsigned>(year);
  t.hour = static_cast<unsigned>(ms_of_day / 3'600'000);
  t.minute = static_cast<unsigned>(ms_of_day / 60'000 % 60);
  t.second = static_cast<unsigned>(ms_of_day / 1000 % 60);
  unsigned long us = static_cast<unsigned long>(ms_of_day % 1000) * 1000;
  unsigned long step = 1;
  for (int d = fraction_digits; d < kMicrosDigits; ++d) step *= 10;
  t.second_part = us - us % step;  // cut, as the server would round into the next second
  t.time_type = MYSQL_TIMESTAMP_DATETIME;
  return t;
}

// The binds of `params`; `times` and `tinies` hold what the binds point into.
struct Binds {
  std::vector<MYSQL_BIND> binds;
  std::vector<MYSQL_TIME> times;
  std::vector<signed char> tinies;
  std::vector<char> nulls;
};

void bind_params(std::vector<MysqlConnection::Param>& params, Binds& b) {
  using T = MysqlConnection::Param::Type;
  b.binds.assign(params.size(), MYSQL_BIND{});
  b.times.resize(params.size());
  b.tinies.resize(params.size());
  b.nulls.assign(params.size(), 1);
  for (size_t i = 0; i < params.size(); ++i) {
    MysqlConnection::Param& p = params[i];
    MYSQL_BIND& bind = b.binds[i];
    switch (p.type) {
      case T::kNull:
        bind.buffer_type = MYSQL_TYPE_NULL;
        bind.is_null = &b.nulls[i];
        break;
      case T::kString:
      case T::kBlob:
        bind.buffer_type = p.type == T::kString ? MYSQL_TYPE_STRING : MYSQL_TYPE_BLOB;
        bind.buffer = p.text.data();
        bind.buffer_length = p.text.size();
        break;
      case T::kInt:
        bind.buffer_type = MYSQL_TYPE_LONGLONG;
        bind.buffer = &p.integer;
        break;
      case T::kDouble:
        bind.buffer_type = MYSQL_TYPE_DOUBLE;
        bind.buffer = &p.real;
        break;
      case T::kTiny:
        b.tinies[i] = static_cast<signed char>(p.integer);
        bind.buffer_type = MYSQL_TYPE_TINY;
        bind.buffer = &b.tinies[i];
        break;
      case T::kDatetime:
      case T::kTimestamp:
        b.times[i] = mysql_time(p.integer, p.fraction_digits);
        bind.buffer_type = p.type == T::kDatetime ? MYSQL_TYPE_DATETIME : MYSQL_TYPE_TIMESTAMP;
        bind.buffer = &b.times[i];
        break;
    }
  }
}

}  // namespace

MysqlConnection::~MysqlConnection() { close(); }

void MysqlConnection::close() {
  for (auto& [sql, stmt] : lru_) mysql_stmt_close(stmt);
  lru_.clear();
  statements_.clear();
  if (mysql_ != nullptr) mysql_close(mysql_);
  mysql_ = nullptr;
}

bool MysqlConnection::check_alive() {
  if (mysql_ == nullptr) return false;
  pollfd fd{static_cast<int>(mysql_get_socket(mysql_)), POLLIN, 0};
  if (::poll(&fd, 1, 0) != 0) {  // nothing arrives on an idle connection unless it ends
    close();
    return false;
  }
  return true;
}

bool MysqlConnection::in_transaction() const {
  return mysql_ != nullptr && (mysql_->server_status & SERVER_STATUS_IN_TRANS) != 0;
}

Status MysqlConnection::failure(unsigned error_number, const char* message, std::string_view what) {
  const std::string text = "ERROR " + std::to_string(error_number) + ": " +
                           sanitize_server_message(message ? message : "", known_names_, password_);
  const bool lost = client_error(error_number);
  if (lost) close();
  if (lost || transient_server_error(error_number))
    return Status::transient(std::string(what) + text);
  return Status::permanent(std::string(what) + text);
}

Status MysqlConnection::connect(const MysqlDsn& dsn, Duration connect_timeout,
                                Duration io_timeout) {
  close();
  password_ = dsn.password;
  mysql_ = mysql_init(nullptr);
  if (mysql_ == nullptr) return Status::transient("cannot connect to MySQL: out of memory");
  const unsigned connect_s = whole_seconds(connect_timeout), io_s = whole_seconds(io_timeout);
  io_timeout_ = seconds(io_s);
  mysql_options(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
  mysql_options(mysql_, MYSQL_OPT_READ_TIMEOUT, &io_s);
  mysql_options(mysql_, MYSQL_OPT_WRITE_TIMEOUT, &io_s);
  mysql_options(mysql_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  const unsigned protocol = dsn.unix_socket.empty() ? MYSQL_PROTOCOL_TCP : MYSQL_PROTOCOL_SOCKET;
  mysql_options(mysql_, MYSQL_OPT_PROTOCOL, &protocol);
  const my_bool no = 0, yes = 1;
  mysql_options(mysql_, MYSQL_OPT_LOCAL_INFILE, &no);
  if (dsn.tls == MysqlDsn::Tls::kVerify || dsn.tls == MysqlDsn::Tls::kSkipVerify) {
    mysql_options(mysql_, MYSQL_OPT_SSL_ENFORCE, &yes);
    mysql_options(mysql_, MYSQL_OPT_SSL_VERIFY_SERVER_CERT,
                  dsn.tls == MysqlDsn::Tls::kVerify ? &yes : &no);
  }
  const char* socket = dsn.unix_socket.empty() ? nullptr : dsn.unix_socket.c_str();
  if (mysql_real_connect(mysql_, dsn.unix_socket.empty() ? dsn.host.c_str() : nullptr,
                         dsn.user.c_str(), dsn.password.c_str(),
                         dsn.database.empty() ? nullptr : dsn.database.c_str(), dsn.port, socket,
                         CLIENT_FOUND_ROWS) == nullptr) {
    Status s = failure(mysql_errno(mysql_), mysql_error(mysql_), "cannot connect to MySQL: ");
    close();
    return s;
  }
  is_mariadb_ = std::strstr(mysql_get_server_info(mysql_), "MariaDB") != nullptr;
  return query(
      "SET SESSION time_zone = '+00:00', autocommit = 1, sql_mode = "
      "'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_"
      "SUBSTITUTION'");
}

Status MysqlConnection::query(const std::string& sql) {
  if (mysql_ == nullptr) return Status::transient("not connected to MySQL");
  if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) {
    return failure(mysql_errno(mysql_), mysql_error(mysql_), "");
  }
  if (MYSQL_RES* res = mysql_store_result(mysql_)) mysql_free_result(res);
  return Status::ok();
}

StatusOr<st_mysql_stmt*> MysqlConnection::prepared(const std::string& sql) {
  if (auto it = statements_.find(sql); it != statements_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  MYSQL_STMT* stmt = mysql_stmt_init(mysql_);
  if (stmt == nullptr) return Status::transient("out of memory");
  if (mysql_stmt_prepare(stmt, sql.data(), sql.size()) != 0) {
    Status s = failure(mysql_stmt_errno(stmt), mysql_stmt_error(stmt), "");
    mysql_stmt_close(stmt);
    return s;
  }
  const my_bool yes = 1;
  mysql_stmt_attr_set(stmt, STMT_ATTR_UPDATE_MAX_LENGTH, &yes);
  lru_.emplace_front(sql, stmt);
  statements_[sql] = lru_.begin();
  if (lru_.size() > kStatementsCached) {
    mysql_stmt_close(lru_.back().second);
    statements_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return stmt;
}

StatusOr<MysqlConnection::Result> MysqlConnection::exec(const std::string& sql,
                                                        const std::vector<Param>& params) {
  if (mysql_ == nullptr) return Status::transient("not connected to MySQL");
  auto stmt = prepared(sql);
  if (!stmt.is_ok()) return stmt.status();
  std::vector<Param> values = params;  // the binds point into these
  Binds binds;
  bind_params(values, binds);
  if ((!values.empty() && mysql_stmt_bind_param(*stmt, binds.binds.data()) != 0) ||
      mysql_stmt_execute(*stmt) != 0) {
    return failure(mysql_stmt_errno(*stmt), mysql_stmt_error(*stmt), "");
  }
  auto result = fetch_all(*stmt);
  if (!result.is_ok()) return result;
  result->affected = static_cast<int64_t>(mysql_stmt_affected_rows(*stmt));
  return result;
}

StatusOr<MysqlConnection::Result> MysqlConnection::fetch_all(st_mysql_stmt* stmt) {
  Result result;
  MYSQL_RES* meta = mysql_stmt_result_metadata(stmt);
  if (meta == nullptr) return result;
  if (mysql_stmt_store_result(stmt) != 0) {
    mysql_free_result(meta);
    return failure(mysql_stmt_errno(stmt), mysql_stmt_error(stmt), "");
  }
  const unsigned n = mysql_num_fields(meta);
  MYSQL_FIELD* fields = mysql_fetch_fields(meta);
  std::vector<MYSQL_BIND> binds(n, MYSQL_BIND{});
  std::vector<std::string> buffers(n);
  std::vector<unsigned long> lengths(n);
  std::vector<my_bool> nulls(n);
  for (unsigned i = 0; i < n; ++i) {
    buffers[i].resize(std::max<unsigned long>(fields[i].max_length, kNumberBuffer) + 1);
    binds[i].buffer_type = MYSQL_TYPE_STRING;
    binds[i].buffer = buffers[i].data();
    binds[i].buffer_length = buffers[i].size();
    binds[i].length = &lengths[i];
    binds[i].is_null = &nulls[i];
  }
  mysql_free_result(meta);
  mysql_stmt_bind_result(stmt, binds.data());
  for (int r; (r = mysql_stmt_fetch(stmt)) == 0 || r == MYSQL_DATA_TRUNCATED;) {
    auto& row = result.rows.emplace_back();
    for (unsigned i = 0; i < n; ++i) {
      if (nulls[i]) {
        row.emplace_back();
        continue;
      }
      std::string value(lengths[i], '\0');
      if (lengths[i] <= buffers[i].size()) {
        value.assign(buffers[i].data(), lengths[i]);
      } else {  // longer than max_length promised: fetch it whole
        MYSQL_BIND whole{};
        whole.buffer_type = MYSQL_TYPE_STRING;
        whole.buffer = value.data();
        whole.buffer_length = value.size();
        mysql_stmt_fetch_column(stmt, &whole, i, 0);
      }
      row.emplace_back(std::move(value));
    }
  }
  const unsigned error = mysql_stmt_errno(stmt);
  mysql_stmt_free_result(stmt);
  if (error != 0) return failure(error, mysql_stmt_error(stmt), "");
  return result;
}

}  // namespace dex::attrstore
