#include "web/web_server.h"

#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "web/http_status.h"
#include "web/json_gateway.h"
#include "web/process_status.h"
#include "web/request_guard.h"
#include "web/static_files.h"

namespace dex::web {
namespace {

namespace fs = std::filesystem;

// Threads that answer requests: a long poll holds one for up to 70 s, so a
// page with a few open ones still gets its other calls through.
constexpr size_t kRequestThreads = 16;
// An idle keep-alive connection is closed after this long (it also bounds
// how long stop() waits for one).
constexpr time_t kKeepAliveSeconds = 2;

struct HostPort {
  std::string host;  // without IPv6 brackets
  int port = 0;
};

StatusOr<HostPort> split_listen(std::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Status::invalid_argument(
        fmt::format("invalid listen address '{}': use host:port, e.g. 127.0.0.1:8802", listen));
  }
  HostPort out;
  std::string_view host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  out.host = std::string(host);
  std::string_view port = listen.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || out.port < 0 ||
      out.port > 65535) {
    return Status::invalid_argument(fmt::format(
        "invalid listen address '{}': the port must be a number from 0 to 65535", listen));
  }
  return out;
}

// cpp-httplib compresses an answer set with set_content whenever the browser
// accepts it and its type is one it deems compressible (an exact
// "application/json", any "text/..."), brotli first, at each request: 3.9 s
// for the 1.6 MB layout worker here, against 5 ms uncompressed on loopback.
// The API's answers are "application/json; charset=utf-8", which it leaves
// alone; files are sized content providers, which it sends as they are.
constexpr std::string_view kJson = "application/json; charset=utf-8";

void set_file_body(httplib::Response& res, std::string body, const std::string& content_type) {
  auto shared = std::make_shared<const std::string>(std::move(body));
  res.set_content_provider(shared->size(), content_type,
                           [shared](size_t offset, size_t length, httplib::DataSink& sink) {
                             return sink.write(shared->data() + offset, length);
                           });
}

void set_body(httplib::Response& res, std::string body, std::string_view content_type) {
  res.set_content(std::move(body), std::string(content_type));
}

void set_json_error(httplib::Response& res, int http_status, std::string_view code,
                    std::string_view message) {
  res.status = http_status;
  set_body(res, error_body(code, message), std::string(kJson));
  res.set_header("Cache-Control", "no-store");
}

}  // namespace

fs::path default_assets_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return {};
  return (exe.parent_path() / ".." / "share" / "dex-web").lexically_normal();
}

std::string dial_address(std::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos) return std::string(listen);
  std::string_view host = listen.substr(0, colon);
  std::string_view port = listen.substr(colon + 1);
  if (host.empty() || host == "0.0.0.0") return fmt::format("127.0.0.1:{}", port);
  if (host == "[::]" || host == "::") return fmt::format("[::1]:{}", port);
  return std::string(listen);
}

class WebServer::Impl {
 public:
  explicit Impl(const WebServerOptions& options)
      : options_(options),
        files_(options.assets_dir),
        gateway_(options.gateway_address.empty() ? dial_address(options.api_address)
                                                 : options.gateway_address) {}

  ~Impl() { stop(); }

