#include "metrics/metrics.h"

#include <CivetServer.h>
#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <charconv>
#include <mutex>
#include <thread>

#include "metrics/attribute_sync_metrics.h"
#include "metrics/flow_metrics.h"

namespace dex {
namespace {

// Latency buckets from 1 ms to 10 s: a log batch or an object-store request
// takes a few ms on a filesystem, tens of ms on S3, and the log write limit is
// 10 s (docs/metrics.md).
const std::vector<double> kLatencyBucketsSeconds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                    0.25,  0.5,    1,     2.5,  5,     10};

constexpr std::array kStandbyStates = {StandbyState::kFollowing, StandbyState::kBootstrapping,
                                       StandbyState::kBehind, StandbyState::kRestarting,
                                       StandbyState::kFailed};
constexpr std::array kLeaseRenewals = {LeaseRenewal::kRenewed, LeaseRenewal::kAdopted,
                                       LeaseRenewal::kRetried, LeaseRenewal::kLost};
constexpr std::array kOperations = {ObjectStoreOperation::kGet, ObjectStoreOperation::kPut,
                                    ObjectStoreOperation::kRemove, ObjectStoreOperation::kList};
constexpr std::array kCodes = {Code::kOk,        Code::kPreconditionFailed, Code::kNotFound,
                               Code::kTransient, Code::kPermanent,          Code::kCorruption,
                               Code::kFenced,    Code::kInvalidArgument,    Code::kStopped};
static_assert(static_cast<size_t>(Code::kOk) == 0 && static_cast<size_t>(Code::kStopped) == 8 &&
              kCodes.size() == 9 && kCodes[8] == Code::kStopped);
constexpr std::array kAttemptOutcomes = {flow::ATTEMPT_COMPLETED, flow::ATTEMPT_FAILED,
                                         flow::ATTEMPT_TIMED_OUT, flow::ATTEMPT_NOT_COMPLETED};
constexpr std::array kFlowEnds = {flow::FLOW_COMPLETED, flow::FLOW_FAILED,
                                  flow::FLOW_CANCELED,  flow::FLOW_TERMINATED,
                                  flow::FLOW_TIMED_OUT, flow::FLOW_CONTINUED_AS_NEW};

size_t standby_index(StandbyState state) {
  assert(state != StandbyState::kNotStandby);
  return static_cast<size_t>(state) - 1;
}

double to_seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// civetweb reports why it could not start (e.g. "cannot bind to 127.0.0.1:9100:
// 98 (Address already in use)") through log_message, on the thread that starts
// it. listen() points this at a string while it constructs the server; on
// civetweb's own threads it is null and messages go to the debug log.
thread_local std::string* civetweb_errors = nullptr;

int civetweb_log_message(const mg_connection*, const char* message) {
  if (civetweb_errors != nullptr) {
    if (!civetweb_errors->empty()) *civetweb_errors += "; ";
    *civetweb_errors += message;
  } else {
    spdlog::debug("metrics http server: {}", message);
  }
  return 1;  // handled: civetweb writes nothing itself
}

// "host:port" with a non-empty host and a decimal port of at most 65535.
Status validate_listen_address(std::string_view address) {
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument(
        fmt::format("metrics listen address '{}': {} (expected host:port, e.g. 127.0.0.1:9100; "
                    "port 0 picks a free port)",
                    address, why));
  };
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return bad("no ':port'");
  std::string_view host = address.substr(0, colon);
  std::string_view port = address.substr(colon + 1);
  if (host.empty()) return bad("the host is empty");
  for (char c : address) {
    // ',' separates civetweb's listening ports; one address here.
    if (c == ',' || c <= ' ' || c == 0x7f) return bad("it contains ',', a space or a control");
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("the port is not a number");
  }
  int value = 0;
  std::from_chars(port.data(), port.data() + port.size(), value);
  if (value > 65535) return bad("the port is above 65535");
  return Status::ok();
}

