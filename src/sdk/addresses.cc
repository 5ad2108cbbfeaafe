#include "sdk/addresses.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

namespace dex {

namespace {

bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
}

bool is_ipv6_char(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == ':' || c == '.';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

}  // namespace

Status validate_server_address(std::string_view address) {
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument(fmt::format("invalid server address '{}': {}", address, why));
  };
  if (address.empty()) return bad("use host:port, e.g. 127.0.0.1:8801");
  std::string_view host, port;
  if (address.front() == '[') {
    size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return bad("use [IPv6 address]:port, e.g. [::1]:8801");
    }
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
    if (host.empty() || !std::all_of(host.begin(), host.end(), is_ipv6_char)) {
      return bad("the part in brackets must be an IPv6 address");
    }
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return bad("use host:port, e.g. 127.0.0.1:8801");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.empty()) return bad("the host is missing; use host:port, e.g. 127.0.0.1:8801");
    if (host.find(':') != std::string_view::npos) {
      return bad("put an IPv6 address in brackets, e.g. [::1]:8801");
    }
    if (!std::all_of(host.begin(), host.end(), is_host_char)) {
      return bad("the host may hold only letters, digits, '.', '-' and '_'");
    }
  }
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value < 1 ||
      value > 65535) {
    return bad("the port must be a number from 1 to 65535");
  }
  return Status::ok();
}

Status validate_server_addresses(const std::vector<std::string>& addresses) {
  if (addresses.empty()) {
    return Status::invalid_argument("no server address given; use host:port, e.g. 127.0.0.1:8801");
  }
  std::set<std::string_view> seen;
  for (const std::string& address : addresses) {
    if (auto s = validate_server_address(address); !s.is_ok()) return s;
    if (!seen.insert(address).second) {
      return Status::invalid_argument(fmt::format("server address '{}' is listed twice in {}",
                                                  address, join_addresses(addresses)));
    }
  }
  return Status::ok();
}

StatusOr<std::vector<std::string>> parse_server_addresses(std::string_view list) {
  const std::string_view original = list;
  std::vector<std::string> addresses;
  size_t position = 1;
  while (true) {
    size_t comma = list.find(',');
    std::string_view entry = trim(list.substr(0, comma));
    if (entry.empty()) {
      return Status::invalid_argument(fmt::format(
          "empty server address at position {} of '{}'; separate addresses with one comma",
          position, original));
    }
    addresses.emplace_back(entry);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
    ++position;
  }
  if (auto s = validate_server_addresses(addresses); !s.is_ok()) return s;
  return addresses;
}

std::vector<std::string> effective_server_addresses(const std::vector<std::string>& addresses,
                                                    const std::string& single) {
  if (!addresses.empty()) return addresses;
  return {single};
}

std::string join_addresses(const std::vector<std::string>& addresses) {
  std::string out;
  for (const std::string& a : addresses) out += (out.empty() ? "" : ", ") + a;
  return out;
}

}  // namespace dex
