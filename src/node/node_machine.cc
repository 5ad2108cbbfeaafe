#include "node/node_machine.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace dex {

Duration takeover_retry_backoff(uint32_t failures) {
  Duration d = seconds(1);
  // Bounded by the 30 s cap: at most five doublings.
  for (uint32_t i = 1; i < failures && d < seconds(30); ++i) d *= 2;
  return std::min<Duration>(d, seconds(30));
}

std::string_view node_phase_name(NodePhase phase) {
  switch (phase) {
    case NodePhase::kIdle:
      return "idle";
    case NodePhase::kAcquiring:
      return "acquiring";
    case NodePhase::kTakeoverBackoff:
      return "takeover-backoff";
    case NodePhase::kOpening:
      return "opening";
    case NodePhase::kActive:
      return "active";
    case NodePhase::kDraining:
      return "draining";
    case NodePhase::kReleasing:
      return "releasing";
    case NodePhase::kClosingStore:
      return "closing-store";
    case NodePhase::kHoldOff:
      return "hold-off";
    case NodePhase::kStopped:
      return "stopped";
  }
  return "?";
}

std::string_view node_command_name(NodeCommandKind kind) {
  switch (kind) {
    case NodeCommandKind::kFollow:
      return "follow";
    case NodeCommandKind::kAcquire:
      return "acquire";
    case NodeCommandKind::kInterruptAcquire:
      return "interrupt-acquire";
    case NodeCommandKind::kOpen:
      return "open";
    case NodeCommandKind::kBeginDrain:
      return "begin-drain";
    case NodeCommandKind::kRelease:
      return "release";
    case NodeCommandKind::kCloseStore:
      return "close-store";
    case NodeCommandKind::kReadLease:
      return "read-lease";
    case NodeCommandKind::kAnswerStepDown:
      return "answer-step-down";
    case NodeCommandKind::kStopAtOnce:
      return "stop-at-once";
    case NodeCommandKind::kReleaseAndFail:
      return "release-and-fail";
    case NodeCommandKind::kExit:
      return "exit";
  }
  return "?";
}

NodeMachine::NodeMachine(NodeMachineConfig config, std::string process_id)
    : config_(config), process_id_(std::move(process_id)) {
  assert(config_.attempt_drain_timeout >= Duration(0));
  assert(config_.step_down_hold_off >= Duration(0));
  assert(config_.stuck_store_limit > Duration(0));
}

void NodeMachine::command(NodeActions& out, NodeCommandKind kind, std::string reason, int code) {
  NodeCommand c;
  c.kind = kind;
  c.reason = std::move(reason);
  c.exit_code = code;
  out.commands.push_back(std::move(c));
}

NodeActions NodeMachine::start(TimePoint now) {
  assert(phase_ == NodePhase::kIdle);
  NodeActions out;
  if (config_.hot) command(out, NodeCommandKind::kFollow);
  begin_acquire(now, out);
  return settle(now, std::move(out));
}

void NodeMachine::begin_acquire(TimePoint, NodeActions& out) {
  phase_ = NodePhase::kAcquiring;
  backoff_until_.reset();
  hold_off_until_.reset();
  command(out, NodeCommandKind::kAcquire);
}

NodeActions NodeMachine::acquired(TimePoint now, Epoch epoch) {
  assert(phase_ == NodePhase::kAcquiring);
  assert(epoch > epoch_);  // every acquisition raises the epoch
  NodeActions out;
  epoch_ = epoch;
  takeover_failures_ = 0;
  released_at_.reset();
  describe_refused_ = false;
  if (stopping_) {
    // A signal raced the acquisition: give the lease back at once.
    phase_ = NodePhase::kReleasing;
    drain_reason_ = DrainReason::kShutdown;
    command(out, NodeCommandKind::kRelease);
    return settle(now, std::move(out));
  }
  if (step_down_pending_) {
    // No other process took over within the hold-off: this one took it back.
    StepDownAnswer a;
    a.outcome = StepDownOutcome::kTakenBackByThisProcess;
    a.released_epoch = released_epoch_;
    a.active_epoch = epoch;
    a.active_holder = process_id_;
    answer(out, std::move(a));
  }
  phase_ = NodePhase::kOpening;
  command(out, NodeCommandKind::kOpen);
  return settle(now, std::move(out));
}

