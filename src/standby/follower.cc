#include "standby/follower.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <limits>
#include <thread>
#include <utility>

#include "engine/local_store.h"
#include "engine/state_machine.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "standby/slot_prefetch.h"

namespace dex {

namespace {
// Stop is checked at least every this many batches.
constexpr int kBatchesPerCheck = 64;
// Slot GETs in flight while catching up, and the most slots read ahead.
constexpr size_t kPrefetchParallel = 16;
constexpr size_t kPrefetchWindowMax = 256;
// At the end of the log, how often the GC point is read to find a hole (the
// log collected under a standby that fell far behind) without a LIST.
constexpr Duration kLogStartCheckInterval = seconds(30);
constexpr int kCatchUpTransientMax = 50;
}  // namespace

std::string_view follower_state_name(FollowerState state) {
  switch (state) {
    case FollowerState::kBootstrapping:
      return "bootstrapping";
    case FollowerState::kFollowing:
      return "following";
    case FollowerState::kBehind:
      return "behind";
    case FollowerState::kRestarting:
      return "restarting";
    case FollowerState::kFailed:
      return "failed";
  }
  return "?";
}

Duration follower_restart_backoff(const FollowerOptions& options, uint32_t restarts) {
  Duration d = options.restart_backoff_min;
  for (uint32_t i = 1; i < restarts && d < options.restart_backoff_max; ++i) d *= 2;
  return std::min(d, options.restart_backoff_max);
}

namespace {

// The device and inode of `path` (0, 0 if it cannot be read).
std::pair<uint64_t, uint64_t> directory_id(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

}  // namespace

Follower::Follower(ObjectStore& store, Clock& clock, FollowerOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

Follower::~Follower() { stop(); }

void Follower::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { run(); });
}

void Follower::stop() {
  (void)stop_and_hand_over();  // closes the store
}

std::unique_ptr<StateMachine> Follower::stop_and_hand_over() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  // The path must still name the directory the store was opened from: one
  // moved or replaced meanwhile (by an operator) is not handed on; the engine
  // then opens the path as it finds it.
  if (sm_ && directory_id(options_.local_store_path) != sm_directory_) {
    spdlog::warn(
        "the local store {} was moved or replaced while the standby followed; not "
        "handing over the store it had open",
        options_.local_store_path.string());
    sm_.reset();
  }
  return std::move(sm_);
}

Follower::Status_ Follower::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  Status_ s = status_;
  s.lag = last_caught_up_ ? clock_.now() - *last_caught_up_ : Duration(0);
  if (s.lag < Duration(0)) s.lag = Duration(0);
  return s;
}

void Follower::set_state(FollowerState state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (status_.state != state) {
    spdlog::info("hot standby of node {}: {} -> {}", options_.node_id.value,
                 follower_state_name(status_.state), follower_state_name(state));
  }
  status_.state = state;
}

bool Follower::wait_for(Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !clock_.wait_until(lock, cv_, clock_.now() + d, [&] { return stopping_; });
}

void Follower::run() {
  uint32_t failures = 0;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    Status ended = session();
    // A session that failed closes its store: the next one opens it afresh,
    // and a takeover never gets a store in an unknown state.
    if (!ended.is_ok()) sm_.reset();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      if (ended.is_ok()) {
        failures = 0;
      } else {
        ++failures;
        ++status_.restarts;
        status_.last_error = ended.to_string();
      }
      last_caught_up_.reset();
    }
    // Access denied or a local store of another log will not heal by itself.
    const bool fatal =
        ended.is_permanent() ||
        (ended.is_corruption() && ended.message().find("ahead of") != std::string::npos);
    set_state(fatal ? FollowerState::kFailed : FollowerState::kRestarting);
    const Duration backoff = follower_restart_backoff(options_, failures);
    spdlog::warn("hot standby of node {} stopped following ({}); bootstrapping again in {} ms",
                 options_.node_id.value, ended.to_string(), to_ms(backoff));
    if (!wait_for(backoff)) return;
  }
}

