#include "objstore/filesystem_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

#include "common/random.h"
#include "objstore/slot_segments.h"

namespace dex {

namespace fs = std::filesystem;

namespace {

// A concurrent remove() may delete an empty parent directory between our mkdir
// and our link/rename; each such race costs one retry, and it needs a remove
// in every round to recur, so a small bound is plenty.
constexpr int kParentRaceRetriesMax = 100;
// Keys are at most 1024 bytes, so at most 512 segments: a bound on list depth.
constexpr int kListDepthMax = 512;
constexpr std::string_view kReservedPrefix = ".dex-";

bool is_transient_errno(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EAGAIN:
    case EINTR:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EBUSY:
    case ETIMEDOUT:
      return true;
    default:
      return false;
  }
}

Status os_error(std::string_view op, const fs::path& path, int err) {
  std::string msg = fmt::format("{} {}: {}", op, path.string(), std::strerror(err));
  return is_transient_errno(err) ? Status::transient(std::move(msg))
                                 : Status::permanent(std::move(msg));
}

Status os_error2(std::string_view op, const fs::path& from, const fs::path& to, int err) {
  return os_error(op, fmt::format("{} -> {}", from.string(), to.string()), err);
}

// Closes a descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes now and reports the error close() gives (write-back errors surface here).
  int close_checked() {
    int fd = std::exchange(fd_, -1);
    return fd >= 0 && ::close(fd) != 0 ? errno : 0;
  }

 private:
  int fd_;
};

// Unlinks a temp file on scope exit unless it was renamed into place.
class TempFile {
 public:
  explicit TempFile(fs::path path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

int open_retry(const char* path, int flags, mode_t mode = 0) {
  while (true) {
    int fd = ::open(path, flags, mode);
    if (fd >= 0 || errno != EINTR) return fd;
  }
}

Status write_all(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return os_error("write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::ok();
}

// Reads the object at `path`. NotFound if there is no regular file there.
StatusOr<std::string> read_object(const fs::path& path, std::string_view key) {
  Fd fd(open_retry(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return Status::not_found(fmt::format("no object '{}'", key));
    }
    return os_error("open", path, err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return os_error("fstat", path, errno);
  if (!S_ISREG(st.st_mode)) return Status::not_found(fmt::format("no object '{}'", key));
  std::string body;
  body.reserve(static_cast<size_t>(st.st_size));
  char buffer[64 * 1024];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return os_error("read", path, errno);
    }
    if (n == 0) break;
    body.append(buffer, static_cast<size_t>(n));
  }
  return body;
}

// FNV-1a: stable across processes and builds, unlike std::hash.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// An exclusive flock on one stripe's lock file, held for the object's lifetime.
// flock locks belong to the open file description, so two threads of one
// process, each opening the file, exclude each other as two processes do.
class StripeLock {
 public:
  static StatusOr<std::unique_ptr<StripeLock>> acquire(const fs::path& lock_dir,
                                                       std::string_view key) {
    const size_t stripe = fnv1a(key) % FilesystemObjectStore::kLockStripes;
    fs::path path = lock_dir / fmt::format("{:02}", stripe);
    int fd = open_retry(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
      // Someone removed the lock directory; recreate it.
      if (::mkdir(lock_dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return os_error("mkdir", lock_dir, errno);
      }
      fd = open_retry(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    }
    if (fd < 0) return os_error("open lock file", path, errno);
    auto lock = std::unique_ptr<StripeLock>(new StripeLock(fd));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) return os_error("flock", path, errno);
    }
    return lock;
  }
  ~StripeLock() { ::flock(fd_.get(), LOCK_UN); }

 private:
  explicit StripeLock(int fd) : fd_(fd) {}
  Fd fd_;
};

Status check_key(std::string_view key) {
  if (auto s = validate_key(key); !s.is_ok()) return s;
  if (key.starts_with(kReservedPrefix)) {
    return Status::permanent(
        fmt::format("invalid object key '{}': names starting with '{}' are reserved by the "
                    "filesystem backend",
                    key, kReservedPrefix));
  }
  return Status::ok();
}

Status conflict(std::string_view key, std::string_view detail) {
  return Status::permanent(fmt::format(
      "object key '{}' conflicts with another key on the filesystem backend: {}", key, detail));
}

}  // namespace

FilesystemObjectStore::FilesystemObjectStore(fs::path root, Durability durability,
                                             const FilesystemStoreOptions& options)
    : root_(std::move(root)),
      durability_(durability),
      segments_(
          std::make_unique<SlotSegments>(root_, durability, options.segment_bytes_max, fsyncs_)) {}

FilesystemObjectStore::~FilesystemObjectStore() = default;

StatusOr<std::unique_ptr<FilesystemObjectStore>> FilesystemObjectStore::open(
    const fs::path& root, Durability durability, const FilesystemStoreOptions& options) {
  std::error_code ec;
  fs::path absolute = fs::absolute(root, ec);
  if (ec)
    return Status::permanent(fmt::format("object store root {}: {}", root.string(), ec.message()));
  fs::create_directories(absolute, ec);
  if (ec) {
    return Status::permanent(
        fmt::format("cannot create object store root {}: {}", absolute.string(), ec.message()));
  }
  if (!fs::is_directory(absolute, ec)) {
    return Status::permanent(
        fmt::format("object store root {} is not a directory", absolute.string()));
  }
  auto store = std::unique_ptr<FilesystemObjectStore>(
      new FilesystemObjectStore(absolute.lexically_normal(), durability, options));
  bool created = false;
  for (std::string_view name : {kTempDirName, kLockDirName}) {
    fs::path dir = store->root_ / name;
    if (::mkdir(dir.c_str(), 0755) == 0) {
      created = true;
    } else if (errno != EEXIST) {
      return Status::permanent(fmt::format("cannot use object store root {}: mkdir {}: {}",
                                           absolute.string(), dir.string(), std::strerror(errno)));
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      return Status::permanent(fmt::format("cannot use object store root {}: {}: {}",
                                           absolute.string(), dir.string(), std::strerror(errno)));
    }
  }
  if (created && durability == Durability::kStrict) {
    if (auto s = store->fsync_dir(store->root_); !s.is_ok()) return Status::permanent(s.message());
  }
  // Temp files of crashed writers: old enough that no live writer still owns them.
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(store->root_ / kTempDirName, ec)) {
    std::error_code entry_ec;
    auto written = entry.last_write_time(entry_ec);
    if (!entry_ec && now - written > kTempFileAgeMax) fs::remove(entry.path(), entry_ec);
  }
  return store;
}

std::string FilesystemObjectStore::describe() const { return "filesystem:" + root_.string(); }

Status FilesystemObjectStore::fsync_fd(int fd, const fs::path& path) {
  ++fsyncs_;
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return os_error("fsync", path, errno);
  }
  return Status::ok();
}

