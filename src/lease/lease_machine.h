// The lease protocol as a pure, single-threaded, sans-I/O state machine
// (docs/lease.md). It never reads a clock and never performs I/O: every input
// carries `now` (local monotonic time), and every output is either ONE object
// store operation to perform or a time to be woken at, plus events. The same
// code runs under LeaseKeeper (threads, real store) and under the seeded
// simulator (tests/lease/lease_sim_test.cc), like FoundationDB's and
// TigerBeetle's replicas.
//
// Driver contract (LeaseKeeper and the simulator both follow it):
//  - Call start(now) once. Afterwards feed exactly the inputs asked for: when
//    the last actions carried an `op`, perform it and call on_result() with its
//    id; the op's `deadline` is a cut-off: an answer that arrives after it must
//    be delivered as Transient (the write may still land later). When the last
//    actions carried `wake_at`, call on_wake(now) at or after that time.
//  - At most one operation is outstanding at any time.
//  - request_release(now) may be called at any time; its actions replace a
//    pending wake_at (an outstanding op stays outstanding).
//  - `now` never goes backwards.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/random.h"
#include "common/status.h"
#include "common/types.h"
#include "lease/lease_record.h"

namespace dex {

// Timing rules of the spec's "Lease" section; docs/lease.md §4 gives the reasons.
inline constexpr Duration kLeaseDurationDefault = seconds(10);
// A held version must stay unchanged this much longer than its duration.
inline constexpr Duration kExpiryMargin = seconds(1);
// Renewal attempts and adoptions end this long before the period ends.
inline constexpr Duration kRenewalCutoffMargin = milliseconds(100);
// One attempt is cut off after duration / 6, clamped to this range.
inline constexpr Duration kAttemptCutoffMin = seconds(1);
inline constexpr Duration kAttemptCutoffMax = seconds(5);
// Exponential backoff with jitter between retries of transient errors.
inline constexpr Duration kBackoffInitial = milliseconds(100);
inline constexpr Duration kBackoffMax = seconds(1);
// A waiting process reads a held lease at least this often.
inline constexpr Duration kHeldPollIntervalMax = seconds(1);
// docs/lease.md §3a: around the time a held lease's next version is due, a
// waiter reads this often, so that it first sees a renewal at most this plus
// two read latencies after it landed; the crash wait then stays within
// duration + 1 s + 100 ms, hot mode's 0-50 ms takeover jitter included, for
// reads answered within 10 ms (cold: 40 ms).
inline constexpr Duration kHeldPollDenseInterval = milliseconds(20);
// The dense window opens this long before the earliest time the next version
// can be due by our observations: it absorbs the previous write's unknown
// latency (send to landing).
inline constexpr Duration kRenewalWindowLead = milliseconds(100);
// Hot mode (spec: Hot standby, Takeover): a hot standby waits 0 to this long
// before it writes an available lease.
inline constexpr Duration kHotTakeoverJitterMax = milliseconds(50);
inline constexpr Duration kLaggingTakeoverDelayDefault = milliseconds(1500);
// A graceful release gives up after this long (the successor then waits for expiry).
inline constexpr Duration kReleaseBudget = seconds(5);
// Bounds the list of our own write IDs remembered for adoption.
inline constexpr size_t kAttemptsRememberedMax = 64;

// duration / 6 clamped to [1 s, 5 s].
Duration attempt_cutoff(Duration lease_duration);
// duration / 3: when a renewal starts, from the period start.
Duration renewal_delay(Duration lease_duration);
// min(1 s, duration / 4): how often a waiter re-reads a held lease.
Duration held_poll_interval(Duration lease_duration);

// What a waiting process knows about the held lease it watches (docs/lease.md §3).
struct HeldLeaseView {
  ProcessId holder;
  Epoch epoch;
  uint64_t renewal_count = 0;
  TimePoint version_first_seen;  // local time we first saw the current version
  TimePoint takeover_at;         // version_first_seen + its duration + 1 s
  // The holder missed its renewal: the current version is older than its
  // renewal delay plus a first attempt's cut-off (a crash, or storage trouble).
  bool overdue = false;
};

struct LeaseConfig {
  NodeId node_id;
  ProcessId process_id;
  Duration duration = kLeaseDurationDefault;
  // lease.failIfHeld: a lease held by another process fails acquisition.
  bool fail_if_held = false;
  // The dev lock is held: a lease held by another process ID belongs to a
  // stopped process, so take it over at once with a raised epoch.
  bool holder_is_stopped = false;
  // Seeds backoff jitter and write IDs, so a simulation replays.
  uint64_t seed = 0;
  // standby.heldLeasePollInterval (hot mode): how often a held lease is read
  // while waiting. Zero: held_poll_interval(duration).
  Duration held_poll_interval{0};
  // Hot mode takeover delays (spec: Hot standby, Takeover). In hot mode, each
  // time an available lease (absent, released, expired) is about to be
  // written, a hot standby (the last on_standby_hot input, initially
  // `standby_hot`) waits 0–kHotTakeoverJitterMax first and one that is not
  // waits lagging_takeover_delay, so that a hot standby wins. The conditional
  // write still decides. Not hot mode (cold mode, dev): write at once.
  bool hot_mode = false;
  bool standby_hot = false;
  Duration lagging_takeover_delay = kLaggingTakeoverDelayDefault;
};

enum class LeaseOpKind { kRead, kCreate, kReplace };
std::string_view lease_op_name(LeaseOpKind kind);

// One object-store operation for the driver to perform on `key`.
struct LeaseOp {
  uint64_t id = 0;  // echo in LeaseResult::op_id
  LeaseOpKind kind = LeaseOpKind::kRead;
  std::string key;
  std::string body;  // kCreate, kReplace: the framed record
  std::string etag;  // kReplace: the ETag the object must still have
  TimePoint sent_at;
  // Cut-off: an answer after this local time counts as Transient.
  TimePoint deadline;
};

struct LeaseResult {
  uint64_t op_id = 0;
  // Ok, PreconditionFailed, NotFound, Transient, Permanent (others count as Permanent).
  Status status;
  std::string etag;  // when ok: the new ETag (writes) or the current one (reads)
  std::string body;  // when ok, reads only
};

enum class LeaseEventKind {
  kWaiting,        // another process holds the lease; waiting for it to expire
  kAcquired,       // we hold the lease at `epoch`
  kRenewed,        // a renewal was confirmed (or a late write adopted)
  kReleased,       // the release landed; a successor can take over at once
  kLost,           // we held the lease and stopped holding it; `status` says why
  kAcquireFailed,  // acquisition gave up: failIfHeld, permanent error, corrupt record
  kAcquireRetry,   // an acquisition read or write failed transiently; retried after `wait_max`
  kReleaseFailed,  // the release did not land; a successor waits for expiry
};
std::string_view lease_event_name(LeaseEventKind kind);

struct LeaseEvent {
  LeaseEventKind kind = LeaseEventKind::kWaiting;
  TimePoint at;
  Epoch epoch;
  Status status;        // the reason, for kLost / kAcquireFailed / kAcquireRetry / kReleaseFailed
  std::string message;  // one line for the log
  // kWaiting: the longest the wait can last from now; kAcquireRetry: the backoff.
  Duration wait_max{0};
};

// The output of every input. At most one of `op` and `wake_at` is set.
struct LeaseActions {
  std::optional<LeaseOp> op;
  std::optional<TimePoint> wake_at;
  std::vector<LeaseEvent> events;
};

enum class LeaseState {
  kIdle,       // start() not called yet
  kAcquiring,  // reading, waiting for expiry, or writing to take the lease
  kHolding,    // holding (possibly renewing); is_valid() tells whether still valid
  kReleasing,  // release requested; no longer valid
  kReleased,   // terminal: released (or stopped before acquiring)
  kLost,       // terminal: held and lost it, or the release failed
  kFailed,     // terminal: acquisition failed
};
std::string_view lease_state_name(LeaseState state);

// Request counts, by outcome: the request-cost figure of the spec.
struct LeaseCounters {
  uint64_t renewal_puts_ok = 0;
  uint64_t renewal_puts_precondition_failed = 0;
  uint64_t renewal_puts_transient = 0;  // including cut-offs
  uint64_t renewal_puts_permanent = 0;
  uint64_t renewal_reads = 0;
  uint64_t adoptions = 0;
  uint64_t acquire_reads = 0;
  uint64_t acquire_reads_dense = 0;  // of acquire_reads: sent inside a dense window (§3a)
  uint64_t acquire_writes = 0;
  uint64_t release_puts = 0;
  uint64_t renewal_puts() const {
    return renewal_puts_ok + renewal_puts_precondition_failed + renewal_puts_transient +
           renewal_puts_permanent;
  }
};

class LeaseMachine {
 public:
  explicit LeaseMachine(LeaseConfig config);