// Connects to `address` and hangs up at once. Best effort.
void poke(const sockaddr_in& address) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  ::close(fd);
}

// civetweb's accept loop polls its listening socket in 2 s quanta and looks at
// its stop flag only between them, so stopping a server that has served a
// request takes up to 2 s. Connecting to it while it stops wakes the loop at
// once. `host` is the listen host ("0.0.0.0" and "localhost" are reached on
// 127.0.0.1); any other name than an IPv4 address just waits the quantum.
void stop_quickly(std::unique_ptr<prometheus::Exposer>& exposer, const std::string& host,
                  int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  const std::string target = host == "0.0.0.0" || host == "localhost" ? "127.0.0.1" : host;
  if (port <= 0 || ::inet_pton(AF_INET, target.c_str(), &address.sin_addr) != 1) {
    exposer.reset();
    return;
  }
  std::atomic<bool> stopped{false};
  // Bounded: ends once the server stopped (at most one quantum, ~100 pokes).
  std::thread poker([&] {
    while (!stopped.load()) {
      poke(address);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer.reset();
  stopped = true;
  poker.join();
}

}  // namespace

std::string_view standby_state_label(StandbyState state) {
  switch (state) {
    case StandbyState::kNotStandby:
      return "";
    case StandbyState::kFollowing:
      return "following";
    case StandbyState::kBootstrapping:
      return "bootstrapping";
    case StandbyState::kBehind:
      return "behind";
    case StandbyState::kRestarting:
      return "restarting";
    case StandbyState::kFailed:
      return "failed";
  }
  return "";
}

std::string_view lease_renewal_label(LeaseRenewal renewal) {
  switch (renewal) {
    case LeaseRenewal::kRenewed:
      return "renewed";
    case LeaseRenewal::kAdopted:
      return "adopted";
    case LeaseRenewal::kRetried:
      return "retried";
    case LeaseRenewal::kLost:
      return "lost";
  }
  return "unknown";
}

std::string_view object_store_operation_label(ObjectStoreOperation op) {
  switch (op) {
    case ObjectStoreOperation::kGet:
      return "get";
    case ObjectStoreOperation::kPut:
      return "put";
    case ObjectStoreOperation::kRemove:
      return "remove";
    case ObjectStoreOperation::kList:
      return "list";
  }
  return "unknown";
}

std::string_view status_outcome_label(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kPreconditionFailed:
      return "precondition_failed";
    case Code::kNotFound:
      return "not_found";
    case Code::kTransient:
      return "transient";
    case Code::kPermanent:
      return "permanent";
    case Code::kCorruption:
      return "corruption";
    case Code::kFenced:
      return "fenced";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kStopped:
      return "stopped";
    case Code::kAlreadyExists:
      return "already_exists";
    case Code::kDeadlineExceeded:
      return "deadline_exceeded";
  }
  return "unknown";
}

struct Metrics::Impl {
  // Constant after construction (the metrics they point at are owned by the
  // registry and are thread-safe themselves).
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::array<prometheus::Gauge*, kStandbyStates.size()> standby{};
  prometheus::Gauge* standby_lag = nullptr;
  prometheus::Gauge* node_epoch = nullptr;
  prometheus::Gauge* active = nullptr;
  std::array<prometheus::Counter*, kLeaseRenewals.size()> renewals{};
  prometheus::Histogram* log_append = nullptr;
  prometheus::Counter* log_batches = nullptr;
  prometheus::Counter* log_records = nullptr;
  std::array<std::array<prometheus::Counter*, kCodes.size()>, kOperations.size()> requests{};
  std::array<prometheus::Histogram*, kOperations.size()> request_seconds{};
  prometheus::Family<prometheus::Counter>* flows = nullptr;
  prometheus::Family<prometheus::Counter>* attempts = nullptr;
  prometheus::Counter* runs_deleted = nullptr;
  prometheus::Counter* blob_collections = nullptr;
  prometheus::Counter* blobs_deleted = nullptr;
  prometheus::Counter* blob_bytes_freed = nullptr;
  prometheus::Counter* blob_delete_errors = nullptr;
  // The known outcomes' series, by enum value (null for the others).
  std::array<prometheus::Counter*, flow::FlowStatus_ARRAYSIZE> flow_ends{};
  std::array<prometheus::Counter*, flow::AttemptOutcome_ARRAYSIZE> attempt_ends{};
  std::unique_ptr<FlowMetrics> by_type;                  // the series by Flow, Step and RPC type
  std::unique_ptr<AttributeSyncMetrics> attribute_sync;  // the series by store

  // Serializes set_standby_state so that the last call wins on all five gauges.
  std::mutex standby_mu;
  StandbyState standby_state = StandbyState::kNotStandby;  // guarded by standby_mu

  mutable std::mutex listen_mu;
  std::unique_ptr<prometheus::Exposer> exposer;  // guarded by listen_mu
  std::string host;                              // guarded by listen_mu; the listen host
  int port = 0;                                  // guarded by listen_mu
};

Metrics::Metrics(size_t type_labels_max) : impl_(std::make_unique<Impl>()) {
  prometheus::Registry& r = *impl_->registry;
  auto& standby = prometheus::BuildGauge()
                      .Name("dexzd_hot_standby_state")
                      .Help(
                          "1 for this process's hot-standby state, 0 for the other states; all "
                          "0 when the process is not a hot standby")
                      .Register(r);
  for (StandbyState s : kStandbyStates) {
    impl_->standby[standby_index(s)] =
        &standby.Add({{"state", std::string(standby_state_label(s))}});
  }
  impl_->standby_lag =
      &prometheus::BuildGauge()
           .Name("dexzd_hot_standby_lag_seconds")
           .Help(
               "How far this hot standby is behind the active process's log; 0 when not a "
               "standby")
           .Register(r)
           .Add({});
  impl_->node_epoch = &prometheus::BuildGauge()
                           .Name("dexzd_node_epoch")
                           .Help("The node epoch this process holds, or last saw as a standby")
                           .Register(r)
                           .Add({});
  impl_->active = &prometheus::BuildGauge()
                       .Name("dexzd_active")
                       .Help("1 while this process holds the node's lease and serves, else 0")
                       .Register(r)
                       .Add({});
  auto& renewals = prometheus::BuildCounter()
                       .Name("dexzd_lease_renewals_total")
                       .Help(
                           "Lease renewal attempts by outcome: renewed, adopted (answer lost, "
                           "read back), retried (failed, retried), lost")
                       .Register(r);
  for (LeaseRenewal x : kLeaseRenewals) {
    impl_->renewals[static_cast<size_t>(x)] =
        &renewals.Add({{"outcome", std::string(lease_renewal_label(x))}});
  }
  impl_->log_append = &prometheus::BuildHistogram()
                           .Name("dexzd_log_append_seconds")
                           .Help(
                               "Latency of an acknowledged log batch, from its first write "
                               "attempt to its acknowledgement")
                           .Register(r)
                           .Add({}, kLatencyBucketsSeconds);
  impl_->log_batches = &prometheus::BuildCounter()
                            .Name("dexzd_log_batches_total")
                            .Help("Log batches acknowledged (EpochStart batches excluded)")
                            .Register(r)
                            .Add({});
  impl_->log_records = &prometheus::BuildCounter()
                            .Name("dexzd_log_records_total")
                            .Help("Log records acknowledged")
                            .Register(r)
                            .Add({});
  auto& requests = prometheus::BuildCounter()
                       .Name("dexzd_object_store_requests_total")
                       .Help("Object-store requests by operation and outcome")
                       .Register(r);
  auto& request_seconds = prometheus::BuildHistogram()
                              .Name("dexzd_object_store_request_seconds")
                              .Help("Object-store request latency by operation")
                              .Register(r);
  for (ObjectStoreOperation op : kOperations) {
    const std::string op_label(object_store_operation_label(op));
    const size_t i = static_cast<size_t>(op);
    for (size_t c = 0; c < kCodes.size(); ++c) {
      impl_->requests[i][c] = &requests.Add(
          {{"operation", op_label}, {"outcome", std::string(status_outcome_label(kCodes[c]))}});
    }
    impl_->request_seconds[i] =
        &request_seconds.Add({{"operation", op_label}}, kLatencyBucketsSeconds);
  }
  impl_->flows = &prometheus::BuildCounter()
                      .Name("dexzd_flows_total")
                      .Help(
                          "Runs of dex Flows that closed, by final status: completed, failed, "
                          "canceled, terminated, timed_out")
                      .Register(r);
  for (flow::FlowStatus s : kFlowEnds) {
    impl_->flow_ends[s] = &impl_->flows->Add({{"outcome", std::string(flow_status_label(s))}});
  }
  impl_->attempts =
      &prometheus::BuildCounter()
           .Name("dexzd_attempts_total")
           .Help(
               "WaitFor and Execute attempts that ended, by outcome: completed, failed, "
               "timed_out, not_completed")
           .Register(r);
  for (flow::AttemptOutcome o : kAttemptOutcomes) {
    impl_->attempt_ends[o] =
        &impl_->attempts->Add({{"outcome", std::string(attempt_outcome_label(o))}});
  }
  auto counter = [&r](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  impl_->runs_deleted = counter("dexzd_runs_deleted_total",
                                "Runs of dex Flows deleted by their retention (flows.retention)");
  impl_->blob_collections =
      counter("dexzd_blob_collections_total", "Blob collection passes that ran to their end");
  impl_->blobs_deleted =
      counter("dexzd_blobs_deleted_total", "Blobs deleted because no run references them");
  impl_->blob_bytes_freed =
      counter("dexzd_blob_bytes_freed_total", "Bytes of the blobs deleted by collection");
  impl_->blob_delete_errors = counter("dexzd_blob_delete_errors_total",
                                      "Blob deletes that failed (the blob waits for a later pass)");
  impl_->by_type = std::make_unique<FlowMetrics>(r, type_labels_max);
  impl_->attribute_sync = std::make_unique<AttributeSyncMetrics>(r);
}

Metrics::~Metrics() {
  // The server first: no scrape may run while the registry goes away.
  std::lock_guard<std::mutex> lock(impl_->listen_mu);
  if (impl_->exposer) stop_quickly(impl_->exposer, impl_->host, impl_->port);
}

Status Metrics::listen(std::string_view address) {
  if (Status s = validate_listen_address(address); !s.is_ok()) return s;
  std::lock_guard<std::mutex> lock(impl_->listen_mu);
  if (impl_->exposer) {
    return Status::invalid_argument(fmt::format(
        "metrics: already serving on port {}; listen('{}') called twice", impl_->port, address));
  }
  CivetCallbacks callbacks;
  callbacks.log_message = civetweb_log_message;
  std::string errors;
  civetweb_errors = &errors;
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(std::string(address), 2, &callbacks);
  } catch (const std::exception& e) {
    civetweb_errors = nullptr;
    return Status::permanent(fmt::format("metrics: cannot serve /metrics on '{}': {}", address,
                                         errors.empty() ? std::string(e.what()) : errors));
  }
  civetweb_errors = nullptr;
  std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.size() != 1 || ports[0] <= 0) {
    return Status::permanent(fmt::format("metrics: serving on '{}' bound {} ports, expected one",
                                         address, ports.size()));
  }
  exposer->RegisterCollectable(impl_->registry, "/metrics");
  impl_->host = std::string(address.substr(0, address.rfind(':')));
  impl_->port = ports[0];
  impl_->exposer = std::move(exposer);
  return Status::ok();
}

