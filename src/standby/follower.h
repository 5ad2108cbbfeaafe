// The hot standby's follower (spec: Hot standby; docs/standby.md): tails the
// node's log in object storage and applies each batch to this process's own
// local store with the engine's deterministic state machine, so that a takeover
// replays only the last few batches. It only reads object storage; it runs no
// Steps or timers.
//
// States (the spec's names, also the metric dexzd_hot_standby_state):
//   bootstrapping — opening or restoring the local store (from a snapshot), and
//                   catching up until it first reaches the end of the log;
//   following     — hot: it reached the end of the log within behindLagThreshold;
//   behind        — it trails the log by more than behindLagThreshold;
//   restarting    — after an error, waiting a backoff of 1–30 s to bootstrap again;
//   failed        — an error retrying cannot fix by itself (access denied, a
//                   local store that belongs to another log); it still retries
//                   every 30 s, and a takeover still works (not hot).
// Lag is local time only: how long ago the follower last stood at the end of
// the log (0 while it keeps reaching it at every poll).
#pragma once

#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "objstore/object_store.h"

namespace dex {

class StateMachine;

enum class FollowerState { kBootstrapping, kFollowing, kBehind, kRestarting, kFailed };
std::string_view follower_state_name(FollowerState state);

struct FollowerOptions {
  NodeId node_id;
  std::filesystem::path local_store_path;
  Duration poll = milliseconds(250);            // standby.heldLeasePollInterval
  Duration behind_lag_threshold = seconds(10);  // standby.behindLagThreshold
  Duration restart_backoff_min = seconds(1);
  Duration restart_backoff_max = seconds(30);
  RequestOptions request = {seconds(10)};
};

// The backoff before the n-th consecutive restart (n >= 1): 1 s doubling to 30 s.
Duration follower_restart_backoff(const FollowerOptions& options, uint32_t restarts);

class Follower {
 public:
  struct Status_ {
    FollowerState state = FollowerState::kBootstrapping;
    Duration lag{0};
    std::optional<Slot> applied;  // the last slot in the local store
    uint64_t batches_applied = 0;
    uint64_t restarts = 0;
    std::string last_error;
  };

  // `store` and `clock` must outlive the follower.
  Follower(ObjectStore& store, Clock& clock, FollowerOptions options);
  ~Follower();  // stop()
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  void start();
  // Stops following and closes the local store, so that the engine can open it.
  // Waits for a batch being applied. Idempotent.
  void stop();
  // A takeover: stops following and hands over the local store still open,
  // at the last slot it applied (status().applied), so the engine neither
  // closes and reopens it nor lists the log from its start. Null when no
  // healthy store is open (bootstrapping failed, restarting); the engine then
  // opens the store itself.
  std::unique_ptr<StateMachine> stop_and_hand_over();

  Status_ status() const;
  // Hot: following (the lease takeover asks this).
  bool hot() const { return status().state == FollowerState::kFollowing; }

 private:
  void run();
  // One bootstrap and follow session; returns the error that ended it (ok: stopped).
  Status session();
  void set_state(FollowerState state);
  bool wait_for(Duration d);  // false when stopping

  ObjectStore& store_;
  Clock& clock_;
  const FollowerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                    // guarded by mu_
  Status_ status_;                           // guarded by mu_ (lag computed from last_caught_up_)
  std::optional<TimePoint> last_caught_up_;  // guarded by mu_
  // The open local store of the current session; used by the follower thread
  // alone while it runs, handed over or closed after it is joined.
  std::unique_ptr<StateMachine> sm_;
  std::pair<uint64_t, uint64_t> sm_directory_{0, 0};  // device and inode of its directory
  std::thread thread_;
};

// A cold takeover's catch-up (issue 30): opens (or restores) the local store
// at `path` for a holder whose EpochStart is at `epoch_slot`, then applies the
// log up to that slot with slot reads in parallel, without a sync per batch
// (StateMachine::apply never syncs: the log is the durable copy). The engine,
// handed the store, replays only the EpochStart and what this did not reach;
// it serves only once its applied slot is the EpochStart.
struct CaughtUpStore {
  std::unique_ptr<StateMachine> sm;
  std::string how;              // open_local_store's account, for the startup log
  std::optional<Slot> applied;  // the last slot in the store
  uint64_t slots_applied = 0;
  uint64_t records_applied = 0;
};
StatusOr<CaughtUpStore> catch_up_local_store(ObjectStore& store, const NodeId& node_id,
                                             const std::filesystem::path& path, Slot epoch_slot,
                                             const RequestOptions& request = {});

}  // namespace dex