  LeaseActions start(TimePoint now);
  LeaseActions on_wake(TimePoint now);
  LeaseActions on_result(TimePoint now, const LeaseResult& result);
  // Hot mode: whether this process's standby is hot now (its follower is
  // following the log). The node reports every change; read at a takeover.
  void on_standby_hot(bool hot) { standby_hot_ = hot; }
  // Graceful shutdown: mark the record released under the same epoch. Valid no
  // longer from this call on.
  LeaseActions request_release(TimePoint now);

  LeaseState state() const;
  // Holding, and `now` is before the end of the current period. The log
  // acknowledges a batch only while this is true.
  bool is_valid(TimePoint now) const;
  // The end of the current period while holding (valid or not yet stopped).
  std::optional<TimePoint> period_end() const;
  Epoch epoch() const { return epoch_; }
  // Why the machine stopped (kLost, kFailed), or ok.
  const Status& stop_reason() const { return stop_reason_; }
  const LeaseConfig& config() const { return config_; }
  const LeaseCounters& counters() const { return counters_; }
  bool op_outstanding() const { return outstanding_.has_value(); }
  // While acquiring: the record of the process that holds the lease, as last
  // read (for operators: who is active, at which epoch).
  const std::optional<LeaseRecordValue>& held_record() const { return held_record_; }
  // While acquiring and watching a lease held by another process: what we know
  // of it at `now` (for progress logs). Otherwise nullopt.
  std::optional<HeldLeaseView> watching(TimePoint now) const;