int Metrics::port() const {
  std::lock_guard<std::mutex> lock(impl_->listen_mu);
  return impl_->port;
}

void Metrics::set_standby_state(StandbyState state) {
  std::lock_guard<std::mutex> lock(impl_->standby_mu);
  impl_->standby_state = state;
  // The new state is raised before the old one is cleared: a scrape in between
  // sees two states at 1 (the one just left really held a moment ago), never
  // none, so "no standby is following" cannot fire for a standby that is.
  if (state != StandbyState::kNotStandby) impl_->standby[standby_index(state)]->Set(1);
  for (StandbyState s : kStandbyStates) {
    if (s != state) impl_->standby[standby_index(s)]->Set(0);
  }
  if (state == StandbyState::kNotStandby) impl_->standby_lag->Set(0);
}

StandbyState Metrics::standby_state() const {
  std::lock_guard<std::mutex> lock(impl_->standby_mu);
  return impl_->standby_state;
}

void Metrics::set_standby_lag(Duration lag) {
  impl_->standby_lag->Set(std::max(0.0, to_seconds(lag)));
}

void Metrics::set_node_epoch(uint64_t epoch) { impl_->node_epoch->Set(static_cast<double>(epoch)); }

void Metrics::set_active(bool active) { impl_->active->Set(active ? 1 : 0); }