NodeActions NodeMachine::acquire_failed(TimePoint now, const Status& why) {
  assert(phase_ == NodePhase::kAcquiring);
  NodeActions out;
  if (stopping_) {
    stop(out, 0, "stopped before acquiring the lease");
  } else if (!config_.hot) {
    stop(out, 1, fmt::format("cannot acquire the lease: {}", why.to_string()));
  } else {
    // Spec: a hot standby keeps following and tries again after a backoff.
    phase_ = NodePhase::kTakeoverBackoff;
    backoff_until_ = now + takeover_retry_backoff(++takeover_failures_);
  }
  return settle(now, std::move(out));
}

NodeActions NodeMachine::opened(TimePoint now) {
  assert(phase_ == NodePhase::kOpening);
  NodeActions out;
  phase_ = NodePhase::kActive;
  if (stopping_) begin_drain(now, DrainReason::kShutdown, out);
  return settle(now, std::move(out));
}

NodeActions NodeMachine::open_failed(TimePoint now, const Status& why) {
  assert(phase_ == NodePhase::kOpening);
  NodeActions out;
  // Spec (Takeover): "A failure after it holds the lease releases the lease
  // and exits the process with status 1."
  command(out, NodeCommandKind::kReleaseAndFail, why.to_string());
  stop(out, 1, fmt::format("cannot serve after taking the lease: {}", why.to_string()));
  return settle(now, std::move(out));
}

NodeActions NodeMachine::signal(TimePoint now) {
  NodeActions out;
  const bool second = stopping_;
  stopping_ = true;
  switch (phase_) {
    case NodePhase::kIdle:
    case NodePhase::kTakeoverBackoff:
    case NodePhase::kHoldOff:
    case NodePhase::kClosingStore:
      // Nothing is served: the lease is not held (or already released).
      stop(out, 0, "stopped on a signal");
      break;
    case NodePhase::kAcquiring:
      if (!second) command(out, NodeCommandKind::kInterruptAcquire);
      break;
    case NodePhase::kOpening:
    case NodePhase::kReleasing:
      break;  // opened() drains; released() stops
    case NodePhase::kActive:
      begin_drain(now, DrainReason::kShutdown, out);
      break;
    case NodePhase::kDraining:
      if (drain_reason_ == DrainReason::kStepDown) {
        // A shutdown during a step down's drain: the process exits after the
        // release instead of staying a standby; the drain keeps its deadline.
        drain_reason_ = DrainReason::kShutdown;
      } else if (second) {
        drain_skipped_ = true;  // a second signal skips the drain
        release(out);
      }
      break;
    case NodePhase::kStopped:
      break;
  }
  return settle(now, std::move(out));
}

Status NodeMachine::can_step_down() const {
  if (step_down_pending_ || describe_refused_) {
    return Status::precondition_failed(
        "a step down of this process is already in progress; wait past the hold-off, "
        "describe, and step down again only if the switchover has not happened");
  }
  if (phase_ != NodePhase::kActive) {
    return Status::precondition_failed(fmt::format(
        "this process is not the active process (it is {}); nothing changed. Run the step down "
        "again: it then reaches the active process",
        node_phase_name(phase_)));
  }
  return Status::ok();
}

NodeActions NodeMachine::step_down(TimePoint now) {
  assert(can_step_down().is_ok());
  NodeActions out;
  step_down_pending_ = true;
  describe_refused_ = true;
  last_seen_ = "the lease was not read";
  begin_drain(now, DrainReason::kStepDown, out);
  return settle(now, std::move(out));
}

void NodeMachine::begin_drain(TimePoint now, DrainReason reason, NodeActions& out) {
  assert(phase_ == NodePhase::kActive);
  phase_ = NodePhase::kDraining;
  drain_reason_ = reason;
  drain_deadline_ = now + config_.attempt_drain_timeout;
  command(out, NodeCommandKind::kBeginDrain);
}

NodeActions NodeMachine::attempts_running(TimePoint now, size_t running) {
  NodeActions out;
  if (phase_ == NodePhase::kDraining && (running == 0 || now >= drain_deadline_)) release(out);
  return settle(now, std::move(out));
}

void NodeMachine::release(NodeActions& out) {
  assert(phase_ == NodePhase::kDraining);
  phase_ = NodePhase::kReleasing;
  command(out, NodeCommandKind::kRelease);
  out.commands.back().stays_standby = !stopping_ && drain_reason_ == DrainReason::kStepDown;
}

