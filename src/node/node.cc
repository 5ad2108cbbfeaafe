#include "node/node.h"

#include <algorithm>
#include <charconv>
#include <iostream>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "dex/api.pb.h"
#include "engine/engine.h"
#include "engine/local_store.h"
#include "lease/lease_keeper.h"
#include "log/log_writer.h"
#include "metrics/metrics.h"
#include "objstore/object_store.h"
#include "standby/follower.h"

namespace dex {
namespace {

constexpr Duration kTick = milliseconds(100);
// Calls that got the engine before a release finish first; never past the
// stuck-store limit (which would then exit 1): a call stuck in the engine
// leaves it undeleted rather than deleted under it.
constexpr Duration kEngineUseWait = seconds(60);

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

StandbyState standby_state_of(FollowerState state) {
  switch (state) {
    case FollowerState::kBootstrapping:
      return StandbyState::kBootstrapping;
    case FollowerState::kFollowing:
      return StandbyState::kFollowing;
    case FollowerState::kBehind:
      return StandbyState::kBehind;
    case FollowerState::kRestarting:
      return StandbyState::kRestarting;
    case FollowerState::kFailed:
      return StandbyState::kFailed;
  }
  return StandbyState::kNotStandby;
}

// NodeStatus::role: what the process is, in a word, from the machine's phase.
std::string role_name(NodePhase phase, bool stopping, bool hot) {
  switch (phase) {
    case NodePhase::kIdle:
      return "starting";
    case NodePhase::kAcquiring:
    case NodePhase::kTakeoverBackoff:
    case NodePhase::kClosingStore:
    case NodePhase::kHoldOff:
      if (stopping) return "stopping";
      return hot ? "hot-standby" : "cold-standby";
    case NodePhase::kOpening:
      return "taking-over";
    case NodePhase::kActive:
      return "active";
    case NodePhase::kDraining:
    case NodePhase::kReleasing:
      return stopping ? "stopping" : "stepping-down";
    case NodePhase::kStopped:
      return "stopping";
  }
  return "starting";
}

NodeMachineConfig machine_config(const NodeSettings& settings, const NodeTestHooks& hooks) {
  NodeMachineConfig c;
  c.hot = settings.standby_mode == StandbyMode::kHot;
  c.attempt_drain_timeout = settings.attempt_drain_timeout;
  c.step_down_hold_off = settings.step_down_hold_off;
  c.acquisition_budget = (c.hot ? settings.lagging_takeover_delay : Duration(0)) + seconds(3);
  c.stuck_store_limit = hooks.stuck_store_limit;
  return c;
}

}  // namespace

// What one active period holds, in the order it was built.
class Node::Serving {
 public:
  std::unique_ptr<LeaseKeeper> keeper;
  std::shared_ptr<EngineLogHook> hook;
  std::unique_ptr<LogWriter> log;
  std::unique_ptr<Engine> engine;
  LeaseCounters counters_seen;
};

Node::Node(NodeSettings settings, NodeRuntime runtime, ObjectStore& store, Clock& clock,
           NodeTestHooks hooks)
    : settings_(std::move(settings)),
      runtime_(std::move(runtime)),
      hooks_(std::move(hooks)),
      store_(store),
      clock_(clock),
      process_id_(make_process_id()),
      hot_(settings_.standby_mode == StandbyMode::kHot),
      own_metrics_(runtime_.metrics == nullptr ? std::make_unique<Metrics>() : nullptr),
      metrics_(runtime_.metrics != nullptr ? *runtime_.metrics : *own_metrics_),
      machine_(machine_config(settings_, hooks_), process_id_) {
  board_.set_standby(fmt::format("this process of node {} is starting up", settings_.node_id),
                     false);
  status_.process_id = process_id_;
  status_.node_id = settings_.node_id;
  status_.hot = hot_;
}

Node::~Node() {
  if (acquirer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(acquire_mu_);
      if (acquiring_) acquiring_->stop();
    }
    acquirer_.join();
  }
  if (closer_.joinable()) {
    // A stuck close is left behind: the process exits (its restart frees the store).
    if (closer_finished_.wait_for(seconds(2)) == std::future_status::ready) {
      closer_.join();
    } else {
      closer_.detach();
    }
  }
  stop_following();
  if (serving_ && serving_->engine) serving_->engine->stop();
}

