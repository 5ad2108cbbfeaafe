#include "web/request_guard.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace dex::web {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The host part of a Host header: "[::1]:8802" -> "::1", "localhost:8802" -> "localhost".
std::string_view host_part(std::string_view host_header) {
  if (host_header.starts_with('[')) {
    const size_t close = host_header.find(']');
    return close == std::string_view::npos ? host_header : host_header.substr(1, close - 1);
  }
  const size_t colon = host_header.rfind(':');
  return colon == std::string_view::npos ? host_header : host_header.substr(0, colon);
}

}  // namespace

bool loopback_host(std::string_view host) {
  const std::string h = lower(host);
  return h == "localhost" || h == "::1" || h.starts_with("127.");
}

std::optional<Refusal> refuse_api_request(bool listener_loopback, bool post,
                                          std::string_view host_header, std::string_view origin,
                                          std::string_view content_type) {
  if (listener_loopback && !host_header.empty() && !loopback_host(host_part(host_header))) {
    return Refusal{403, "PERMISSION_DENIED",
                   fmt::format("Host '{}' is not a loopback name, and this dex-web listens on "
                               "loopback only (a DNS-rebinding guard): open it as "
                               "http://127.0.0.1:<port>",
                               host_header)};
  }
  if (!origin.empty() && lower(origin) != lower(fmt::format("http://{}", host_header)) &&
      lower(origin) != lower(fmt::format("https://{}", host_header))) {
    return Refusal{403, "PERMISSION_DENIED",
                   fmt::format("a call from the page of another origin ({}) is refused: dex-web "
                               "answers its own pages only",
                               origin)};
  }
  if (post) {
    std::string type = lower(content_type.substr(0, content_type.find(';')));
    type.erase(0, std::min(type.size(), type.find_first_not_of(' ')));
    type.erase(type.find_last_not_of(' ') + 1);
    if (type != "application/json") {
      return Refusal{415, "INVALID_ARGUMENT",
                     fmt::format("an API call needs Content-Type: application/json{}",
                                 content_type.empty() ? std::string(" (none was sent)")
                                                      : fmt::format(", not '{}'", content_type))};
    }
  }
  return std::nullopt;
}

}  // namespace dex::web
