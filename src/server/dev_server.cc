#include "server/dev_server.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/api_server.h"
#include "common/random.h"
#include "engine/engine.h"
#include "lease/dev_lock.h"
#include "lease/lease_keeper.h"
#include "lease/lease_record.h"
#include "log/log_writer.h"
#include "metrics/metered_store.h"
#include "metrics/metrics.h"
#include "objstore/filesystem_store.h"
#include "objstore/s3_store.h"
#include "server/serve_check.h"
#include "standby/follower.h"

namespace dex {
namespace {

namespace fs = std::filesystem;

// Present while a dev process runs in relaxed mode; removed by a clean exit. Its
// presence at startup means a relaxed process exited abruptly: unsynced writes
// may be torn, so the directory is not trusted (spec: Lease, relaxed).
constexpr const char* kRelaxedMarker = "relaxed-running";

// Why the server stops, set once by whoever notices first.
class StopSignal {
 public:
  void request_shutdown() { set(std::nullopt, /*shutdown=*/true); }
  void fatal(const Status& why) { set(why, /*shutdown=*/false); }
  // Blocks until a shutdown or a fatal error. Returns the fatal error, if any.
  std::optional<Status> wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return fatal_;
  }
  bool done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // Waits up to `d`; true if the node is stopping.
  bool wait_for(Duration d) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, d, [&] { return done_; });
  }
  // A StepDown call asks the node loop to step down (wakes wait_event).
  void request_step_down() {
    std::lock_guard<std::mutex> lock(mu_);
    step_down_ = true;
    cv_.notify_all();
  }
  enum class Event { kStop, kStepDown };
  // Blocks until the node must stop or a step down is requested (consumed).
  Event wait_event() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ || step_down_; });
    if (done_) return Event::kStop;
    step_down_ = false;
    return Event::kStepDown;
  }
  std::optional<Status> fatal() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fatal_;
  }

 private:
  void set(std::optional<Status> why, bool shutdown) {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    if (!shutdown) fatal_ = std::move(why);
    cv_.notify_all();
  }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;            // guarded by mu_
  bool step_down_ = false;       // guarded by mu_
  std::optional<Status> fatal_;  // guarded by mu_
};

// Waits for SIGINT/SIGTERM on its own thread (the signals are blocked in every
// thread, so only sigtimedwait here receives them).
class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int)> on_signal) : on_signal_(std::move(on_signal)) {
    thread_ = std::thread([this] { run(); });
  }
  ~SignalWatcher() {
    exit_ = true;
    thread_.join();
  }

 private:
  void run() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    timespec poll{0, 100'000'000};
    while (!exit_) {
      int sig = sigtimedwait(&set, nullptr, &poll);
      if (sig > 0) on_signal_(sig);
    }
  }
  std::function<void(int)> on_signal_;
  std::atomic<bool> exit_{false};
  std::thread thread_;
};