void Node::set_listen_description(std::string listen) {
  std::lock_guard<std::mutex> lock(mu_);
  listen_ = std::move(listen);
}

void Node::take_locked(NodeActions actions) {
  for (NodeCommand& c : actions.commands) pending_.push_back(std::move(c));
  wake_at_ = actions.wake_at;
  cv_.notify_all();
}

void Node::signal() {
  std::lock_guard<std::mutex> lock(mu_);
  take_locked(machine_.signal(now()));
}

int Node::run() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    spdlog::info("API on {}: it answers UNAVAILABLE until this process holds the lease", listen_);
    take_locked(machine_.start(now()));
  }
  TimePoint next_tick = now();
  // Bounded by the machine: it ends in kStopped, which sets exit_code_.
  while (true) {
    std::optional<NodeCommand> command;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (exit_code_) break;
      TimePoint until = next_tick;
      if (wake_at_ && *wake_at_ < until) until = *wake_at_;
      clock_.wait_until(lock, cv_, until, [&] { return !pending_.empty(); });
      if (!pending_.empty()) {
        command = std::move(pending_.front());
        pending_.pop_front();
      } else if (wake_at_ && now() >= *wake_at_) {
        if (machine_.phase() == NodePhase::kDraining) {
          const size_t running =
              serving_ && serving_->engine ? serving_->engine->attempts_running() : 0;
          take_locked(machine_.attempts_running(now(), running));
        } else {
          take_locked(machine_.on_wake(now()));
        }
      }
    }
    if (command) execute(*command);
    if (now() >= next_tick) {
      tick();
      next_tick = now() + kTick;
    }
  }
  if (acquirer_.joinable()) acquirer_.join();
  stop_following();
  std::lock_guard<std::mutex> lock(mu_);
  return *exit_code_;
}

void Node::execute(const NodeCommand& command) {
  spdlog::debug("node {}: {}", settings_.node_id, node_command_name(command.kind));
  switch (command.kind) {
    case NodeCommandKind::kFollow:
      start_following();
      break;
    case NodeCommandKind::kAcquire:
      start_acquire();
      break;
    case NodeCommandKind::kInterruptAcquire: {
      std::lock_guard<std::mutex> lock(acquire_mu_);
      if (acquiring_ && acquiring_->state() == LeaseState::kAcquiring) acquiring_->stop();
      break;
    }
    case NodeCommandKind::kOpen:
      open_serving();
      break;
    case NodeCommandKind::kBeginDrain:
      if (serving_ && serving_->engine) {
        spdlog::info(
            "node {} epoch {}: handing out no new task, draining running attempts for up to {}",
            settings_.node_id, serving_->keeper->epoch().value,
            format_duration(settings_.attempt_drain_timeout));
        serving_->engine->begin_drain();
      }
      break;
    case NodeCommandKind::kRelease:
      release_serving(command.stays_standby);
      break;
    case NodeCommandKind::kCloseStore:
      close_store();
      break;
    case NodeCommandKind::kReadLease:
      read_lease();
      break;
    case NodeCommandKind::kAnswerStepDown:
      answer_step_down(command.step_down);
      break;
    case NodeCommandKind::kStopAtOnce:
      stop_at_once(command.reason);
      break;
    case NodeCommandKind::kReleaseAndFail:
      release_and_fail(command.reason);
      break;
    case NodeCommandKind::kExit:
      exit_with(command);
      break;
  }
  board_.set_describe_refused(machine_describe_refused());
  publish_status();
}

bool Node::machine_describe_refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return machine_.describe_refused();
}

LeaseKeeperOptions Node::lease_options() const {
  LeaseKeeperOptions o;
  o.node_id = NodeId(settings_.node_id);
  o.process_id = ProcessId(process_id_);
  o.duration = settings_.lease_duration;
  o.fail_if_held = settings_.lease_fail_if_held;
  o.holder_is_stopped = runtime_.holder_is_stopped;
  if (hot_) {
    // standby.heldLeasePollInterval is a hot-mode setting; cold polls at the
    // lease's own interval (held_poll_interval of lease_machine.h).
    o.held_poll_interval = settings_.held_lease_poll_interval;
    o.lagging_takeover_delay = settings_.lagging_takeover_delay;
    o.hot_mode = true;
    o.standby_hot = follower_ && follower_->hot();  // then tick() reports each change
  }
  return o;
}

