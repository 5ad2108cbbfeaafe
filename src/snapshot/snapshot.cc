#include "snapshot/snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/digest.h"
#include "common/framing.h"
#include "common/random.h"
#include "log/log_format.h"

namespace dex {
namespace fs = std::filesystem;

namespace {

constexpr size_t kSha256HexDigits = 64;
// A RocksDB checkpoint holds a handful of files per level; a manifest naming more
// than this is not one dex wrote.
constexpr int kManifestFilesMax = 100'000;
// Snapshot files restored at once (each held in memory while it is checked
// and written): enough to overlap GETs, hashing and fsyncs.
constexpr int kRestoreParallel = 3;

bool is_hex_sha256(std::string_view s) {
  return s.size() == kSha256HexDigits && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// A checkpoint file name: no directories, nothing that could escape `dest`.
bool is_plain_file_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return c != '/' && c != '\\' && c != '\0' && c > ' ' && c < 127;
  });
}

// SST and blob files never change once written (RocksDB file numbers are not
// reused), so their hashes can be remembered by name and size.
bool is_immutable_file(const std::string& name) {
  return name.ends_with(".sst") || name.ends_with(".blob");
}

// Into one buffer of the file's size: a stream grown by doubling held two to
// three times a 64 MiB SST file at once, the snapshot's peak of RSS.
StatusOr<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return Status::permanent(
        fmt::format("cannot read '{}': {}", path.string(), std::strerror(errno)));
  const std::streamoff size = in.tellg();
  if (size < 0) return Status::permanent(fmt::format("cannot size '{}'", path.string()));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  // A file that changed size under us is an error: checkpoint files are immutable.
  if (in.gcount() != size || in.peek() != std::char_traits<char>::eof())
    return Status::permanent(fmt::format("error reading '{}': its size changed", path.string()));
  return bytes;
}

// Writes `bytes` to a new file and fsyncs it: a restored store must survive a
// power loss once it is in place.
Status write_file_synced(const fs::path& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::permanent(
        fmt::format("cannot create '{}': {}", path.string(), std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return Status::permanent(
          fmt::format("cannot write '{}': {}", path.string(), std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return Status::permanent(fmt::format("cannot fsync '{}': {}", path.string(), std::strerror(e)));
  }
  ::close(fd);
  return Status::ok();
}

Status fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Status::permanent(
        fmt::format("cannot open '{}': {}", dir.string(), std::strerror(errno)));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0)
    return Status::permanent(fmt::format("cannot fsync '{}': {}", dir.string(), std::strerror(e)));
  return Status::ok();
}

}  // namespace

// ------------------------------------------------------------------ layout

std::string snapshot_manifest_prefix(const NodeId& node_id) {
  return fmt::format("nodes/{}/snapshots/manifests/", node_id.value);
}

std::string snapshot_manifest_key(const NodeId& node_id, Slot slot) {
  return fmt::format("nodes/{}/snapshots/manifests/{:020d}", node_id.value, slot.value);
}

std::string snapshot_file_prefix(const NodeId& node_id) {
  return fmt::format("nodes/{}/snapshots/files/", node_id.value);
}

StatusOr<Slot> parse_snapshot_manifest_key(const NodeId& node_id, std::string_view key) {
  const std::string prefix = snapshot_manifest_prefix(node_id);
  if (!key.starts_with(prefix)) {
    return Status::invalid_argument(
        fmt::format("'{}' is not a snapshot manifest key of node '{}'", key, node_id.value));
  }
  std::string_view digits = key.substr(prefix.size());
  uint64_t value = 0;
  bool ok = digits.size() == kSlotDigits;
  for (char c : digits) {
    if (!ok) break;
    if (c < '0' || c > '9') {
      ok = false;
      break;
    }
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) {
      ok = false;
      break;
    }
    value = value * 10 + digit;
  }
  if (!ok) {
    return Status::invalid_argument(
        fmt::format("'{}' is not a snapshot manifest key: expected {} digits after '{}'", key,
                    kSlotDigits, prefix));
  }
  return Slot(value);
}

