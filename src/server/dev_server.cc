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
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/api_server.h"
#include "api/api_tls.h"
#include "auth/token_store.h"
#include "common/random.h"
#include "common/version.h"
#include "lease/dev_lock.h"
#include "metrics/metered_store.h"
#include "metrics/metrics.h"
#include "node/node.h"
#include "objstore/store_settings.h"
#include "server/attribute_tables.h"
#include "server/memory_trimmer.h"
#include "tls/ssl_context.h"
#include "tls/tls_watcher.h"
#include "web/https_text.h"
#include "web/web_server.h"

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

// GET /api/v1/process (docs/dex-web.md): the node's own account of itself,
// as dex-web shows it. The node outlives the web server.
web::ProcessStatusSource process_status_of(const Node& node) {
  return [&node] {
    const NodeStatus n = node.status();
    web::ProcessStatus p;
    p.process_id = n.process_id;
    p.node_id = n.node_id;
    p.role = n.role;
    p.phase = n.phase;
    p.serving = n.serving;
    p.standby_mode = n.hot ? "hot" : "cold";
    p.standby_state = n.standby_state;
    if (n.standby_lag) {
      p.lag_seconds = std::chrono::duration<double>(*n.standby_lag).count();
    }
    p.epoch = n.epoch;
    p.holder_process_id = n.holder_process_id;
    p.lease_released = n.lease_released;
    p.log_head = n.log_head;
    p.applied_slot = n.applied_slot;
    p.not_serving_reason = n.not_serving_reason;
    return p;
  };
}

// api.tls and web.tls of one process (docs/operations.md, "TLS"): what each
// listener serves, reloaded from disk while the process runs. Outlives both
// listeners.
struct ProcessTls {
  std::unique_ptr<ApiTls> api;                    // null: the API is plaintext
  std::unique_ptr<tls::ReloadingSslContext> web;  // null: dex-web is plain HTTP
};

// Reads and checks the configured files (an error names the key and the
// file) and starts watching them; warns about a listener reachable beyond
// loopback without TLS.
StatusOr<ProcessTls> start_tls(const NodeSettings& settings) {
  ProcessTls out;
  for (const auto& [key, listen, files] :
       {std::tuple{"api.listen", settings.listen, &settings.api_tls},
        std::tuple{"web.listen", settings.web_listen, &settings.web_tls}}) {
    if (std::string warning = plaintext_exposure_warning(key, listen, *files); !warning.empty()) {
      spdlog::warn("{}", warning);
    }
    if (!files->enabled() || listen.empty()) continue;
    auto watcher = tls::TlsWatcher::start(*files);
    if (!watcher.is_ok()) return watcher.status();
    std::shared_ptr<tls::TlsWatcher> shared = std::move(watcher).value();
    spdlog::info("{}; certificate {}, expires {}", tls::describe_server_tls(*files),
                 shared->current()->subject, shared->current()->not_after);
    if (files == &settings.api_tls) {
      auto api = ApiTls::start(shared);
      if (!api.is_ok()) return api.status();
      out.api = std::move(api).value();
    } else {
      out.web = std::make_unique<tls::ReloadingSslContext>(shared);
    }
  }
  return out;
}

// metrics.tls (serve): the metrics endpoint's checked, reloaded material;
// null when it is plaintext. (No warning for plaintext metrics beyond
// loopback: they are read-only and carry no credential; the manifests scrape
// them in-cluster.)
StatusOr<std::unique_ptr<tls::ReloadingSslContext>> start_metrics_tls(
    const NodeSettings& settings) {
  if (settings.metrics_listen.empty() || !settings.metrics_tls.enabled()) {
    return std::unique_ptr<tls::ReloadingSslContext>();
  }
  auto watcher = tls::TlsWatcher::start(settings.metrics_tls);
  if (!watcher.is_ok()) return watcher.status();
  spdlog::info("{}", tls::describe_server_tls(settings.metrics_tls));
  return std::make_unique<tls::ReloadingSslContext>(
      std::shared_ptr<tls::TlsWatcher>(std::move(watcher).value()));
}