NodeActions NodeMachine::released(TimePoint now, bool ok) {
  assert(phase_ == NodePhase::kReleasing);
  NodeActions out;
  if (stopping_ || drain_reason_ == DrainReason::kShutdown) {
    drain_reason_.reset();
    stop(out, ok ? 0 : 1, ok ? "released the lease" : "the lease release did not land");
    return settle(now, std::move(out));
  }
  drain_reason_.reset();
  // Stepped down: a standby from now on, competing again after the hold-off
  // once the local store of the stopped serving period has closed.
  released_at_ = now;
  released_epoch_ = epoch_;
  hold_off_until_ = now + config_.step_down_hold_off;
  next_watch_ = now;
  phase_ = NodePhase::kClosingStore;
  command(out, NodeCommandKind::kCloseStore);
  if (config_.hot) command(out, NodeCommandKind::kFollow);
  return settle(now, std::move(out));
}

NodeActions NodeMachine::store_closed(TimePoint now) {
  assert(phase_ == NodePhase::kClosingStore);
  NodeActions out;
  phase_ = NodePhase::kHoldOff;
  if (now >= *hold_off_until_) {
    begin_acquire(now, out);
  }
  return settle(now, std::move(out));
}

NodeActions NodeMachine::lease_seen(TimePoint now, const LeaseSeen& seen) {
  NodeActions out;
  read_outstanding_ = false;
  if (step_down_pending_ && released_at_) {
    if (seen.epoch > released_epoch_) {
      StepDownAnswer a;
      a.outcome = seen.holder_process_id == process_id_
                      ? StepDownOutcome::kTakenBackByThisProcess
                      : StepDownOutcome::kTakenOverByAnotherProcess;
      a.released_epoch = released_epoch_;
      a.active_epoch = seen.epoch;
      a.active_holder = seen.holder_process_id;
      // Settled: Describe here need not refuse any longer (answer() ends the
      // refusal), so a client that lists every address finds the new active.
      answer(out, std::move(a));
    } else {
      last_seen_ = fmt::format("the lease still shows epoch {}{}", seen.epoch.value,
                               seen.released ? " (released)" : "");
      next_watch_ = now + kStepDownWatchPoll;
    }
  }
  return settle(now, std::move(out));
}

NodeActions NodeMachine::lease_unreadable(TimePoint now, const Status& why) {
  NodeActions out;
  read_outstanding_ = false;
  if (step_down_pending_) {
    last_seen_ = fmt::format("reading the lease failed: {}", why.to_string());
    next_watch_ = now + kStepDownWatchPoll;
  }
  return settle(now, std::move(out));
}

NodeActions NodeMachine::fatal(TimePoint now, const Status& why) {
  NodeActions out;
  if (phase_ == NodePhase::kStopped) return settle(now, std::move(out));
  const bool holding = phase_ == NodePhase::kOpening || phase_ == NodePhase::kActive ||
                       phase_ == NodePhase::kDraining || phase_ == NodePhase::kReleasing;
  // Refuse further work: no more log writes, no release (the lease is not
  // ours or cannot be trusted), and exit 1 as the spec requires.
  if (holding) command(out, NodeCommandKind::kStopAtOnce, why.to_string());
  stop(out, 1, why.to_string());
  return settle(now, std::move(out));
}

NodeActions NodeMachine::on_wake(TimePoint now) {
  NodeActions out;
  switch (phase_) {
    case NodePhase::kTakeoverBackoff:
      if (now >= *backoff_until_) begin_acquire(now, out);
      break;
    case NodePhase::kHoldOff:
      if (now >= *hold_off_until_) {
        // Describe refuses until the step down is answered (spec: "while a
        // step down or its hold-off is in progress").
        begin_acquire(now, out);
      }
      break;
    default:
      break;
  }
  return settle(now, std::move(out));
}

