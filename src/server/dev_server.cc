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
#include "lease/dev_lock.h"
#include "metrics/metered_store.h"
#include "metrics/metrics.h"
#include "node/node.h"
#include "objstore/filesystem_store.h"
#include "objstore/s3_store.h"
#include "server/serve_check.h"

namespace dex {
namespace {

namespace fs = std::filesystem;

// Present while a dev process runs in relaxed mode; removed by a clean exit. Its
// presence at startup means a relaxed process exited abruptly: unsynced writes
// may be torn, so the directory is not trusted (spec: Lease, relaxed).
constexpr const char* kRelaxedMarker = "relaxed-running";

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

// One process of a node: its role (Node, src/node) and the API that reads it.
// The signal watcher turns SIGINT/SIGTERM into Node::signal (the first drains,
// a second skips the drain).
int serve_node(Node& node, ApiServer& api) {
  node.set_listen_description(api.listen_address());
  std::atomic<int> signals{0};
  SignalWatcher watcher([&](int sig) {
    const bool second = signals.fetch_add(1) > 0;
    spdlog::info("received {}; {}", sig == SIGINT ? "SIGINT" : "SIGTERM",
                 second ? "skipping the drain" : "shutting down (a second signal skips the drain)");
    node.signal();
  });
  const int code = node.run();
  // Calls still open (a step down's answer, a Worker stream ending) get a moment.
  api.shutdown(seconds(1));
  return code;
}

// The API's options, the same in every mode; warns when AdminService is
// reachable beyond loopback without a credential.
ApiServerOptions api_options_for(const std::string& listen, bool admin_enabled,
                                 const std::vector<std::string>& admin_token_sha256,
                                 const ValueSettings& values) {
  ApiServerOptions options;
  options.listen = listen;
  // A request or a Worker result may carry values up to values.maxSize.
  options.message_bytes_max = static_cast<int>(values_message_bytes_max(values));
  options.admin_enabled = admin_enabled;
  options.admin_token_sha256 = admin_token_sha256;
  if (std::string warning =
          admin_exposure_warning(listen, admin_enabled, admin_token_sha256.size());
      !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  return options;
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

  const ApiServerOptions api_options = api_options_for(config.listen, config.admin_enabled,
                                                       config.admin_token_sha256, config.values);

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
  run.values = config.values;
  run.flows = config.flows;
  run.attempt_drain_timeout = config.attempt_drain_timeout;
  Node node(run, *store.value(), SystemClock::instance());
  // Listen first: a port in use fails before the lease is touched, and clients
  // that arrive early get UNAVAILABLE until this process is active.
  auto api = ApiServer::start(api_options, node);
  if (!api.is_ok()) return fail(fmt::format("cannot start: {}", api.status().message()));
  if (config.durability == Durability::kRelaxed) {
    std::ofstream(marker) << "dex-server-zd with durability relaxed is running or crashed\n";
  }
  int code = serve_node(node, *api.value());
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
  const ApiServerOptions api_options = api_options_for(config.listen, config.admin_enabled,
                                                       config.admin_token_sha256, config.values);
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
  run.values = config.values;
  run.flows = config.flows;
  run.standby_mode = config.standby_mode;
  if (config.standby_mode == "hot") run.held_lease_poll_interval = config.held_lease_poll_interval;
  run.lagging_takeover_delay = config.lagging_takeover_delay;
  run.behind_lag_threshold = config.behind_lag_threshold;
  run.step_down_hold_off = config.step_down_hold_off;
  run.attempt_drain_timeout = config.attempt_drain_timeout;
  run.metrics = &metrics;
  Node node(run, store, SystemClock::instance());
  auto api = ApiServer::start(api_options, node);
  if (!api.is_ok()) return fail(fmt::format("cannot start: {}", api.status().message()));
  return serve_node(node, *api.value());
}

}  // namespace dex