// dex-web (docs/dex-web.md) when web.listen names an address: it calls this
// process's API as a client does (a wildcard API host dialled as loopback),
// and reads the node's status for GET /api/v1/process.
// Null when off; a bind failure (the port in use) fails startup.
StatusOr<std::unique_ptr<web::WebServer>> start_web(const NodeSettings& settings,
                                                    const ApiServer& api, const Node& node,
                                                    const ProcessTls& tls) {
  if (settings.web_listen.empty()) return std::unique_ptr<web::WebServer>();
  web::WebServerOptions options;
  options.listen = settings.web_listen;
  const std::string& api_listen = settings.listen;
  options.api_address =
      fmt::format("{}:{}", api_listen.substr(0, api_listen.rfind(':')), api.port());
  options.assets_dir =
      settings.web_assets.empty() ? web::default_assets_dir() : settings.web_assets;
  options.version = git_revision().empty()
                        ? std::string(project_version())
                        : fmt::format("{} (git {})", project_version(), git_revision());
  // Whether dex-web asks for a token before an action: any credential configured
  // (docs/api.md, "Access").
  options.admin_auth = settings.access.any();
  options.process_status = process_status_of(node);
  if (tls.api != nullptr) options.gateway_address = tls.api->gateway_address();
  if (tls.web != nullptr) {
    options.tls_setup = [ctx = tls.web.get()](SSL_CTX& ssl) { return ctx->setup(ssl); };
  }
  auto server = web::WebServer::start(options);
  if (!server.is_ok() && settings.web_listen_is_default) {
    // dev's default address, not asked for: another dev process may have it.
    spdlog::warn(
        "dex-web is not served: {} (--web-listen HOST:PORT serves it elsewhere; --no-web turns "
        "it off)",
        server.status().message());
    return std::unique_ptr<web::WebServer>();
  }
  if (!server.is_ok()) {
    return Status::invalid_argument(fmt::format(
        "{} (web.listen, --web-listen; --no-web turns dex-web off)", server.status().message()));
  }
  spdlog::info("dex-web on {}", server.value()->url());
  if (!server.value()->assets_built()) {
    spdlog::warn(
        "dex-web's assets are not built (no index.html in {}): its pages say so and the JSON "
        "API works; run scripts/build-web, or set --web-assets / web.assets",
        options.assets_dir.string());
  }
  return server;
}

// One process of a node: its role (Node, src/node) and the API that reads it.
// The signal watcher turns SIGINT/SIGTERM into Node::signal (the first drains,
// a second skips the drain). dex-web, if served, stops before the API.
int serve_node(Node& node, ApiServer& api, web::WebServer* web) {
  node.set_listen_description(api.listen_address());
  MemoryTrimmer trimmer(MemoryTrimmer::kServerInterval);
  std::atomic<int> signals{0};
  SignalWatcher watcher([&](int sig) {
    const bool second = signals.fetch_add(1) > 0;
    spdlog::info("received {}; {}", sig == SIGINT ? "SIGINT" : "SIGTERM",
                 second ? "skipping the drain" : "shutting down (a second signal skips the drain)");
    node.signal();
  });
  const int code = node.run();
  if (web != nullptr) web->stop();
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
  return options;
}

// The API listener's TLS credentials, and the local socket dex-web's gateway
// calls it through: with TLS (and client certificates required) on the API,
// the gateway would otherwise need a client certificate of its own. The
// socket is plaintext in a directory only this user can enter. The API's
// options for every subcommand: listen, admin, values, TLS and the health port.
ApiServerOptions api_options_of(const NodeSettings& settings, const ProcessTls& tls) {
  ApiServerOptions options = api_options_for(settings.listen, settings.admin_enabled,
                                             settings.admin_token_sha256, settings.values);
  options.health_listen = settings.health_listen;
  if (tls.api == nullptr) return options;
  options.credentials = tls.api->credentials();
  if (!settings.web_listen.empty()) options.local_listen = tls.api->gateway_address();
  return options;
}