Status FilesystemObjectStore::fsync_dir(const fs::path& dir) {
  Fd fd(open_retry(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return os_error("open directory", dir, errno);
  return fsync_fd(fd.get(), dir);
}

StatusOr<fs::path> FilesystemObjectStore::write_temp(std::string_view body) {
  const fs::path dir = root_ / kTempDirName;
  fs::path path = dir / fmt::format("{}-{}.tmp", ::getpid(), random_hex_id());
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  Fd fd(open_retry(path.c_str(), flags, 0644));
  if (!fd.valid() && errno == ENOENT) {
    // Someone removed the temp directory; recreate it.
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return os_error("mkdir", dir, errno);
    fd.reset(open_retry(path.c_str(), flags, 0644));
  }
  if (!fd.valid()) return os_error("create temp file", path, errno);
  TempFile temp(path);
  if (auto s = write_all(fd.get(), body, path); !s.is_ok()) return s;
  if (durability_ == Durability::kStrict) {
    if (auto s = fsync_fd(fd.get(), path); !s.is_ok()) return s;
  }
  if (int err = fd.close_checked(); err != 0) return os_error("close", path, err);
  temp.release();
  return path;
}

Status FilesystemObjectStore::make_parents(const fs::path& path) {
  // Walk down from root_: every ancestor of `path` below root_ must be a directory.
  const fs::path relative = path.lexically_relative(root_);
  fs::path dir = root_;
  std::vector<fs::path> created;
  for (auto it = relative.begin(); it != relative.end(); ++it) {
    if (std::next(it) == relative.end()) break;  // the object's own name
    dir /= *it;
    if (::mkdir(dir.c_str(), 0755) == 0) {
      created.push_back(dir);
      continue;
    }
    int err = errno;
    if (err == EEXIST) continue;  // a file there surfaces as ENOTDIR one level down
    if (err == ENOTDIR) {
      return conflict(relative.string(),
                      fmt::format("{} is an object, not a directory", dir.parent_path().string()));
    }
    return os_error("mkdir", dir, err);
  }
  if (durability_ == Durability::kStrict) {
    // A new directory is durable once its entry in its parent is.
    for (const auto& d : created) {
      if (auto s = fsync_dir(d.parent_path()); !s.is_ok()) return s;
    }
  }
  return Status::ok();
}

StatusOr<ObjectData> FilesystemObjectStore::get(std::string_view key, const RequestOptions&) {
  if (auto s = check_key(key); !s.is_ok()) return s;
  if (auto slot = parse_slot_object_key(key)) {
    auto body = segments_->get(*slot);
    if (!body.is_ok()) return body.status();
    if (body.value()) {
      ObjectData data;
      data.etag = etag_of(*body.value());
      data.body = std::move(*body.value());
      return data;
    }
    // Not in a segment: maybe a slot file of the earlier layout.
  }
  auto body = read_object(root_ / key, key);
  if (!body.is_ok()) return body.status();
  ObjectData data;
  data.etag = etag_of(body.value());
  data.body = std::move(body).value();
  return data;
}

StatusOr<std::string> FilesystemObjectStore::put(std::string_view key, std::string_view body,
                                                 const PutCondition& condition,
                                                 const RequestOptions&) {
  if (auto s = check_key(key); !s.is_ok()) return s;
  if (auto slot = parse_slot_object_key(key)) return create_slot(key, *slot, body, condition);
  // The temp file is written before any lock is taken, so the lock is held only
  // for the compare and the rename.
  auto temp_path = write_temp(body);
  if (!temp_path.is_ok()) return temp_path.status();
  TempFile temp(temp_path.value());
  const std::string etag_new = etag_of(body);
  if (condition.mode == PutMode::kCreate) return create(key, temp.path(), etag_new);
  auto etag = replace(key, temp.path(), etag_new, condition);
  if (etag.is_ok()) temp.release();  // renamed into place
  return etag;
}

StatusOr<std::string> FilesystemObjectStore::create(std::string_view key, const fs::path& temp,
                                                    std::string_view etag) {
  const fs::path path = root_ / key;
  for (int attempt = 0; attempt < kParentRaceRetriesMax; ++attempt) {
    if (auto s = make_parents(path); !s.is_ok()) return s;
    if (::link(temp.c_str(), path.c_str()) == 0) {
      if (durability_ == Durability::kStrict) {
        if (auto s = fsync_dir(path.parent_path()); !s.is_ok()) return s;
      }
      // The temp name is unlinked by the caller's TempFile; the object keeps the inode.
      return std::string(etag);
    }
    int err = errno;
    if (err == EEXIST) {
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        return conflict(key, fmt::format("{} is a directory of other keys", path.string()));
      }
      return Status::precondition_failed(fmt::format("'{}' exists", key));
    }
    if (err == ENOENT) continue;  // a remove() deleted the new parent directory; redo it
    if (err == ENOTDIR) return conflict(key, "a parent of it is an object");
    return os_error2("link", temp, path, err);
  }
  return Status::transient(fmt::format(
      "create '{}': parent directory kept disappearing ({} attempts)", key, kParentRaceRetriesMax));
}

StatusOr<std::string> FilesystemObjectStore::replace(std::string_view key, const fs::path& temp,
                                                     std::string_view etag,
                                                     const PutCondition& condition) {
  assert(condition.mode == PutMode::kReplace || condition.mode == PutMode::kOverwrite);
  const fs::path path = root_ / key;
  auto lock = StripeLock::acquire(root_ / kLockDirName, key);
  if (!lock.is_ok()) return lock.status();
  if (condition.mode == PutMode::kReplace) {
    // Under the stripe lock nobody else can replace or remove this key, and a
    // create cannot succeed while it exists: the compare holds until the rename.
    auto current = read_object(path, key);
    if (current.status().is_not_found()) {
      return Status::precondition_failed(fmt::format("'{}' does not exist", key));
    }
    if (!current.is_ok()) return current.status();
    std::string current_etag = etag_of(current.value());
    if (current_etag != condition.etag) {
      return Status::precondition_failed(
          fmt::format("'{}' has ETag {}, not {}", key, current_etag, condition.etag));
    }
  }
  for (int attempt = 0; attempt < kParentRaceRetriesMax; ++attempt) {
    if (auto s = make_parents(path); !s.is_ok()) return s;
    if (::rename(temp.c_str(), path.c_str()) == 0) {
      if (durability_ == Durability::kStrict) {
        if (auto s = fsync_dir(path.parent_path()); !s.is_ok()) return s;
      }
      return std::string(etag);
    }
    int err = errno;
    if (err == ENOENT) continue;  // a remove() deleted the new parent directory; redo it
    if (err == EISDIR || err == ENOTEMPTY || err == EEXIST) {
      return conflict(key, fmt::format("{} is a directory of other keys", path.string()));
    }
    if (err == ENOTDIR) return conflict(key, "a parent of it is an object");
    return os_error2("rename", temp, path, err);
  }
  return Status::transient(fmt::format("put '{}': parent directory kept disappearing ({} attempts)",
                                       key, kParentRaceRetriesMax));
}

StatusOr<std::string> FilesystemObjectStore::create_slot(std::string_view key,
                                                         const SlotObjectKey& slot,
                                                         std::string_view body,
                                                         const PutCondition& condition) {
  if (condition.mode != PutMode::kCreate) {
    return Status::permanent(fmt::format(
        "'{}' is a log slot: the filesystem backend can only create (If-None-Match) and remove "
        "it",
        key));
  }
  // A slot file of the earlier layout holds the key as well.
  struct stat st {};
  if (::lstat((root_ / key).c_str(), &st) == 0) {
    return Status::precondition_failed(fmt::format("'{}' exists", key));
  }
  if (auto s = segments_->create(slot, body); !s.is_ok()) return s;
  return etag_of(body);
}

Status FilesystemObjectStore::remove(std::string_view key, const RequestOptions&) {
  if (auto s = check_key(key); !s.is_ok()) return s;
  if (auto slot = parse_slot_object_key(key)) {
    if (auto s = segments_->remove(*slot); !s.is_ok()) return s;
  }
  const fs::path path = root_ / key;
  auto lock = StripeLock::acquire(root_ / kLockDirName, key);
  if (!lock.is_ok()) return lock.status();
  if (::unlink(path.c_str()) != 0) {
    int err = errno;
    // No object under this key (maybe a directory of other keys): S3 DELETE succeeds.
    if (err == ENOENT || err == ENOTDIR || err == EISDIR) return Status::ok();
    struct stat st {};
    if (err == EPERM && ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return Status::ok();
    }
    return os_error("unlink", path, err);
  }
  if (durability_ == Durability::kStrict) {
    if (auto s = fsync_dir(path.parent_path()); !s.is_ok()) return s;
  }
  remove_empty_parents(path);
  return Status::ok();
}

void FilesystemObjectStore::remove_empty_parents(const fs::path& path) {
  // rmdir fails on a non-empty directory, so this never removes another key's
  // directory; a writer that loses its new parent to it retries (see create).
  for (fs::path dir = path.parent_path(); dir != root_ && dir.has_relative_path();
       dir = dir.parent_path()) {
    if (::rmdir(dir.c_str()) != 0) break;
  }
}

namespace {

struct ListWalk {
  std::string_view prefix;
  std::string_view start_after;
  size_t max_keys;
  ListResult result;
  bool done = false;

  // Visits the keys under `dir` (whose keys start with `dir_key`) in byte order.
  Status walk(const fs::path& dir, const std::string& dir_key, int depth) {
    if (depth > kListDepthMax) return Status::ok();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      int err = errno;
      if (err == ENOENT || err == ENOTDIR) return Status::ok();
      return os_error("opendir", dir, err);
    }
    struct Entry {
      std::string sort_key;  // the full key, with a trailing '/' for a directory
      bool is_dir;
    };
    std::vector<Entry> entries;
    errno = 0;
    while (struct dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      if (dir_key.empty() && name.starts_with(kReservedPrefix)) continue;
      // A name that cannot be a key segment was not written by dex: skip it.
      if (name.find('/') != std::string_view::npos || !validate_key(name).is_ok()) continue;
      unsigned char type = e->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st {};
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
      }
      // Symbolic links and special files were not written by dex.
      if (type != DT_DIR && type != DT_REG) continue;
      bool is_dir = type == DT_DIR;
      entries.push_back({dir_key + std::string(name) + (is_dir ? "/" : ""), is_dir});
    }
    int read_err = errno;
    ::closedir(d);
    if (read_err != 0) return os_error("readdir", dir, read_err);
    // A directory sorts as "name/", so the walk yields keys in byte order:
    // "a-c" < "a/b" < "a0".
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.sort_key < b.sort_key; });
    for (const auto& entry : entries) {
      const std::string& key = entry.sort_key;
      if (entry.is_dir) {
        if (!key.starts_with(prefix) && !prefix.starts_with(key)) continue;
        // Every key under it sorts before start_after: skip the whole directory.
        if (key < start_after && !start_after.starts_with(key)) continue;
        fs::path child = dir / key.substr(dir_key.size(), key.size() - dir_key.size() - 1);
        if (auto s = walk(child, key, depth + 1); !s.is_ok()) return s;
        if (done) return Status::ok();
        continue;
      }
      if (!key.starts_with(prefix) || key <= start_after) continue;
      if (result.keys.size() == max_keys) {
        result.truncated = true;
        done = true;
        return Status::ok();
      }
      // The file's time and size; one removed meanwhile is not listed.
      const fs::path file = dir / key.substr(dir_key.size());
      struct stat st {};
      if (::stat(file.c_str(), &st) != 0) {
        const int err = errno;
        if (err == ENOENT) continue;
        return os_error("stat", file, err);
      }
      result.keys.push_back(key);
      result.objects.push_back(ListedObject{
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000,
          static_cast<uint64_t>(st.st_size)});
    }
    return Status::ok();
  }
};

