#include "attrstore/pg_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>

#include "attrstore/server_message.h"

namespace dex::attrstore {
namespace {

// SQLSTATEs a retry may get past: connection exceptions (08), serialization
// failure and deadlock (40001, 40P01), lock_timeout (55P03), statement_timeout
// and operator cancels (57014), shutdowns (57P01..03), insufficient resources
// (53), I/O (58), the idle-in-transaction timeout (25P03).
bool transient_sqlstate(std::string_view state) {
  if (state.size() != 5) return true;  // no SQLSTATE: a client-side failure
  const std::string_view cls = state.substr(0, 2);
  return cls == "08" || cls == "53" || cls == "58" || state == "40001" || state == "40P01" ||
         state == "55P03" || state == "57014" || state == "57P01" || state == "57P02" ||
         state == "57P03" || state == "25P03";
}

// The guard's error (postgres_session.cc): a cast of this text to boolean.
constexpr std::string_view kOverBudget = "ran past its budget";

int remaining_ms(TimePoint deadline) {
  const auto left =
      std::chrono::duration_cast<milliseconds>(deadline - SystemClock::instance().now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 60'000));
}

}  // namespace

PgConnection::~PgConnection() { close(); }

bool PgConnection::is_open() const { return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK; }

bool PgConnection::check_alive() {
  if (!is_open()) return false;
  // Readable while idle: the server ended the session (an error, then EOF),
  // or, rarely, sent a notice; a new connection is cheap either way.
  pollfd fd{PQsocket(conn_), POLLIN, 0};
  if (::poll(&fd, 1, 0) != 0) {
    close();
    return false;
  }
  return true;
}

bool PgConnection::in_transaction() const {
  if (conn_ == nullptr) return false;
  const PGTransactionStatusType st = PQtransactionStatus(conn_);
  return st == PQTRANS_INTRANS || st == PQTRANS_INERROR || st == PQTRANS_ACTIVE;
}

void PgConnection::close() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
}

int PgConnection::server_version() const { return conn_ ? PQserverVersion(conn_) : 0; }

std::string PgConnection::server_encoding() const {
  const char* e = conn_ ? PQparameterStatus(conn_, "server_encoding") : nullptr;
  return e ? e : "";
}

Status PgConnection::connection_lost(std::string_view what) {
  std::string msg = conn_ ? PQerrorMessage(conn_) : "";
  close();
  return Status::transient(std::string(what) + ": " +
                           sanitize_server_message(msg, known_names_, password_));
}

Status PgConnection::connect(const std::string& dsn, const std::string& password,
                             TimePoint deadline) {
  close();
  password_ = password;
  // Ours before the DSN (which may override them), then the DSN, then what
  // must hold: values cross as UTF-8.
  const char* keys[] = {"application_name", "keepalives", "keepalives_idle", "keepalives_interval",
                        "keepalives_count", "dbname",     "client_encoding", nullptr};
  const char* values[] = {"dex-attrstore", "1", "10", "5", "3", dsn.c_str(), "UTF8", nullptr};
  conn_ = PQconnectStartParams(keys, values, /*expand_dbname=*/1);
  if (conn_ == nullptr) return Status::transient("cannot connect to PostgreSQL: out of memory");
  if (PQstatus(conn_) == CONNECTION_BAD) return connection_lost("cannot connect to PostgreSQL");
  for (;;) {
    const PostgresPollingStatusType poll_status = PQconnectPoll(conn_);
    if (poll_status == PGRES_POLLING_OK) break;
    if (poll_status == PGRES_POLLING_FAILED) return connection_lost("cannot connect to PostgreSQL");
    if (Status s = wait_socket(poll_status == PGRES_POLLING_WRITING, deadline); !s.is_ok()) {
      close();
      return Status::transient(
          "cannot connect to PostgreSQL: no answer within the connect timeout");
    }
  }
  if (PQsetnonblocking(conn_, 1) != 0) return connection_lost("cannot connect to PostgreSQL");
  return Status::ok();
}

Status PgConnection::wait_socket(bool for_write, TimePoint deadline) {
  pollfd fd{PQsocket(conn_), static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
  if (fd.fd < 0) return Status::transient("no socket");
  for (;;) {
    const int ms = remaining_ms(deadline);
    if (ms == 0) return Status::transient("timed out");
    const int n = ::poll(&fd, 1, ms);
    if (n > 0) return Status::ok();
    if (n < 0 && errno != EINTR) return Status::transient("poll failed");
  }
}

Status PgConnection::flush(TimePoint deadline) {
  for (;;) {
    const int r = PQflush(conn_);
    if (r == 0) return Status::ok();
    if (r < 0) return connection_lost("sending to PostgreSQL failed");
    // The server may be waiting for us to read before it reads more.
    if (Status s = wait_socket(/*for_write=*/true, deadline); !s.is_ok()) return s;
    if (PQconsumeInput(conn_) == 0) return connection_lost("PostgreSQL connection lost");
  }
}

StatusOr<PgConnection::Result> PgConnection::exec(const std::string& sql,
                                                  const std::vector<Param>& params,
                                                  TimePoint deadline) {
  if (!is_open()) return Status::transient("not connected to PostgreSQL");
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  std::vector<Oid> types;
  for (const Param& p : params) {
    values.push_back(p.value ? p.value->data() : nullptr);
    lengths.push_back(p.value ? static_cast<int>(p.value->size()) : 0);
    formats.push_back(p.binary ? 1 : 0);
    types.push_back(p.type_oid);
  }
  if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(params.size()), types.data(),
                        values.data(), lengths.data(), formats.data(), /*resultFormat=*/0) == 0) {
    return connection_lost("sending to PostgreSQL failed");
  }
  return collect(deadline);
}

