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
#include "objstore/filesystem_store.h"
#include "objstore/s3_store.h"

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
  auto store = open_serve_store(config.object_store);
  if (!store.is_ok())
    return fail(fmt::format("cannot open the object store: {}", store.status().message()));
  ApiServerOptions api_options;
  api_options.listen = config.listen;
  auto api = ApiServer::start(api_options);
  if (!api.is_ok()) return fail(fmt::format("cannot start: {}", api.status().message()));
  NodeRun run;
  run.program = "serve";
  run.node_id = config.node_id;
  run.lease_duration = config.lease_duration;
  run.fail_if_held = config.lease_fail_if_held;
  run.holder_is_stopped = false;  // no dev lock: a held lease is waited out (cold standby)
  run.local_store_path = fs::absolute(config.local_store_path);
  run.data_description = fmt::format("objects {}, local store {}", store.value()->describe(),
                                     run.local_store_path.string());
  run.snapshots = config.snapshots;
  return run_node(run, *store.value(), *api.value());
}

int run_node(const NodeRun& run, ObjectStore& store, ApiServer& api) {
  StopSignal stop;
  Clock& clock = SystemClock::instance();
  LeaseKeeperOptions lease_options;
  lease_options.node_id = NodeId(run.node_id);
  lease_options.process_id = ProcessId(make_process_id());
  lease_options.duration = run.lease_duration;
  lease_options.fail_if_held = run.fail_if_held;
  lease_options.holder_is_stopped = run.holder_is_stopped;
  LeaseKeeper keeper(store, clock, lease_options);

  // Whatever stops the node makes every public call UNAVAILABLE at once.
  auto stop_node = [&](std::string_view what, const Status& why) {
    spdlog::error("{}: {}", what, why.to_string());
    api.set_inactive(fmt::format("{} for node {}: {}", what, run.node_id, why.message()));
    stop.fatal(why);
  };

  SignalWatcher signals([&](int sig) {
    spdlog::info("received {}; shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    stop.request_shutdown();
    if (keeper.state() == LeaseState::kAcquiring) keeper.stop();  // interrupts acquire()
  });

  spdlog::info("API on {}: it answers UNAVAILABLE until this process holds the lease",
               api.listen_address());
  spdlog::info("acquiring the lease of node {} in {} (lease {})", run.node_id, store.describe(),
               format_duration(run.lease_duration));
  if (Status s = keeper.acquire(); !s.is_ok()) {
    if (stop.done()) {
      spdlog::info("stopped before acquiring the lease");
      return 0;
    }
    return fail(fmt::format("cannot acquire the lease: {}", s.to_string()));
  }
  keeper.start_renewing([&](const Status& why) { stop_node("lease lost", why); });

  auto hook = std::make_shared<EngineLogHook>();
  LogWriterOptions log_options;
  log_options.node_id = lease_options.node_id;
  log_options.process_id = lease_options.process_id;
  log_options.epoch = keeper.epoch();
  log_options.on_durable = hook->on_durable();
  log_options.epoch_start_unix_ms = unix_ms_now();
  LogWriter log(
      store, clock, log_options, [&] { return keeper.is_valid(); },
      [&](const Status& why) { stop_node("log stopped", why); });
  if (Status s = log.open(); !s.is_ok()) {
    keeper.stop();
    return fail(fmt::format("cannot open the log: {}", s.to_string()));
  }

  EngineOptions engine_options;
  engine_options.node_id = lease_options.node_id;
  engine_options.process_id = lease_options.process_id;
  engine_options.epoch = keeper.epoch();
  engine_options.local_store_path = run.local_store_path;
  engine_options.log_hook = hook;
  engine_options.snapshots.interval = run.snapshots.interval;
  engine_options.snapshots.every_records = run.snapshots.every_records;
  engine_options.snapshots.keep = run.snapshots.keep;
  auto engine = Engine::open(engine_options, store, log, clock);
  if (!engine.is_ok()) {
    keeper.stop();
    return fail(fmt::format("cannot open the engine: {}", engine.status().to_string()));
  }
  spdlog::info("local store {}: {}", run.local_store_path.string(),
               engine.value()->local_store_report());
  api.set_active(engine.value().get(),
                 {run.node_id, keeper.epoch(), lease_options.process_id.value},
                 [&keeper] { return keeper.is_valid(); });

  // Tests and users wait for this line.
  std::cout << fmt::format(
                   "dex-server-zd {} ready: node {} epoch {} holder {} listening on {} ({}, "
                   "lease {}, log from slot {})",
                   run.program, run.node_id, keeper.epoch().value, lease_options.process_id.value,
                   api.listen_address(), run.data_description, format_duration(run.lease_duration),
                   log.epoch_start_slot().value)
            << std::endl;

  std::optional<Status> fatal = stop.wait();
  api.set_inactive(fatal ? fmt::format("node {} stopped: {}", run.node_id, fatal->message())
                         : std::string("this process is shutting down"));
  engine.value()->stop();
  if (fatal) {
    // Refuse further work: no more log writes, no release (the lease is not ours
    // or cannot be trusted), and exit 1 as the spec requires.
    keeper.stop();
    spdlog::error("stopping node {}: {}", run.node_id, fatal->to_string());
    api.shutdown(seconds(0));
    return 1;
  }
  api.shutdown(seconds(1));
  engine.value().reset();
  Status closed = log.close();
  Status released = keeper.release();
  if (!closed.is_ok()) spdlog::warn("log close: {}", closed.to_string());
  if (!released.is_ok()) {
    spdlog::warn("lease release failed ({}); a successor waits for it to expire",
                 released.to_string());
  }
  return closed.is_ok() && released.is_ok() ? 0 : 1;
}

}  // namespace dex
