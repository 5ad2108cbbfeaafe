// What keeps other web pages from using dex-web's API through the browser of
// the developer who runs it (docs/dex-web.md, "Browser safety"). A page on
// another origin can send a "simple" cross-origin POST without asking first,
// and a DNS-rebinding page can make its own host name resolve to 127.0.0.1.
// So every API call must be JSON (a cross-origin page cannot send that
// without a preflight, which dex-web never approves), must not come from
// another origin, and on a loopback listener must name a loopback host.
// Pure functions over the request's headers.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dex::web {

struct Refusal {
  int http_status;
  std::string code;  // a gRPC code name, as the gateway's errors
  std::string message;
};

// Whether the listener's host is a loopback one (127.0.0.0/8, ::1, localhost).
bool loopback_host(std::string_view host);

// The refusal of an API request, or nullopt to let it through. `post`: a
// call of the gateway (GET /api/v1/web needs no body type). Header values
// as received ("" when absent).
std::optional<Refusal> refuse_api_request(bool listener_loopback, bool post,
                                          std::string_view host_header, std::string_view origin,
                                          std::string_view content_type);

}  // namespace dex::web
