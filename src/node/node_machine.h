// The role of one server process as a pure, single-threaded machine
// (docs/node.md): standby → takeover → active → drain → release → hold-off →
// take back or follow, and the stops. Like LeaseMachine it reads no clock and
// performs no I/O: every input carries `now`, and every output is a list of
// commands for the shell (src/node/node.h) plus a time to be woken at. The
// shell performs the commands and reports their outcomes as inputs; the
// seeded simulation (tests/node/node_sim_test.cc) drives the same code.
//
// Driver contract:
//  - start(now) once; afterwards report the outcome of every command that has
//    one (kAcquire → acquired/acquire_failed, kOpen → opened/open_failed,
//    kRelease → released, kCloseStore → store_closed, kReadLease → lease_seen
//    or lease_unreadable), call on_wake(now) at or after `wake_at`, and pass
//    signals, step-down requests and fatal errors as they happen.
//  - At most one of kAcquire, kOpen, kRelease is outstanding at a time.
//  - `now` never goes backwards.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"

namespace dex {

// Spec (Step down): the process waits up to about this long after the release
// for the local store of its stopped serving period to close.
inline constexpr Duration kStuckStoreLimit = seconds(64);
// How often the shell reports the running attempts while a drain lasts.
inline constexpr Duration kDrainPoll = milliseconds(50);
// How often a step down reads the lease after the release.
inline constexpr Duration kStepDownWatchPoll = milliseconds(250);

// Spec (Hot standby, Takeover): after a takeover fails before the lease is
// held, a hot standby keeps following and tries again after 1 s, doubling up
// to 30 s.
Duration takeover_retry_backoff(uint32_t failures);

struct NodeMachineConfig {
  bool hot = false;                               // standby.mode: hot
  Duration attempt_drain_timeout = seconds(30);   // lifecycle.attemptDrainTimeout
  Duration step_down_hold_off = seconds(5);       // standby.stepDownHoldOff
  Duration acquisition_budget = seconds(3);       // one attempt to take the lease back
  Duration stuck_store_limit = kStuckStoreLimit;  // tests shorten it
};

enum class NodePhase {
  kIdle,             // start() not called yet
  kAcquiring,        // a standby: waiting for the lease (following the log when hot)
  kTakeoverBackoff,  // hot: a takeover failed before holding the lease; wait, then again
  kOpening,          // holding the lease: opening the log and the engine
  kActive,           // serving
  kDraining,         // no new tasks; running attempts may still end (shutdown or step down)
  kReleasing,        // stopped serving; the log closes and the lease is released
  kClosingStore,     // stepped down: the local store of the stopped period is closing
  kHoldOff,          // stepped down: waiting before competing for the lease again
  kStopped,          // terminal: exit_code() says how the process exits
};
std::string_view node_phase_name(NodePhase phase);

enum class NodeCommandKind {
  kFollow,            // hot: start following the log (if not already)
  kAcquire,           // one acquisition of the lease (blocks until held, failed or interrupted)
  kInterruptAcquire,  // a stop: interrupt the acquisition in progress
  kOpen,              // open the log and the engine and serve as the active process
  kBeginDrain,        // hand out no new task; running attempts may still end
  kRelease,           // stop serving, close the engine and the log, release the lease
  kCloseStore,        // close the local store of the stopped serving period
  kReadLease,         // read the lease once (a step down watches for a takeover)
  kAnswerStepDown,    // the step-down call returns `step_down`
  kStopAtOnce,        // fatal: stop serving, no more writes, no release
  kReleaseAndFail,    // a failure after holding the lease: release it, then exit 1
  kExit,              // the process exits with `exit_code`
};
std::string_view node_command_name(NodeCommandKind kind);

// What a step-down call answers (spec: leaseHolderAfterStepDown).
enum class StepDownOutcome {
  kTakenOverByAnotherProcess,
  kTakenBackByThisProcess,
  kUnknown,     // neither confirmed: detail says why
  kStuckStore,  // INTERNAL: the store did not close and nobody took over
  kAbandoned,   // the process stopped before the release (Stopped)
};

struct StepDownAnswer {
  StepDownOutcome outcome = StepDownOutcome::kUnknown;
  Epoch released_epoch;
  Epoch active_epoch;         // taken over / back: the holder's epoch
  std::string active_holder;  // taken over / back: the holder's process ID
  std::string detail;         // unknown, stuck, abandoned: why
};

struct NodeCommand {
  NodeCommandKind kind = NodeCommandKind::kExit;
  int exit_code = 0;           // kExit
  bool stays_standby = false;  // kRelease: a step down's (the process stays a standby)
  std::string reason;          // kStopAtOnce, kReleaseAndFail, kExit: for the log
  StepDownAnswer step_down;    // kAnswerStepDown
};

struct NodeActions {
  std::vector<NodeCommand> commands;
  std::optional<TimePoint> wake_at;
};

// One lease read of a step-down watch.
struct LeaseSeen {
  Epoch epoch;
  std::string holder_process_id;
  bool released = false;
};

class NodeMachine {
 public:
  NodeMachine(NodeMachineConfig config, std::string process_id);