void Metrics::lease_renewal(LeaseRenewal renewal) {
  impl_->renewals[static_cast<size_t>(renewal)]->Increment();
}

void Metrics::log_append(Duration latency, size_t records) {
  impl_->log_append->Observe(std::max(0.0, to_seconds(latency)));
  impl_->log_batches->Increment();
  impl_->log_records->Increment(static_cast<double>(records));
}

void Metrics::object_store_request(ObjectStoreOperation op, Code outcome, Duration latency) {
  const size_t i = static_cast<size_t>(op);
  assert(i < kOperations.size());
  const size_t c = static_cast<size_t>(outcome);
  assert(c < kCodes.size() && kCodes[c] == outcome);
  impl_->requests[i][c]->Increment();
  impl_->request_seconds[i]->Observe(std::max(0.0, to_seconds(latency)));
}

void Metrics::flow_ended(flow::FlowStatus status) {
  if (status >= 0 && status < flow::FlowStatus_ARRAYSIZE && impl_->flow_ends[status] != nullptr) {
    impl_->flow_ends[status]->Increment();
    return;
  }
  // Not an end status: counted under its own label rather than dropped
  // (Family::Add returns the existing series after the first time).
  impl_->flows->Add({{"outcome", std::string(flow_status_label(status))}}).Increment();
}