std::string encode_snapshot_manifest(const proto::SnapshotManifest& manifest) {
  std::string payload;
  bool serialized = manifest.SerializeToString(&payload);
  assert(serialized && "a SnapshotManifest always serializes");
  (void)serialized;
  return frame(kSnapshotManifestMagic, payload);
}

StatusOr<proto::SnapshotManifest> decode_snapshot_manifest(const NodeId& node_id,
                                                           std::string_view key,
                                                           std::string_view bytes) {
  auto bad = [&](const std::string& why) {
    return Status::corruption(fmt::format("snapshot manifest '{}': {}", key, why));
  };
  auto payload = unframe(kSnapshotManifestMagic, bytes);
  if (!payload.is_ok()) return bad(payload.status().message());
  proto::SnapshotManifest m;
  if (!m.ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
    return bad("not a SnapshotManifest protobuf");
  }
  auto slot = parse_snapshot_manifest_key(node_id, key);
  if (!slot.is_ok()) return bad(slot.status().message());
  if (m.node_id() != node_id.value) return bad(fmt::format("names node '{}'", m.node_id()));
  if (m.slot() != slot->value)
    return bad(fmt::format("names slot {}, its key slot {}", m.slot(), slot->value));
  if (m.epoch() == 0) return bad("epoch 0");
  if (m.files_size() == 0 || m.files_size() > kManifestFilesMax) {
    return bad(fmt::format("{} files", m.files_size()));
  }
  const std::string files = snapshot_file_prefix(node_id);
  std::set<std::string> names;
  for (const auto& f : m.files()) {
    if (!is_plain_file_name(f.name())) return bad(fmt::format("bad file name '{}'", f.name()));
    if (!names.insert(f.name()).second) return bad(fmt::format("file '{}' named twice", f.name()));
    if (!is_hex_sha256(f.sha256())) return bad(fmt::format("file '{}' has a bad sha256", f.name()));
    if (f.key() != files + f.sha256()) {
      return bad(
          fmt::format("file '{}' has key '{}', not '{}{}'", f.name(), f.key(), files, f.sha256()));
    }
  }
  return m;
}

StatusOr<std::vector<Slot>> list_snapshots(ObjectStore& store, const NodeId& node_id,
                                           const RequestOptions& request) {
  const std::string prefix = snapshot_manifest_prefix(node_id);
  std::vector<Slot> slots;
  std::string after;
  // Bounded: every page advances `after`.
  while (true) {
    auto page = store.list(prefix, after, kListKeysMax, request);
    if (!page.is_ok()) return page.status();
    for (const auto& key : page->keys) {
      auto slot = parse_snapshot_manifest_key(node_id, key);
      if (!slot.is_ok()) {
        return Status::corruption(
            fmt::format("junk key among the snapshots: {}", slot.status().message()));
      }
      slots.push_back(slot.value());
    }
    if (!page->truncated || page->keys.empty()) break;
    after = page->keys.back();
  }
  return slots;
}

// ------------------------------------------------------------------ upload

SnapshotUploader::SnapshotUploader(ObjectStore& store, Options options,
                                   std::function<bool()> lease_valid)
    : store_(store), options_(std::move(options)), lease_valid_(std::move(lease_valid)) {}

