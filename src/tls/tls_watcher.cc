#include "tls/tls_watcher.h"

#include <spdlog/spdlog.h>

namespace dex::tls {

namespace {

bool same_material(const ServerTlsMaterial& a, const ServerTlsMaterial& b) {
  return a.cert_chain_pem == b.cert_chain_pem && a.key_pem == b.key_pem &&
         a.client_ca_pem == b.client_ca_pem;
}

}  // namespace

StatusOr<std::unique_ptr<TlsWatcher>> TlsWatcher::start(const ServerTlsFiles& files,
                                                        Duration poll) {
  auto first = load_server_tls(files);
  if (!first.is_ok()) return first.status();
  std::unique_ptr<TlsWatcher> watcher(new TlsWatcher(files, std::move(first).value(), poll));
  watcher->thread_ = std::thread([w = watcher.get()] { w->run(); });
  return watcher;
}

TlsWatcher::TlsWatcher(ServerTlsFiles files, ServerTlsMaterial first, Duration poll)
    : files_(std::move(files)),
      poll_(poll),
      current_(std::make_shared<const ServerTlsMaterial>(std::move(first))) {}

TlsWatcher::~TlsWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const ServerTlsMaterial> TlsWatcher::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

uint64_t TlsWatcher::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void TlsWatcher::set_on_change(OnChange on_change) {
  // check_mu_ first: a callback running now finishes before this returns, so
  // its owner may go away once it has set another (or none).
  std::lock_guard<std::mutex> check(check_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  on_change_ = std::move(on_change);
}

bool TlsWatcher::check_now() {
  std::lock_guard<std::mutex> check(check_mu_);
  auto next = load_server_tls(files_);
  std::unique_lock<std::mutex> lock(mu_);
  if (!next.is_ok()) {
    if (next.status().message() != last_error_) {
      last_error_ = next.status().message();
      spdlog::warn(
          "{}: the files changed but cannot be used; the listener keeps the previous "
          "certificate and CA: {}",
          files_.key, last_error_);
    }
    return false;
  }
  last_error_.clear();
  if (same_material(*current_, next.value())) return false;
  current_ = std::make_shared<const ServerTlsMaterial>(std::move(next).value());
  const uint64_t generation = ++generation_;
  const auto material = current_;
  OnChange on_change = on_change_;
  lock.unlock();
  spdlog::info(
      "{}: reloaded the certificate ({}, expires {}) and CA from disk; new connections "
      "use them",
      files_.key, material->subject, material->not_after);
  if (on_change) on_change(*material, generation);
  return true;
}

void TlsWatcher::run() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_cv_.wait_for(lock, poll_, [&] { return stop_; })) return;
    }
    check_now();
  }
}

}  // namespace dex::tls
