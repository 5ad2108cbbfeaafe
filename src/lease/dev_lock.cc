#include "lease/dev_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace dex {
namespace {

constexpr int kEintrRetriesMax = 100;
constexpr size_t kPidFileBytesMax = 64;

int default_lock(int fd) { return ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno; }

bool is_unsupported(int err) {
  return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL;
}

// The holder's "pid N" line, or "" when unreadable.
std::string read_holder(int fd) {
  char buf[kPidFileBytesMax] = {0};
  ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<DevLock>> DevLock::open(const std::filesystem::path& data_dir,
                                                 DevLockFn lock_fn) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    return Status::permanent(
        fmt::format("cannot create data directory {}: {}", data_dir.string(), ec.message()));
  }
  std::filesystem::path path = data_dir / kDevLockFileName;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::permanent(
        fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
  }
  if (!lock_fn) lock_fn = default_lock;
  int err = EINTR;
  for (int i = 0; i < kEintrRetriesMax && err == EINTR; ++i) err = lock_fn(fd);

  if (err == 0) {
    // Ours: record who holds it, for the error of a second process.
    std::string line = fmt::format("pid {}\n", ::getpid());
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
      spdlog::warn("could not write the holder pid into {}: {}", path.string(),
                   std::strerror(errno));
    }
    return std::unique_ptr<DevLock>(new DevLock(path, fd, true, ""));
  }
  if (err == EWOULDBLOCK || err == EAGAIN) {
    std::string holder = read_holder(fd);
    ::close(fd);
    return Status::fenced(fmt::format(
        "another dex process{} holds the lock {}; only one dev process may use a data directory",
        holder.empty() ? "" : " (" + holder + ")", path.string()));
  }
  if (is_unsupported(err)) {
    std::string reason =
        fmt::format("the filesystem cannot lock {}: {}", path.string(), std::strerror(err));
    // Spec "Lease": the caller logs a warning and waits for a held lease to expire.
    return std::unique_ptr<DevLock>(new DevLock(path, fd, false, std::move(reason)));
  }
  ::close(fd);
  return Status::permanent(fmt::format("cannot lock {}: {}", path.string(), std::strerror(err)));
}

DevLock::DevLock(std::filesystem::path path, int fd, bool held, std::string unsupported_reason)
    : path_(std::move(path)),
      fd_(fd),
      held_(held),
      unsupported_reason_(std::move(unsupported_reason)) {}

DevLock::~DevLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace dex