// auth.* (docs/api.md, "Access"): opens the token files (an unusable one
// fails startup, naming its key and file) and watches them for rotation;
// logs what is configured (never a token) and warns when the API is
// reachable beyond loopback with calls that need no credential. Null when
// nothing is configured (every call open).
StatusOr<std::shared_ptr<auth::TokenStore>> open_access(const NodeSettings& settings) {
  const auth::AccessSettings& access = settings.access;
  const size_t admin_credentials = access.file_count(auth::Role::kAdmin) +
                                   access.digest_count(auth::Role::kAdmin) +
                                   access.identity_count(auth::Role::kAdmin);
  const bool beyond = !listen_is_loopback(settings.listen);
  for (const std::string& warning :
       {access.every_call_needs_credential  // then nobody without admin can reach AdminService
            ? std::string()
            : admin_exposure_warning(settings.listen, settings.admin_enabled, admin_credentials),
        auth::access_exposure_warning(settings.listen, beyond, access)}) {
    if (!warning.empty()) spdlog::warn("{}", warning);
  }
  if (access.every_call_needs_credential && admin_credentials == 0 && settings.admin_enabled) {
    spdlog::warn(
        "auth.tokens gives no admin token (and auth.certificateRoles no admin identity): nobody "
        "can describe this node or step it down; add auth.tokens.admin.files");
  }
  if (!access.certificate_roles.empty() && settings.api_tls.client_ca_file.empty()) {
    spdlog::warn(
        "auth.certificateRoles maps client certificates to roles, but api.tls.clientCaFile is not "
        "set: no client certificate is verified, so no caller gets a role from one");
  }
  spdlog::info("access: {}", auth::describe_access(access));
  if (!access.any()) return std::shared_ptr<auth::TokenStore>();
  auto store = auth::TokenStore::open(access);
  if (!store.is_ok()) return store.status();
  store.value()->watch();
  return store;
}

// `options` with the accepted credentials of open_access.
ApiServerOptions with_access(ApiServerOptions options, std::shared_ptr<auth::TokenStore> access) {
  options.access = std::move(access);
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

int run_dev_server(const NodeSettings& settings, Subcommand command) {
  block_stop_signals();
  const std::string_view program = subcommand_name(command);
  const fs::path data_dir = fs::absolute(settings.data_dir);
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
        format_duration(settings.lease_duration + seconds(1)));
  }

  const fs::path marker = data_dir / kRelaxedMarker;
  if (fs::exists(marker)) {
    return fail(fmt::format(
        "cannot start: the previous dex-server-zd {} on {} ran with durability relaxed and exited "
        "abruptly, so its recent writes may be torn. Delete the data directory {} to start afresh.",
        program, data_dir.string(), data_dir.string()));
  }

  auto tls = start_tls(settings);
  if (!tls.is_ok()) return fail(fmt::format("cannot start: {}", tls.status().message()));
  ApiServerOptions api_options = api_options_of(settings, tls.value());

  auto store = open_object_store(data_dir_object_store(data_dir, settings.durability));
  if (!store.is_ok())
    return fail(fmt::format("cannot open the object store: {}", store.status().message()));

  auto tables = open_attribute_tables(settings);
  if (!tables.is_ok()) return fail(fmt::format("cannot start: {}", tables.status().message()));
  NodeRuntime runtime;
  runtime.attribute_tables = tables->pointers();
  runtime.program = std::string(program);
  runtime.holder_is_stopped = lock.value()->held();
  runtime.local_store_path = data_dir / "local";
  runtime.data_description = fmt::format("data {}, durability {}", data_dir.string(),
                                         durability_name(settings.durability));
  auto access = open_access(settings);
  if (!access.is_ok()) return fail(fmt::format("cannot start: {}", access.status().message()));
  Node node(settings, runtime, *store.value(), SystemClock::instance());
  // Listen first: a port in use fails before the lease is touched, and clients
  // that arrive early get UNAVAILABLE until this process is active.
  auto api = ApiServer::start(with_access(api_options, access.value()), node);
  if (!api.is_ok()) return fail(fmt::format("cannot start: {}", api.status().message()));
  if (api.value()->health_port() != 0) {
    spdlog::info("gRPC health only, plaintext, on {}:{} (api.healthListen)",
                 settings.health_listen.substr(0, settings.health_listen.rfind(':')),
                 api.value()->health_port());
  }
  auto web = start_web(settings, *api.value(), node, tls.value());
  if (!web.is_ok()) {
    api.value()->shutdown(seconds(0));
    return fail(fmt::format("cannot start: {}", web.status().message()));
  }
  if (settings.durability == Durability::kRelaxed) {
    std::ofstream(marker) << "dex-server-zd with durability relaxed is running or crashed\n";
  }
  int code = serve_node(node, *api.value(), web.value().get());
  if (code == 0) fs::remove(marker, ec);
  return code;
}