void Node::start_acquire() {
  if (acquirer_.joinable()) acquirer_.join();
  spdlog::info("acquiring the lease of node {} in {} (lease {}, standby {})", settings_.node_id,
               store_.describe(), format_duration(settings_.lease_duration),
               standby_mode_name(settings_.standby_mode));
  auto keeper = std::make_unique<LeaseKeeper>(store_, clock_, lease_options());
  LeaseKeeper* k = keeper.get();
  {
    std::lock_guard<std::mutex> lock(acquire_mu_);
    acquiring_ = std::move(keeper);
  }
  acquirer_ = std::thread([this, k] {
    Status s = k->acquire();
    std::lock_guard<std::mutex> lock(mu_);
    if (s.is_ok()) {
      take_locked(machine_.acquired(now(), k->epoch()));
    } else {
      const TimePoint failed_at = now();
      NodeActions actions = machine_.acquire_failed(failed_at, s);
      if (machine_.phase() == NodePhase::kTakeoverBackoff && actions.wake_at) {
        spdlog::warn(
            "takeover failed before holding the lease ({}); still following the log, trying "
            "again in {} s",
            s.to_string(), to_ms(*actions.wake_at - failed_at) / 1000);
      }
      take_locked(std::move(actions));
    }
  });
}

void Node::start_following() {
  if (!hot_ || follower_) return;
  FollowerOptions fo;
  fo.node_id = NodeId(settings_.node_id);
  fo.local_store_path = runtime_.local_store_path;
  fo.poll = settings_.held_lease_poll_interval;
  fo.behind_lag_threshold = settings_.behind_lag_threshold;
  follower_ = std::make_unique<Follower>(store_, clock_, fo);
  follower_->start();
}

void Node::stop_following() {
  if (!follower_) return;
  follower_->stop();
  follower_.reset();
  metrics_.set_standby_state(StandbyState::kNotStandby);
}

Status Node::open_log(Serving& s, std::optional<Slot> followed_to) {
  s.hook = std::make_shared<EngineLogHook>();
  LogWriterOptions o;
  o.node_id = NodeId(settings_.node_id);
  o.process_id = ProcessId(process_id_);
  o.epoch = s.keeper->epoch();
  o.on_durable = s.hook->on_durable();
  o.on_batch_written = [this](Duration latency, size_t records) {
    metrics_.log_append(latency, records);
  };
  o.epoch_start_unix_ms = unix_ms_now();
  // At most 5 ms: under load a batch waits up to a quarter of the last write's latency
  // (milliseconds on object storage, a fraction of one on a local disk) to fill up.
  o.batch_linger_max = milliseconds(5);
  if (followed_to) o.end_hint = *followed_to;  // list the log's tail only
  LeaseKeeper* held = s.keeper.get();
  s.log = std::make_unique<LogWriter>(
      store_, clock_, o, [held] { return held->is_valid(); },
      [this](const Status& why) {
        spdlog::error("log stopped: {}", why.to_string());
        board_.set_inactive(
            fmt::format("log stopped for node {}: {}", settings_.node_id, why.message()));
        std::lock_guard<std::mutex> lock(mu_);
        take_locked(machine_.fatal(now(), why));
      });
  return s.log->open();
}