  Status start() {
    auto hp = split_listen(options_.listen);
    if (!hp.is_ok()) return hp.status();
    host_ = hp->host;
    if (!server_.is_valid()) {
      return Status::invalid_argument(fmt::format(
          "cannot serve HTTPS on {}: the TLS settings were refused (web.tls)", options_.listen));
    }
    routes();
    // SO_REUSEADDR only: the library's default also sets SO_REUSEPORT, with
    // which a second process could bind the same port without an error.
    // TCP_NODELAY (accepted connections inherit it from the listener on
    // Linux): an answer goes out in more than one write, and with Nagle's
    // algorithm the second waited for the browser's delayed ACK of the first,
    // 40 ms on a kept-alive connection, on about half the calls.
    server_.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    });
    server_.set_tcp_nodelay(true);
    server_.new_task_queue = [] { return new httplib::ThreadPool(kRequestThreads); };
    server_.set_payload_max_length(options_.request_bytes_max);
    server_.set_keep_alive_timeout(kKeepAliveSeconds);
    errno = 0;
    if (hp->port == 0) {
      port_ = server_.bind_to_any_port(host_);
    } else {
      port_ = server_.bind_to_port(host_, hp->port) ? hp->port : -1;
    }
    if (port_ < 0) {
      const int error = errno;
      return Status::invalid_argument(
          fmt::format("cannot listen on {} for dex-web: {}", options_.listen,
                      error == EADDRINUSE ? std::string("the address is already in use")
                      : error != 0        ? std::string(std::strerror(error))
                                          : std::string("the address cannot be bound")));
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // The library's stop() does nothing until the listener runs: wait for it,
    // so that a stop() right after start() is not lost (bounded: 10 s).
    for (int i = 0; i < 10'000 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return Status::ok();
  }

  void stop() {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    server_.stop();
    gateway_.cancel_all();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  std::string url() const {
    const bool v6 = host_.find(':') != std::string::npos;
    return fmt::format("{}://{}{}{}:{}", options_.tls_setup ? "https" : "http", v6 ? "[" : "",
                       host_, v6 ? "]" : "", port_);
  }
  const StaticFiles& files() const { return files_; }

 private:
  // Refuses (and answers) an API request another origin's page could have
  // sent through the browser (web/request_guard.h).
  bool refused(const httplib::Request& req, httplib::Response& res, bool post) const {
    auto r =
        refuse_api_request(loopback_host(host_), post, req.get_header_value("Host"),
                           req.get_header_value("Origin"), req.get_header_value("Content-Type"));
    if (!r) return false;
    set_json_error(res, r->http_status, r->code, r->message);
    res.set_header("Cache-Control", "no-store");
    return true;
  }

  void routes() {
    server_.Get("/api/v1/web", [this](const httplib::Request& req, httplib::Response& res) {
      if (refused(req, res, /*post=*/false)) return;
      nlohmann::json info = {{"version", options_.version},
                             {"apiAddress", options_.api_address},
                             {"adminAuth", options_.admin_auth}};
      set_body(res, info.dump(), std::string(kJson));
      res.set_header("Cache-Control", "no-store");
    });
    // Answers on any process, a standby included: it reads this process's
    // own state, not the public API (which a standby answers UNAVAILABLE).
    server_.Get("/api/v1/process", [this](const httplib::Request& req, httplib::Response& res) {
      if (refused(req, res, /*post=*/false)) return;
      if (!options_.process_status) {
        set_json_error(res, 404, "NOT_FOUND", "this dex-web was started without a process status");
        return;
      }
      set_body(res, process_status_json(options_.process_status()), std::string(kJson));
      res.set_header("Cache-Control", "no-store");
    });
    server_.Post(
        R"(/api/v1/([^/]+)/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
          if (refused(req, res, /*post=*/true)) return;
          GatewayReply reply = gateway_.call(req.matches[1].str(), req.matches[2].str(), req.body,
                                             req.get_header_value("Authorization"));
          res.status = reply.http_status;
          set_body(res, std::move(reply.body), std::string(kJson));
          res.set_header("Cache-Control", "no-store");
        });
    server_.Get(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.path.starts_with("/api/")) {
        set_json_error(res, 404, "NOT_FOUND",
                       fmt::format("no API path {}: calls are POST /api/v1/<service>/<method> "
                                   "(docs/dex-web.md)",
                                   req.path));
        return;
      }
      StaticReply reply = files_.get(req.path);
      res.status = reply.http_status;
      res.set_header("Cache-Control", reply.cache_control);
      res.set_header("X-Content-Type-Options", "nosniff");
      set_file_body(res, std::move(reply.body), reply.content_type);
    });
    // Answers the library makes itself (no route, a body over the limit)
    // get a body; the handlers' own errors keep theirs.
    server_.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          // A handler's own answer has its type; the library's have none.
          if (res.has_header("Content-Type")) return httplib::Server::HandlerResponse::Unhandled;
          if (res.status == 413) {
            set_json_error(res, 413, "RESOURCE_EXHAUSTED",
                           fmt::format("the request body is larger than dex-web's limit of {}",
                                       options_.request_bytes_max % (1u << 20) == 0
                                           ? fmt::format("{} MiB", options_.request_bytes_max >> 20)
                                           : fmt::format("{} bytes", options_.request_bytes_max)));
          } else if (res.status == 404 || res.status == 405) {
            set_json_error(res, res.status, "NOT_FOUND",
                           fmt::format("no route for {} {}: calls are POST "
                                       "/api/v1/<service>/<method>, the app answers GET",
                                       req.method, req.path));
          } else {
            set_json_error(res, res.status, "INVALID_ARGUMENT",
                           "the request could not be read (a POST needs a Content-Length, 0 for "
                           "an empty request, or a chunked body)");
          }
          return httplib::Server::HandlerResponse::Handled;
        }));
  }

  const WebServerOptions options_;
  const StaticFiles files_;
  JsonGateway gateway_;
  // An httplib::SSLServer when web.tls is set, else a plain one.
  std::unique_ptr<httplib::Server> server_owner_ =
      options_.tls_setup
          ? std::unique_ptr<httplib::Server>(new httplib::SSLServer(options_.tls_setup))
          : std::make_unique<httplib::Server>();
  httplib::Server& server_ = *server_owner_;
  std::string host_;
  int port_ = -1;
  std::thread thread_;
  std::mutex stop_mu_;
  bool stopped_ = false;  // guarded by stop_mu_
};

StatusOr<std::unique_ptr<WebServer>> WebServer::start(const WebServerOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  if (Status s = impl->start(); !s.is_ok()) return s;
  return std::unique_ptr<WebServer>(new WebServer(std::move(impl)));
}

WebServer::WebServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WebServer::~WebServer() = default;

int WebServer::port() const { return impl_->port(); }
std::string WebServer::url() const { return impl_->url(); }
bool WebServer::assets_built() const { return impl_->files().built(); }
const fs::path& WebServer::assets_dir() const { return impl_->files().dir(); }
void WebServer::stop() { impl_->stop(); }

}  // namespace dex::web