int fail(const std::string& message) {
  spdlog::error("{}", message);
  return 1;
}

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int run_dev_server(const DevConfig& config, std::string_view program) {
  block_stop_signals();
  const fs::path data_dir = fs::absolute(config.data_dir);
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec)
    return fail(
        fmt::format("cannot create data directory {}: {}", data_dir.string(), ec.message()));

  auto lock = DevLock::open(data_dir);
  if (!lock.is_ok()) return fail(fmt::format("cannot start: {}", lock.status().message()));
  if (!lock.value()->held()) {
    spdlog::warn(
        "the filesystem of {} cannot lock files ({}); a lease left by an earlier process is taken "
        "only after it expires (up to {})",
        data_dir.string(), lock.value()->unsupported_reason(),
        format_duration(config.lease_duration + seconds(1)));
  }

  const fs::path marker = data_dir / kRelaxedMarker;
  if (fs::exists(marker)) {
    return fail(fmt::format(
        "cannot start: the previous dex-server-zd {} on {} ran with durability relaxed and exited "
        "abruptly, so its recent writes may be torn. Delete the data directory {} to start afresh.",
        program, data_dir.string(), data_dir.string()));
  }

  // Listen first: a port in use fails before the lease is touched, and clients
  // that arrive early get UNAVAILABLE until this process is active.
  ApiServerOptions api_options;
  api_options.listen = config.listen;
  api_options.admin_enabled = config.admin_enabled;
  api_options.admin_token_sha256 = config.admin_token_sha256;
  if (std::string warning = admin_exposure_warning(config.listen, config.admin_enabled,
                                                   config.admin_token_sha256.size());
      !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  auto api = ApiServer::start(api_options);
  if (!api.is_ok()) return fail(fmt::format("cannot start: {}", api.status().message()));

  if (config.durability == Durability::kRelaxed) {
    std::ofstream(marker) << "dex-server-zd with durability relaxed is running or crashed\n";
  }

  auto store = FilesystemObjectStore::open(data_dir / "objects", config.durability);
  if (!store.is_ok())
    return fail(fmt::format("cannot open the object store: {}", store.status().message()));

  NodeRun run;
  run.program = std::string(program);
  run.node_id = config.node_id;
  run.lease_duration = config.lease_duration;
  run.fail_if_held = config.lease_fail_if_held;
  run.holder_is_stopped = lock.value()->held();
  run.local_store_path = data_dir / "local";
  run.data_description =
      fmt::format("data {}, durability {}", data_dir.string(), durability_name(config.durability));
  run.snapshots = config.snapshots;
  int code = run_node(run, *store.value(), *api.value());
  if (code == 0) fs::remove(marker, ec);
  return code;
}

namespace {

StatusOr<std::unique_ptr<ObjectStore>> open_serve_store(const ServeConfig::ObjectStore& c) {
  if (c.type == "filesystem") {
    auto store = FilesystemObjectStore::open(c.path, c.durability);
    if (!store.is_ok()) return store.status();
    return std::unique_ptr<ObjectStore>(std::move(store).value());
  }
  auto options = serve_s3_options(c);  // the same options `serve --check` validates
  if (!options.is_ok()) return options.status();
  auto store = S3ObjectStore::open(std::move(options).value());
  if (!store.is_ok()) return store.status();
  return std::unique_ptr<ObjectStore>(std::move(store).value());
}

}  // namespace

