// The accepted tokens of a running server: read from the token files and
// digests of AccessSettings at start, and read again when a file changes on
// disk (its modification time, size or inode: a rotated Kubernetes Secret
// swaps the file under a symlink), so a rotation needs no restart. A file
// that cannot be read or holds no token after a change keeps the tokens read
// before, and the store logs why (the path and the reason, never a token).
// Thread-safe: match() may run on every call while reload_changed() runs on
// the watcher thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "auth/access_settings.h"
#include "auth/token_set.h"
#include "common/clock.h"
#include "common/status.h"

namespace dex::auth {

// A token file's accepted digests: it must be a regular file of at most
// 64 KiB holding at least one token (token_set.h, parse_token_file).
// InvalidArgument naming the file and what is wrong ("cannot read 'f': no
// such file", "'f' is empty"), never its content.
StatusOr<std::vector<std::string>> read_token_file_digests(const std::string& path);

// How often the watcher looks at the token files.
inline constexpr Duration kTokenFilePollInterval = seconds(2);

class TokenStore {
 public:
  // Reads every file; the first that is unusable fails the open, naming its
  // key and path (nothing starts with a token file it cannot use).
  static StatusOr<std::shared_ptr<TokenStore>> open(const AccessSettings& settings);
  ~TokenStore();
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;

  TokenMatch match(std::string_view token) const;
  // How many tokens `role` accepts now (files after any reload, and digests).
  size_t accepted(Role role) const;
  const AccessPolicy& policy() const { return policy_; }
  std::span<const CertificateRole> certificate_mapping() const {
    return settings_.certificate_roles;
  }
  const AccessSettings& settings() const { return settings_; }

  // Reads again each file that changed since it was last read; returns how
  // many were replaced by a good new version.
  size_t reload_changed();
  // Starts a thread that calls reload_changed every `interval` until the
  // store is destroyed. At most once.
  void watch(Duration interval = kTokenFilePollInterval);

 private:
  struct FileState {
    TokenFileSource source;
    std::vector<std::string> digests;  // the last good read
    std::string stamp;                 // device, inode, size, mtime when last looked at
  };
  explicit TokenStore(AccessSettings settings)
      : settings_(std::move(settings)), policy_(settings_.policy()) {}
  // The token set of the inline digests and every file's last good read.
  // REQUIRES: reload_mu_ held.
  TokenSet build_locked() const;

  const AccessSettings settings_;  // constant after construction
  const AccessPolicy policy_;      // constant after construction
  std::mutex reload_mu_;           // one reload at a time
  std::vector<FileState> files_;   // guarded by reload_mu_
  mutable std::shared_mutex mu_;
  TokenSet tokens_;  // guarded by mu_

  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;  // guarded by watch_mu_
  std::thread watcher_;
};

}  // namespace dex::auth