void Metrics::flow_effects(const flow::Effects& effects) { impl_->by_type->applied(effects); }

void Metrics::runs_deleted(uint64_t runs) {
  impl_->runs_deleted->Increment(static_cast<double>(runs));
}

void Metrics::blobs_collected(uint64_t deleted, uint64_t bytes_freed, uint64_t delete_errors) {
  impl_->blob_collections->Increment();
  impl_->blobs_deleted->Increment(static_cast<double>(deleted));
  impl_->blob_bytes_freed->Increment(static_cast<double>(bytes_freed));
  impl_->blob_delete_errors->Increment(static_cast<double>(delete_errors));
}

void Metrics::attribute_sync(const AttributeSyncSample& sample) {
  impl_->attribute_sync->sample(sample);
}

void Metrics::attempt_ended(flow::AttemptOutcome outcome) {
  if (outcome >= 0 && outcome < flow::AttemptOutcome_ARRAYSIZE &&
      impl_->attempt_ends[outcome] != nullptr) {
    impl_->attempt_ends[outcome]->Increment();
    return;
  }
  impl_->attempts->Add({{"outcome", std::string(attempt_outcome_label(outcome))}}).Increment();
}

std::string Metrics::render() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

std::shared_ptr<prometheus::Registry> Metrics::registry() const { return impl_->registry; }

}  // namespace dex
