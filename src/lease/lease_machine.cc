// The lease protocol (docs/lease.md). Every rule below names the section of the
// note that explains it; the spec's "Lease" section is the contract.
#include "lease/lease_machine.h"

#include <algorithm>

#include <fmt/format.h>

namespace dex {

Duration attempt_cutoff(Duration lease_duration) {
  return std::clamp<Duration>(lease_duration / 6, kAttemptCutoffMin, kAttemptCutoffMax);
}

Duration renewal_delay(Duration lease_duration) { return lease_duration / 3; }

Duration held_poll_interval(Duration lease_duration) {
  return std::max<Duration>(milliseconds(1),
                            std::min<Duration>(kHeldPollIntervalMax, lease_duration / 4));
}

std::string_view lease_op_name(LeaseOpKind kind) {
  switch (kind) {
    case LeaseOpKind::kRead:
      return "read";
    case LeaseOpKind::kCreate:
      return "create";
    case LeaseOpKind::kReplace:
      return "replace";
  }
  return "?";
}

std::string_view lease_event_name(LeaseEventKind kind) {
  switch (kind) {
    case LeaseEventKind::kWaiting:
      return "waiting";
    case LeaseEventKind::kAcquired:
      return "acquired";
    case LeaseEventKind::kRenewed:
      return "renewed";
    case LeaseEventKind::kReleased:
      return "released";
    case LeaseEventKind::kLost:
      return "lost";
    case LeaseEventKind::kAcquireFailed:
      return "acquire-failed";
    case LeaseEventKind::kReleaseFailed:
      return "release-failed";
    case LeaseEventKind::kAcquireRetry:
      return "acquire-retry";
  }
  return "?";
}

std::string_view lease_state_name(LeaseState state) {
  switch (state) {
    case LeaseState::kIdle:
      return "idle";
    case LeaseState::kAcquiring:
      return "acquiring";
    case LeaseState::kHolding:
      return "holding";
    case LeaseState::kReleasing:
      return "releasing";
    case LeaseState::kReleased:
      return "released";
    case LeaseState::kLost:
      return "lost";
    case LeaseState::kFailed:
      return "failed";
  }
  return "?";
}

namespace {

double seconds_of(Duration d) { return std::chrono::duration<double>(d).count(); }

// Anything but the classified answers counts as a permanent error.
bool is_permanent(const Status& s) {
  return !s.is_ok() && !s.is_precondition_failed() && !s.is_not_found() && !s.is_transient();
}

}  // namespace

LeaseMachine::LeaseMachine(LeaseConfig config)
    : config_(std::move(config)), key_(lease_key(config_.node_id)), random_(config_.seed) {
  standby_hot_ = config_.standby_hot;
  assert(!config_.node_id.empty());
  assert(!config_.process_id.empty());
  // A lease shorter than the cut-off margins has no room to renew.
  assert(config_.duration >= seconds(1));
}

LeaseState LeaseMachine::state() const {
  switch (phase_) {
    case Phase::kIdle:
      return LeaseState::kIdle;
    case Phase::kAcqRead:
    case Phase::kAcqWrite:
    case Phase::kAcqBackoff:
    case Phase::kAcqWaitHeld:
    case Phase::kAcqTakeoverDelay:
      return LeaseState::kAcquiring;
    case Phase::kHoldIdle:
    case Phase::kRenewWrite:
    case Phase::kRenewRead:
    case Phase::kRenewBackoff:
      return release_requested_ ? LeaseState::kReleasing : LeaseState::kHolding;
    case Phase::kReleaseWrite:
    case Phase::kReleaseRead:
    case Phase::kReleaseBackoff:
      return LeaseState::kReleasing;
    case Phase::kReleased:
      return LeaseState::kReleased;
    case Phase::kLost:
      return LeaseState::kLost;
    case Phase::kFailed:
      return LeaseState::kFailed;
  }
  return LeaseState::kFailed;
}

bool LeaseMachine::is_valid(TimePoint now) const {
  // docs/lease.md §4: valid from the send of the confirming write until send +
  // duration; a release ends validity at once.
  return state() == LeaseState::kHolding && now < period_start_ + config_.duration;
}

std::optional<TimePoint> LeaseMachine::period_end() const {
  switch (state()) {
    case LeaseState::kHolding:
    case LeaseState::kReleasing:
      return period_start_ + config_.duration;
    default:
      return std::nullopt;
  }
}

// ---------------------------------------------------------------- inputs

LeaseActions LeaseMachine::start(TimePoint now) {
  assert(phase_ == Phase::kIdle);
  LeaseActions out;
  send_acquire_read(now, out);
  return out;
}

LeaseActions LeaseMachine::on_wake(TimePoint now) {
  LeaseActions out;
  if (outstanding_ || !wake_at_) return out;  // nothing to wake for
  if (now < *wake_at_) {                      // early: keep waiting
    out.wake_at = wake_at_;
    return out;
  }
  wake_at_.reset();
  switch (phase_) {
    case Phase::kAcqBackoff:
      send_acquire_read(now, out);
      break;
    case Phase::kAcqTakeoverDelay:
      send_acquire_write(now, takeover_current_, takeover_etag_, out);
      break;
    case Phase::kAcqWaitHeld:
      if (now >= held_expiry()) {
        take_expired(now, out);
      } else {
        send_acquire_read(now, out);
      }
      break;
    case Phase::kHoldIdle:
    case Phase::kRenewBackoff:
      if (now >= renewal_cutoff()) {
        // §4: nothing may be sent at or after the renewal cutoff; a process
        // stalled this long has already stopped being valid (or is about to).
        lose(now,
             Status::stopped(
                 fmt::format("renewal could not be sent before the renewal cutoff ({:.3f}s late)",
                             seconds_of(now - renewal_cutoff()))),
             out);
      } else if (phase_ == Phase::kHoldIdle) {
        renew_attempts_.clear();
        reset_backoff();
        send_renew_write(now, out);
      } else if (renew_need_read_) {
        send_renew_read(now, out);
      } else {
        send_renew_write(now, out);
      }
      break;
    case Phase::kReleaseBackoff:
      if (renew_need_read_) {
        send_release_read(now, out);
      } else {
        send_release_write(now, out);
      }
      break;
    default:
      assert(false && "wake in a phase without a wake");
      break;
  }
  maybe_start_release(now, out);
  return out;
}

LeaseActions LeaseMachine::on_result(TimePoint now, const LeaseResult& in) {
  LeaseActions out;
  if (!outstanding_ || outstanding_->id != in.op_id) {
    // Only a machine that gave up (release before acquisition) drops an op.
    assert(phase_ == Phase::kReleased || phase_ == Phase::kLost || phase_ == Phase::kFailed);
    return out;
  }
  LeaseOp op = std::move(*outstanding_);
  outstanding_.reset();
  result_sent_at_ = op.sent_at;
  result_kind_ = op.kind;
  LeaseResult result = in;
  if (result.status.is_ok() && now > op.deadline) {
    // The driver should have cut this off; an answer after the deadline counts
    // as a cut-off, because our timing assumed it would not arrive (§4).
    result.status = Status::transient("answer arrived after the attempt cut-off");
  }
  if (is_permanent(result.status)) {
    result.status = Status::permanent(result.status.to_string());
  }
  switch (phase_) {
    case Phase::kAcqRead:
      on_acquire_read(now, result, out);
      break;
    case Phase::kAcqWrite:
      on_acquire_write(now, result, out);
      break;
    case Phase::kRenewWrite:
      on_renew_write(now, result, out);
      break;
    case Phase::kRenewRead:
      on_renew_read(now, result, out);
      break;
    case Phase::kReleaseWrite:
      on_release_write(now, result, out);
      break;
    case Phase::kReleaseRead:
      on_release_read(now, result, out);
      break;
    default:
      assert(false && "result in a phase without an op");
      break;
  }
  maybe_start_release(now, out);
  return out;
}

LeaseActions LeaseMachine::request_release(TimePoint now) {
  LeaseActions out;
  switch (state()) {
    case LeaseState::kIdle:
    case LeaseState::kAcquiring:
      // Not holding: nothing to release. An acquisition write still in flight
      // may land; the successor then waits for it to expire (docs/lease.md §6).
      phase_ = Phase::kReleased;
      wake_at_.reset();
      outstanding_.reset();
      emit(out, LeaseEventKind::kReleased, now, Status::ok(), "stopped before acquiring the lease");
      return out;
    case LeaseState::kHolding:
      release_requested_ = true;
      release_give_up_ = now + kReleaseBudget;
      wake_at_.reset();
      maybe_start_release(now, out);
      return out;
    default:
      return out;  // already releasing or stopped
  }
}

// ---------------------------------------------------------------- acquisition (§3)

void LeaseMachine::send_acquire_read(TimePoint now, LeaseActions& out) {
  if (phase_ == Phase::kAcqWaitHeld && now >= dense_from_ && now < dense_until_) {
    ++counters_.acquire_reads_dense;
  }
  phase_ = Phase::kAcqRead;
  ++counters_.acquire_reads;
  issue(now, LeaseOpKind::kRead, now + attempt_cutoff(config_.duration), out);
}

void LeaseMachine::acquire_retry_later(TimePoint now, LeaseOpKind failed, const Status& why,
                                       LeaseActions& out) {
  assert(why.is_transient());
  // Bounded: 100 ms doubling to 1 s (next_backoff), so a store that refuses
  // every request sees at most about one attempt a second, each one warned.
  const Duration backoff = next_backoff();
  assert(backoff > Duration(0) && backoff <= kBackoffMax);
  phase_ = Phase::kAcqBackoff;
  emit(out, LeaseEventKind::kAcquireRetry, now, why,
       fmt::format("{} of the lease {} failed: {}; retrying in {} ms", lease_op_name(failed), key_,
                   why.to_string(), to_ms(backoff)))
      .wait_max = backoff;
  wake(now + backoff, out);
}

void LeaseMachine::on_acquire_read(TimePoint now, const LeaseResult& result, LeaseActions& out) {
  if (result.status.is_transient()) {
    return acquire_retry_later(now, LeaseOpKind::kRead, result.status, out);
  }
  if (result.status.is_not_found()) return take_available(now, std::nullopt, "", out);
  if (!result.status.is_ok()) {
    return fail(now, Status::permanent("reading the lease: " + result.status.to_string()), out);
  }
  reset_backoff();
  auto decoded = decode_lease_record(result.body);
  if (!decoded.is_ok()) {
    return fail(now, Status::corruption(fmt::format("{}: {}", key_, decoded.status().message())),
                out);
  }
  const LeaseRecordValue& record = decoded.value();
  if (record.node_id != config_.node_id) {
    return fail(now,
                Status::corruption(fmt::format("{} names node {}, not {}", key_,
                                               record.node_id.value, config_.node_id.value)),
                out);
  }
  if (record.holder_process_id == config_.process_id) {
    // One of our own acquisition writes landed although its answer was lost
    // or cut off. Adopt it while its period leaves room (§5); otherwise it is
    // ours and unused, so take it again at once with a raised epoch.
    const WriteAttempt* mine = find_attempt(acquire_attempts_, record.write_id);
    if (mine != nullptr && !record.released && mine->epoch == record.epoch &&
        now < mine->sent_at + config_.duration - kRenewalCutoffMargin) {
      return become_holder(now, *mine, result.etag, /*adopted=*/true, out);
    }
    return send_acquire_write(now, record, result.etag, out);
  }
  if (record.released) return take_available(now, record, result.etag, out);

  // Held by another process. With the dev lock held that process has stopped,
  // so failIfHeld (which guards against a live holder) does not apply (§7).
  if (config_.holder_is_stopped) {
    // §7: we hold the dev lock, so the holder is a stopped process.
    emit(out, LeaseEventKind::kWaiting, now, Status::ok(),
         fmt::format("lease held by stopped process {} (epoch {}); taking it over at once",
                     record.holder_process_id.value, record.epoch.value));
    return send_acquire_write(now, record, result.etag, out);
  }
  if (config_.fail_if_held) {
    return fail(now,
                Status::fenced(fmt::format(
                    "lease for node {} is held by process {} (epoch {}); lease.failIfHeld is set",
                    config_.node_id.value, record.holder_process_id.value, record.epoch.value)),
                out);
  }
  if (result.etag != held_etag_) {
    // A new version: (re)start the wait. Observed at the answer's arrival,
    // which is no earlier than the write landed, which is no earlier than its
    // sender's period began (§3). Never from an earlier time: that is the
    // safety argument.
    std::optional<TimePoint> landed_after;
    if (!held_etag_.empty()) landed_after = held_last_read_sent_;  // it showed the old version
    held_etag_ = result.etag;
    held_since_ = now;
    held_record_ = record;
    plan_dense_window(landed_after);
    // Logged once per holder (process and epoch), not at every renewal.
    const std::pair<ProcessId, Epoch> holder{record.holder_process_id, record.epoch};
    if (announced_holder_ != holder) {
      announced_holder_ = holder;
      const Duration held = held_duration();
      LeaseEvent& e = emit(out, LeaseEventKind::kWaiting, now, Status::ok(),
                           fmt::format("lease held by {}; waiting for it to expire (up to {:.1f}s)",
                                       describe_holder(record), seconds_of(held + kExpiryMargin)));
      e.epoch = record.epoch;
      e.wait_max = held + kExpiryMargin;
    }
  }
  assert(result_sent_at_ <= now);
  held_last_read_sent_ = std::max(held_last_read_sent_, result_sent_at_);
  wait_held(now, out);
}

Duration LeaseMachine::held_duration() const {
  assert(held_record_.has_value());
  return held_record_->duration > Duration(0) ? held_record_->duration : config_.duration;
}

TimePoint LeaseMachine::held_expiry() const {
  // §3: the record's duration + 1 s from our first sight of this version, never
  // from an earlier read.
  return held_since_ + held_duration() + kExpiryMargin;
}

void LeaseMachine::plan_dense_window(std::optional<TimePoint> landed_after) {
  // §3a. The version first seen at held_since_ was sent at some S <= held_since_;
  // its holder sends the next one at S + D/3 and, if that first attempt is
  // healthy, it lands before S + D/3 + cut-off. When an earlier read showed
  // the previous version, this one landed after that read was sent, so S is
  // at least `landed_after` less the write's own latency (kRenewalWindowLead).
  // Without such a read (the first version we see) S is unknown: the next
  // version may come at any time from now on.
  const Duration held = held_duration();
  const Duration renew = renewal_delay(held);
  dense_from_ = landed_after ? *landed_after + renew - kRenewalWindowLead : held_since_;
  dense_until_ = held_since_ + renew + attempt_cutoff(held);
  assert(!landed_after || *landed_after <= held_since_);
  assert(dense_from_ < dense_until_);
  // The window closes before the takeover time: the wake at expiry is exact anyway.
  assert(dense_until_ < held_expiry());
}

void LeaseMachine::wait_held(TimePoint now, LeaseActions& out) {
  assert(held_record_.has_value());
  assert(held_since_ <= now);
  const Duration held = held_duration();
  // §3: expiry counts only from our first sight of this version.
  const TimePoint expiry = held_expiry();
  if (now >= expiry) return take_expired(now, out);
  phase_ = Phase::kAcqWaitHeld;
  const Duration poll = config_.held_poll_interval > Duration(0) ? config_.held_poll_interval
                                                                 : held_poll_interval(held);
  const Duration dense = std::min(kHeldPollDenseInterval, poll);
  // §3a: dense reads inside the window, the regular interval outside it, a wake
  // exactly when the window opens, and one exactly at expiry (not at the next
  // regular poll).
  TimePoint next;
  if (now < dense_from_) {
    next = std::min(now + poll, dense_from_);
  } else if (now < dense_until_) {
    next = now + dense;
  } else {
    next = now + poll;
  }
  next = std::min(next, expiry);
  assert(next > now);
  assert(next - now <= poll);
  wake(next, out);
}

void LeaseMachine::take_expired(TimePoint now, LeaseActions& out) {
  assert(now >= held_expiry());
  // The moment of the takeover decision, for the log (and the crash-wait e2e
  // test, which measures from a SIGKILL to it).
  emit(out, LeaseEventKind::kWaiting, now, Status::ok(),
       fmt::format("lease of node {} expired: held by {}, unchanged for {:.3f}s since first seen; "
                   "taking it over",
                   config_.node_id.value, describe_holder(*held_record_),
                   seconds_of(now - held_since_)))
      .epoch = held_record_->epoch;
  take_available(now, held_record_, held_etag_, out);
}

std::optional<HeldLeaseView> LeaseMachine::watching(TimePoint now) const {
  if (state() != LeaseState::kAcquiring || !held_record_) return std::nullopt;
  HeldLeaseView v;
  v.holder = held_record_->holder_process_id;
  v.epoch = held_record_->epoch;
  v.renewal_count = held_record_->renewal_count;
  v.version_first_seen = held_since_;
  v.takeover_at = held_expiry();
  v.overdue = now - held_since_ > renewal_delay(held_duration()) + attempt_cutoff(held_duration());
  return v;
}

void LeaseMachine::take_available(TimePoint now, std::optional<LeaseRecordValue> current,
                                  const std::string& etag, LeaseActions& out) {
  if (!config_.hot_mode) return send_acquire_write(now, std::move(current), etag, out);
  // Hot mode: a hot standby waits 0–50 ms, one that is not hot about
  // laggingTakeoverDelay, so that a hot standby wins a race (spec: Takeover).
  const bool hot = standby_hot_;
  const Duration delay =
      hot ? random_.between(Duration(0), kHotTakeoverJitterMax) : config_.lagging_takeover_delay;
  takeover_current_ = std::move(current);
  takeover_etag_ = etag;
  phase_ = Phase::kAcqTakeoverDelay;
  emit(out, LeaseEventKind::kWaiting, now, Status::ok(),
       fmt::format("lease of node {} is available; taking it in {} ms ({})", config_.node_id.value,
                   to_ms(delay), hot ? "hot standby" : "standby not hot: laggingTakeoverDelay"))
      .wait_max = delay;
  wake(now + delay, out);
}

void LeaseMachine::send_acquire_write(TimePoint now, std::optional<LeaseRecordValue> current,
                                      const std::string& etag, LeaseActions& out) {
  // Every acquisition raises the epoch by one; renewal_count restarts at 0.
  const Epoch epoch = current ? current->epoch.next() : Epoch(1);
  WriteAttempt attempt{new_write_id(), now, epoch, 0};
  phase_ = Phase::kAcqWrite;
  ++counters_.acquire_writes;
  LeaseOp& op = issue(now, current ? LeaseOpKind::kReplace : LeaseOpKind::kCreate,
                      now + attempt_cutoff(config_.duration), out);
  op.body = encode_lease_record(make_record(epoch, 0, false, attempt.write_id));
  if (current) op.etag = etag;
  remember(acquire_attempts_, std::move(attempt));
}

void LeaseMachine::on_acquire_write(TimePoint now, const LeaseResult& result, LeaseActions& out) {
  if (result.status.is_ok()) {
    return become_holder(now, acquire_attempts_.back(), result.etag, /*adopted=*/false, out);
  }
  // Someone else wrote first (or the key vanished): look again at once.
  if (result.status.is_precondition_failed() || result.status.is_not_found()) {
    return send_acquire_read(now, out);
  }
  // Ambiguous: the write may have landed. The next read tells (§5).
  if (result.status.is_transient()) {
    return acquire_retry_later(now, result_kind_, result.status, out);
  }
  fail(now, Status::permanent("writing the lease: " + result.status.to_string()), out);
}

void LeaseMachine::become_holder(TimePoint now, const WriteAttempt& attempt,
                                 const std::string& etag, bool adopted, LeaseActions& out) {
  epoch_ = attempt.epoch;
  renewal_count_ = attempt.renewal_count;
  period_start_ = attempt.sent_at;  // §4: a period starts when its write was sent
  etag_ = etag;
  acquire_attempts_.clear();
  held_record_.reset();
  held_etag_.clear();
  announced_holder_.reset();
  reset_backoff();
  phase_ = Phase::kHoldIdle;
  emit(out, LeaseEventKind::kAcquired, now, Status::ok(),
       fmt::format("acquired the lease for node {} at epoch {}{}", config_.node_id.value,
                   epoch_.value, adopted ? " (adopted a write whose answer was lost)" : ""));
  schedule_renewal(out);
}

// ---------------------------------------------------------------- renewal (§4, §5)

void LeaseMachine::schedule_renewal(LeaseActions& out) {
  phase_ = Phase::kHoldIdle;
  renew_attempts_.clear();
  wake(period_start_ + renewal_delay(config_.duration), out);
}

TimePoint LeaseMachine::attempt_deadline(TimePoint now) {
  // §4: while another attempt still fits — this one's cut-off, the next
  // backoff and a full attempt of the next one all end before the renewal
  // cutoff — an attempt gets duration/6 clamped to 1–5 s. Otherwise it is the
  // last attempt and may use everything up to the renewal cutoff.
  if (!pending_backoff_) pending_backoff_ = next_backoff();
  const TimePoint cutoff = renewal_cutoff();
  const Duration cut = attempt_cutoff(config_.duration);
  if (now + cut + *pending_backoff_ + cut < cutoff) return now + cut;
  return cutoff;
}

void LeaseMachine::send_renew_write(TimePoint now, LeaseActions& out) {
  assert(now < renewal_cutoff());
  WriteAttempt attempt{new_write_id(), now, epoch_, renewal_count_ + 1};
  phase_ = Phase::kRenewWrite;
  LeaseOp& op = issue(now, LeaseOpKind::kReplace, attempt_deadline(now), out);
  op.body =
      encode_lease_record(make_record(epoch_, attempt.renewal_count, false, attempt.write_id));
  op.etag = etag_;
  remember(renew_attempts_, std::move(attempt));
}

void LeaseMachine::send_renew_read(TimePoint now, LeaseActions& out) {
  assert(now < renewal_cutoff());
  phase_ = Phase::kRenewRead;
  ++counters_.renewal_reads;
  issue(now, LeaseOpKind::kRead, attempt_deadline(now), out);
}

void LeaseMachine::renew_retry_later(TimePoint now, const Status& why, bool need_read,
                                     LeaseActions& out) {
  // §4: retry only while the backoff ends before the renewal cutoff.
  const Duration backoff = next_backoff();
  if (now + backoff >= renewal_cutoff()) {
    return lose(now,
                Status::stopped(fmt::format(
                    "lease renewal failed and no retry fits before the renewal cutoff: {}",
                    why.to_string())),
                out);
  }
  phase_ = Phase::kRenewBackoff;
  renew_need_read_ = need_read;
  wake(now + backoff, out);
}

void LeaseMachine::on_renew_write(TimePoint now, const LeaseResult& result, LeaseActions& out) {
  if (result.status.is_ok()) {
    ++counters_.renewal_puts_ok;
    const WriteAttempt& attempt = renew_attempts_.back();
    period_start_ = attempt.sent_at;
    renewal_count_ = attempt.renewal_count;
    etag_ = result.etag;
    reset_backoff();
    emit(out, LeaseEventKind::kRenewed, now, Status::ok(),
         fmt::format("renewed the lease at epoch {} (renewal {})", epoch_.value, renewal_count_));
    return schedule_renewal(out);
  }
  if (result.status.is_precondition_failed() || result.status.is_not_found()) {
    ++counters_.renewal_puts_precondition_failed;
    // §5: an earlier attempt of ours may have landed late; read to find out.
    if (now >= renewal_cutoff()) {
      return lose(now, Status::stopped("lease renewal write failed at the renewal cutoff"), out);
    }
    return send_renew_read(now, out);
  }
  if (result.status.is_transient()) {
    ++counters_.renewal_puts_transient;
    return renew_retry_later(now, result.status, /*need_read=*/false, out);
  }
  ++counters_.renewal_puts_permanent;
  lose(now, Status::permanent("lease renewal: " + result.status.to_string()), out);
}

void LeaseMachine::on_renew_read(TimePoint now, const LeaseResult& result, LeaseActions& out) {
  if (result.status.is_transient()) {
    return renew_retry_later(now, result.status, /*need_read=*/true, out);
  }
  if (result.status.is_not_found()) {
    return lose(now, Status::fenced(fmt::format("lease object {} was deleted", key_)), out);
  }
  if (!result.status.is_ok()) {
    return lose(now, Status::permanent("lease renewal read: " + result.status.to_string()), out);
  }
  auto decoded = decode_lease_record(result.body);
  if (!decoded.is_ok()) {
    return lose(now, Status::corruption(fmt::format("{}: {}", key_, decoded.status().message())),
                out);
  }
  const LeaseRecordValue& record = decoded.value();
  if (record.holder_process_id != config_.process_id || record.epoch != epoch_) {
    // §4: lost to another holder: stop at once.
    return lose(
        now,
        Status::fenced(fmt::format("lease lost to another holder: {}", describe_holder(record))),
        out);
  }
  if (result.etag == etag_) {
    // Our confirmed version is still there; the failed write was not about it.
    return renew_retry_later(now, Status::transient("renewal write refused, lease unchanged"),
                             /*need_read=*/false, out);
  }
  if (record.released) {
    return lose(now,
                Status::fenced(fmt::format("lease released under our epoch {} by a write not ours",
                                           epoch_.value)),
                out);
  }
  const WriteAttempt* mine = find_attempt(renew_attempts_, record.write_id);
  if (mine == nullptr) {
    return lose(now,
                Status::fenced(fmt::format(
                    "lease at our epoch {} carries a write not of this renewal", epoch_.value)),
                out);
  }
  if (now >= renewal_cutoff()) {
    // §5: a late write counts only if found before the renewal cutoff.
    return lose(now, Status::stopped("found our late renewal write only after the renewal cutoff"),
                out);
  }
  // §5: adopt the late-landing write; its period began when it was sent.
  ++counters_.adoptions;
  period_start_ = mine->sent_at;
  renewal_count_ = mine->renewal_count;
  etag_ = result.etag;
  reset_backoff();
  emit(out, LeaseEventKind::kRenewed, now, Status::ok(),
       fmt::format("renewed the lease at epoch {} (renewal {}, adopted a late-landing write)",
                   epoch_.value, renewal_count_));
  schedule_renewal(out);
}

// ---------------------------------------------------------------- release (§6)

void LeaseMachine::maybe_start_release(TimePoint now, LeaseActions& out) {
  if (!release_requested_ || outstanding_) return;
  if (phase_ != Phase::kHoldIdle && phase_ != Phase::kRenewBackoff) return;
  wake_at_.reset();
  out.wake_at.reset();
  send_release_write(now, out);
}

void LeaseMachine::send_release_write(TimePoint now, LeaseActions& out) {
  if (now >= release_give_up_) return release_fail(now, Status::stopped("out of time"), out);
  WriteAttempt attempt{new_write_id(), now, epoch_, renewal_count_};
  phase_ = Phase::kReleaseWrite;
  ++counters_.release_puts;
  LeaseOp& op = issue(now, LeaseOpKind::kReplace,
                      std::min(now + attempt_cutoff(config_.duration), release_give_up_), out);
  // Same epoch, released = true: a successor takes over at once (§6).
  op.body = encode_lease_record(make_record(epoch_, renewal_count_, true, attempt.write_id));
  op.etag = etag_;
  remember(release_attempts_, std::move(attempt));
}

void LeaseMachine::send_release_read(TimePoint now, LeaseActions& out) {
  if (now >= release_give_up_) return release_fail(now, Status::stopped("out of time"), out);
  phase_ = Phase::kReleaseRead;
  issue(now, LeaseOpKind::kRead, std::min(now + attempt_cutoff(config_.duration), release_give_up_),
        out);
}

void LeaseMachine::release_fail(TimePoint now, Status why, LeaseActions& out) {
  phase_ = Phase::kLost;
  stop_reason_ = Status(why.code(), "lease release failed: " + why.message());
  emit(out, LeaseEventKind::kReleaseFailed, now, stop_reason_,
       stop_reason_.message() + "; a successor waits for the lease to expire");
}

void LeaseMachine::release_retry_later(TimePoint now, const Status& why, bool need_read,
                                       LeaseActions& out) {
  const Duration backoff = next_backoff();
  if (now + backoff >= release_give_up_) return release_fail(now, why, out);
  renew_need_read_ = need_read;
  phase_ = Phase::kReleaseBackoff;
  wake(now + backoff, out);
}

void LeaseMachine::on_release_write(TimePoint now, const LeaseResult& result, LeaseActions& out) {
  if (result.status.is_ok()) {
    phase_ = Phase::kReleased;
    emit(out, LeaseEventKind::kReleased, now, Status::ok(),
         fmt::format("released the lease for node {} at epoch {}", config_.node_id.value,
                     epoch_.value));
    return;
  }
  // Our release (or a late renewal) may have landed; look.
  if (result.status.is_precondition_failed() || result.status.is_not_found()) {
    return send_release_read(now, out);
  }
  if (result.status.is_transient()) return release_retry_later(now, result.status, false, out);
  release_fail(now, result.status, out);
}

void LeaseMachine::on_release_read(TimePoint now, const LeaseResult& result, LeaseActions& out) {
  if (result.status.is_transient()) return release_retry_later(now, result.status, true, out);
  if (!result.status.is_ok()) return release_fail(now, result.status, out);
  auto decoded = decode_lease_record(result.body);
  if (!decoded.is_ok()) return release_fail(now, decoded.status(), out);
  const LeaseRecordValue& record = decoded.value();
  if (record.holder_process_id != config_.process_id || record.epoch != epoch_) {
    return release_fail(now, Status::fenced("lease now held by " + describe_holder(record)), out);
  }
  if (record.released && find_attempt(release_attempts_, record.write_id) != nullptr) {
    phase_ = Phase::kReleased;
    emit(out, LeaseEventKind::kReleased, now, Status::ok(),
         fmt::format("released the lease for node {} at epoch {}", config_.node_id.value,
                     epoch_.value));
    return;
  }
  if (!record.released &&
      (result.etag == etag_ || find_attempt(renew_attempts_, record.write_id) != nullptr)) {
    // Our confirmed version, or a renewal of ours that landed late: release on top.
    etag_ = result.etag;
    renewal_count_ = record.renewal_count;
    return release_retry_later(now, Status::transient("release write refused"), false, out);
  }
  release_fail(now, Status::fenced("lease carries a write not ours at our epoch"), out);
}

// ---------------------------------------------------------------- helpers

void LeaseMachine::lose(TimePoint now, Status why, LeaseActions& out) {
  assert(!why.is_ok());
  phase_ = Phase::kLost;
  wake_at_.reset();
  out.wake_at.reset();
  stop_reason_ = std::move(why);
  emit(out, LeaseEventKind::kLost, now, stop_reason_,
       fmt::format("lost the lease for node {} at epoch {}: {}", config_.node_id.value,
                   epoch_.value, stop_reason_.to_string()));
}

void LeaseMachine::fail(TimePoint now, Status why, LeaseActions& out) {
  assert(!why.is_ok());
  phase_ = Phase::kFailed;
  wake_at_.reset();
  out.wake_at.reset();
  stop_reason_ = std::move(why);
  emit(out, LeaseEventKind::kAcquireFailed, now, stop_reason_,
       "could not acquire the lease: " + stop_reason_.to_string());
}

LeaseEvent& LeaseMachine::emit(LeaseActions& out, LeaseEventKind kind, TimePoint at, Status status,
                               std::string message) {
  LeaseEvent e;
  e.kind = kind;
  e.at = at;
  e.epoch = epoch_;
  e.status = std::move(status);
  e.message = std::move(message);
  out.events.push_back(std::move(e));
  return out.events.back();
}

LeaseOp& LeaseMachine::issue(TimePoint now, LeaseOpKind kind, TimePoint deadline,
                             LeaseActions& out) {
  assert(!outstanding_ && "at most one operation outstanding");
  assert(deadline > now);
  wake_at_.reset();
  out.wake_at.reset();
  LeaseOp op;
  op.id = next_op_id_++;
  op.kind = kind;
  op.key = key_;
  op.sent_at = now;
  op.deadline = deadline;
  outstanding_ = op;
  out.op = std::move(op);
  // The caller fills body and etag through this reference; keep both copies equal.
  return *out.op;
}

void LeaseMachine::wake(TimePoint at, LeaseActions& out) {
  assert(!outstanding_);
  wake_at_ = at;
  out.wake_at = at;
}

Duration LeaseMachine::next_backoff() {
  if (pending_backoff_) {
    Duration d = *pending_backoff_;
    pending_backoff_.reset();
    return d;
  }
  // Exponential from 100 ms, doubling to at most 1 s, with "equal jitter":
  // half fixed, half random, so retries of processes spread out.
  const int step = std::min(backoff_step_, 10);
  ++backoff_step_;
  const Duration base = std::min<Duration>(kBackoffInitial * (int64_t{1} << step), kBackoffMax);
  return base / 2 + random_.between(Duration(0), base / 2);
}

std::string LeaseMachine::new_write_id() {
  uint64_t a = random_.next();
  uint64_t b = random_.next();
  return fmt::format("{:016x}{:016x}", a, b);
}

LeaseRecordValue LeaseMachine::make_record(Epoch epoch, uint64_t renewal_count, bool released,
                                           const std::string& write_id) const {
  LeaseRecordValue r;
  r.node_id = config_.node_id;
  r.epoch = epoch;
  r.holder_process_id = config_.process_id;
  r.duration = config_.duration;
  r.renewal_count = renewal_count;
  r.released = released;
  r.write_id = write_id;
  return r;
}

const LeaseMachine::WriteAttempt* LeaseMachine::find_attempt(
    const std::vector<WriteAttempt>& attempts, const std::string& write_id) const {
  for (const auto& a : attempts) {
    if (a.write_id == write_id) return &a;
  }
  return nullptr;
}

void LeaseMachine::remember(std::vector<WriteAttempt>& attempts, WriteAttempt attempt) {
  if (attempts.size() >= kAttemptsRememberedMax) attempts.erase(attempts.begin());
  attempts.push_back(std::move(attempt));
}

}  // namespace dex