Status Follower::session() {
  set_state(FollowerState::kBootstrapping);
  // No lease, no EpochStart of ours: every snapshot is acceptable.
  auto opened = open_local_store(store_, options_.node_id, options_.local_store_path,
                                 Slot(std::numeric_limits<uint64_t>::max()), options_.request);
  if (!opened.is_ok()) return opened.status();
  sm_.reset();  // the previous session's store, if any, closes first
  sm_ = std::move(opened->sm);
  sm_directory_ = directory_id(options_.local_store_path);
  StateMachine* sm = sm_.get();
  spdlog::info("hot standby of node {}: local store {}", options_.node_id.value, opened->how);
  auto last = sm->last_applied();
  if (!last.is_ok()) return last.status();
  Slot start;
  if (last->has_value()) {
    start = last->value().next();
  } else {
    auto bounds = find_log_bounds(store_, options_.node_id, options_.request);
    if (!bounds.is_ok()) return bounds.status();
    start = bounds->first;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_.applied = last.value();
    last_caught_up_ = clock_.now();  // lag counts from the start of the session
  }
  SlotPrefetcher ahead(store_, options_.node_id, kPrefetchParallel);
  LogReader reader(ahead, options_.node_id, start);
  bool reached_end_once = false;
  TimePoint log_start_checked = clock_.now();
  while (true) {
    // Read up to the end of the log, applying as we go. The first read of a
    // poll is one GET of the next slot; runs that exist widen the window.
    size_t window = 1;
    bool found_new = false;
    int since_check = 0;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return Status::ok();
        if (reached_end_once && clock_.now() - *last_caught_up_ > options_.behind_lag_threshold) {
          status_.state = FollowerState::kBehind;
        }
      }
      auto run = ahead.fill(reader.next_slot(), window, options_.request);
      if (!run.is_ok()) {
        // A blip: retry at the next poll; the lag grows meanwhile.
        if (run.status().is_transient()) break;
        return run.status();
      }
      if (*run == 0) {
        // Not written yet, or collected under us (a hole): without a LIST,
        // the GC point tells, read now and then (GC writes it first).
        if (clock_.now() - log_start_checked >= kLogStartCheckInterval) {
          log_start_checked = clock_.now();
          auto first = read_log_start(store_, options_.node_id, options_.request);
          if (!first.is_ok()) {
            if (first.status().is_transient()) break;
            return first.status();
          }
          if (reader.next_slot() < *first) {
            return Status::corruption(fmt::format(
                "hole in the log: slot {} is missing and the log was collected up to slot {}",
                reader.next_slot().value, first->value));
          }
        }
        reached_end_once = true;
        std::lock_guard<std::mutex> lock(mu_);
        last_caught_up_ = clock_.now();
        break;
      }
      const Slot until(reader.next_slot().value + *run);
      bool blip = false;
      // Bounded by the run: each next() takes at least one of its slots.
      while (reader.next_slot() < until) {
        auto next = reader.next(options_.request);
        if (!next.is_ok()) {
          if (!next.status().is_transient()) return next.status();
          blip = true;
          break;
        }
        if (!next->has_value()) break;
        const LogEntry& entry = next->value();
        auto applied = sm->apply(entry.slot, entry.batch);
        if (!applied.is_ok()) return applied.status();
        std::lock_guard<std::mutex> lock(mu_);
        status_.applied = entry.slot;
        ++status_.batches_applied;
        if (++since_check >= kBatchesPerCheck) {
          since_check = 0;
          if (stopping_) return Status::ok();
        }
      }
      if (blip) break;
      found_new = true;
      if (*run < window) {
        // The run ended before the window: that was the end of the log.
        reached_end_once = true;
        std::lock_guard<std::mutex> lock(mu_);
        last_caught_up_ = clock_.now();
        break;
      }
      window = std::min(window * 4, kPrefetchWindowMax);
    }
    if (reached_end_once) {
      const bool behind = status().lag > options_.behind_lag_threshold;
      set_state(behind ? FollowerState::kBehind : FollowerState::kFollowing);
    }
    // At rest, every other poll: with the lease's own read, a hot standby then
    // costs fewer than 2 GETs per poll interval (issue 30). A takeover replays
    // what it missed, at most one more poll's worth.
    if (!wait_for(found_new ? options_.poll : options_.poll * 2)) return Status::ok();
  }
}

StatusOr<CaughtUpStore> catch_up_local_store(ObjectStore& store, const NodeId& node_id,
                                             const std::filesystem::path& path, Slot epoch_slot,
                                             const RequestOptions& request) {
  auto opened = open_local_store(store, node_id, path, epoch_slot, request);
  if (!opened.is_ok()) return opened.status();
  CaughtUpStore out;
  out.sm = std::move(opened->sm);
  out.how = std::move(opened->how);
  auto last = out.sm->last_applied();
  if (!last.is_ok()) return last.status();
  out.applied = last.value();
  // A store with nothing applied is only ever handed out for a log that was
  // never collected (otherwise a snapshot is restored): it starts at the first
  // slot, without another listing of the whole log.
  const Slot start = last->has_value() ? last->value().next() : kFirstSlot;
  SlotPrefetcher ahead(store, node_id, kPrefetchParallel);
  LogReader reader(ahead, node_id, start);
  int transient = 0;
  auto window_at = [&](Slot from) {
    return static_cast<size_t>(
        std::min<uint64_t>(epoch_slot.value - from.value, kPrefetchWindowMax));
  };
  // The next run is read while this one is applied, so that on a store with
  // a round trip of milliseconds (S3) reading does not add to applying.
  std::future<StatusOr<size_t>> ahead_run;
  Slot ahead_from;
  // Bounded: each round applies at least one slot below epoch_slot, ends, or
  // counts a transient error (at most kCatchUpTransientMax).
  while (reader.next_slot() < epoch_slot) {
    const Slot from = reader.next_slot();
    StatusOr<size_t> run = size_t{0};
    if (ahead_run.valid() && ahead_from == from) {
      run = ahead_run.get();
    } else {
      if (ahead_run.valid()) (void)ahead_run.get();
      run = ahead.fill(from, window_at(from), request);
    }
    if (!run.is_ok() && run.status().is_transient() && ++transient <= kCatchUpTransientMax) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (!run.is_ok()) return run.status();
    if (*run == 0) break;  // the engine's own replay reports what is missing
    const Slot until(from.value + *run);
    if (*run == window_at(from) && until < epoch_slot) {
      ahead_from = until;
      ahead_run = std::async(std::launch::async, [&ahead, until, w = window_at(until), &request] {
        return ahead.fill(until, w, request);
      });
    }
    while (reader.next_slot() < until) {
      auto next = reader.next(request);
      if (!next.is_ok()) return next.status();
      if (!next->has_value()) break;
      auto applied = out.sm->apply(next->value().slot, next->value().batch);
      if (!applied.is_ok()) return applied.status();
      out.applied = next->value().slot;
      ++out.slots_applied;
      out.records_applied += next->value().batch.records_size();
    }
  }
  // An early return above leaves a read in flight: its future waits for it
  // (std::async), before `ahead` goes.
  return out;
}

}  // namespace dex