// The files' keys and the segments' slot keys in one ascending listing of at most max_keys.
ListResult merge_listings(ListResult files, std::vector<SlotSegments::Listed> slots,
                          size_t max_keys) {
  ListResult out;
  size_t f = 0, s = 0;
  while (out.keys.size() < max_keys && (f < files.keys.size() || s < slots.size())) {
    const bool take_file =
        s == slots.size() || (f < files.keys.size() && files.keys[f] < slots[s].key);
    if (take_file) {
      out.keys.push_back(std::move(files.keys[f]));
      out.objects.push_back(files.objects[f]);
      ++f;
    } else {
      out.keys.push_back(std::move(slots[s].key));
      out.objects.push_back(slots[s].object);
      ++s;
    }
  }
  out.truncated = f < files.keys.size() || s < slots.size() || files.truncated;
  return out;
}

}  // namespace

StatusOr<ListResult> FilesystemObjectStore::list(std::string_view prefix,
                                                 std::string_view start_after, size_t max_keys,
                                                 const RequestOptions&) {
  ListWalk walk{prefix, start_after, max_keys, {}};
  // Start at the deepest directory the prefix names: "log/000" walks root/log.
  const size_t slash = prefix.rfind('/');
  std::string dir_key;
  fs::path dir = root_;
  if (slash != std::string_view::npos) {
    std::string_view dir_part = prefix.substr(0, slash);
    // No valid key lies under an invalid or reserved directory.
    if (!check_key(dir_part).is_ok()) return ListResult{};
    dir_key = std::string(prefix.substr(0, slash + 1));
    dir /= dir_part;
  }
  if (auto s = walk.walk(dir, dir_key, 0); !s.is_ok()) return s;
  auto slots = segments_->list(prefix, start_after, max_keys);
  if (!slots.is_ok()) return slots.status();
  if (slots.value().empty()) return std::move(walk.result);
  return merge_listings(std::move(walk.result), std::move(slots).value(), max_keys);
}

}  // namespace dex