Status PgConnection::exec_script(const std::string& sql, TimePoint deadline) {
  if (!is_open()) return Status::transient("not connected to PostgreSQL");
  if (PQsendQuery(conn_, sql.c_str()) == 0) return connection_lost("sending to PostgreSQL failed");
  return collect(deadline).status();
}

StatusOr<PgConnection::Result> PgConnection::collect(TimePoint deadline) {
  if (Status s = flush(deadline); !s.is_ok()) {
    close();
    return Status::transient("PostgreSQL did not take the statement in time: " + s.message());
  }
  Result result;
  Status error;
  for (;;) {
    while (PQisBusy(conn_)) {
      if (Status s = wait_socket(/*for_write=*/false, deadline); !s.is_ok()) {
        close();  // the server's own timeouts end the statement
        return Status::transient("PostgreSQL did not answer in time");
      }
      if (PQconsumeInput(conn_) == 0) return connection_lost("PostgreSQL connection lost");
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_TUPLES_OK) {
      for (int row = 0; row < PQntuples(r); ++row) {
        auto& out = result.rows.emplace_back();
        for (int col = 0; col < PQnfields(r); ++col) {
          if (PQgetisnull(r, row, col))
            out.emplace_back();
          else
            out.emplace_back(std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col)));
        }
      }
    } else if (st == PGRES_COMMAND_OK) {
      const char* n = PQcmdTuples(r);
      if (n && *n) result.affected += std::stoll(n);
      result.command = PQcmdStatus(r);
    } else if (error.is_ok()) {
      const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
      const std::string_view sqlstate = state ? state : "";
      const std::string text = primary ? primary : PQresultErrorMessage(r);
      if (text.find(kOverBudget) != std::string::npos) {
        error = Status::transient("the transaction ran past its budget (checked by the server)");
      } else {
        const std::string msg = "ERROR " + std::string(sqlstate) + ": " +
                                sanitize_server_message(text, known_names_, password_);
        error = transient_sqlstate(sqlstate) ? Status::transient(msg) : Status::permanent(msg);
      }
    }
    PQclear(r);
  }
  if (PQstatus(conn_) == CONNECTION_BAD) {
    Status lost = connection_lost("PostgreSQL connection lost");
    return error.is_ok() ? lost : Status::transient(error.message());
  }
  if (!error.is_ok()) return error;
  return result;
}

}  // namespace dex::attrstore
