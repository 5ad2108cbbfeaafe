#include "objstore/slot_segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "common/invariant.h"
#include "common/random.h"

namespace dex {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kFileMagic = "DXSF";
constexpr uint32_t kFileVersion = 1;
constexpr size_t kNonceBytes = 16;
constexpr size_t kFileHeaderBytes = 4 + 4 + kNonceBytes;
constexpr std::string_view kRecordMagic = "DXSR";
// magic, type, 3 pad bytes, slot, body length, header CRC, body CRC.
constexpr size_t kRecordHeaderBytes = 4 + 1 + 3 + 8 + 4 + 4 + 4;
constexpr size_t kHeaderCrcOffset = 20;  // the header CRC covers the bytes before it
constexpr uint32_t kBodyBytesMax = 256u << 20;
constexpr uint8_t kPut = 1;
constexpr uint8_t kTomb = 2;
constexpr uint8_t kSeal = 3;
constexpr size_t kSegmentNameBytes = 20 + 4;  // "<20 digits>.seg"
// A PUT is appended again only after another process sealed the segment under it, which
// needs a full segment each time: a small bound is plenty.
constexpr int kAppendAttemptsMax = 100;

Status os_error(std::string_view op, const fs::path& path, int err) {
  std::string msg = fmt::format("{} {}: {}", op, path.string(), std::strerror(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EAGAIN:
    case EINTR:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return Status::transient(std::move(msg));
    default:
      return Status::permanent(std::move(msg));
  }
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// A CRC-32 seeded with the segment's nonce: bytes that were not written as a record of this
// segment (a torn append's remains, a payload that copies a record) fail it.
uint32_t keyed_crc(std::string_view nonce, const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(nonce.data()), static_cast<uInt>(nonce.size()));
  // zlib answers its initial value for a null buffer: an empty body adds nothing instead.
  if (size == 0) return static_cast<uint32_t>(crc);
  return static_cast<uint32_t>(crc32_z(crc, reinterpret_cast<const Bytef*>(data), size));
}

std::string encode_record(std::string_view nonce, uint8_t type, uint64_t slot,
                          std::string_view body) {
  std::string out;
  out.reserve(kRecordHeaderBytes + body.size());
  out.append(kRecordMagic);
  out.push_back(static_cast<char>(type));
  out.append(3, '\0');
  put_u64(out, slot);
  put_u32(out, static_cast<uint32_t>(body.size()));
  put_u32(out, keyed_crc(nonce, out.data(), kHeaderCrcOffset));
  put_u32(out, keyed_crc(nonce, body.data(), body.size()));
  out.append(body);
  return out;
}

struct Parsed {
  enum Kind { kValid, kIncomplete, kInvalid } kind = kInvalid;
  uint8_t type = 0;
  uint64_t slot = 0;
  uint32_t length = 0;
};

// The record at `pos`: valid, incomplete (its header is valid but its body runs past what
// has been read: an append in flight, or a torn one), or invalid.
Parsed parse_record(std::string_view buf, size_t pos, std::string_view nonce) {
  Parsed p;
  if (buf.size() - pos < kRecordHeaderBytes) {
    p.kind = buf.substr(pos, kRecordMagic.size()) == kRecordMagic.substr(0, buf.size() - pos)
                 ? Parsed::kIncomplete
                 : Parsed::kInvalid;
    return p;
  }
  const char* h = buf.data() + pos;
  if (std::string_view(h, 4) != kRecordMagic ||
      get_u32(h + kHeaderCrcOffset) != keyed_crc(nonce, h, kHeaderCrcOffset)) {
    return p;
  }
  p.type = static_cast<uint8_t>(h[4]);
  p.slot = get_u64(h + 8);
  p.length = get_u32(h + 16);
  if (p.length > kBodyBytesMax) return p;
  if (buf.size() - pos - kRecordHeaderBytes < p.length) {
    p.kind = Parsed::kIncomplete;
    return p;
  }
  if (get_u32(h + 24) != keyed_crc(nonce, h + kRecordHeaderBytes, p.length)) return p;
  p.kind = Parsed::kValid;
  return p;
}

// The first complete valid record after `from`, or npos. Bounded by the buffer's size.
size_t next_valid(std::string_view buf, size_t from, std::string_view nonce) {
  for (size_t p = buf.find(kRecordMagic, from); p != std::string_view::npos;
       p = buf.find(kRecordMagic, p + 1)) {
    if (parse_record(buf, p, nonce).kind == Parsed::kValid) return p;
  }
  return std::string_view::npos;
}

std::optional<uint64_t> parse_digits(std::string_view s) {
  if (s.size() != 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<uint64_t> segment_number(std::string_view name) {
  if (name.size() != kSegmentNameBytes || !name.ends_with(".seg")) return std::nullopt;
  return parse_digits(name.substr(0, 20));
}

int64_t mtime_ms(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

std::shared_ptr<const int> share_fd(int fd) {
  return std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
}

}  // namespace

std::optional<SlotObjectKey> parse_slot_object_key(std::string_view key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view dir = key.substr(0, slash);
  if (dir != "log" && !dir.ends_with("/log")) return std::nullopt;
  auto slot = parse_digits(key.substr(slash + 1));
  if (!slot) return std::nullopt;
  return SlotObjectKey{std::string(dir), *slot};
}

struct SlotSegments::Segment {
  uint64_t number = 0;
  fs::path path;
  std::shared_ptr<const int> fd;
  std::string nonce;
  uint64_t scanned = kFileHeaderBytes;  // every record before this offset is applied
  bool sealed = false;
  uint64_t live = 0;  // live PUTs in this segment
  int64_t modified_ms = -1;
};

struct SlotSegments::Dir {
  struct Loc {
    uint64_t segment;
    uint64_t offset;  // of the body
    uint32_t length;
  };
  std::string name;  // the keys' directory: "nodes/n1/log"
  fs::path path;
  std::map<uint64_t, Segment> segments;
  std::map<uint64_t, Loc> live;  // slot -> its object
  // This instance's appends not yet verified, by (segment, offset): what became of each, set by
  // whichever thread's refresh read it (kNone: not read, or void after a SEAL).
  std::map<std::pair<uint64_t, uint64_t>, Outcome> appended;
};

SlotSegments::SlotSegments(fs::path store_root, Durability durability, uint64_t segment_bytes_max,
                           std::atomic<uint64_t>& fsyncs)
    : root_(std::move(store_root) / kDirName),
      durability_(durability),
      segment_bytes_max_(segment_bytes_max),
      fsyncs_(fsyncs) {
  DEX_INVARIANT(segment_bytes_max_ > kFileHeaderBytes, "a segment holds at least its header");
}

SlotSegments::~SlotSegments() = default;

StatusOr<SlotSegments::Dir*> SlotSegments::dir_of(const std::string& name) {
  auto it = dirs_.find(name);
  if (it == dirs_.end()) {
    auto dir = std::make_unique<Dir>();
    dir->name = name;
    dir->path = root_ / name;
    it = dirs_.emplace(name, std::move(dir)).first;
  }
  return it->second.get();
}

Status SlotSegments::sync(int fd, const fs::path& path) {
  ++fsyncs_;
  while (::fdatasync(fd) != 0) {
    if (errno != EINTR) return os_error("fdatasync", path, errno);
  }
  return Status::ok();
}

Status SlotSegments::sync_dir(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return os_error("open directory", path, errno);
  auto shared = share_fd(fd);
  ++fsyncs_;
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return os_error("fsync", path, errno);
  }
  return Status::ok();
}

Status SlotSegments::open_segment(Dir& dir, uint64_t number) {
  Segment segment;
  segment.number = number;
  segment.path = dir.path / fmt::format("{:020}.seg", number);
  int fd = ::open(segment.path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0 && (errno == EACCES || errno == EROFS)) {
    fd = ::open(segment.path.c_str(), O_RDONLY | O_CLOEXEC);  // a read-only store
  }
  if (fd < 0) {
    if (errno == ENOENT) return Status::ok();  // deleted meanwhile
    return os_error("open segment", segment.path, errno);
  }
  segment.fd = share_fd(fd);
  char header[kFileHeaderBytes];
  const ssize_t n = ::pread(fd, header, sizeof header, 0);
  if (n < 0) return os_error("read segment header", segment.path, errno);
  // A segment appears by link() only once its header is written: a short one is damage.
  if (static_cast<size_t>(n) != sizeof header || std::string_view(header, 4) != kFileMagic ||
      get_u32(header + 4) != kFileVersion) {
    return Status::corruption(
        fmt::format("log segment {}: not a dex segment (bad header)", segment.path.string()));
  }
  segment.nonce.assign(header + 8, kNonceBytes);
  dir.segments.emplace(number, std::move(segment));
  return Status::ok();
}

Status SlotSegments::refresh(Dir& dir) {
  // Only the newest segment is open to appends: while it is, its new bytes are all there is
  // to read (a segment is deleted only once it is sealed and older than the newest, and new
  // ones follow a SEAL), so the directory is listed only when it holds no segment or the
  // newest is sealed.
  if (!dir.segments.empty() && !dir.segments.rbegin()->second.sealed) {
    Segment& newest = dir.segments.rbegin()->second;
    if (auto s = parse_new(dir, newest); !s.is_ok()) return s;
    if (!newest.sealed) return Status::ok();
  }
  std::vector<uint64_t> numbers;
  if (DIR* d = ::opendir(dir.path.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      if (auto n = segment_number(e->d_name)) numbers.push_back(*n);
    }
    ::closedir(d);
  } else if (errno != ENOENT) {
    return os_error("opendir", dir.path, errno);
  }
  std::sort(numbers.begin(), numbers.end());
  // Segments another process deleted held nothing live.
  for (auto it = dir.segments.begin(); it != dir.segments.end();) {
    if (std::binary_search(numbers.begin(), numbers.end(), it->first)) {
      ++it;
      continue;
    }
    for (auto l = dir.live.begin(); l != dir.live.end();) {
      l = l->second.segment == it->first ? dir.live.erase(l) : std::next(l);
    }
    it = dir.segments.erase(it);
  }
  for (uint64_t n : numbers) {
    if (dir.segments.contains(n)) continue;
    // Below what is known: a segment deleted here and not yet by the lister; skip it.
    if (!dir.segments.empty() && n < dir.segments.rbegin()->first) continue;
    if (auto s = open_segment(dir, n); !s.is_ok()) return s;
  }
  for (auto it = dir.segments.begin(); it != dir.segments.end(); ++it) {
    Segment& segment = it->second;
    if (segment.sealed) continue;
    if (auto s = parse_new(dir, segment); !s.is_ok()) return s;
    // The next segment is created only after this one's SEAL was appended.
    if (!segment.sealed && std::next(it) != dir.segments.end()) {
      return Status::corruption(fmt::format("log segment {} has no SEAL but a later segment exists",
                                            segment.path.string()));
    }
  }
  return Status::ok();
}

Status SlotSegments::parse_new(Dir& dir, Segment& segment) {
  struct stat st {};
  if (::fstat(*segment.fd, &st) != 0) return os_error("fstat", segment.path, errno);
  segment.modified_ms = mtime_ms(st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size <= segment.scanned) return Status::ok();
  std::string buf(size - segment.scanned, '\0');
  size_t got = 0;
  while (got < buf.size()) {  // bounded by the segment's size
    const ssize_t n = ::pread(*segment.fd, buf.data() + got, buf.size() - got,
                              static_cast<off_t>(segment.scanned + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error("read segment", segment.path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  buf.resize(got);
  const std::string_view view(buf);
  size_t pos = 0;
  while (pos < view.size() && !segment.sealed) {  // bounded: pos only grows
    const Parsed p = parse_record(view, pos, segment.nonce);
    if (p.kind != Parsed::kValid) {
      // Invalid bytes, or a record whose end is not there yet: if a complete record follows,
      // they are a torn append's remains (an append in flight is the file's last bytes).
      const size_t next = next_valid(view, pos + 1, segment.nonce);
      if (next == std::string_view::npos) break;
      pos = next;
      continue;
    }
    const uint64_t offset = segment.scanned + pos;
    Outcome o = Outcome::kWon;
    if (p.type == kPut) {
      if (dir.live.contains(p.slot)) {
        o = Outcome::kExists;
      } else {
        dir.live[p.slot] = {segment.number, offset + kRecordHeaderBytes, p.length};
        ++segment.live;
      }
    } else if (p.type == kTomb) {
      if (auto l = dir.live.find(p.slot); l != dir.live.end()) {
        auto owner = dir.segments.find(l->second.segment);
        DEX_INVARIANT(owner != dir.segments.end() && owner->second.live > 0,
                      "a live object's segment counts it");
        --owner->second.live;
        dir.live.erase(l);
      }
    } else if (p.type == kSeal) {
      segment.sealed = true;
    } else {
      return Status::corruption(fmt::format("log segment {} offset {}: unknown record type {}",
                                            segment.path.string(), offset, p.type));
    }
    // One of this instance's own appends: its appender learns what became of it, whichever
    // thread read it first.
    if (auto own = dir.appended.find({segment.number, offset}); own != dir.appended.end()) {
      own->second = o;
    }
    pos += kRecordHeaderBytes + p.length;
  }
  // What follows a SEAL is void and never read again; an own append there keeps
  // Outcome::kNone, which its appender takes as void.
  segment.scanned = segment.sealed ? size : segment.scanned + pos;
  return Status::ok();
}

Status SlotSegments::new_segment(Dir& dir, uint64_t number) {
  std::error_code ec;
  const bool existed = fs::is_directory(dir.path, ec);
  if (!existed) {
    // Create the missing directories; under kStrict each new one is made durable in its parent.
    std::vector<fs::path> missing;
    for (fs::path p = dir.path; !fs::exists(p, ec); p = p.parent_path()) missing.push_back(p);
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST) return os_error("mkdir", *it, errno);
      if (durability_ == Durability::kStrict) {
        if (auto s = sync_dir(it->parent_path()); !s.is_ok()) return s;
      }
    }
  }
  std::string header(kFileMagic);
  put_u32(header, kFileVersion);
  header += random_hex_id().substr(0, kNonceBytes);  // 64 random bits, as hex
  const fs::path temp = dir.path / fmt::format(".tmp-{}-{}", ::getpid(), random_hex_id());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return os_error("create segment", temp, errno);
  auto shared = share_fd(fd);
  Status status = Status::ok();
  if (::write(fd, header.data(), header.size()) != static_cast<ssize_t>(header.size())) {
    status = os_error("write segment header", temp, errno);
  } else if (durability_ == Durability::kStrict) {
    status = sync(fd, temp);
  }
  const fs::path path = dir.path / fmt::format("{:020}.seg", number);
  // link() fails if another process made the segment first: then it is theirs, complete.
  if (status.is_ok() && ::link(temp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    status = os_error("link segment", path, errno);
  }
  ::unlink(temp.c_str());
  if (status.is_ok() && durability_ == Durability::kStrict) status = sync_dir(dir.path);
  return status;
}

StatusOr<SlotSegments::Segment*> SlotSegments::append_target(Dir& dir) {
  // Each round seals the newest segment or finds it open; other processes rolling meanwhile
  // can only make the next one, so the bound is generous.
  for (int round = 0; round < kAppendAttemptsMax; ++round) {
    if (dir.segments.empty()) {
      if (auto s = new_segment(dir, 0); !s.is_ok()) return s;
    } else {
      Segment& newest = dir.segments.rbegin()->second;
      struct stat st {};
      if (::fstat(*newest.fd, &st) != 0) return os_error("fstat", newest.path, errno);
      if (!newest.sealed && static_cast<uint64_t>(st.st_size) < segment_bytes_max_) {
        return &newest;
      }
      if (!newest.sealed) {
        uint64_t offset = 0;
        std::shared_ptr<const int> fd;
        if (auto s = append(dir, newest, kSeal, 0, {}, &offset, &fd); !s.is_ok()) return s;
        // The next segment exists only once the SEAL before it is durable.
        if (durability_ == Durability::kStrict) {
          if (auto s = sync(*fd, newest.path); !s.is_ok()) return s;
        }
      }
      if (auto s = new_segment(dir, newest.number + 1); !s.is_ok()) return s;
    }
    if (auto s = refresh(dir); !s.is_ok()) return s;
  }
  return Status::transient(fmt::format("log segments under {}: rolled by others {} times in a row",
                                       dir.path.string(), kAppendAttemptsMax));
}

Status SlotSegments::append(Dir&, Segment& segment, uint8_t type, uint64_t slot,
                            std::string_view body, uint64_t* offset,
                            std::shared_ptr<const int>* fd) {
  const std::string record = encode_record(segment.nonce, type, slot, body);
  // One write: O_APPEND places it whole after every other append. A short write leaves a
  // torn record, which readers skip; the caller may append again.
  ssize_t n;
  do {
    n = ::write(*segment.fd, record.data(), record.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return os_error("append to log segment", segment.path, errno);
  if (static_cast<size_t>(n) != record.size()) {
    return Status::transient(fmt::format("append to log segment {}: {} of {} bytes written",
                                         segment.path.string(), n, record.size()));
  }
  const off_t end = ::lseek(*segment.fd, 0, SEEK_CUR);
  if (end < 0) return os_error("lseek", segment.path, errno);
  DEX_INVARIANT(static_cast<size_t>(end) >= record.size(), "the record lies before the end");
  *offset = static_cast<uint64_t>(end) - record.size();
  *fd = segment.fd;
  return Status::ok();
}

StatusOr<std::optional<std::string>> SlotSegments::get(const SlotObjectKey& key) {
  std::shared_ptr<const int> fd;
  Dir::Loc loc{};
  fs::path path;
  {
    std::lock_guard lock(mu_);
    auto dir = dir_of(key.dir);
    if (!dir.is_ok()) return dir.status();
    Dir& d = *dir.value();
    if (auto s = refresh(d); !s.is_ok()) return s;
    auto it = d.live.find(key.slot);
    if (it == d.live.end()) return std::optional<std::string>();
    loc = it->second;
    const Segment& segment = d.segments.at(loc.segment);
    fd = segment.fd;
    path = segment.path;
  }
  std::string body(loc.length, '\0');
  size_t got = 0;
  while (got < body.size()) {  // bounded by the body's length
    const ssize_t n =
        ::pread(*fd, body.data() + got, body.size() - got, static_cast<off_t>(loc.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error("read log segment", path, errno);
    if (n == 0)
      return Status::corruption(
          fmt::format("log segment {} is shorter than its index", path.string()));
    got += static_cast<size_t>(n);
  }
  return std::optional<std::string>(std::move(body));
}

StatusOr<SlotSegments::Outcome> SlotSegments::append_round(const SlotObjectKey& key, uint8_t type,
                                                           std::string_view body) {
  uint64_t segment_number = 0, offset = 0;
  std::shared_ptr<const int> fd;
  fs::path path;
  {
    std::lock_guard lock(mu_);
    auto dir = dir_of(key.dir);
    if (!dir.is_ok()) return dir.status();
    Dir& d = *dir.value();
    if (auto s = refresh(d); !s.is_ok()) return s;
    // What the index says already decides: a PUT of a live slot, a TOMB of an absent one.
    const bool live = d.live.contains(key.slot);
    if (type == kPut && live) return Outcome::kExists;
    if (type == kTomb && !live) return Outcome::kWon;
    auto target = append_target(d);
    if (!target.is_ok()) return target.status();
    segment_number = target.value()->number;
    path = target.value()->path;
    if (auto s = append(d, *target.value(), type, key.slot, body, &offset, &fd); !s.is_ok()) {
      return s;
    }
    d.appended.emplace(std::pair{segment_number, offset}, Outcome::kNone);
  }
  // Flushed outside the lock, so that reads go on meanwhile.
  const Status flushed = durability_ == Durability::kStrict ? sync(*fd, path) : Status::ok();
  std::lock_guard lock(mu_);
  auto dir = dir_of(key.dir);
  if (!dir.is_ok()) return dir.status();
  Dir& d = *dir.value();
  const Status read = flushed.is_ok() ? refresh(d) : flushed;
  Outcome outcome = Outcome::kNone;
  if (auto own = d.appended.find({segment_number, offset}); own != d.appended.end()) {
    outcome = own->second;
    d.appended.erase(own);
  }
  if (!read.is_ok()) return read;
  if (type == kTomb && outcome == Outcome::kWon) {
    if (auto s = delete_empty_segments(*dir.value()); !s.is_ok()) return s;
  }
  return outcome;
}

Status SlotSegments::create(const SlotObjectKey& key, std::string_view body) {
  if (body.size() > kBodyBytesMax) {
    return Status::permanent(fmt::format("a log slot object of {} bytes is over the {} allowed",
                                         body.size(), kBodyBytesMax));
  }
  // Bounded: a round ends void only when another process sealed the segment under it.
  for (int attempt = 0; attempt < kAppendAttemptsMax; ++attempt) {
    auto outcome = append_round(key, kPut, body);
    if (!outcome.is_ok()) return outcome.status();
    if (outcome.value() == Outcome::kWon) return Status::ok();
    if (outcome.value() == Outcome::kExists) {
      return Status::precondition_failed(fmt::format("'{}/{:020}' exists", key.dir, key.slot));
    }
  }
  return Status::transient(
      fmt::format("create '{}/{:020}': the log segment was sealed under {} "
                  "appends in a row",
                  key.dir, key.slot, kAppendAttemptsMax));
}

Status SlotSegments::remove(const SlotObjectKey& key) {
  // Bounded as create's.
  for (int attempt = 0; attempt < kAppendAttemptsMax; ++attempt) {
    auto outcome = append_round(key, kTomb, {});
    if (!outcome.is_ok()) return outcome.status();
    if (outcome.value() == Outcome::kWon) return Status::ok();
  }
  return Status::transient(
      fmt::format("remove '{}/{:020}': the log segment was sealed under {} "
                  "appends in a row",
                  key.dir, key.slot, kAppendAttemptsMax));
}

Status SlotSegments::delete_empty_segments(Dir& dir) {
  bool deleted = false;
  // The newest segment stays, so numbers never repeat. Bounded by the segments' count.
  while (dir.segments.size() >= 2) {
    Segment& oldest = dir.segments.begin()->second;
    if (!oldest.sealed || oldest.live != 0) break;
    if (::unlink(oldest.path.c_str()) != 0 && errno != ENOENT) {
      return os_error("unlink log segment", oldest.path, errno);
    }
    dir.segments.erase(dir.segments.begin());
    deleted = true;
  }
  if (deleted && durability_ == Durability::kStrict) return sync_dir(dir.path);
  return Status::ok();
}

StatusOr<std::vector<SlotSegments::Listed>> SlotSegments::list(std::string_view prefix,
                                                               std::string_view start_after,
                                                               size_t max_keys) {
  // The key directories that hold segments: a small tree (one log per node).
  std::vector<std::string> names;
  std::error_code ec;
  const bool any = fs::is_directory(root_, ec);
  ec.clear();  // no segments yet is not an error
  if (any) {
    for (auto it = fs::recursive_directory_iterator(root_, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && it->path().filename() == "log") {
        names.push_back(it->path().lexically_relative(root_).generic_string());
      }
    }
  }
  if (ec) return Status::transient(fmt::format("list {}: {}", root_.string(), ec.message()));
  std::vector<Listed> out;
  for (const std::string& name : names) {
    const std::string dir_key = name + "/";
    if (!dir_key.starts_with(prefix) && !prefix.starts_with(dir_key)) continue;
    std::lock_guard lock(mu_);
    auto dir = dir_of(name);
    if (!dir.is_ok()) return dir.status();
    Dir& d = *dir.value();
    if (auto s = refresh(d); !s.is_ok()) return s;
    auto it = d.live.begin();
    // Slots sort as their 20-digit names: start past start_after's slot when it names one.
    if (start_after.starts_with(dir_key) && start_after.size() >= dir_key.size() + 20) {
      if (auto s = parse_digits(start_after.substr(dir_key.size(), 20))) {
        it = *s == std::numeric_limits<uint64_t>::max() ? d.live.end() : d.live.lower_bound(*s);
      }
    }
    size_t taken = 0;
    for (; it != d.live.end() && taken <= max_keys; ++it) {  // bounded by max_keys + 1
      std::string key = fmt::format("{}{:020}", dir_key, it->first);
      if (!key.starts_with(prefix) || key <= start_after) continue;
      out.push_back({std::move(key), ListedObject{d.segments.at(it->second.segment).modified_ms,
                                                  it->second.length}});
      ++taken;
    }
  }
  std::sort(out.begin(), out.end(), [](const Listed& a, const Listed& b) { return a.key < b.key; });
  if (out.size() > max_keys + 1) out.resize(max_keys + 1);
  return out;
}

}  // namespace dex
