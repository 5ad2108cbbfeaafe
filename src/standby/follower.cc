#include "standby/follower.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <limits>
#include <utility>

#include "engine/local_store.h"
#include "engine/state_machine.h"
#include "log/log_format.h"
#include "log/log_reader.h"

namespace dex {

namespace {
// Status is refreshed (and stop checked) at least every this many batches.
constexpr int kBatchesPerCheck = 64;
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
  LogReader reader(store_, options_.node_id, start);
  bool reached_end_once = false;
  while (true) {
    // Read up to the end of the log, applying as we go.
    int since_check = 0;
    while (true) {
      if (++since_check >= kBatchesPerCheck) {
        since_check = 0;
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return Status::ok();
        if (reached_end_once && clock_.now() - *last_caught_up_ > options_.behind_lag_threshold) {
          status_.state = FollowerState::kBehind;
        }
      }
      auto next = reader.next(options_.request);
      if (!next.is_ok()) {
        // A blip: retry at the next poll; the lag grows meanwhile.
        if (next.status().is_transient()) break;
        return next.status();
      }
      if (!next->has_value()) {
        reached_end_once = true;
        std::lock_guard<std::mutex> lock(mu_);
        last_caught_up_ = clock_.now();
        break;
      }
      const LogEntry& entry = next->value();
      auto applied = sm->apply(entry.slot, entry.batch);
      if (!applied.is_ok()) return applied.status();
      std::lock_guard<std::mutex> lock(mu_);
      status_.applied = entry.slot;
      ++status_.batches_applied;
    }
    if (reached_end_once) {
      const bool behind = status().lag > options_.behind_lag_threshold;
      set_state(behind ? FollowerState::kBehind : FollowerState::kFollowing);
    }
    if (!wait_for(options_.poll)) return Status::ok();
  }
}

}  // namespace dex