StatusOr<SnapshotInfo> SnapshotUploader::upload(const fs::path& dir, Slot slot,
                                                int64_t created_unix_ms) {
  SnapshotInfo info;
  info.slot = slot;
  proto::SnapshotManifest manifest;
  manifest.set_node_id(options_.node_id.value);
  manifest.set_slot(slot.value);
  manifest.set_epoch(options_.epoch.value);
  manifest.set_writer_process_id(options_.process_id.value);
  manifest.set_write_id(random_hex_id());
  manifest.set_created_unix_ms(created_unix_ms);

  // What is already uploaded: one listing instead of a request per file.
  auto existing = list_all(store_, snapshot_file_prefix(options_.node_id));
  if (!existing.is_ok()) return existing.status();
  std::set<std::string> present(existing->begin(), existing->end());

  std::vector<fs::directory_entry> entries;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) entries.push_back(e);
  if (ec)
    return Status::permanent(
        fmt::format("cannot list checkpoint '{}': {}", dir.string(), ec.message()));
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
  std::map<std::string, Known> seen;
  for (const auto& e : entries) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const uint64_t size = e.file_size();
    std::optional<std::string> body;
    std::string sha;
    auto known = immutable_.find(name);
    if (is_immutable_file(name) && known != immutable_.end() && known->second.size == size) {
      sha = known->second.sha256;
    } else {
      auto bytes = read_file(e.path());
      if (!bytes.is_ok()) return bytes.status();
      sha = sha256_hex(bytes.value());
      body = std::move(bytes).value();
    }
    if (is_immutable_file(name)) seen[name] = {size, sha};
    const std::string key = snapshot_file_prefix(options_.node_id) + sha;
    if (!present.contains(key)) {
      if (!body) {
        auto bytes = read_file(e.path());
        if (!bytes.is_ok()) return bytes.status();
        body = std::move(bytes).value();
      }
      if (!lease_valid_())
        return Status::stopped("snapshot upload stopped: the lease is not valid");
      // Content-addressed: an object already at the key holds the same bytes.
      auto put = store_.put(key, *body, PutCondition::create(), options_.request);
      if (!put.is_ok() && put.status().code() != Code::kPreconditionFailed) {
        return Status(put.status().code(), fmt::format("uploading snapshot file '{}' to '{}': {}",
                                                       name, key, put.status().message()));
      }
      present.insert(key);
      ++info.uploaded_files;
      info.uploaded_bytes += size;
    }
    auto* f = manifest.add_files();
    f->set_name(name);
    f->set_key(key);
    f->set_size(size);
    f->set_sha256(sha);
    ++info.files;
    info.bytes += size;
  }
  immutable_ = std::move(seen);  // forget files no longer in the store
  if (info.files == 0) {
    return Status::invalid_argument(fmt::format("checkpoint '{}' has no files", dir.string()));
  }

  if (!lease_valid_())
    return Status::stopped("snapshot manifest not written: the lease is not valid");
  const std::string key = snapshot_manifest_key(options_.node_id, slot);
  auto put =
      store_.put(key, encode_snapshot_manifest(manifest), PutCondition::create(), options_.request);
  if (!put.is_ok()) {
    // A manifest for this slot already exists: either our own earlier attempt
    // landed, or another holder snapshotted the same slot. Both describe the
    // state after the same log prefix, so either will do.
    if (put.status().code() != Code::kPreconditionFailed) {
      return Status(put.status().code(),
                    fmt::format("writing snapshot manifest '{}': {}", key, put.status().message()));
    }
    info.manifest_existed = true;
  }
  return info;
}

// ------------------------------------------------------------------ trim

StatusOr<TrimResult> trim_snapshots(ObjectStore& store, const NodeId& node_id, size_t keep,
                                    const std::function<bool()>& lease_valid,
                                    const RequestOptions& request) {
  if (keep < 1) return Status::invalid_argument("snapshots.keep must be at least 1");
  TrimResult result;
  auto slots = list_snapshots(store, node_id, request);
  if (!slots.is_ok()) return slots.status();
  if (slots->empty()) return result;
  const size_t drop = slots->size() > keep ? slots->size() - keep : 0;
  result.oldest_kept = (slots.value())[drop];
  // Manifests first: a manifest never names a deleted file unless a trim of
  // another holder raced it (a restore then falls back to a newer snapshot).
  for (size_t i = 0; i < drop; ++i) {
    if (!lease_valid()) return Status::stopped("snapshot trim stopped: the lease is not valid");
    Status s = store.remove(snapshot_manifest_key(node_id, (slots.value())[i]), request);
    if (!s.is_ok()) return s;
    ++result.manifests_deleted;
  }
  std::set<std::string> referenced;
  for (size_t i = drop; i < slots->size(); ++i) {
    const std::string key = snapshot_manifest_key(node_id, (slots.value())[i]);
    auto data = store.get(key, request);
    if (!data.is_ok()) return data.status();  // even NotFound: do not guess what it named
    auto m = decode_snapshot_manifest(node_id, key, data->body);
    if (!m.is_ok()) return m.status();
    for (const auto& f : m->files()) referenced.insert(f.key());
  }
  auto files = list_all(store, snapshot_file_prefix(node_id));
  if (!files.is_ok()) return files.status();
  for (const auto& key : files.value()) {
    if (referenced.contains(key)) continue;
    if (!lease_valid()) return Status::stopped("snapshot trim stopped: the lease is not valid");
    Status s = store.remove(key, request);
    if (!s.is_ok()) return s;
    ++result.files_deleted;
  }
  return result;
}