EngineOptions Node::engine_options(Serving& s, std::shared_ptr<HandedLocalStore> handed) {
  EngineOptions eo;
  eo.node_id = NodeId(settings_.node_id);
  eo.process_id = ProcessId(process_id_);
  eo.epoch = s.keeper->epoch();
  eo.local_store_path = runtime_.local_store_path;
  eo.log_hook = s.hook;
  eo.handed_store = std::move(handed);
  eo.snapshots.interval = settings_.snapshots.interval;
  eo.snapshots.every_records = settings_.snapshots.every_records;
  eo.snapshots.keep = settings_.snapshots.keep;
  eo.values.threshold_bytes = settings_.values.blob_threshold_bytes;
  eo.values.value_bytes_max = settings_.values.max_size_bytes;
  eo.values.cache_bytes_max = settings_.values.blob_cache_bytes;
  eo.values.message_bytes_max = values_message_bytes_max(settings_.values);
  eo.values.collect_interval = settings_.values.blob_collect_interval;
  eo.values.collect_min_age = settings_.values.blob_min_age;
  eo.flow_retention_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(settings_.flows.retention).count();
  eo.worker_reconnect_grace = settings_.flows.worker_reconnect_grace;
  eo.on_attempt_ended = [this](flow::AttemptOutcome o) { metrics_.attempt_ended(o); };
  eo.on_flow_ended = [this](flow::FlowStatus st) { metrics_.flow_ended(st); };
  eo.on_runs_deleted = [this](size_t runs) { metrics_.runs_deleted(runs); };
  eo.on_applied = [this](const flow::Effects& fx) { metrics_.flow_effects(fx); };
  eo.on_blobs_collected = [this](const SweepCounts& c) {
    metrics_.blobs_collected(c.deleted, c.bytes_freed, c.delete_errors);
  };
  // Attribute Store sync: each transaction ends within a quarter of the lease
  // (spec: Lease duration and alerts) and begins only with that much left.
  const auto& stores = settings_.attribute_store.stores;
  assert(stores.size() == runtime_.attribute_tables.size());
  for (size_t i = 0; i < stores.size(); ++i)
    eo.attribute_stores.push_back({stores[i], runtime_.attribute_tables[i]});
  eo.attribute_store_settings = settings_.attribute_store;
  // syncAttemptTimeout may shorten it, never lengthen it.
  eo.attribute_sync_budget =
      std::min(settings_.lease_duration / 4, settings_.attribute_store.sync_attempt_timeout);
  LeaseKeeper* held = s.keeper.get();
  eo.lease_remaining = [held] { return held->valid_for(); };
  eo.on_attribute_sync = [this](const AttributeSyncReport& r) {
    metrics_.attribute_sync({r.store, r.lag_seconds, r.lag_slots, r.watermark_slot, r.transactions,
                             r.failures, r.rows, r.misfits});
  };
  return eo;
}

