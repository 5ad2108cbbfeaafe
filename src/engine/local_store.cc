#include "engine/local_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "log/log_format.h"
#include "snapshot/snapshot.h"

namespace dex {
namespace fs = std::filesystem;

namespace {

constexpr int kTransientTriesMax = 5;
constexpr auto kTransientPause = std::chrono::milliseconds(300);

// Retries a transient object-store error a few times: a restore runs while the
// process holds the lease, and a blip should not cost a takeover.
template <typename F>
auto with_retries(F f) -> decltype(f()) {
  for (int tries = 1;; ++tries) {
    auto r = f();
    if (r.is_ok() || !r.status().is_transient() || tries >= kTransientTriesMax) return r;
    std::this_thread::sleep_for(kTransientPause);
  }
}

void fsync_parent(const fs::path& path) {
  int fd = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

enum class Need { kNothing, kMissing, kCorrupt, kBehind };

}  // namespace

StatusOr<LocalStoreOpened> open_local_store(ObjectStore& store, const NodeId& node_id,
                                            const fs::path& path, Slot epoch_slot,
                                            const RequestOptions& request,
                                            std::unique_ptr<StateMachine> already_open) {
  std::error_code ec;
  const fs::path restoring = fs::path(path.string() + ".restoring");
  const fs::path corrupt_aside = fs::path(path.string() + ".corrupt");
  fs::remove_all(restoring, ec);  // an interrupted restore: never half used
  fs::create_directories(path.parent_path(), ec);

  // The log's bounds; `hint` is a slot the local store says exists (listing
  // then starts there, not at the log's start).
  std::optional<LogBounds> bounds_cache;
  auto log_bounds = [&](Slot hint) -> StatusOr<LogBounds> {
    if (bounds_cache) return *bounds_cache;
    auto found = with_retries([&] { return find_log_bounds(store, node_id, request, hint); });
    if (found.is_ok()) bounds_cache = found.value();
    return found;
  };

  LocalStoreOpened out;
  Need need = Need::kNothing;
  std::string why;
  if (!already_open && (!fs::exists(path, ec) || fs::is_empty(path, ec))) {
    need = Need::kMissing;
    why = "is missing";
  } else {
    const bool handed = already_open != nullptr;
    auto sm = handed ? StatusOr<std::unique_ptr<StateMachine>>(std::move(already_open))
                     : StateMachine::open(path);
    if (!sm.is_ok() && !sm.status().is_corruption()) return sm.status();
    std::optional<Slot> last;
    if (sm.is_ok()) {
      auto applied = sm.value()->last_applied();
      if (!applied.is_ok() && !applied.status().is_corruption()) return applied.status();
      if (applied.is_ok()) {
        last = applied.value();
        out.sm = std::move(sm).value();
      } else {
        why = fmt::format("is corrupt ({})", applied.status().message());
        need = Need::kCorrupt;
      }
    } else {
      why = fmt::format("is corrupt ({})", sm.status().message());
      need = Need::kCorrupt;
    }
    if (need == Need::kNothing) {
      auto bounds = log_bounds(last ? last->next() : kFirstSlot);
      if (!bounds.is_ok()) return bounds.status();
      if (!last) {
        need = Need::kMissing;
        why = "is empty";
      } else if (last->value + 1 < bounds->first.value) {
        need = Need::kBehind;
        why = fmt::format("has applied the log through slot {}, but the log now starts at slot {}",
                          last->value, bounds->first.value);
      } else {
        out.how =
            fmt::format("{}; it has applied the log through slot {}",
                        handed ? "handed over open by the hot standby" : "opened", last->value);
        return out;
      }
    }
  }

  auto bounds = log_bounds(kFirstSlot);
  if (!bounds.is_ok()) return bounds.status();
  auto snapshots = with_retries([&] { return list_snapshots(store, node_id, request); });
  if (!snapshots.is_ok()) return snapshots.status();
  // A missing or empty store on a log that was never collected and never
  // snapshotted: build it from the whole log.
  if (need == Need::kMissing && snapshots->empty() && bounds->first == kFirstSlot) {
    if (!out.sm) {
      auto sm = StateMachine::open(path);
      if (!sm.is_ok()) return sm.status();
      out.sm = std::move(sm).value();
    }
    out.how = "created; replaying the whole log";
    return out;
  }
  out.sm.reset();  // closed before it is replaced

  auto put_in_place = [&](const fs::path& from) -> Status {
    if (fs::exists(path, ec)) {
      if (need == Need::kCorrupt) {
        fs::remove_all(corrupt_aside, ec);
        fs::rename(path, corrupt_aside, ec);
        if (ec) {
          return Status::permanent(fmt::format("cannot move the corrupt local store '{}' aside: {}",
                                               path.string(), ec.message()));
        }
        spdlog::warn("the corrupt local store was moved to {} for inspection; delete it when done",
                     corrupt_aside.string());
      } else {
        fs::remove_all(path, ec);
        if (ec) {
          return Status::permanent(fmt::format("cannot remove the old local store '{}': {}",
                                               path.string(), ec.message()));
        }
      }
    }
    if (!from.empty()) {
      fs::rename(from, path, ec);
      if (ec) {
        return Status::permanent(fmt::format("cannot move the restored store into '{}': {}",
                                             path.string(), ec.message()));
      }
      fsync_parent(path);
    }
    return Status::ok();
  };

  // Newest first; a snapshot whose files are gone (trimmed by a newer holder
  // meanwhile) or do not match falls back to the next older one.
  for (auto it = snapshots->rbegin(); it != snapshots->rend(); ++it) {
    const Slot slot = *it;
    if (slot >= epoch_slot) {
      spdlog::warn("snapshot at slot {} is not below this epoch's EpochStart at slot {}: skipped",
                   slot.value, epoch_slot.value);
      continue;
    }
    if (slot.value + 1 < bounds->first.value) break;  // older ones are even further behind
    auto manifest = with_retries([&]() -> StatusOr<proto::SnapshotManifest> {
      fs::remove_all(restoring, ec);
      return download_snapshot(store, node_id, slot, restoring, request);
    });
    if (!manifest.is_ok()) {
      if (manifest.status().is_not_found() || manifest.status().is_corruption()) {
        spdlog::warn("snapshot at slot {} cannot be restored ({}); trying an older one", slot.value,
                     manifest.status().message());
        continue;
      }
      return manifest.status();
    }
    {
      // The store must say what its manifest says.
      auto check = StateMachine::open(restoring);
      Status bad = Status::ok();
      if (!check.is_ok()) {
        bad = check.status();
      } else if (auto a = check.value()->last_applied(); !a.is_ok()) {
        bad = a.status();
      } else if (!a->has_value() || a->value() != slot) {
        bad = Status::corruption(
            fmt::format("its store has applied slot {}",
                        a->has_value() ? std::to_string(a->value().value) : "none"));
      }
      if (!bad.is_ok()) {
        check = Status::stopped("closed");
        fs::remove_all(restoring, ec);
        spdlog::warn("snapshot at slot {} does not open as a local store ({}); trying an older one",
                     slot.value, bad.message());
        continue;
      }
    }
    if (Status s = put_in_place(restoring); !s.is_ok()) return s;
    auto sm = StateMachine::open(path);
    if (!sm.is_ok()) return sm.status();
    out.sm = std::move(sm).value();
    out.restored_slot = slot;
    out.how = fmt::format("restored the snapshot at log slot {} because the local store {}",
                          slot.value, why);
    return out;
  }

  if (bounds->first == kFirstSlot) {
    // No usable snapshot, but the whole log is there.
    if (Status s = put_in_place({}); !s.is_ok()) return s;
    auto sm = StateMachine::open(path);
    if (!sm.is_ok()) return sm.status();
    out.sm = std::move(sm).value();
    out.how = fmt::format("recreated because the local store {}; replaying the whole log", why);
    return out;
  }
  return Status::corruption(fmt::format(
      "the local store '{}' {}, and no snapshot can replace it: the log of node '{}' starts at "
      "slot {} and {} snapshot(s) were found, none restorable at or after slot {}",
      path.string(), why, node_id.value, bounds->first.value, snapshots->size(),
      bounds->first.value == 0 ? 0 : bounds->first.value - 1));
}

}  // namespace dex
