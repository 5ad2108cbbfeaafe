#include "attrstore/dsn.h"

#include <charconv>
#include <vector>

namespace dex::attrstore {
namespace {

constexpr std::string_view kMysqlScheme = "mysql://";
constexpr std::string_view kRedacted = "***";

Status bad(std::string_view why) {
  return Status::invalid_argument("mysql DSN: " + std::string(why));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "host:port", "[::1]:port" or "host" into `out`.
Status parse_host_port(std::string_view text, MysqlDsn* out) {
  std::string_view host = text, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("an unclosed [ in the host");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("text after the ] of the host");
      port = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) return bad("no host before the port");
  out->host = std::string(host);
  if (text.find(':') != std::string_view::npos && port.empty() && text.front() != '[') {
    return bad("an empty port");
  }
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return bad("the port \"" + std::string(port) + "\" is not a number from 1 to 65535");
    }
    out->port = static_cast<uint16_t>(value);
  }
  return Status::ok();
}

// "tls=true&parseTime=true": tls is used; the Go driver's harmless options are
// accepted and ignored, so a DSN copied from a Go service works.
Status parse_params(std::string_view text, MysqlDsn* out) {
  while (!text.empty()) {
    const size_t amp = text.find('&');
    std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (key == "tls") {
      if (value == "true")
        out->tls = MysqlDsn::Tls::kVerify;
      else if (value == "false")
        out->tls = MysqlDsn::Tls::kOff;
      else if (value == "skip-verify")
        out->tls = MysqlDsn::Tls::kSkipVerify;
      else if (value == "preferred")
        out->tls = MysqlDsn::Tls::kPreferred;
      else
        return bad("tls must be true, false, skip-verify or preferred");
    } else if (key == "parseTime" || key == "loc" || key == "charset" || key == "collation" ||
               key == "interpolateParams") {
      // The connection always speaks utf8mb4 with UTC timestamps.
    } else {
      return bad(
          "unknown parameter \"" + std::string(key) +
          "\" (accepted: tls; ignored: parseTime, loc, charset, collation, interpolateParams)");
    }
  }
  return Status::ok();
}

StatusOr<MysqlDsn> parse_uri(std::string_view dsn) {
  MysqlDsn out;
  std::string_view rest = dsn.substr(kMysqlScheme.size());
  const size_t query = rest.find('?');
  std::string_view params = query == std::string_view::npos ? "" : rest.substr(query + 1);
  rest = rest.substr(0, query);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    const size_t colon = userinfo.find(':');
    if (!percent_decode(userinfo.substr(0, colon), &out.user))
      return bad("a bad %-escape in the user");
    if (colon != std::string_view::npos &&
        !percent_decode(userinfo.substr(colon + 1), &out.password)) {
      return bad("a bad %-escape in the password");
    }
    authority = authority.substr(at + 1);
  }
  if (authority.empty()) return bad("no host (mysql://user:password@host:port/database)");
  if (Status s = parse_host_port(authority, &out); !s.is_ok()) return s;
  if (path.find('/') != std::string_view::npos) return bad("a / in the database name");
  if (!percent_decode(path, &out.database)) return bad("a bad %-escape in the database");
  if (Status s = parse_params(params, &out); !s.is_ok()) return s;
  return out;
}

// The Go driver's [user[:password]@][net[(addr)]]/dbname[?params], split as
// that driver splits it: the last '/', then the last '@' before it.
StatusOr<MysqlDsn> parse_go_form(std::string_view dsn) {
  MysqlDsn out;
  const size_t slash = dsn.rfind('/');
  if (slash == std::string_view::npos) {
    return bad(
        "neither mysql://user:password@host:port/database nor "
        "user:password@tcp(host:port)/database");
  }
  std::string_view head = dsn.substr(0, slash), tail = dsn.substr(slash + 1);
  const size_t at = head.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = head.substr(0, at);
    const size_t colon = userinfo.find(':');
    out.user = std::string(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) out.password = std::string(userinfo.substr(colon + 1));
    head = head.substr(at + 1);
  }
  if (!head.empty()) {
    const size_t open = head.find('(');
    std::string_view net = head.substr(0, open);
    if (open == std::string_view::npos || head.back() != ')') {
      return bad("the address must be tcp(host:port) or unix(/path)");
    }
    std::string_view addr = head.substr(open + 1, head.size() - open - 2);
    if (net == "tcp") {
      if (!addr.empty()) {
        if (Status s = parse_host_port(addr, &out); !s.is_ok()) return s;
      }
    } else if (net == "unix") {
      if (addr.empty()) return bad("unix() needs a socket path");
      out.unix_socket = std::string(addr);
    } else {
      return bad("the network must be tcp or unix");
    }
  }
  const size_t query = tail.find('?');
  out.database = std::string(tail.substr(0, query));
  if (query != std::string_view::npos) {
    if (Status s = parse_params(tail.substr(query + 1), &out); !s.is_ok()) return s;
  }
  return out;
}