void Node::open_serving() {
  const TimePoint took_lease = now();
  serving_ = std::make_unique<Serving>();
  Serving& s = *serving_;
  {
    std::lock_guard<std::mutex> lock(acquire_mu_);
    s.keeper = std::move(acquiring_);
  }
  assert(s.keeper != nullptr);
  released_keeper_.reset();
  const Epoch epoch = s.keeper->epoch();
  s.keeper->start_renewing([this](const Status& why) {
    metrics_.lease_renewal(LeaseRenewal::kLost);
    spdlog::error("lease lost: {}", why.to_string());
    board_.set_inactive(
        fmt::format("lease lost for node {}: {}", settings_.node_id, why.message()));
    std::lock_guard<std::mutex> lock(mu_);
    take_locked(machine_.fatal(now(), why));
  });
  // A hot standby hands its open local store and the last slot it applied to
  // the engine: no close and reopen, and the log writer lists only the tail.
  std::optional<Slot> followed_to;
  std::shared_ptr<HandedLocalStore> handed;
  if (follower_) {
    auto store = follower_->stop_and_hand_over();
    followed_to = follower_->status().applied;
    if (store) handed = std::make_shared<HandedLocalStore>(HandedLocalStore{std::move(store)});
    stop_following();
  }

  auto fail = [&](const std::string& message) {
    spdlog::error("{}", message);
    std::lock_guard<std::mutex> lock(mu_);
    take_locked(machine_.open_failed(now(), Status::permanent(message)));
  };
  const TimePoint engine_opening = now();
  bool caught_up = false;
  if (!handed) {
    // Cold (or a follower with no healthy store): bring the store up to the
    // log's end with parallel slot reads, as a follower would, before the log
    // opens (which then lists only the tail, from the slot reached) and the
    // engine replays the rest through the EpochStart (issue 30). On an error
    // the engine opens the store itself and reports what is wrong.
    auto caught = catch_up_local_store(store_, NodeId(settings_.node_id), runtime_.local_store_path,
                                       Slot(std::numeric_limits<uint64_t>::max()),
                                       RequestOptions{seconds(10)});
    if (caught.is_ok()) {
      spdlog::info("local store {}: {}; {} log slots ({} records) applied in {} ms",
                   runtime_.local_store_path.string(), caught->how, caught->slots_applied,
                   caught->records_applied, to_ms(now() - engine_opening));
      followed_to = caught->applied;
      handed = std::make_shared<HandedLocalStore>(HandedLocalStore{std::move(caught->sm)});
      caught_up = true;
    } else {
      spdlog::warn(
          "catching the local store up before the engine opens failed ({}); the engine "
          "opens it itself",
          caught.status().to_string());
    }
  }
  if (Status st = open_log(s, followed_to); !st.is_ok()) {
    return fail(fmt::format("cannot open the log: {}", st.to_string()));
  }
  LeaseKeeper* held = s.keeper.get();
  EngineOptions eo = engine_options(s, std::move(handed));
  auto opened = Engine::open(eo, store_, *s.log, clock_);
  if (!opened.is_ok()) {
    (void)s.log->close();  // nothing was acknowledged; the writer stops either way
    return fail(fmt::format("cannot open the engine: {}", opened.status().to_string()));
  }
  s.engine = std::move(opened).value();
  // After a catch-up the engine's account is of the store handed to it; the
  // line above told how the store was made usable.
  if (!caught_up) {
    spdlog::info("local store {}: {}", runtime_.local_store_path.string(),
                 s.engine->local_store_report());
  }
  // The machine is active before the board says so, so a step down that
  // sees the role active is never refused as "opening"; commands it queues
  // run on this thread after the board is set.
  {
    std::lock_guard<std::mutex> lock(mu_);
    take_locked(machine_.opened(now()));
  }
  board_.set_active(s.engine.get(), {settings_.node_id, epoch, process_id_},
                    [held] { return held->is_valid(); });
  metrics_.set_active(true);
  metrics_.set_node_epoch(epoch.value);
  if (hot_) {
    const uint64_t replayed = followed_to ? s.log->epoch_start_slot().value - followed_to->value
                                          : s.log->epoch_start_slot().value + 1;
    spdlog::info(
        "took over as the active process: {} log slots replayed after following, engine open "
        "{} ms, lease to serving {} ms",
        replayed, to_ms(now() - engine_opening), to_ms(now() - took_lease));
  }
  const uint64_t active_version = board_.state().version;
  std::string listen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listen = listen_;
  }
  // The API serves the new role (readiness SERVING, the active server
  // listening) before the line that tells clients so; bounded.
  if (!board_.wait_applied(active_version, seconds(2))) {
    spdlog::warn("the API has not applied the active role within 2 s; serving anyway");
  }
  // Tests and users wait for this line.
  std::cout << fmt::format(
                   "dex-server-zd {} ready: node {} epoch {} holder {} listening on {} ({}, "
                   "lease {}, log from slot {})",
                   runtime_.program, settings_.node_id, epoch.value, process_id_, listen,
                   runtime_.data_description, format_duration(settings_.lease_duration),
                   s.log->epoch_start_slot().value)
            << std::endl;
}