// ------------------------------------------------------------------ download

StatusOr<proto::SnapshotManifest> download_snapshot(ObjectStore& store, const NodeId& node_id,
                                                    Slot slot, const fs::path& dest,
                                                    const RequestOptions& request) {
  std::error_code ec;
  if (fs::exists(dest, ec)) {
    return Status::invalid_argument(
        fmt::format("restore target '{}' already exists", dest.string()));
  }
  const std::string key = snapshot_manifest_key(node_id, slot);
  auto data = store.get(key, request);
  if (!data.is_ok()) return data.status();
  auto manifest = decode_snapshot_manifest(node_id, key, data->body);
  if (!manifest.is_ok()) return manifest.status();
  fs::create_directories(dest, ec);
  if (ec)
    return Status::permanent(fmt::format("cannot create '{}': {}", dest.string(), ec.message()));
  auto fail = [&](Status s) {
    fs::remove_all(dest, ec);
    return s;
  };
  // One file per task, a few at once: a restore waits on GETs, SHA-256 and
  // fsyncs of files that do not depend on each other (issue 30: a cold
  // takeover's time after the lease wait). Each task keeps one file in memory.
  const int files = manifest->files_size();
  std::vector<Status> results(static_cast<size_t>(files));
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  // Each worker takes the next file until none is left or one failed.
  auto work = [&] {
    for (int i = next++; i < files && !failed; i = next++) {
      const auto& f = manifest->files(i);
      Status& result = results[static_cast<size_t>(i)];
      auto body = store.get(f.key(), request);
      if (!body.is_ok()) {
        result = Status(body.status().code(),
                        fmt::format("snapshot at slot {}: file '{}' ({}): {}", slot.value, f.name(),
                                    f.key(), body.status().message()));
      } else if (body->body.size() != f.size() || sha256_hex(body->body) != f.sha256()) {
        result = Status::corruption(fmt::format(
            "snapshot at slot {}: file '{}' ({}) does not match its manifest ({} bytes, expected "
            "{})",
            slot.value, f.name(), f.key(), body->body.size(), f.size()));
      } else {
        result = write_file_synced(dest / f.name(), body->body);
      }
      if (!result.is_ok()) failed = true;
    }
  };
  const int threads = std::min(files, kRestoreParallel);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const Status& r : results) {
    if (!r.is_ok()) return fail(r);
  }
  if (Status s = fsync_dir(dest); !s.is_ok()) return fail(s);
  return manifest;
}

// ------------------------------------------------------------------ policy

bool snapshot_due(const SnapshotPolicy& policy, uint64_t records, Duration since) {
  if (records == 0) return false;  // nothing new since the last snapshot
  if (policy.every_records > 0 && records >= policy.every_records) return true;
  return policy.interval > Duration(0) && since >= policy.interval;
}

// ------------------------------------------------------------------ Snapshotter

Snapshotter::Snapshotter(ObjectStore& store, Clock& clock, Options options, Source source)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      source_(std::move(source)),
      uploader_(store, {options_.node_id, options_.process_id, options_.epoch, options_.request},
                [this] { return may_write(); }),
      last_time_(clock.now()) {}

