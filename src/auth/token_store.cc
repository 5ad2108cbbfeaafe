#include "auth/token_store.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/digest.h"

namespace dex::auth {

namespace {

// A token file is small and regular (a mounted Secret is a symlink to one);
// anything else (a device such as /dev/zero, a FIFO) could block or never end.
constexpr off_t kTokenFileBytesMax = 64 * 1024;

// What identifies one version of a file: a change of any part is a change.
std::string stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return fmt::format("{}:{}:{}:{}.{}", st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec);
}

}  // namespace

StatusOr<std::vector<std::string>> read_token_file_digests(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::invalid_argument(fmt::format("cannot read '{}': no such file", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(fmt::format("'{}' is not a regular file", path));
  }
  if (st.st_size > kTokenFileBytesMax) {
    return Status::invalid_argument(
        fmt::format("'{}' is larger than {} bytes (a token file holds one token a line)", path,
                    kTokenFileBytesMax));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::invalid_argument(fmt::format("cannot read '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::invalid_argument(fmt::format("cannot read '{}'", path));
  std::vector<std::string> digests;
  for (const std::string& token : parse_token_file(text.str())) {
    digests.push_back(sha256_hex(token));
  }
  if (digests.empty()) return Status::invalid_argument(fmt::format("'{}' is empty", path));
  return digests;
}

StatusOr<std::shared_ptr<TokenStore>> TokenStore::open(const AccessSettings& settings) {
  std::shared_ptr<TokenStore> store(new TokenStore(settings));
  std::lock_guard<std::mutex> reload(store->reload_mu_);
  for (const TokenFileSource& source : settings.files) {
    FileState file{source, {}, stamp_of(source.path)};
    auto digests = read_token_file_digests(source.path);
    if (!digests.is_ok()) {
      return Status::invalid_argument(
          fmt::format("{}: {}", source.key, digests.status().message()));
    }
    file.digests = std::move(digests).value();
    store->files_.push_back(std::move(file));
  }
  TokenSet tokens = store->build_locked();
  std::unique_lock<std::shared_mutex> lock(store->mu_);
  store->tokens_ = std::move(tokens);
  return store;
}

TokenStore::~TokenStore() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

TokenMatch TokenStore::match(std::string_view token) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return tokens_.match(token);
}

size_t TokenStore::accepted(Role role) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return tokens_.count(role);
}

TokenSet TokenStore::build_locked() const {
  TokenSet tokens;
  for (const TokenDigestSource& d : settings_.digests) tokens.add(d.role, d.digest_hex);
  for (const FileState& file : files_) {
    for (const std::string& digest : file.digests) tokens.add(file.source.role, digest);
  }
  return tokens;
}

size_t TokenStore::reload_changed() {
  std::lock_guard<std::mutex> reload(reload_mu_);
  size_t replaced = 0;
  for (FileState& file : files_) {
    const std::string stamp = stamp_of(file.source.path);
    if (stamp == file.stamp) continue;
    file.stamp = stamp;
    auto digests = read_token_file_digests(file.source.path);
    if (!digests.is_ok()) {
      // Half-written or removed during a rotation: keep serving with the
      // tokens read before; the next change is read again.
      spdlog::warn("{}: {}; keeping the {} token(s) read from it before", file.source.key,
                   digests.status().message(), file.digests.size());
      continue;
    }
    file.digests = std::move(digests).value();
    spdlog::info("{}: '{}' changed: {} {} token(s) now accepted from it", file.source.key,
                 file.source.path, file.digests.size(), role_name(file.source.role));
    ++replaced;
  }
  if (replaced == 0) return 0;
  TokenSet tokens = build_locked();
  std::unique_lock<std::shared_mutex> lock(mu_);
  tokens_ = std::move(tokens);
  return replaced;
}

void TokenStore::watch(Duration interval) {
  {
    std::lock_guard<std::mutex> reload(reload_mu_);
    if (files_.empty()) return;  // digests only: nothing can change
  }
  std::lock_guard<std::mutex> lock(watch_mu_);
  if (watcher_.joinable()) return;
  watcher_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> guard(watch_mu_);
    while (!stopping_) {  // bounded by the destructor
      if (watch_cv_.wait_for(guard, interval, [this] { return stopping_; })) return;
      guard.unlock();
      reload_changed();
      guard.lock();
    }
  });
}

}  // namespace dex::auth