void Node::release_serving(bool stays_standby) {
  Status closed = Status::ok();
  Status released = Status::ok();
  if (serving_ && serving_->keeper) {
    Serving& s = *serving_;
    const Epoch epoch = s.keeper->epoch();
    const size_t interrupted = s.engine ? s.engine->attempts_running() : 0;
    // Calls still open at the release answer UNAVAILABLE.
    const std::string why =
        stays_standby
            ? fmt::format("node {} epoch {} stepped down: another process of the node serves",
                          settings_.node_id, epoch.value)
            : std::string("this process is shutting down");
    if (stays_standby) {
      board_.set_standby(why, false);
    } else {
      board_.set_inactive(why);
    }
    if (s.engine) s.engine->stop();
    board_.end_worker_streams();  // their Workers reconnect to whoever is active
    if (s.log) closed = s.log->close();
    released = s.keeper->release();
    metrics_.set_active(false);
    if (stays_standby) {
      spdlog::info(
          "stepped down: released the lease of epoch {} ({} attempts interrupted); competing "
          "again in {}",
          epoch.value, interrupted, format_duration(settings_.step_down_hold_off));
    } else {
      spdlog::info("released the lease of epoch {} ({} attempts interrupted)", epoch.value,
                   interrupted);
    }
    if (!closed.is_ok()) spdlog::warn("log close: {}", closed.to_string());
    if (!released.is_ok()) {
      // The release did not land: the lease is ours until it expires.
      spdlog::warn("lease release failed ({}); a successor waits for it to expire",
                   released.to_string());
    }
    released_keeper_ = std::move(s.keeper);
  } else {
    // A signal raced an acquisition that succeeded: give the lease back.
    std::lock_guard<std::mutex> lock(acquire_mu_);
    if (acquiring_) released = acquiring_->release();
  }
  std::lock_guard<std::mutex> lock(mu_);
  take_locked(machine_.released(now(), closed.is_ok() && released.is_ok()));
}

void Node::close_store() {
  std::unique_ptr<Engine> engine;
  if (serving_) engine = std::move(serving_->engine);
  // The log writer is closed; it goes with the period (the engine first).
  std::unique_ptr<Serving> period = std::move(serving_);
  if (closer_.joinable()) closer_.join();
  std::promise<void> finished;
  closer_finished_ = finished.get_future();
  closer_ = std::thread([this, e = engine.release(), period = period.release(),
                         finished = std::move(finished)]() mutable {
    if (hooks_.before_store_close) hooks_.before_store_close();
    // Stuck calls leave the engine undeleted; the machine exits 1 at its limit.
    if (board_.wait_engine_unused(kEngineUseWait)) {
      delete e;
      delete period;
      std::lock_guard<std::mutex> lock(mu_);
      if (machine_.phase() == NodePhase::kClosingStore) take_locked(machine_.store_closed(now()));
    }
    finished.set_value();
  });
}

void Node::read_lease() {
  LeaseKeeper* keeper = released_keeper_.get();
  StatusOr<LeaseRecordValue> record =
      keeper != nullptr ? keeper->read_lease(seconds(1))
                        : StatusOr<LeaseRecordValue>(Status::stopped("no lease keeper"));
  std::lock_guard<std::mutex> lock(mu_);
  if (record.is_ok()) {
    take_locked(machine_.lease_seen(
        now(), {record->epoch, record->holder_process_id.value, record->released}));
  } else {
    take_locked(machine_.lease_unreadable(now(), record.status()));
  }
}

void Node::answer_step_down(const StepDownAnswer& answer) {
  std::lock_guard<std::mutex> lock(mu_);
  step_down_answer_ = answer;
  cv_.notify_all();
}

void Node::stop_at_once(const std::string& why) {
  board_.set_inactive(fmt::format("node {} stopped: {}", settings_.node_id, why));
  if (!serving_) return;
  if (serving_->engine) serving_->engine->stop();
  // No more log writes and no release: the lease is not ours or cannot be trusted.
  if (serving_->keeper) serving_->keeper->stop();
}

void Node::release_and_fail(const std::string& why) {
  board_.set_inactive(why);
  if (!serving_ || !serving_->keeper) return;
  if (serving_->engine) serving_->engine->stop();
  Status released = serving_->keeper->release();
  if (!released.is_ok()) spdlog::warn("lease release failed: {}", released.to_string());
}

void Node::exit_with(const NodeCommand& command) {
  if (command.exit_code == 0) {
    spdlog::info("node {}: {}; exiting", settings_.node_id, command.reason);
  } else {
    spdlog::error("stopping node {}: {}; exiting 1", settings_.node_id, command.reason);
  }
  board_.set_inactive(command.exit_code == 0
                          ? std::string("this process is shutting down")
                          : fmt::format("node {} stopped: {}", settings_.node_id, command.reason));
  std::lock_guard<std::mutex> lock(mu_);
  exit_code_ = command.exit_code;
}

