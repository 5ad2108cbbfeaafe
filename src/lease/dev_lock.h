// The dev lock (docs/lease.md §7): an exclusive flock on <data dir>/dev.lock,
// held for the lifetime of a dex-server-zd dev (or local) process. While this
// process holds it, no other process on the directory runs, so a lease held by
// another process ID belongs to a stopped process and is taken over at once
// (LeaseKeeperOptions::holder_is_stopped = lock->held()).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace dex {

// The lock syscall, injectable for tests: takes an exclusive, non-blocking lock
// on `fd` and returns 0, or the errno value on failure. The default is
// flock(fd, LOCK_EX | LOCK_NB).
using DevLockFn = std::function<int(int fd)>;

class DevLock {
 public:
  // Opens (creating) `data_dir`/dev.lock and locks it.
  //  - ok, held() == true: this process holds the lock; its pid is written in
  //    the file for the error message of a second process.
  //  - ok, held() == false: the filesystem cannot lock files (ENOLCK,
  //    EOPNOTSUPP, ENOSYS, EINVAL). The caller logs a warning (with
  //    unsupported_reason()) and waits for a held lease to expire
  //    (holder_is_stopped = false).
  //  - Fenced: another process holds the lock; the message names the path and
  //    the holder's pid.
  //  - Permanent: the directory or file cannot be opened.
  static StatusOr<std::unique_ptr<DevLock>> open(const std::filesystem::path& data_dir,
                                                 DevLockFn lock_fn = {});
  // Releases the lock (closes the file). The file stays.
  ~DevLock();
  DevLock(const DevLock&) = delete;
  DevLock& operator=(const DevLock&) = delete;

  bool held() const { return held_; }
  const std::filesystem::path& path() const { return path_; }
  // When !held(): why the lock is unsupported, for the log.
  const std::string& unsupported_reason() const { return unsupported_reason_; }

 private:
  DevLock(std::filesystem::path path, int fd, bool held, std::string unsupported_reason);

  const std::filesystem::path path_;
  const int fd_;
  const bool held_;
  const std::string unsupported_reason_;
};

inline constexpr const char* kDevLockFileName = "dev.lock";

}  // namespace dex
