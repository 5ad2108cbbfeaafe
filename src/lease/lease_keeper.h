// LeaseKeeper: the threaded driver of LeaseMachine over a real ObjectStore and
// Clock (docs/lease.md §8). It performs the machine's operations, turns each
// op's deadline into RequestOptions::timeout, counts an answer after the
// deadline as a cut-off, and sleeps with Clock::wait_until so that a
// ManualClock drives it and stop() interrupts it. Every decision is the
// machine's; this class only moves bytes and time.
//
// How a server uses it (dex-server-zd dev / local / serve):
//   auto lock = DevLock::open(data_dir);              // dev and local only
//   LeaseKeeper keeper(store, clock, {.node_id = ..., .process_id = make_process_id(),
//                                     .duration = ..., .fail_if_held = ...,
//                                     .holder_is_stopped = lock->held()});
//   if (Status s = keeper.acquire(); !s.is_ok()) exit(1);
//   keeper.start_renewing([&](const Status& why) { /* refuse work, exit 1 */ });
//   ... serve; acknowledge log writes only while keeper.is_valid() ...
//   keeper.release();                                  // graceful shutdown
//
// Thread contract: every public method is thread-safe. acquire() blocks its
// caller; start_renewing() starts one keeper thread; on_lost runs on it.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "lease/lease_machine.h"
#include "objstore/object_store.h"

namespace dex {

struct LeaseKeeperOptions {
  NodeId node_id;
  ProcessId process_id;
  Duration duration = kLeaseDurationDefault;
  bool fail_if_held = false;       // lease.failIfHeld
  bool holder_is_stopped = false;  // true while this process holds the dev lock
  uint64_t seed = 0;               // 0: from the OS
  // Hot mode (LeaseConfig): the held-lease poll interval and takeover delays.
  Duration held_poll_interval{0};
  bool hot_mode = false;
  bool standby_hot = false;  // initially; then set_standby_hot
  Duration lagging_takeover_delay = kLaggingTakeoverDelayDefault;
};

class LeaseKeeper {
 public:
  // `store` and `clock` must outlive the keeper.
  LeaseKeeper(ObjectStore& store, Clock& clock, LeaseKeeperOptions options);
  // Stops without releasing (as stop()).
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Blocks until this process holds the lease (ok), acquisition fails
  // (failIfHeld: Fenced naming the holder; Permanent; Corruption), or stop() is
  // called (Stopped). While another process holds it, logs once per holder that
  // it waits and for how long at most, then a sparse progress line (every 5 s
  // once the holder is overdue, every 5 min otherwise). Every failed attempt
  // (read or write) is a warning naming the store and the error. Call once.
  Status acquire();

  // After acquire() returned ok: starts the keeper thread, which renews the
  // lease. If the lease is lost (renewal cut off, lost to another holder,
  // permanent error), `on_lost` runs once on the keeper thread with the reason;
  // it does not run after release() or stop(). Call once.
  void start_renewing(std::function<void(const Status&)> on_lost);

  // Holding, and the current lease period has not ended by clock.now().
  bool is_valid() const;
  // How long the lease stays valid from clock.now() on (0 when it is not):
  // work that must end before the lease could expire (an Attribute Store
  // transaction) begins only with enough of it left.
  Duration valid_for() const;
  Epoch epoch() const;
  LeaseState state() const;
  LeaseCounters counters() const;
  // While waiting for the lease: the holder's record as last read.
  std::optional<LeaseRecordValue> observed_holder() const;
  // Hot mode: this process's standby is hot (or no longer): an input of the
  // lease machine, read when an available lease is taken over.
  void set_standby_hot(bool hot);
  // Reads the lease object once (a step down watches for a takeover through
  // this), within `timeout`. Errors: NotFound, Transient, Corruption, ...
  StatusOr<LeaseRecordValue> read_lease(Duration timeout) const;

  // Graceful shutdown: marks the lease released under the same epoch so that a
  // successor takes over at once; is_valid() is false from the call on. Blocks
  // until the release landed or gave up (at most about 5 s). Ok if released or
  // nothing was held.
  Status release();

  // Stops at once without releasing, like a crash: a successor waits for the
  // lease to expire. Interrupts acquire() and the keeper thread. Idempotent.
  void stop();

 private:
  using Lock = std::unique_lock<std::mutex>;
  // Runs the machine until `until()` is true, the machine needs nothing more,
  // or stop(). REQUIRES: lock held; released around store calls and waits.
  void drive(Lock& lock, const std::function<bool()>& until);
  void apply(Lock& lock, LeaseActions actions);
  LeaseResult perform(const LeaseOp& op);
  // While waiting for a held lease: a sparse progress line. REQUIRES: mu_ held.
  void log_wait_progress(TimePoint now);
  void run_thread();

  // Constant after construction.
  ObjectStore& store_;
  Clock& clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  LeaseMachine machine_;                        // guarded by mu_
  std::optional<LeaseOp> next_op_;              // guarded by mu_
  std::optional<TimePoint> wake_at_;            // guarded by mu_
  bool started_ = false;                        // guarded by mu_
  bool stop_requested_ = false;                 // guarded by mu_
  bool release_requested_ = false;              // guarded by mu_
  bool release_sent_ = false;                   // guarded by mu_
  bool lost_reported_ = false;                  // guarded by mu_
  std::function<void(const Status&)> on_lost_;  // guarded by mu_
  std::optional<TimePoint> last_progress_log_;  // guarded by mu_
  std::thread thread_;                          // the keeper thread; joined by release() / stop()
};

}  // namespace dex