std::string Node::standby_reason() const {
  std::optional<LeaseRecordValue> holder;
  {
    std::lock_guard<std::mutex> lock(acquire_mu_);
    if (acquiring_) holder = acquiring_->observed_holder();
  }
  const std::string kind = hot_ ? "a hot standby" : "a cold standby";
  if (!holder && released_keeper_) {
    return fmt::format(
        "this process of node {} stepped down from epoch {} and is {} until it competes for the "
        "lease again",
        settings_.node_id, released_keeper_->epoch().value, kind);
  }
  if (!holder) {
    return fmt::format("this process is {} of node {}; the active process is not known yet", kind,
                       settings_.node_id);
  }
  if (holder->released) {
    return fmt::format("this process is {} of node {}; {} released the lease at epoch {}", kind,
                       settings_.node_id, holder->holder_process_id.value, holder->epoch.value);
  }
  return fmt::format("this process is {} of node {}; the active process is {} at epoch {}", kind,
                     settings_.node_id, holder->holder_process_id.value, holder->epoch.value);
}

NodeStatus Node::status() const {
  NodeStatus st;
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    st = status_;
  }
  // Whether it serves, and why not, as the API sees it now.
  const RoleState role = board_.state();
  st.serving = role.active;
  st.not_serving_reason = role.active ? std::string() : role.unavailable_reason;
  return st;
}

void Node::publish_status() {
  NodePhase phase;
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase = machine_.phase();
    stopping = machine_.stopping();
  }
  NodeStatus st;
  st.process_id = process_id_;
  st.node_id = settings_.node_id;
  st.hot = hot_;
  st.phase = std::string(node_phase_name(phase));
  st.role = role_name(phase, stopping, hot_);
  if (follower_) {
    const Follower::Status_ f = follower_->status();
    st.standby_state = std::string(follower_state_name(f.state));
    st.standby_lag = f.lag;
    if (f.applied) st.applied_slot = f.applied->value;
  }
  const bool holding = phase == NodePhase::kActive || phase == NodePhase::kDraining;
  if (holding && serving_ && serving_->keeper) {
    last_lease_ = LeaseSeen{serving_->keeper->epoch(), process_id_, false};
    // The writer's next slot follows the last batch made durable (the
    // EpochStart at least, once open).
    if (serving_->log) {
      const Slot next = serving_->log->next_slot();
      if (next.value > 0) st.log_head = next.value - 1;
    }
  } else {
    {
      std::lock_guard<std::mutex> lock(acquire_mu_);
      if (acquiring_) {
        if (auto holder = acquiring_->observed_holder()) {
          last_lease_ = LeaseSeen{holder->epoch, holder->holder_process_id.value, holder->released};
        }
      }
    }
    if (released_keeper_ && last_lease_ && last_lease_->holder_process_id == process_id_ &&
        last_lease_->epoch == released_keeper_->epoch()) {
      last_lease_->released = true;  // this process stepped down from it
    }
  }
  if (last_lease_) {
    st.epoch = last_lease_->epoch.value;
    st.holder_process_id = last_lease_->holder_process_id;
    st.lease_released = last_lease_->released;
  }
  std::lock_guard<std::mutex> lock(status_mu_);
  status_ = std::move(st);
}