  NodeActions start(TimePoint now);
  NodeActions on_wake(TimePoint now);

  // kAcquire's outcomes. A failure while stopping is the interruption.
  NodeActions acquired(TimePoint now, Epoch epoch);
  NodeActions acquire_failed(TimePoint now, const Status& why);
  // kOpen's outcomes.
  NodeActions opened(TimePoint now);
  NodeActions open_failed(TimePoint now, const Status& why);
  // kRelease's outcome (`ok`: the release landed).
  NodeActions released(TimePoint now, bool ok);
  NodeActions store_closed(TimePoint now);
  NodeActions lease_seen(TimePoint now, const LeaseSeen& seen);
  NodeActions lease_unreadable(TimePoint now, const Status& why);

  // SIGTERM / SIGINT: an active process drains first; a second one skips the drain.
  NodeActions signal(TimePoint now);
  // A step down whose precondition matched (node ID and epoch: the shell
  // checks them against what it serves). Refused (Status) unless active and
  // no step down is in progress.
  Status can_step_down() const;
  NodeActions step_down(TimePoint now);
  // The running attempts, reported every kDrainPoll while draining.
  NodeActions attempts_running(TimePoint now, size_t running);
  // The lease was lost or the log stopped: stop at once, exit 1.
  NodeActions fatal(TimePoint now, const Status& why);

  NodePhase phase() const { return phase_; }
  Epoch epoch() const { return epoch_; }  // the last epoch held (0: never)
  bool step_down_in_progress() const { return step_down_pending_; }
  // Describe refuses while a step down or its hold-off is in progress.
  bool describe_refused() const { return describe_refused_; }
  std::optional<int> exit_code() const { return exit_code_; }
  // A signal arrived: the process stops instead of (re)acquiring.
  bool stopping() const { return stopping_; }

 private:
  enum class DrainReason { kShutdown, kStepDown };

  void command(NodeActions& out, NodeCommandKind kind, std::string reason = {}, int code = 0);
  void begin_acquire(TimePoint now, NodeActions& out);
  void begin_drain(TimePoint now, DrainReason reason, NodeActions& out);
  void release(NodeActions& out);
  void answer(NodeActions& out, StepDownAnswer a);
  void stop(NodeActions& out, int code, std::string reason);
  void check_step_down_deadlines(TimePoint now, NodeActions& out);
  NodeActions settle(TimePoint now, NodeActions out);  // sets wake_at, checks invariants
  void check_invariants() const;

  const NodeMachineConfig config_;
  const std::string process_id_;

  NodePhase phase_ = NodePhase::kIdle;
  Epoch epoch_;
  std::optional<int> exit_code_;
  bool stopping_ = false;       // a signal arrived: stop instead of (re)acquiring
  bool drain_skipped_ = false;  // a second signal
  uint32_t takeover_failures_ = 0;
  std::optional<TimePoint> backoff_until_;
  std::optional<DrainReason> drain_reason_;
  TimePoint drain_deadline_;
  std::optional<TimePoint> next_drain_poll_;
  std::optional<TimePoint> hold_off_until_;
  std::optional<TimePoint> next_watch_;
  bool read_outstanding_ = false;
  bool describe_refused_ = false;
  // The step-down call: accepted and not yet answered.
  bool step_down_pending_ = false;
  // Set by a step down's release, until the process competes again.
  std::optional<TimePoint> released_at_;
  Epoch released_epoch_;
  std::string last_seen_;  // the step down's last lease read, for an unknown outcome
};

}  // namespace dex