void NodeMachine::check_step_down_deadlines(TimePoint now, NodeActions& out) {
  if (phase_ == NodePhase::kClosingStore && now >= *released_at_ + config_.stuck_store_limit) {
    // Spec: a stuck task keeps the store open: after about 64 s the call
    // returns INTERNAL unless another process took over; either way the
    // process exits 1 without taking the lease (its restart frees the store).
    if (step_down_pending_) {
      StepDownAnswer a;
      a.outcome = StepDownOutcome::kStuckStore;
      a.released_epoch = released_epoch_;
      a.detail = fmt::format(
          "the local store of the stopped serving period did not close within {} s of the "
          "release and no other process took over; this process exits 1 without taking the "
          "lease (its restart releases the store)",
          to_ms(config_.stuck_store_limit) / 1000);
      answer(out, std::move(a));
    }
    stop(out, 1, "the local store did not close after the step down");
    return;
  }
  if (!step_down_pending_ || !released_at_) return;
  // After the hold-off and one acquisition attempt nothing was confirmed.
  if (phase_ != NodePhase::kClosingStore &&
      now >= *released_at_ + config_.step_down_hold_off + config_.acquisition_budget) {
    StepDownAnswer a;
    a.outcome = StepDownOutcome::kUnknown;
    a.released_epoch = released_epoch_;
    a.detail = fmt::format(
        "no process was confirmed to hold the lease after the hold-off and one acquisition "
        "attempt: {}",
        last_seen_);
    answer(out, std::move(a));
    return;
  }
  if (!read_outstanding_ && next_watch_ && now >= *next_watch_) {
    read_outstanding_ = true;
    next_watch_.reset();
    command(out, NodeCommandKind::kReadLease);
  }
}

void NodeMachine::answer(NodeActions& out, StepDownAnswer a) {
  assert(step_down_pending_);
  step_down_pending_ = false;
  describe_refused_ = false;
  NodeCommand c;
  c.kind = NodeCommandKind::kAnswerStepDown;
  c.step_down = std::move(a);
  out.commands.push_back(std::move(c));
}

void NodeMachine::stop(NodeActions& out, int code, std::string reason) {
  if (step_down_pending_) {
    StepDownAnswer a;
    a.outcome = released_at_ ? StepDownOutcome::kUnknown : StepDownOutcome::kAbandoned;
    a.released_epoch = released_epoch_;
    a.detail = fmt::format("the process is stopping: {}", reason);
    answer(out, std::move(a));
  }
  phase_ = NodePhase::kStopped;
  exit_code_ = code;
  describe_refused_ = false;
  command(out, NodeCommandKind::kExit, std::move(reason), code);
}

NodeActions NodeMachine::settle(TimePoint now, NodeActions out) {
  // Deadlines that are already due are acted on at once (a hold-off of 0, a
  // watch that is due): bounded, since each pass either acts or leaves.
  if (phase_ != NodePhase::kStopped) check_step_down_deadlines(now, out);
  std::optional<TimePoint> wake;
  auto consider = [&](std::optional<TimePoint> t) {
    if (t && (!wake || *t < *wake)) wake = *t;
  };
  switch (phase_) {
    case NodePhase::kTakeoverBackoff:
      consider(backoff_until_);
      break;
    case NodePhase::kHoldOff:
      consider(hold_off_until_);
      break;
    case NodePhase::kDraining:
      consider(std::min(now + kDrainPoll, drain_deadline_));
      break;
    case NodePhase::kClosingStore:
      consider(*released_at_ + config_.stuck_store_limit);
      break;
    default:
      break;
  }
  if (phase_ != NodePhase::kStopped && step_down_pending_ && released_at_) {
    if (!read_outstanding_) consider(next_watch_);
    if (phase_ != NodePhase::kClosingStore) {
      consider(*released_at_ + config_.step_down_hold_off + config_.acquisition_budget);
    }
  }
  out.wake_at = wake;
  check_invariants();
  return out;
}

void NodeMachine::check_invariants() const {
  assert((phase_ == NodePhase::kStopped) == exit_code_.has_value());
  assert(drain_reason_.has_value() ==
             (phase_ == NodePhase::kDraining || phase_ == NodePhase::kReleasing) ||
         phase_ == NodePhase::kStopped);
  assert(!step_down_pending_ || phase_ != NodePhase::kActive);
  assert(!step_down_pending_ || phase_ != NodePhase::kStopped);
  assert(phase_ != NodePhase::kTakeoverBackoff || (config_.hot && backoff_until_));
  assert(phase_ != NodePhase::kHoldOff || hold_off_until_);
  assert(phase_ != NodePhase::kClosingStore || released_at_);
}

}  // namespace dex
