#include "lease/lease_keeper.h"

#include <random>

#include <spdlog/spdlog.h>

namespace dex {
namespace {

// How often acquire() repeats that it is still waiting: often while the
// holder is overdue (a countdown to the takeover), rarely while it renews.
constexpr Duration kWaitProgressLogIntervalOverdue = seconds(5);
constexpr Duration kWaitProgressLogInterval = std::chrono::minutes(5);

double seconds_of(Duration d) { return std::chrono::duration<double>(d).count(); }

LeaseConfig machine_config(const LeaseKeeperOptions& o) {
  LeaseConfig c;
  c.node_id = o.node_id;
  c.process_id = o.process_id;
  c.duration = o.duration;
  c.fail_if_held = o.fail_if_held;
  c.holder_is_stopped = o.holder_is_stopped;
  c.seed = o.seed;
  c.held_poll_interval = o.held_poll_interval;
  c.hot_mode = o.hot_mode;
  c.standby_hot = o.standby_hot;
  c.lagging_takeover_delay = o.lagging_takeover_delay;
  if (c.seed == 0) {
    std::random_device device;
    c.seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  }
  return c;
}

}  // namespace

LeaseKeeper::LeaseKeeper(ObjectStore& store, Clock& clock, LeaseKeeperOptions options)
    : store_(store), clock_(clock), machine_(machine_config(options)) {}

LeaseKeeper::~LeaseKeeper() { stop(); }

Status LeaseKeeper::acquire() {
  Lock lock(mu_);
  assert(!started_ && "acquire() is called once");
  started_ = true;
  if (stop_requested_) return Status::stopped("lease keeper stopped");
  apply(lock, machine_.start(clock_.now()));
  drive(lock, [this] {
    LeaseState s = machine_.state();
    return s != LeaseState::kIdle && s != LeaseState::kAcquiring;
  });
  switch (machine_.state()) {
    case LeaseState::kHolding:
      return Status::ok();
    case LeaseState::kFailed:
    case LeaseState::kLost:
      return machine_.stop_reason();
    default:
      return Status::stopped("lease keeper stopped before acquiring the lease");
  }
}

void LeaseKeeper::start_renewing(std::function<void(const Status&)> on_lost) {
  Lock lock(mu_);
  assert(!thread_.joinable() && "start_renewing() is called once");
  on_lost_ = std::move(on_lost);
  // A late start is safe: the machine sees the late wake and stops if the
  // renewal cutoff has passed, and on_lost reports it on the keeper thread.
  thread_ = std::thread([this] { run_thread(); });
}

void LeaseKeeper::run_thread() {
  Lock lock(mu_);
  drive(lock, [] { return false; });
  if (machine_.state() == LeaseState::kLost && !release_requested_ && !lost_reported_ && on_lost_) {
    lost_reported_ = true;
    Status why = machine_.stop_reason();
    auto callback = on_lost_;
    lock.unlock();
    callback(why);
  }
}

bool LeaseKeeper::is_valid() const {
  Lock lock(mu_);
  return machine_.is_valid(clock_.now());
}

Duration LeaseKeeper::valid_for() const {
  Lock lock(mu_);
  const TimePoint now = clock_.now();
  if (!machine_.is_valid(now)) return Duration(0);
  auto end = machine_.period_end();
  return end ? std::max(Duration(0), *end - now) : Duration(0);
}

Epoch LeaseKeeper::epoch() const {
  Lock lock(mu_);
  return machine_.epoch();
}

LeaseState LeaseKeeper::state() const {
  Lock lock(mu_);
  return machine_.state();
}

void LeaseKeeper::set_standby_hot(bool hot) {
  Lock lock(mu_);
  machine_.on_standby_hot(hot);
}

LeaseCounters LeaseKeeper::counters() const {
  Lock lock(mu_);
  return machine_.counters();
}

std::optional<LeaseRecordValue> LeaseKeeper::observed_holder() const {
  Lock lock(mu_);
  return machine_.held_record();
}

StatusOr<LeaseRecordValue> LeaseKeeper::read_lease(Duration timeout) const {
  auto data = store_.get(lease_key(machine_.config().node_id), {timeout});
  if (!data.is_ok()) return data.status();
  return decode_lease_record(data->body);
}

Status LeaseKeeper::release() {
  Lock lock(mu_);
  if (stop_requested_) return Status::stopped("lease keeper stopped");
  release_requested_ = true;
  cv_.notify_all();
  if (thread_.joinable()) {
    // The keeper thread sends the release and exits when the machine is done.
    lock.unlock();
    thread_.join();
    lock.lock();
  } else if (started_) {
    drive(lock, [] { return false; });
  } else {
    return Status::ok();
  }
  switch (machine_.state()) {
    case LeaseState::kReleased:
      return Status::ok();
    case LeaseState::kIdle:
      return Status::ok();
    default:
      return machine_.stop_reason().is_ok() ? Status::stopped("lease keeper stopped")
                                            : machine_.stop_reason();
  }
}

void LeaseKeeper::stop() {
  {
    Lock lock(mu_);
    stop_requested_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void LeaseKeeper::drive(Lock& lock, const std::function<bool()>& until) {
  // Bounded: each iteration performs one op or waits for one wake; the machine
  // reaches a terminal state or `until()` / stop() ends the loop.
  while (!stop_requested_ && !until()) {
    if (release_requested_ && !release_sent_) {
      release_sent_ = true;
      apply(lock, machine_.request_release(clock_.now()));
      continue;
    }
    if (next_op_) {
      LeaseOp op = std::move(*next_op_);
      next_op_.reset();
      lock.unlock();
      LeaseResult result = perform(op);
      lock.lock();
      TimePoint now = clock_.now();
      if (now > op.deadline && result.status.is_ok()) {
        result.status = Status::transient("answer arrived after the attempt cut-off");
      }
      apply(lock, machine_.on_result(now, result));
      continue;
    }
    if (wake_at_) {
      TimePoint at = *wake_at_;
      bool interrupted = clock_.wait_until(lock, cv_, at, [this] {
        return stop_requested_ || (release_requested_ && !release_sent_);
      });
      if (interrupted) continue;
      TimePoint now = clock_.now();
      log_wait_progress(now);
      apply(lock, machine_.on_wake(now));
      continue;
    }
    return;  // terminal: nothing to perform or wait for
  }
}

void LeaseKeeper::apply(Lock& lock, LeaseActions actions) {
  (void)lock;
  if (actions.op) {
    next_op_ = std::move(actions.op);
    wake_at_.reset();
  } else if (actions.wake_at) {
    wake_at_ = actions.wake_at;
  } else if (!machine_.op_outstanding()) {
    wake_at_.reset();
  }
  for (LeaseEvent& e : actions.events) {
    switch (e.kind) {
      case LeaseEventKind::kWaiting:
        spdlog::info("{}", e.message);
        last_progress_log_ = e.at;
        break;
      case LeaseEventKind::kAcquireRetry:
        // Every failed attempt, naming the store: an unreachable or refusing
        // store must not look like a silent wait (the backoff bounds the rate).
        spdlog::warn("lease of node {} in {}: {}", machine_.config().node_id.value,
                     store_.describe(), e.message);
        break;
      case LeaseEventKind::kAcquired:
      case LeaseEventKind::kReleased:
        spdlog::info("{}", e.message);
        break;
      case LeaseEventKind::kRenewed:
        // Routine renewals are debug; an adopted late write says storage had trouble.
        if (e.message.find("adopted") != std::string::npos) {
          spdlog::info("{}", e.message);
        } else {
          spdlog::debug("{}", e.message);
        }
        break;
      case LeaseEventKind::kLost:
        spdlog::error("{}", e.message);
        break;
      case LeaseEventKind::kAcquireFailed:
        spdlog::error("{} (object store {})", e.message, store_.describe());
        break;
      case LeaseEventKind::kReleaseFailed:
        spdlog::warn("{}", e.message);
        break;
    }
  }
}

void LeaseKeeper::log_wait_progress(TimePoint now) {
  // The waiting line itself comes once per holder (kWaiting); this one is sparse.
  std::optional<HeldLeaseView> view = machine_.watching(now);
  if (!view) return;
  const Duration interval =
      view->overdue ? kWaitProgressLogIntervalOverdue : kWaitProgressLogInterval;
  if (last_progress_log_ && now - *last_progress_log_ < interval) return;
  last_progress_log_ = now;
  const NodeId& node = machine_.config().node_id;
  if (view->overdue) {
    spdlog::info(
        "lease of node {} held by {} (epoch {}) not renewed for {:.1f}s; taking it over in at "
        "most {:.1f}s",
        node.value, view->holder.value, view->epoch.value,
        seconds_of(now - view->version_first_seen),
        seconds_of(std::max<Duration>(Duration(0), view->takeover_at - now)));
  } else {
    spdlog::info("still waiting for the lease of node {}: held by {} (epoch {}, renewal {})",
                 node.value, view->holder.value, view->epoch.value, view->renewal_count);
  }
}

LeaseResult LeaseKeeper::perform(const LeaseOp& op) {
  RequestOptions options;
  // The deadline is the cut-off; a zero timeout would mean "backend default".
  options.timeout = std::max<Duration>(op.deadline - clock_.now(), milliseconds(1));
  LeaseResult result;
  result.op_id = op.id;
  switch (op.kind) {
    case LeaseOpKind::kRead: {
      auto got = store_.get(op.key, options);
      result.status = got.status();
      if (got.is_ok()) {
        result.etag = got->etag;
        result.body = std::move(got->body);
      }
      break;
    }
    case LeaseOpKind::kCreate:
    case LeaseOpKind::kReplace: {
      PutCondition condition =
          op.kind == LeaseOpKind::kCreate ? PutCondition::create() : PutCondition::replace(op.etag);
      auto put = store_.put(op.key, op.body, condition, options);
      result.status = put.status();
      if (put.is_ok()) result.etag = put.value();
      break;
    }
  }
  return result;
}

}  // namespace dex