// Replaces [from, to) of `s` with ***.
std::string splice(std::string_view s, size_t from, size_t to) {
  return std::string(s.substr(0, from)) + std::string(kRedacted) + std::string(s.substr(to));
}

// password=... parameters of a URI query.
std::string redact_query_password(std::string text) {
  for (size_t pos = text.find('?'); pos != std::string::npos; pos = text.find('&', pos + 1)) {
    const size_t key = pos + 1;
    if (text.compare(key, 9, "password=") != 0) continue;
    const size_t end = text.find('&', key);
    text = splice(text, key + 9, end == std::string::npos ? text.size() : end);
  }
  return text;
}

std::string redact_uri(std::string_view dsn) {
  const size_t start = dsn.find("://") + 3;
  const size_t path = dsn.find_first_of("/?", start);
  std::string_view authority =
      dsn.substr(start, path == std::string_view::npos ? dsn.npos : path - start);
  const size_t at = authority.rfind('@');
  std::string out(dsn);
  if (at != std::string_view::npos) {
    const size_t colon = authority.substr(0, at).find(':');
    if (colon != std::string_view::npos) out = splice(dsn, start + colon + 1, start + at);
  }
  return redact_query_password(std::move(out));
}

// libpq's key = value form; a value may be 'quoted' with \ escapes.
std::string redact_key_values(std::string_view dsn) {
  std::string out;
  size_t i = 0;
  while (i < dsn.size()) {
    const size_t eq = dsn.find('=', i);
    if (eq == std::string_view::npos) {
      out += dsn.substr(i);
      break;
    }
    std::string_view key = dsn.substr(i, eq - i);
    while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
    size_t v = eq + 1;
    while (v < dsn.size() && dsn[v] == ' ') ++v;
    size_t end = v;
    if (end < dsn.size() && dsn[end] == '\'') {
      for (++end; end < dsn.size() && dsn[end] != '\''; ++end) {
        if (dsn[end] == '\\') ++end;
      }
      end = std::min(end + 1, dsn.size());
    } else {
      while (end < dsn.size() && dsn[end] != ' ') ++end;
    }
    const bool secret = key.size() >= 8 && key.substr(key.size() - 8) == "password";
    out += dsn.substr(i, v - i);
    out += secret ? kRedacted : dsn.substr(v, end - v);
    i = end;
  }
  return out;
}

}  // namespace

bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    const int hi = i + 1 < in.size() ? hex_value(in[i + 1]) : -1;
    const int lo = i + 2 < in.size() ? hex_value(in[i + 2]) : -1;
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

StatusOr<MysqlDsn> parse_mysql_dsn(std::string_view dsn) {
  if (dsn.empty()) return bad("empty");
  if (dsn.substr(0, kMysqlScheme.size()) == kMysqlScheme) return parse_uri(dsn);
  if (dsn.find("://") != std::string_view::npos) return bad("the scheme must be mysql://");
  return parse_go_form(dsn);
}

std::string redact_dsn(std::string_view dsn) {
  if (dsn.find("://") != std::string_view::npos) return redact_uri(dsn);
  // The Go form: user:password@...(...)/db; a key=value DSN has no '@' before its first '='.
  const size_t slash = dsn.rfind('/');
  const size_t at = dsn.substr(0, slash == std::string_view::npos ? dsn.size() : slash).rfind('@');
  const size_t eq = dsn.find('=');
  if (at != std::string_view::npos && (eq == std::string_view::npos || eq > at)) {
    const size_t colon = dsn.substr(0, at).find(':');
    return colon == std::string_view::npos ? std::string(dsn) : splice(dsn, colon + 1, at);
  }
  return redact_key_values(dsn);
}

}  // namespace dex::attrstore
