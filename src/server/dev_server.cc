#include "server/dev_server.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
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
#include "log/log_writer.h"
#include "metrics/metered_store.h"
#include "metrics/metrics.h"
#include "objstore/filesystem_store.h"
#include "objstore/s3_store.h"
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
  S3Options options;
  options.bucket = c.bucket;
  options.prefix = c.prefix;
  options.endpoint = c.endpoint;
  options.region = c.region;
  options.addressing =
      c.addressing == "virtualHost" ? S3Addressing::kVirtualHost : S3Addressing::kPath;
  auto credentials = c.credentials_file.empty()
                         ? s3_credentials_from_environment()
                         : s3_credentials_from_file(c.credentials_file, c.credentials_profile);
  if (!credentials.is_ok()) return credentials.status();
  options.credentials = std::move(credentials).value();
  auto store = S3ObjectStore::open(std::move(options));
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
  if (config.admin_enabled && config.admin_token_sha256.empty()) {
    spdlog::warn(
        "no admin credentials are configured (auth.adminTokenFiles / auth.adminTokenSha256): "
        "anyone who can reach {} can describe this node and step it down",
        config.listen);
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

  // Hot mode: follow the log while waiting (spec: Hot standby).
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
    lease_options.lagging_takeover_delay = run.lagging_takeover_delay;
  }
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

  spdlog::info("API on {}: it answers UNAVAILABLE until this process holds the lease",
               api.listen_address());
  if (follower) {
    follower->start();
    monitor.watch_follower(follower.get());
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
      monitor.watch_follower(nullptr);
      spdlog::info("stopped before acquiring the lease");
      return 0;
    }
    if (!hot) return fail(fmt::format("cannot acquire the lease: {}", s.to_string()));
    const Duration backoff = takeover_retry_backoff(++failures);
    spdlog::warn(
        "takeover failed before holding the lease ({}); still following the log, trying "
        "again in {} s",
        s.to_string(), to_ms(backoff) / 1000);
    if (stop.wait_for(backoff)) {
      monitor.watch_follower(nullptr);
      return 0;
    }
  }
  const TimePoint took_lease = clock.now();
  keeper->start_renewing([&](const Status& why) {
    metrics.lease_renewal(LeaseRenewal::kLost);
    stop_node("lease lost", why);
  });
  monitor.watch_keeper(keeper.get());
  std::optional<Slot> followed_to;
  if (follower) {
    monitor.watch_follower(nullptr);
    followed_to = follower->status().applied;
    follower->stop();  // closes the local store: the engine opens it next
    follower.reset();
  }
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
  auto engine = Engine::open(engine_options, store, log, clock);
  if (!engine.is_ok()) {
    (void)log.close();  // nothing was acknowledged; the writer stops either way
    return release_and_fail(fmt::format("cannot open the engine: {}", engine.status().to_string()));
  }
  spdlog::info("local store {}: {}", run.local_store_path.string(),
               engine.value()->local_store_report());
  if (Status s = api.activate(engine.value().get(),
                              {run.node_id, keeper->epoch(), lease_options.process_id.value},
                              [&held] { return held.is_valid(); });
      !s.is_ok()) {
    engine.value()->stop();
    (void)log.close();
    return release_and_fail(fmt::format("cannot serve: {}", s.to_string()));
  }
  metrics.set_active(true);
  metrics.set_node_epoch(keeper->epoch().value);
  if (hot) {
    const uint64_t replayed = followed_to ? log.epoch_start_slot().value - followed_to->value
                                          : log.epoch_start_slot().value + 1;
    spdlog::info(
        "took over as the active process: {} log slots replayed after following, "
        "engine open {} ms, lease to serving {} ms",
        replayed, to_ms(clock.now() - engine_opening), to_ms(clock.now() - took_lease));
  }

  // Tests and users wait for this line.
  std::cout << fmt::format(
                   "dex-server-zd {} ready: node {} epoch {} holder {} listening on {} ({}, "
                   "lease {}, log from slot {})",
                   run.program, run.node_id, keeper->epoch().value, lease_options.process_id.value,
                   api.listen_address(), run.data_description, format_duration(run.lease_duration),
                   log.epoch_start_slot().value)
            << std::endl;

  std::optional<Status> fatal = stop.wait();
  api.set_inactive(fatal ? fmt::format("node {} stopped: {}", run.node_id, fatal->message())
                         : std::string("this process is shutting down"));
  engine.value()->stop();
  monitor.watch_keeper(nullptr);
  if (fatal) {
    // Refuse further work: no more log writes, no release (the lease is not ours
    // or cannot be trusted), and exit 1 as the spec requires.
    keeper->stop();
    spdlog::error("stopping node {}: {}", run.node_id, fatal->to_string());
    api.shutdown(seconds(0));
    return 1;
  }
  api.shutdown(seconds(1));
  engine.value().reset();
  Status closed = log.close();
  Status released = keeper->release();
  if (!closed.is_ok()) spdlog::warn("log close: {}", closed.to_string());
  if (!released.is_ok()) {
    spdlog::warn("lease release failed ({}); a successor waits for it to expire",
                 released.to_string());
  }
  return closed.is_ok() && released.is_ok() ? 0 : 1;
}

}  // namespace dex