int run_serve_server(const ServeConfig& config) {
  block_stop_signals();
  // First, so that it is destroyed last.
  Metrics metrics;
  if (!config.metrics_listen.empty()) {
    if (Status s = metrics.listen(config.metrics_listen); !s.is_ok()) {
      return fail(fmt::format("cannot serve metrics: {}", s.to_string()));
    }
    spdlog::info("metrics on http://{}:{}/metrics",
                 config.metrics_listen.substr(0, config.metrics_listen.rfind(':')), metrics.port());
  }
  auto opened = open_serve_store(config.object_store);
  if (!opened.is_ok())
    return fail(fmt::format("cannot open the object store: {}", opened.status().message()));
  // Every request is counted by operation and outcome (docs/metrics.md).
  MeteredObjectStore store(*opened.value(), metrics);
  ApiServerOptions api_options;
  api_options.listen = config.listen;
  api_options.admin_enabled = config.admin_enabled;
  api_options.admin_token_sha256 = config.admin_token_sha256;
  if (std::string warning = admin_exposure_warning(config.listen, config.admin_enabled,
                                                   config.admin_token_sha256.size());
      !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  auto api = ApiServer::start(api_options);
  if (!api.is_ok()) return fail(fmt::format("cannot start: {}", api.status().message()));
  NodeRun run;
  run.program = "serve";
  run.node_id = config.node_id;
  run.lease_duration = config.lease_duration;
  run.fail_if_held = config.lease_fail_if_held;
  run.holder_is_stopped = false;  // no dev lock: a held lease is waited out (cold standby)
  run.local_store_path = fs::absolute(config.local_store_path);
  run.data_description =
      fmt::format("objects {}, local store {}", store.describe(), run.local_store_path.string());
  run.snapshots = config.snapshots;
  run.standby_mode = config.standby_mode;
  if (config.standby_mode == "hot") run.held_lease_poll_interval = config.held_lease_poll_interval;
  run.lagging_takeover_delay = config.lagging_takeover_delay;
  run.behind_lag_threshold = config.behind_lag_threshold;
  run.step_down_hold_off = config.step_down_hold_off;
  run.attempt_drain_timeout = config.attempt_drain_timeout;
  run.metrics = &metrics;
  return run_node(run, store, *api.value());
}

Duration takeover_retry_backoff(uint32_t failures) {
  Duration d = seconds(1);
  for (uint32_t i = 1; i < failures && d < seconds(30); ++i) d *= 2;
  return std::min<Duration>(d, seconds(30));
}

namespace {

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

// Publishes the standby's state (health, metrics) and the lease's renewal
// counts (metrics) every 100 ms, for the life of run_node.
class NodeMonitor {
 public:
  NodeMonitor(ApiServer& api, Metrics& metrics) : api_(api), metrics_(metrics) {
    thread_ = std::thread([this] { run(); });
  }
  ~NodeMonitor() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }
  void watch_follower(Follower* follower) {
    std::lock_guard<std::mutex> lock(mu_);
    follower_ = follower;
    if (follower == nullptr) metrics_.set_standby_state(StandbyState::kNotStandby);
  }
  void watch_keeper(LeaseKeeper* keeper) {
    std::lock_guard<std::mutex> lock(mu_);
    keeper_ = keeper;
    seen_ = {};
    lease_invalid_reported_ = false;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (follower_ != nullptr) {
        Follower::Status_ st = follower_->status();
        api_.set_hot_standby(st.state == FollowerState::kFollowing);
        metrics_.set_standby_state(standby_state_of(st.state));
        metrics_.set_standby_lag(st.lag);
      }
      if (keeper_ != nullptr) {
        // Spec (Health and probes): a process whose lease is no longer valid
        // (resumed after a freeze) reports NOT_SERVING at once, even if no
        // public call arrives to notice it.
        if (!keeper_->is_valid() && !lease_invalid_reported_) {
          lease_invalid_reported_ = true;
          api_.set_inactive("the lease of this process is no longer valid");
        }
        LeaseCounters c = keeper_->counters();
        report(c.renewal_puts_ok - c.adoptions, seen_.renewal_puts_ok - seen_.adoptions,
               LeaseRenewal::kRenewed);
        report(c.adoptions, seen_.adoptions, LeaseRenewal::kAdopted);
        report(c.renewal_puts_transient, seen_.renewal_puts_transient, LeaseRenewal::kRetried);
        seen_ = c;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
  void report(uint64_t now, uint64_t before, LeaseRenewal outcome) {
    for (uint64_t i = before; i < now && i < before + 10'000; ++i) metrics_.lease_renewal(outcome);
  }

  ApiServer& api_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                    // guarded by mu_
  Follower* follower_ = nullptr;         // guarded by mu_
  LeaseKeeper* keeper_ = nullptr;        // guarded by mu_
  LeaseCounters seen_;                   // guarded by mu_
  bool lease_invalid_reported_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

namespace {

// A StepDown call (gRPC thread) meets the node loop here (spec: Step down the
// active process). The call checks its precondition against the identity the
// node serves, asks the loop to step down, waits for the release, then watches
// the lease until another process takes over, this process takes it back, or
// the hold-off and one acquisition attempt have passed.
class StepDownCoordinator {
 public:
  struct Settings {
    std::string node_id;
    std::string process_id;
    Duration hold_off;
    Duration acquisition_budget;  // one attempt to take the lease back
    Duration stuck_store_limit = seconds(64);
  };
  StepDownCoordinator(ObjectStore& store, StopSignal& stop, Settings settings,
                      std::function<void()> after_call, std::function<void()> on_settled)
      : store_(store),
        stop_(stop),
        settings_(std::move(settings)),
        after_call_(std::move(after_call)),
        on_settled_(std::move(on_settled)) {}
  ~StepDownCoordinator() {
    if (after_thread_.joinable()) after_thread_.join();
  }

  // The node loop: the epoch it serves now (nullopt: not active).
  void set_serving(std::optional<Epoch> epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    serving_ = epoch;
  }
  // The node loop: the lease of `epoch` was released; the local store closed
  // (or not: `store_stuck`).
  void released(Epoch epoch, TimePoint at) {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = {epoch, at};
    cv_.notify_all();
  }
  void store_stuck() {
    std::lock_guard<std::mutex> lock(mu_);
    stuck_ = true;
    cv_.notify_all();
  }
  // The node loop could not step down (it is stopping): the call fails.
  void abandon(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    abandoned_ = why;
    cv_.notify_all();
  }
  bool in_progress() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_progress_;
  }

  StatusOr<StepDownResponse> handle(const StepDownRequest& request) {
    StepDownResponse response;
    response.set_expected_node_id(request.expected_node_id());
    response.set_expected_node_epoch(request.expected_node_epoch());
    response.set_node_id(settings_.node_id);
    response.set_lease_reacquisition_hold_off_ms(static_cast<uint64_t>(to_ms(settings_.hold_off)));
    uint64_t expected_epoch = 0;
    const std::string& e = request.expected_node_epoch();
    auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), expected_epoch);
    if (e.empty() || ec != std::errc() || end != e.data() + e.size()) {
      return Status::invalid_argument(
          fmt::format("expected_node_epoch '{}' is not a decimal node epoch", e));
    }
    Epoch released_epoch;
    TimePoint released_at;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (in_progress_) {
        return Status::precondition_failed(
            "a step down of this process is already in progress; wait past the hold-off, "
            "describe, and step down again only if the switchover has not happened");
      }
      if (request.expected_node_id() != settings_.node_id) {
        return Status::precondition_failed(fmt::format(
            "this process serves node '{}', not the expected node '{}'; nothing changed",
            settings_.node_id, request.expected_node_id()));
      }
      if (!serving_) {
        return Status::precondition_failed(fmt::format(
            "this process is not the active process of node '{}' (it is a standby); nothing "
            "changed. Run the step down again: it then reaches the active process",
            settings_.node_id));
      }
      if (serving_->value != expected_epoch) {
        return Status::precondition_failed(
            fmt::format("the active process of node '{}' is at node epoch {}, not the expected "
                        "{}; nothing changed",
                        settings_.node_id, serving_->value, expected_epoch));
      }
      in_progress_ = true;
      released_.reset();
      abandoned_.reset();
      stuck_ = false;
      stop_.request_step_down();
      // Bounded by the node loop: the drain timeout, the commit and the release.
      cv_.wait(lock, [&] { return released_.has_value() || abandoned_.has_value(); });
      if (abandoned_) {
        finish_locked();
        return Status::stopped(
            fmt::format("the step down did not complete: {}", abandoned_->message()));
      }
      released_epoch = released_->first;
      released_at = released_->second;
    }
    response.set_released_node_epoch(released_epoch.to_string());
    watch_lease(released_epoch, released_at, response);
    bool stuck;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stuck = stuck_;
      finish_locked();
    }
    if (stuck && response.lease_holder_after_step_down() != TAKEN_OVER_BY_ANOTHER_PROCESS) {
      return Status::permanent(fmt::format(
          "the local store of the stopped serving period did not close within {} s of the "
          "release and no other process took over; this process exits 1 without taking the "
          "lease (its restart releases the store)",
          to_ms(settings_.stuck_store_limit) / 1000));
    }
    return response;
  }

 private:
  // Reads the lease every 250 ms until it names a newer epoch, or the
  // hold-off and one acquisition attempt (or the stuck-store limit) passed.
  void watch_lease(Epoch released, TimePoint released_at, StepDownResponse& response) {
    Clock& clock = SystemClock::instance();
    std::string last = "the lease was not read";
    // Bounded by the deadline: one read per 250 ms.
    while (true) {
      const bool stuck = [&] {
        std::lock_guard<std::mutex> lock(mu_);
        return stuck_;
      }();
      const TimePoint deadline =
          released_at +
          (stuck ? settings_.stuck_store_limit : settings_.hold_off + settings_.acquisition_budget);
      auto data = store_.get(lease_key(NodeId(settings_.node_id)), {seconds(2)});
      if (data.is_ok()) {
        auto record = decode_lease_record(data->body);
        if (record.is_ok() && record->epoch > released) {
          // Settled: Describe on this process need not refuse any longer (a
          // client that lists every address then finds the new active one).
          if (on_settled_) on_settled_();
          const bool ours = record->holder_process_id.value == settings_.process_id;
          response.set_lease_holder_after_step_down(ours ? TAKEN_BACK_BY_THIS_PROCESS
                                                         : TAKEN_OVER_BY_ANOTHER_PROCESS);
          response.set_active_node_epoch(record->epoch.to_string());
          response.set_active_holder_process_id(record->holder_process_id.value);
          return;
        }
        last = record.is_ok() ? fmt::format("the lease still shows epoch {}{}", record->epoch.value,
                                            record->released ? " (released)" : "")
                              : record.status().to_string();
      } else {
        last = fmt::format("reading the lease failed: {}", data.status().to_string());
      }
      if (clock.now() >= deadline || stop_.done()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    response.set_lease_holder_after_step_down(UNKNOWN);
    response.set_lease_holder_unknown_detail(fmt::format(
        "no process was confirmed to hold the lease after the hold-off and one acquisition "
        "attempt: {}",
        last));
  }

  // REQUIRES: mu_. After the call returns, the process may become a standby
  // server (connections closed after about 3 s) without cutting this call.
  void finish_locked() {
    in_progress_ = false;
    if (after_thread_.joinable()) after_thread_.detach();
    after_thread_ = std::thread([after = after_call_] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      after();
    });
  }

  ObjectStore& store_;
  StopSignal& stop_;
  const Settings settings_;
  std::function<void()> after_call_;
  std::function<void()> on_settled_;  // another process (or this one) holds the lease again
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Epoch> serving_;                         // guarded by mu_
  bool in_progress_ = false;                             // guarded by mu_
  std::optional<std::pair<Epoch, TimePoint>> released_;  // guarded by mu_
  std::optional<Status> abandoned_;                      // guarded by mu_
  bool stuck_ = false;                                   // guarded by mu_
  std::thread after_thread_;
};

}  // namespace

int run_node(const NodeRun& run, ObjectStore& store, ApiServer& api) {
  StopSignal stop;
  Clock& clock = SystemClock::instance();
  const bool hot = run.standby_mode == "hot";
  Metrics local_metrics;
  Metrics& metrics = run.metrics != nullptr ? *run.metrics : local_metrics;
  LeaseKeeperOptions lease_options;
  lease_options.node_id = NodeId(run.node_id);
  lease_options.process_id = ProcessId(make_process_id());
  lease_options.duration = run.lease_duration;
  lease_options.fail_if_held = run.fail_if_held;
  lease_options.holder_is_stopped = run.holder_is_stopped;
  lease_options.held_poll_interval = run.held_lease_poll_interval;
  if (hot) lease_options.lagging_takeover_delay = run.lagging_takeover_delay;

  NodeMonitor monitor(api, metrics);
  metrics.set_active(false);

  // Whatever stops the node makes every public call UNAVAILABLE at once.
  auto stop_node = [&](std::string_view what, const Status& why) {
    spdlog::error("{}: {}", what, why.to_string());
    api.set_inactive(fmt::format("{} for node {}: {}", what, run.node_id, why.message()));
    stop.fatal(why);
  };

  std::mutex acquiring_mu;
  LeaseKeeper* acquiring = nullptr;  // guarded by acquiring_mu: interrupted by a signal
  SignalWatcher signals([&](int sig) {
    spdlog::info("received {}; shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    stop.request_shutdown();
    std::lock_guard<std::mutex> lock(acquiring_mu);
    if (acquiring != nullptr && acquiring->state() == LeaseState::kAcquiring) acquiring->stop();
  });

  // Role changes of the API server are serialised: the active process's
  // activation and the stepped-down process's switch to a standby server.
  std::mutex role_mu;
  bool serving = false;  // guarded by role_mu
  std::atomic<Follower*> current_follower{nullptr};
  StepDownCoordinator::Settings sd;
  sd.node_id = run.node_id;
  sd.process_id = lease_options.process_id.value;
  sd.hold_off = run.step_down_hold_off;
  sd.acquisition_budget = (hot ? run.lagging_takeover_delay : Duration(0)) + seconds(3);
  StepDownCoordinator step_down(
      store, stop, sd,
      [&] {
        std::lock_guard<std::mutex> lock(role_mu);
        if (serving || stop.done()) return;
        Follower* f = current_follower.load();
        if (Status s = api.set_standby(f != nullptr && f->hot()); !s.is_ok()) {
          spdlog::error("cannot serve as a standby: {}", s.to_string());
        }
      },
      [&api] { api.set_stepping_down(false); });
  api.set_step_down_handler(
      [&step_down](const StepDownRequest& request) { return step_down.handle(request); });

  spdlog::info("API on {}: it answers UNAVAILABLE until this process holds the lease",
               api.listen_address());
  std::optional<TimePoint> hold_off_until;  // after a step down
  // The role loop: standby until the lease is held, then active until a stop
  // (return) or a step down (back to standby). Bounded by the stop signal.
  while (true) {
    // ------------------------------------------------------------- standby
    std::unique_ptr<Follower> follower;
    if (hot) {
      FollowerOptions fo;
      fo.node_id = lease_options.node_id;
      fo.local_store_path = run.local_store_path;
      if (run.held_lease_poll_interval > Duration(0)) fo.poll = run.held_lease_poll_interval;
      fo.behind_lag_threshold = run.behind_lag_threshold;
      follower = std::make_unique<Follower>(store, clock, fo);
      Follower* f = follower.get();
      lease_options.standby_is_hot = [f] { return f->hot(); };
      follower->start();
      current_follower = f;
      monitor.watch_follower(f);
    }
    auto leave_standby = [&] {
      current_follower = nullptr;
      monitor.watch_follower(nullptr);
      if (follower) follower->stop();
    };
    if (hold_off_until) {
      // Spec: the stepped-down process waits standby.stepDownHoldOff before it
      // competes for the lease again (following the log meanwhile when hot).
      const Duration wait = *hold_off_until - clock.now();
      const bool stopping = wait > Duration(0) && stop.wait_for(wait);
      hold_off_until.reset();
      api.set_stepping_down(false);
      if (stopping || stop.done()) {
        leave_standby();
        return 0;
      }
    }
    spdlog::info("acquiring the lease of node {} in {} (lease {}, standby {})", run.node_id,
                 store.describe(), format_duration(run.lease_duration), run.standby_mode);
    std::unique_ptr<LeaseKeeper> keeper;
    // Bounded by the stop signal: each failure waits a backoff of up to 30 s.
    for (uint32_t failures = 0;;) {
      auto candidate = std::make_unique<LeaseKeeper>(store, clock, lease_options);
      {
        std::lock_guard<std::mutex> lock(acquiring_mu);
        acquiring = candidate.get();
      }
      Status s = stop.done() ? Status::stopped("stopping") : candidate->acquire();
      {
        std::lock_guard<std::mutex> lock(acquiring_mu);
        acquiring = nullptr;
      }
      if (s.is_ok()) {
        keeper = std::move(candidate);
        break;
      }
      if (stop.done()) {
        leave_standby();
        spdlog::info("stopped before acquiring the lease");
        return 0;
      }
      if (!hot) {
        leave_standby();
        return fail(fmt::format("cannot acquire the lease: {}", s.to_string()));
      }
      const Duration backoff = takeover_retry_backoff(++failures);
      spdlog::warn(
          "takeover failed before holding the lease ({}); still following the log, trying "
          "again in {} s",
          s.to_string(), to_ms(backoff) / 1000);
      if (stop.wait_for(backoff)) {
        leave_standby();
        return 0;
      }
    }

    // ------------------------------------------------------------- active
    const TimePoint took_lease = clock.now();
    keeper->start_renewing([&](const Status& why) {
      metrics.lease_renewal(LeaseRenewal::kLost);
      stop_node("lease lost", why);
    });
    monitor.watch_keeper(keeper.get());
    std::optional<Slot> followed_to;
    if (follower) followed_to = follower->status().applied;
    leave_standby();  // closes the follower's local store: the engine opens it next
    follower.reset();
    // Spec: "A failure after it holds the lease releases the lease and exits the
    // process with status 1."
    auto release_and_fail = [&](const std::string& message) {
      api.set_inactive(message);
      monitor.watch_keeper(nullptr);
      Status released = keeper->release();
      if (!released.is_ok()) spdlog::warn("lease release failed: {}", released.to_string());
      return fail(message);
    };

    auto hook = std::make_shared<EngineLogHook>();
    LogWriterOptions log_options;
    log_options.node_id = lease_options.node_id;
    log_options.process_id = lease_options.process_id;
    log_options.epoch = keeper->epoch();
    log_options.on_durable = hook->on_durable();
    log_options.on_batch_written = [&metrics](Duration latency, size_t records) {
      metrics.log_append(latency, records);
    };
    log_options.epoch_start_unix_ms = unix_ms_now();
    if (followed_to) log_options.end_hint = *followed_to;  // list the log's tail only
    LeaseKeeper& held = *keeper;
    LogWriter log(
        store, clock, log_options, [&held] { return held.is_valid(); },
        [&](const Status& why) { stop_node("log stopped", why); });
    if (Status s = log.open(); !s.is_ok()) {
      return release_and_fail(fmt::format("cannot open the log: {}", s.to_string()));
    }

    EngineOptions engine_options;
    engine_options.node_id = lease_options.node_id;
    engine_options.process_id = lease_options.process_id;
    engine_options.epoch = keeper->epoch();
    engine_options.local_store_path = run.local_store_path;
    engine_options.log_hook = hook;
    engine_options.snapshots.interval = run.snapshots.interval;
    engine_options.snapshots.every_records = run.snapshots.every_records;
    engine_options.snapshots.keep = run.snapshots.keep;
    engine_options.on_attempt_ended = [&metrics](AttemptOutcome o) { metrics.attempt_ended(o); };
    engine_options.on_flow_ended = [&metrics](FlowStatus s) { metrics.flow_ended(s); };
    const TimePoint engine_opening = clock.now();
    auto opened = Engine::open(engine_options, store, log, clock);
    if (!opened.is_ok()) {
      (void)log.close();  // nothing was acknowledged; the writer stops either way
      return release_and_fail(
          fmt::format("cannot open the engine: {}", opened.status().to_string()));
    }
    std::unique_ptr<Engine> engine = std::move(opened).value();
    spdlog::info("local store {}: {}", run.local_store_path.string(), engine->local_store_report());
    {
      std::lock_guard<std::mutex> lock(role_mu);
      if (Status s = api.activate(engine.get(),
                                  {run.node_id, keeper->epoch(), lease_options.process_id.value},
                                  [&held] { return held.is_valid(); });
          !s.is_ok()) {
        engine->stop();
        (void)log.close();
        return release_and_fail(fmt::format("cannot serve: {}", s.to_string()));
      }
      serving = true;
    }
    step_down.set_serving(keeper->epoch());
    metrics.set_active(true);
    metrics.set_node_epoch(keeper->epoch().value);
    if (hot) {
      const uint64_t replayed = followed_to ? log.epoch_start_slot().value - followed_to->value
                                            : log.epoch_start_slot().value + 1;
      spdlog::info(
          "took over as the active process: {} log slots replayed after following, engine open "
          "{} ms, lease to serving {} ms",
          replayed, to_ms(clock.now() - engine_opening), to_ms(clock.now() - took_lease));
    }

    // Tests and users wait for this line.
    std::cout << fmt::format(
                     "dex-server-zd {} ready: node {} epoch {} holder {} listening on {} ({}, "
                     "lease {}, log from slot {})",
                     run.program, run.node_id, keeper->epoch().value,
                     lease_options.process_id.value, api.listen_address(), run.data_description,
                     format_duration(run.lease_duration), log.epoch_start_slot().value)
              << std::endl;

    const StopSignal::Event event = stop.wait_event();
    if (event == StopSignal::Event::kStepDown) {
      // ------------------------------------------------------------- step down
      api.set_stepping_down(true);
      const Epoch epoch = keeper->epoch();
      spdlog::info(
          "stepping down node {} epoch {}: handing out no new task, draining running "
          "attempts for up to {}",
          run.node_id, epoch.value, format_duration(run.attempt_drain_timeout));
      engine->begin_drain();
      const TimePoint drain_deadline = clock.now() + run.attempt_drain_timeout;
      // Bounded by the drain timeout (or a stop).
      while (engine->attempts_running() > 0 && clock.now() < drain_deadline && !stop.done()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!stop.done()) {
        const size_t interrupted = engine->attempts_running();
        {
          std::lock_guard<std::mutex> lock(role_mu);
          serving = false;
          step_down.set_serving(std::nullopt);
          // Calls still open at the release answer UNAVAILABLE.
          api.set_inactive(
              fmt::format("node {} epoch {} stepped down: another process of the node serves",
                          run.node_id, epoch.value));
        }
        engine->stop();
        api.end_worker_streams();  // their Workers reconnect to whoever is active
        Status closed = log.close();
        monitor.watch_keeper(nullptr);
        Status released = keeper->release();
        metrics.set_active(false);
        const TimePoint released_at = clock.now();
        spdlog::info(
            "stepped down: released the lease of epoch {} ({} attempts interrupted); "
            "competing again in {}",
            epoch.value, interrupted, format_duration(run.step_down_hold_off));
        if (!closed.is_ok()) spdlog::warn("log close: {}", closed.to_string());
        if (!released.is_ok()) {
          // The release did not land: the lease is ours until it expires.
          spdlog::warn("lease release failed ({}); a successor waits for it to expire",
                       released.to_string());
        }
        keeper.reset();
        step_down.released(epoch, released_at);
        // Close the local store of the stopped serving period, bounded by about
        // 64 s (spec): a stuck store means exit 1 without taking the lease.
        auto closer_done = std::make_shared<std::atomic<bool>>(false);
        std::thread closer([e = engine.release(), closer_done, &api] {
          // Calls that got the engine before the release (a Worker stream
          // ending, a start waiting for its batch) finish first. Never past
          // the 64 s limit below (which would then exit 1): a call stuck in
          // the engine leaves it undeleted rather than deleted under it.
          if (!api.wait_engine_unused(seconds(60))) return;
          delete e;
          *closer_done = true;
        });
        while (!*closer_done && clock.now() - released_at < seconds(64) && !stop.done()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (!*closer_done) {
          closer.detach();
          step_down.store_stuck();
          spdlog::error(
              "the local store did not close within 64 s of the release; exiting 1 "
              "without taking the lease");
          // Let the StepDown call report what it saw (bounded by its own limit).
          for (int i = 0; i < 400 && step_down.in_progress(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
          api.shutdown(seconds(1));
          return 1;
        }
        closer.join();
        hold_off_until = released_at + run.step_down_hold_off;
        continue;  // back to standby
      }
      step_down.abandon(Status::stopped("the process is shutting down"));
    }

    // ------------------------------------------------------------- stop
    step_down.set_serving(std::nullopt);
    std::optional<Status> fatal = stop.fatal();
    api.set_inactive(fatal ? fmt::format("node {} stopped: {}", run.node_id, fatal->message())
                           : std::string("this process is shutting down"));
    engine->stop();
    monitor.watch_keeper(nullptr);
    if (fatal) {
      // Refuse further work: no more log writes, no release (the lease is not
      // ours or cannot be trusted), and exit 1 as the spec requires.
      keeper->stop();
      spdlog::error("stopping node {}: {}", run.node_id, fatal->to_string());
      api.shutdown(seconds(0));
      return 1;
    }
    // Release before waiting for the API's open calls (a Worker's task stream
    // stays open until the grace ends): the successor takes over at once.
    Status closed = log.close();
    Status released = keeper->release();
    api.shutdown(seconds(1));
    engine.reset();
    if (!closed.is_ok()) spdlog::warn("log close: {}", closed.to_string());
    if (!released.is_ok()) {
      spdlog::warn("lease release failed ({}); a successor waits for it to expire",
                   released.to_string());
    }
    return closed.is_ok() && released.is_ok() ? 0 : 1;
  }
}

}  // namespace dex