 private:
  enum class Phase {
    kIdle,
    kAcqRead,           // op: read the lease
    kAcqWrite,          // op: create or replace to take it
    kAcqBackoff,        // wake: read again after a transient error
    kAcqWaitHeld,       // wake: poll the held lease or take it once expired
    kAcqTakeoverDelay,  // wake: write the available lease (hot mode's delay is over)
    kHoldIdle,          // wake: renewal time
    kRenewWrite,        // op: replace with renewal_count + 1
    kRenewRead,         // op: read after a failed renewal write (adoption check)
    kRenewBackoff,      // wake: retry the write or the read
    kReleaseWrite,      // op: replace with released = true
    kReleaseRead,       // op: read after a failed release write
    kReleaseBackoff,
    kReleased,
    kLost,
    kFailed,
  };

  // One write of ours, remembered so that a late-landing copy can be recognised.
  struct WriteAttempt {
    std::string write_id;
    TimePoint sent_at;
    Epoch epoch;
    uint64_t renewal_count = 0;
  };

  // Acquisition.
  void send_acquire_read(TimePoint now, LeaseActions& out);
  void on_acquire_read(TimePoint now, const LeaseResult& result, LeaseActions& out);
  void send_acquire_write(TimePoint now, std::optional<LeaseRecordValue> current,
                          const std::string& etag, LeaseActions& out);
  void on_acquire_write(TimePoint now, const LeaseResult& result, LeaseActions& out);
  // After a transient error of an acquisition op: warn (kAcquireRetry) and
  // read again after a backoff.
  void acquire_retry_later(TimePoint now, LeaseOpKind failed, const Status& why, LeaseActions& out);
  // Writes an available lease, after hot mode's takeover delay if configured.
  void take_available(TimePoint now, std::optional<LeaseRecordValue> current,
                      const std::string& etag, LeaseActions& out);
  void wait_held(TimePoint now, LeaseActions& out);
  // The held version stayed unchanged for its duration + 1 s: take it.
  void take_expired(TimePoint now, LeaseActions& out);
  // A new held version was first seen at held_since_: plan when its successor
  // is due (§3a). `landed_after`: a local time before which it had not landed,
  // when known.
  void plan_dense_window(std::optional<TimePoint> landed_after);
  Duration held_duration() const;
  // When the watched version, unchanged, may be taken over.
  TimePoint held_expiry() const;
  void become_holder(TimePoint now, const WriteAttempt& attempt, const std::string& etag,
                     bool adopted, LeaseActions& out);