void Node::tick() {
  publish_status();
  if (follower_) {
    Follower::Status_ st = follower_->status();
    board_.set_hot_standby(st.state == FollowerState::kFollowing);
    metrics_.set_standby_state(standby_state_of(st.state));
    metrics_.set_standby_lag(st.lag);
  }
  if (serving_ && serving_->keeper) {
    Serving& s = *serving_;
    // Spec (Health and probes): a process whose lease is no longer valid
    // (resumed after a freeze) reports NOT_SERVING at once, even if no public
    // call arrives to notice it.
    if (board_.state().active && !s.keeper->is_valid()) {
      board_.set_inactive(
          fmt::format("the lease of node {} is no longer valid", settings_.node_id));
    }
    const LeaseCounters c = s.keeper->counters();
    auto report = [&](uint64_t now_count, uint64_t before, LeaseRenewal outcome) {
      for (uint64_t i = before; i < now_count && i < before + 10'000; ++i) {
        metrics_.lease_renewal(outcome);
      }
    };
    const LeaseCounters& seen = s.counters_seen;
    report(c.renewal_puts_ok - c.adoptions, seen.renewal_puts_ok - seen.adoptions,
           LeaseRenewal::kRenewed);
    report(c.adoptions, seen.adoptions, LeaseRenewal::kAdopted);
    report(c.renewal_puts_transient, seen.renewal_puts_transient, LeaseRenewal::kRetried);
    s.counters_seen = c;
    return;
  }
  // A standby: say who is active, and report the epoch last seen.
  board_.set_unavailable_reason(standby_reason());
  std::lock_guard<std::mutex> lock(acquire_mu_);
  if (acquiring_) {
    if (auto holder = acquiring_->observed_holder()) metrics_.set_node_epoch(holder->epoch.value);
    // The lease machine decides a takeover's delay by it (spec: Takeover).
    if (hot_) acquiring_->set_standby_hot(follower_ && follower_->hot());
  }
}

StatusOr<StepDownResponse> Node::step_down(const StepDownRequest& request) {
  StepDownResponse response;
  response.set_expected_node_id(request.expected_node_id());
  response.set_expected_node_epoch(request.expected_node_epoch());
  response.set_node_id(settings_.node_id);
  response.set_lease_reacquisition_hold_off_ms(
      static_cast<uint64_t>(to_ms(settings_.step_down_hold_off)));
  uint64_t expected_epoch = 0;
  const std::string& e = request.expected_node_epoch();
  auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), expected_epoch);
  if (e.empty() || ec != std::errc() || end != e.data() + e.size()) {
    return Status::invalid_argument(
        fmt::format("expected_node_epoch '{}' is not a decimal node epoch", e));
  }
  StepDownAnswer answer;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (machine_.step_down_in_progress() || machine_.describe_refused()) {
      return machine_.can_step_down();  // "already in progress"
    }
    if (request.expected_node_id() != settings_.node_id) {
      return Status::precondition_failed(
          fmt::format("this process serves node '{}', not the expected node '{}'; nothing changed",
                      settings_.node_id, request.expected_node_id()));
    }
    if (Status s = machine_.can_step_down(); !s.is_ok()) return s;
    if (machine_.epoch().value != expected_epoch) {
      return Status::precondition_failed(
          fmt::format("the active process of node '{}' is at node epoch {}, not the expected "
                      "{}; nothing changed",
                      settings_.node_id, machine_.epoch().value, expected_epoch));
    }
    step_down_answer_.reset();
    take_locked(machine_.step_down(now()));
    spdlog::info("stepping down node {} epoch {}", settings_.node_id, expected_epoch);
    // Bounded by the machine: the drain timeout, the release, the hold-off and
    // one acquisition attempt, or the stuck-store limit.
    cv_.wait(lock, [&] { return step_down_answer_.has_value(); });
    answer = std::move(*step_down_answer_);
    step_down_answer_.reset();
  }
  switch (answer.outcome) {
    case StepDownOutcome::kAbandoned:
      return Status::stopped(fmt::format("the step down did not complete: {}", answer.detail));
    case StepDownOutcome::kStuckStore:
      return Status::permanent(answer.detail);
    case StepDownOutcome::kTakenOverByAnotherProcess:
    case StepDownOutcome::kTakenBackByThisProcess:
      response.set_released_node_epoch(answer.released_epoch.to_string());
      response.set_lease_holder_after_step_down(answer.outcome ==
                                                        StepDownOutcome::kTakenBackByThisProcess
                                                    ? TAKEN_BACK_BY_THIS_PROCESS
                                                    : TAKEN_OVER_BY_ANOTHER_PROCESS);
      response.set_active_node_epoch(answer.active_epoch.to_string());
      response.set_active_holder_process_id(answer.active_holder);
      return response;
    case StepDownOutcome::kUnknown:
      response.set_released_node_epoch(answer.released_epoch.to_string());
      response.set_lease_holder_after_step_down(UNKNOWN);
      response.set_lease_holder_unknown_detail(answer.detail);
      return response;
  }
  return Status::permanent("unknown step-down outcome");
}

}  // namespace dex