int run_serve_server(const NodeSettings& settings) {
  block_stop_signals();
  // metrics.tls: outlives the metrics endpoint, whose handshakes it serves.
  auto metrics_tls = start_metrics_tls(settings);
  if (!metrics_tls.is_ok()) {
    return fail(fmt::format("cannot start: {}", metrics_tls.status().message()));
  }
  // First, so that it is destroyed last.
  Metrics metrics(settings.metrics_type_labels_max);
  // The HTTPS metrics endpoint (metrics.tls); goes before `metrics`.
  std::unique_ptr<web::HttpsText> metrics_https;
  if (!settings.metrics_listen.empty() && metrics_tls.value() != nullptr) {
    auto https = web::HttpsText::start(
        settings.metrics_listen, "/metrics", "text/plain; version=0.0.4; charset=utf-8",
        [&metrics] { return metrics.render(); },
        [ctx = metrics_tls.value().get()](SSL_CTX& ssl) { return ctx->setup(ssl); });
    if (!https.is_ok()) {
      return fail(fmt::format("cannot serve metrics: {} (metrics.listen, metrics.tls)",
                              https.status().message()));
    }
    metrics_https = std::move(https).value();
    spdlog::info("metrics on https://{}:{}/metrics",
                 settings.metrics_listen.substr(0, settings.metrics_listen.rfind(':')),
                 metrics_https->port());
  } else if (!settings.metrics_listen.empty()) {
    if (Status s = metrics.listen(settings.metrics_listen); !s.is_ok()) {
      return fail(fmt::format("cannot serve metrics: {}", s.to_string()));
    }
    spdlog::info("metrics on http://{}:{}/metrics",
                 settings.metrics_listen.substr(0, settings.metrics_listen.rfind(':')),
                 metrics.port());
  }
  auto opened = open_object_store(settings.object_store);
  if (!opened.is_ok())
    return fail(fmt::format("cannot open the object store: {}", opened.status().message()));
  // Every request is counted by operation and outcome (docs/metrics.md).
  MeteredObjectStore store(*opened.value(), metrics);
  auto tls = start_tls(settings);
  if (!tls.is_ok()) return fail(fmt::format("cannot start: {}", tls.status().message()));
  ApiServerOptions api_options = api_options_of(settings, tls.value());
  auto tables = open_attribute_tables(settings);
  if (!tables.is_ok()) return fail(fmt::format("cannot start: {}", tables.status().message()));
  NodeRuntime runtime;
  runtime.attribute_tables = tables->pointers();
  runtime.program = "serve";
  runtime.holder_is_stopped = false;  // no dev lock: a held lease is waited out (standby)
  runtime.local_store_path = fs::absolute(settings.local_store_path);
  runtime.data_description = fmt::format("objects {}, local store {}", store.describe(),
                                         runtime.local_store_path.string());
  runtime.metrics = &metrics;
  auto access = open_access(settings);
  if (!access.is_ok()) return fail(fmt::format("cannot start: {}", access.status().message()));
  Node node(settings, runtime, store, SystemClock::instance());
  auto api = ApiServer::start(with_access(api_options, access.value()), node);
  if (!api.is_ok()) return fail(fmt::format("cannot start: {}", api.status().message()));
  if (api.value()->health_port() != 0) {
    spdlog::info("gRPC health only, plaintext, on {}:{} (api.healthListen)",
                 settings.health_listen.substr(0, settings.health_listen.rfind(':')),
                 api.value()->health_port());
  }
  auto web = start_web(settings, *api.value(), node, tls.value());
  if (!web.is_ok()) {
    api.value()->shutdown(seconds(0));
    return fail(fmt::format("cannot start: {}", web.status().message()));
  }
  return serve_node(node, *api.value(), web.value().get());
}

}  // namespace dex