  // Renewal.
  TimePoint renewal_cutoff() const {
    return period_start_ + config_.duration - kRenewalCutoffMargin;
  }
  TimePoint attempt_deadline(TimePoint now);
  void schedule_renewal(LeaseActions& out);
  void send_renew_write(TimePoint now, LeaseActions& out);
  void send_renew_read(TimePoint now, LeaseActions& out);
  void on_renew_write(TimePoint now, const LeaseResult& result, LeaseActions& out);
  void on_renew_read(TimePoint now, const LeaseResult& result, LeaseActions& out);
  void renew_retry_later(TimePoint now, const Status& why, bool need_read, LeaseActions& out);

  // Release.
  void send_release_write(TimePoint now, LeaseActions& out);
  void send_release_read(TimePoint now, LeaseActions& out);
  void release_fail(TimePoint now, Status why, LeaseActions& out);
  void on_release_write(TimePoint now, const LeaseResult& result, LeaseActions& out);
  void on_release_read(TimePoint now, const LeaseResult& result, LeaseActions& out);
  void release_retry_later(TimePoint now, const Status& why, bool need_read, LeaseActions& out);

  void maybe_start_release(TimePoint now, LeaseActions& out);
  void lose(TimePoint now, Status why, LeaseActions& out);
  void fail(TimePoint now, Status why, LeaseActions& out);
  LeaseEvent& emit(LeaseActions& out, LeaseEventKind kind, TimePoint at, Status status,
                   std::string message);
  LeaseOp& issue(TimePoint now, LeaseOpKind kind, TimePoint deadline, LeaseActions& out);
  void wake(TimePoint at, LeaseActions& out);
  Duration next_backoff();
  void reset_backoff() {
    backoff_step_ = 0;
    pending_backoff_.reset();
  }
  std::string new_write_id();
  LeaseRecordValue make_record(Epoch epoch, uint64_t renewal_count, bool released,
                               const std::string& write_id) const;
  const WriteAttempt* find_attempt(const std::vector<WriteAttempt>& attempts,
                                   const std::string& write_id) const;
  static void remember(std::vector<WriteAttempt>& attempts, WriteAttempt attempt);

  // Constant after construction.
  const LeaseConfig config_;
  bool standby_hot_ = false;  // the last on_standby_hot input (hot mode)
  const std::string key_;

  Random random_;
  Phase phase_ = Phase::kIdle;
  uint64_t next_op_id_ = 1;
  std::optional<LeaseOp> outstanding_;  // the one op in flight (id, kind, times; no body)
  std::optional<TimePoint> wake_at_;    // the pending wake
  // kAcqTakeoverDelay: what to write once the delay is over.
  std::optional<LeaseRecordValue> takeover_current_;
  std::string takeover_etag_;
  int backoff_step_ = 0;
  Status stop_reason_;
  LeaseCounters counters_;

  // Acquisition: our writes (adoptable after an ambiguous answer) and the held
  // version we are watching.
  std::vector<WriteAttempt> acquire_attempts_;
  std::optional<LeaseRecordValue> held_record_;
  std::string held_etag_;
  TimePoint held_since_;  // local time we first saw held_etag_
  // Send time of the latest read that showed held_etag_: the next version
  // lands after it (§3a).
  TimePoint held_last_read_sent_;
  // §3a: reads are dense (kHeldPollDenseInterval) in [dense_from_, dense_until_).
  TimePoint dense_from_;
  TimePoint dense_until_;
  // The holder and epoch last announced by a kWaiting event: it is logged once
  // per holder, not at every renewal.
  std::optional<std::pair<ProcessId, Epoch>> announced_holder_;
  // Send time and kind of the op whose result is being handled.
  TimePoint result_sent_at_;
  LeaseOpKind result_kind_ = LeaseOpKind::kRead;

  // Holding: the last confirmed version of our record.
  Epoch epoch_;
  std::string etag_;
  uint64_t renewal_count_ = 0;
  TimePoint period_start_;  // when the write that started this period was sent
  // The current renewal: its attempts (adoptable) and when it began.
  std::vector<WriteAttempt> renew_attempts_;
  bool renew_need_read_ = false;  // the next retry reads instead of writing
  // Pre-drawn so that "does another attempt fit" and the retry agree.
  std::optional<Duration> pending_backoff_;
  bool release_requested_ = false;
  TimePoint release_give_up_;
  std::vector<WriteAttempt> release_attempts_;
};

}  // namespace dex
