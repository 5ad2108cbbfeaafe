#include "web/https_text.h"

#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

namespace dex::web {

namespace {

// A scrape at a time is the common case; a few more in parallel are served.
constexpr size_t kThreads = 4;

}  // namespace

class HttpsText::Impl {
 public:
  explicit Impl(const std::function<bool(SSL_CTX&)>& tls_setup) : server_(tls_setup) {}
  ~Impl() { stop(); }

  Status start(const std::string& listen, const std::string& path, const std::string& content_type,
               std::function<std::string()> render) {
    const size_t colon = listen.rfind(':');
    if (colon == std::string::npos || !server_.is_valid()) {
      return Status::invalid_argument(
          fmt::format("cannot serve HTTPS on '{}': not host:port, or the TLS settings were "
                      "refused",
                      listen));
    }
    const std::string host = listen.substr(0, colon);
    const int wanted = std::atoi(listen.c_str() + colon + 1);
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a
    // second process could bind the same port without an error.
    server_.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    server_.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
    server_.Get(path, [render, content_type](const httplib::Request&, httplib::Response& res) {
      res.set_content(render(), content_type);
    });
    port_ = wanted == 0 ? server_.bind_to_any_port(host)
                        : (server_.bind_to_port(host, wanted) ? wanted : -1);
    if (port_ < 0) {
      return Status::invalid_argument(fmt::format("cannot listen on '{}' (in use?)", listen));
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // httplib's stop() does nothing until the listener runs (bounded: 10 s).
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
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }

 private:
  httplib::SSLServer server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex stop_mu_;
  bool stopped_ = false;  // guarded by stop_mu_
};

StatusOr<std::unique_ptr<HttpsText>> HttpsText::start(const std::string& listen,
                                                      const std::string& path,
                                                      const std::string& content_type,
                                                      std::function<std::string()> render,
                                                      std::function<bool(SSL_CTX&)> tls_setup) {
  auto impl = std::make_unique<Impl>(std::move(tls_setup));
  if (Status s = impl->start(listen, path, content_type, std::move(render)); !s.is_ok()) return s;
  return std::unique_ptr<HttpsText>(new HttpsText(std::move(impl)));
}

HttpsText::HttpsText(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpsText::~HttpsText() = default;
int HttpsText::port() const { return impl_->port(); }
void HttpsText::stop() { impl_->stop(); }

}  // namespace dex::web