Snapshotter::~Snapshotter() { stop(); }

void Snapshotter::start() {
  if (!options_.policy.enabled() || thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void Snapshotter::stop() {
  stop_requested_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

Snapshotter::Stats Snapshotter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

StatusOr<SnapshotInfo> Snapshotter::snapshot_now() {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  return take();
}

void Snapshotter::run() {
  TimePoint not_before = clock_.now();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (clock_.wait_until(lock, cv_, clock_.now() + options_.poll, [&] { return stopping_; })) {
        return;
      }
    }
    const TimePoint now = clock_.now();
    if (now < not_before) continue;
    std::lock_guard<std::mutex> run_lock(run_mu_);
    const uint64_t records = source_.records_applied() - records_at_last_;
    if (!snapshot_due(options_.policy, records, now - last_time_)) continue;
    auto taken = take();
    if (!taken.is_ok()) {
      spdlog::warn("snapshot of node {} failed (retrying in {} s): {}", options_.node_id.value,
                   to_ms(options_.retry_after) / 1000, taken.status().to_string());
      not_before = clock_.now() + options_.retry_after;
    }
  }
}

StatusOr<SnapshotInfo> Snapshotter::take() {
  const TimePoint started = clock_.now();
  const uint64_t records = source_.records_applied();
  auto failed = [&](Status s) -> StatusOr<SnapshotInfo> {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.failures;
    return s;
  };
  std::error_code ec;
  const fs::path dir = options_.scratch_dir / "checkpoint";
  fs::remove_all(dir, ec);
  fs::create_directories(options_.scratch_dir, ec);
  auto slot = source_.checkpoint(dir);
  if (!slot.is_ok()) return failed(slot.status());
  if (!slot->has_value()) {
    fs::remove_all(dir, ec);
    return failed(Status::invalid_argument("the local store has applied nothing yet"));
  }
  auto info = uploader_.upload(dir, slot->value(), source_.now_unix_ms());
  fs::remove_all(dir, ec);
  if (!info.is_ok()) return failed(info.status());

  GcGuard guard = source_.gc_guard();
  guard.lease_valid = [this] { return may_write(); };
  auto trimmed = trim_snapshots(store_, options_.node_id, options_.policy.keep, guard.lease_valid,
                                options_.request);
  if (!trimmed.is_ok()) return failed(trimmed.status());
  // Collect the log behind the oldest kept snapshot: a restore starts at its
  // slot + 1. Never within the GC margin of the log end, and not past the
  // current EpochStart until the epoch has settled (docs/log.md, "GC safety").
  uint64_t collected = 0;
  if (trimmed->oldest_kept) {
    uint64_t below = trimmed->oldest_kept->value + 1;
    if (!guard.epoch_settled) below = std::min(below, guard.epoch_start_slot.value);
    const uint64_t margin = std::max(guard.keep_slots_min, kGcKeepSlotsMin);
    below = guard.log_end.value >= margin ? std::min(below, guard.log_end.value - margin) : 0;
    if (below > 0) {
      guard.request = options_.request;
      auto gc = collect_garbage(store_, options_.node_id, Slot(below), guard);
      if (!gc.is_ok()) return failed(gc.status());
      collected = gc.value();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.snapshots;
    stats_.log_slots_collected += collected;
    stats_.last_slot = info->slot;
  }
  records_at_last_ = records;
  last_time_ = started;
  spdlog::info(
      "snapshot of node {} at log slot {}: {} files, {} bytes ({} files, {} bytes uploaded); "
      "removed {} old snapshots and {} files; collected {} log slots; {} ms",
      options_.node_id.value, info->slot.value, info->files, info->bytes, info->uploaded_files,
      info->uploaded_bytes, trimmed->manifests_deleted, trimmed->files_deleted, collected,
      to_ms(clock_.now() - started));
  return info;
}

}  // namespace dex
