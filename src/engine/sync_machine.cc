#include "engine/sync_machine.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/invariant.h"

namespace dex {

namespace {
double unit(Random& r) { return static_cast<double>(r.uniform(1'000'000)) / 1e6; }
}  // namespace

SyncMachine::SyncMachine(Config config, AttributeSyncReport report, TimePoint now)
    : config_(std::move(config)), random_(config_.seed), report_(std::move(report)) {
  DEX_INVARIANT(config_.budget > Duration(0), "a transaction has a budget");
  DEX_INVARIANT(config_.batch_size > 0, "a batch holds rows");
  // The first read follows a fresh describe: a standby opened its table at
  // startup, maybe long before it took over, and a column added since must
  // not be taken for missing.
  next_refresh_ = now;
  report_.state = "claiming";
}

SyncAction SyncMachine::next(TimePoint now, Duration lease_remaining) {
  SyncAction a;
  if (phase_ == Phase::kFenced || phase_ == Phase::kStopped) {
    a.kind = SyncAction::Kind::kStop;
    return a;
  }
  if (now < retry_at_) {
    a.until = retry_at_;
    return a;
  }
  const bool room = sync_may_begin(lease_remaining, config_.budget);
  if (phase_ == Phase::kClaiming) {
    if (!room) {
      a.until = now + config_.lease_wait;
      return a;
    }
    a.kind = SyncAction::Kind::kClaim;
    return a;
  }
  a.watermark = watermark_;
  if (plan_) {
    if (!room) {
      a.until = now + config_.lease_wait;
      return a;
    }
    a.kind = SyncAction::Kind::kCommit;
    a.plan = &*plan_;
    return a;
  }
  if (now >= next_refresh_) {
    a.kind = SyncAction::Kind::kRefresh;
    return a;
  }
  if (oldest_kept_slot_ != 0 && oldest_kept_slot_ <= watermark_ &&
      (!trimmed_once_ || now - last_trim_ >= config_.trim_interval)) {
    a.kind = SyncAction::Kind::kTrim;
    return a;
  }
  if (idle_) {
    idle_ = false;  // one wait, then a read
    a.until = now + config_.idle_poll;
    a.wakeable = true;
    return a;
  }
  a.kind = SyncAction::Kind::kRead;
  a.cursor = cursor_;
  return a;
}

void SyncMachine::failed(std::string what, const Status& status, TimePoint now) {
  ++failures_in_row_;
  retry_at_ = now + sync_backoff(config_.retry, failures_in_row_);
  report_.state = "retrying";
  ++report_.failures;
  report_.last_error = fmt::format("{}: {}", what, status.message());
}

void SyncMachine::fenced(const attrstore::Watermark& found) {
  phase_ = Phase::kFenced;
  plan_.reset();
  report_.state = "fenced";
  report_.last_error =
      fmt::format("epoch {} took the watermark: this process no longer syncs", found.epoch);
}

void SyncMachine::claimed(const StatusOr<attrstore::CommitResult>& result, TimePoint now) {
  DEX_INVARIANT(phase_ == Phase::kClaiming || phase_ == Phase::kStopped, "claims come first");
  if (phase_ == Phase::kStopped) return;
  if (!result.is_ok()) return failed("taking the watermark", result.status(), now);
  if (result->outcome == attrstore::CommitOutcome::kFenced) return fenced(result->found);
  phase_ = Phase::kSyncing;
  watermark_ = result->found.slot;
  failures_in_row_ = 0;
  report_.state = "syncing";
  report_.watermark_slot = watermark_;
  report_.last_error.clear();
}

void SyncMachine::read(StatusOr<PendingRead> result, const attrstore::TableSchema& schema,
                       TimePoint now, int64_t now_unix_ms) {
  if (phase_ != Phase::kSyncing) return;
  DEX_INVARIANT(!plan_, "a read follows a commit");
  if (!result.is_ok()) {
    if (result.status().code() == Code::kStopped) {
      phase_ = Phase::kStopped;
      report_.state = "stopped";
      return;
    }
    return failed("reading the entries to sync", result.status(), now);
  }
  PendingRead& r = result.value();
  if (!r.skipped_to.empty() && r.skipped_to > cursor_) cursor_ = std::move(r.skipped_to);
  oldest_kept_slot_ = r.oldest_kept_slot;
  if (r.entries.empty()) {
    idle_ = true;
    report_.state = "idle";
    report_.lag_slots = 0;
    report_.lag_seconds = 0;
    return;
  }
  plan_ = plan_sync(r.entries, schema, config_.delete_rows, config_.batch_size);
  DEX_INVARIANT(plan_->through_slot > watermark_, "a plan moves the watermark forward");
  report_.misfits += plan_->misfits.size();
  for (auto& m : plan_->misfits) misfits_.push_back(std::move(m));
  plan_->misfits.clear();
  report_.lag_slots = r.entries.back().entry.slot() - watermark_;
  report_.lag_seconds = std::max<double>(
      0, static_cast<double>(now_unix_ms - r.entries.front().entry.at_unix_ms()) / 1000.0);
}

void SyncMachine::committed(const StatusOr<attrstore::CommitResult>& result, TimePoint now) {
  if (phase_ != Phase::kSyncing) return;
  DEX_INVARIANT(plan_.has_value(), "a commit carries a plan");
  if (!result.is_ok()) {
    // The same plan is tried again: a commit whose answer was lost finds the
    // watermark moved (kMoved) and is not applied twice.
    return failed(fmt::format("writing log slots {}..{}", watermark_ + 1, plan_->through_slot),
                  result.status(), now);
  }
  switch (result->outcome) {
    case attrstore::CommitOutcome::kCommitted:
      DEX_INVARIANT(result->found.slot == plan_->through_slot, "the table took the plan");
      watermark_ = plan_->through_slot;
      cursor_ = plan_->last_key;
      ++report_.transactions;
      report_.rows += plan_->rows.size();
      report_.state = "syncing";
      report_.last_error.clear();
      break;
    case attrstore::CommitOutcome::kFenced:
      return fenced(result->found);
    case attrstore::CommitOutcome::kMoved:
      // A lost answer to a commit that landed, or an operator's change: follow
      // the table (entries at or below its watermark are not written again).
      watermark_ = result->found.slot;
      cursor_.clear();
      break;
  }
  plan_.reset();
  failures_in_row_ = 0;
  report_.watermark_slot = watermark_;
}

void SyncMachine::trimmed(TimePoint now) {
  last_trim_ = now;
  trimmed_once_ = true;
  oldest_kept_slot_ = 0;  // the next read tells
}

void SyncMachine::refreshed(TimePoint now) {
  next_refresh_ = now + jittered(config_.schema_sync_interval, unit(random_));
}

std::vector<SyncMisfit> SyncMachine::take_misfits() {
  std::vector<SyncMisfit> out;
  out.swap(misfits_);
  return out;
}

}  // namespace dex
