#include "api/api_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <openssl/crypto.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "auth/access_rules.h"
#include "auth/token_set.h"
#include "auth/token_store.h"
#include "common/digest.h"
#include "dex/api.grpc.pb.h"

namespace dex {

int grpc_code_for(const Status& status) {
  switch (status.code()) {
    case Code::kOk:
      return grpc::StatusCode::OK;
    case Code::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case Code::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case Code::kPreconditionFailed:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case Code::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case Code::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case Code::kTransient:
    case Code::kStopped:
    case Code::kFenced:
      return grpc::StatusCode::UNAVAILABLE;
    case Code::kPermanent:
    case Code::kCorruption:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::UNKNOWN;
}

namespace {

// The health names of the spec: readiness follows the active role; HotStandby
// is SERVING only on a following hot standby (a later issue).
constexpr const char* kReadinessNames[] = {"", "dex.FlowService", "dex.WorkerTaskService"};
constexpr const char* kHotStandbyName = "dex.HotStandby";

grpc::Status to_grpc(const Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(grpc_code_for(status)), status.message());
}

}  // namespace

// Shared by the services: the role (read through NodeRoleView) and the
// gRPC server that follows it.
class ApiServer::Impl {
 public:
  explicit Impl(NodeRoleView& role) : role_(role) {}

  StatusOr<std::shared_ptr<Engine>> engine() { return role_.engine(); }
  NodeIdentity identity() const { return role_.state().identity; }
  bool describe_refused() const { return role_.state().describe_refused; }
  NodeRoleView& role() { return role_; }

  // A StepDown call is open: the server is not replaced under it, and not in
  // the moment after it answered (so its answer reaches the client).
  void step_down_call(bool open) {
    std::lock_guard<std::mutex> lock(watch_mu_);
    if (open) {
      ++step_down_calls_;
    } else {
      --step_down_calls_;
      step_down_answered_at_ = SystemClock::instance().now();
    }
    watch_cv_.notify_all();
  }

  // The watcher thread: applies every change of the role. Bounded by stop_watch.
  void watch() {
    uint64_t seen_streams = role_.state().worker_streams_generation;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(watch_mu_);
        if (watch_stop_) return;
      }
      const RoleState state = role_.state();
      const bool applied = apply(state, seen_streams);
      if (applied) role_.role_applied(state.version);
      {
        std::lock_guard<std::mutex> lock(watch_mu_);
        if (applied) applied_version_ = state.version;
        watch_cv_.notify_all();
      }
      // A postponed swap is tried again soon; otherwise wait for a change.
      role_.wait_changed(state.version, applied ? milliseconds(200) : milliseconds(50));
    }
  }
  // True when everything `state` asks for is in place.
  bool apply(const RoleState& state, uint64_t& seen_streams) {
    if (state.worker_streams_generation != seen_streams) {
      seen_streams = state.worker_streams_generation;
      end_worker_streams();
    }
    std::lock_guard<std::mutex> lock(server_mu_);
    const bool hot = state.hot_standby && !state.active;
    // Only a change is pushed: every SetServingStatus reaches each health Watch.
    if (serving_ != state.active || hot_standby_ != hot) {
      serving_ = state.active;
      hot_standby_ = hot;
      apply_health_locked();
    }
    if (state.standby_connections == standby_server_) return true;
    if (state.standby_connections && step_down_call_recent()) return false;
    if (Status s = swap_locked(state.standby_connections); !s.is_ok()) {
      spdlog::error("cannot serve on {} as {}: {}; retrying", listen_,
                    state.standby_connections ? "a standby" : "the active process", s.to_string());
      return false;
    }
    return true;
  }
  bool step_down_call_recent() {
    std::lock_guard<std::mutex> lock(watch_mu_);
    return step_down_calls_ > 0 ||
           (step_down_answered_at_ &&
            SystemClock::instance().now() - *step_down_answered_at_ < milliseconds(300));
  }
  bool wait_applied(Duration timeout) {
    const uint64_t version = role_.state().version;
    std::unique_lock<std::mutex> lock(watch_mu_);
    return watch_cv_.wait_for(lock, timeout, [&] { return applied_version_ >= version; });
  }
  void stop_watch() {
    {
      std::lock_guard<std::mutex> lock(watch_mu_);
      watch_stop_ = true;
    }
    if (watcher_.joinable()) watcher_.join();
  }
  void start_watch() {
    watcher_ = std::thread([this] { watch(); });
  }

  // The access check of every call of the three services (docs/api.md,
  // "Access"; the rule is auth::decide_access): the caller's token is matched
  // in constant time against every accepted digest and is never logged or
  // echoed; a verified client certificate's identity may add roles.
  grpc::Status authorize(const grpc::ServerContext* context, std::string_view service,
                         std::string_view method) const {
    if (access_ == nullptr) return grpc::Status::OK;  // nothing configured: open
    auth::Caller caller;
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      caller.presented_token = true;
      const std::string_view value(it->second.data(), it->second.size());
      constexpr std::string_view kBearer = "Bearer ";
      if (value.starts_with(kBearer)) {
        caller.token_roles = access_->match(value.substr(kBearer.size())).roles;
      }
    }
    caller.certificate_roles = peer_certificate_roles(*context, access_->certificate_mapping());
    const auth::Decision decision = auth::decide_access(access_->policy(), service, method, caller);
    switch (decision.verdict) {
      case auth::Verdict::kAllowed:
        return grpc::Status::OK;
      case auth::Verdict::kUnauthenticated:
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, decision.message);
      case auth::Verdict::kPermissionDenied:
        break;
    }
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, decision.message);
  }
  // The roles of the peer's client certificate: its subject CN and SANs as
  // gRPC's auth context lists them under TLS (none on a plaintext listener).
  static auth::RoleSet peer_certificate_roles(const grpc::ServerContext& context,
                                              std::span<const auth::CertificateRole> mapping) {
    if (mapping.empty()) return {};
    const std::shared_ptr<const grpc::AuthContext> peer = context.auth_context();
    if (peer == nullptr) return {};
    std::vector<std::pair<std::string, std::string>> properties;
    for (const char* name : {"x509_common_name", "x509_subject_alternative_name"}) {
      for (const grpc::string_ref& value : peer->FindPropertyValues(name)) {
        properties.emplace_back(name, std::string(value.data(), value.size()));
      }
    }
    return auth::certificate_roles(peer->IsPeerAuthenticated(), properties, mapping);
  }
  // What Describe reports of access: per role, never a token or a digest.
  void describe_access(DescribeResponse& response) const {
    if (access_ == nullptr) {
      response.set_access_mode("open");
      return;
    }
    const auth::AccessSettings& settings = access_->settings();
    response.set_access_mode(settings.every_call_needs_credential ? "every-call" : "admin");
    for (auth::Role role : auth::kRoles) {
      AccessRoleStatus* status = response.add_access_roles();
      status->set_role(std::string(auth::role_name(role)));
      for (const auto& file : settings.files) {
        if (file.role == role) status->add_token_files(file.path);
      }
      status->set_token_digests(static_cast<uint32_t>(settings.digest_count(role)));
      status->set_tokens_accepted(static_cast<uint32_t>(access_->accepted(role)));
      uint32_t identities = 0;
      for (const auto& c : settings.certificate_roles) identities += c.role == role ? 1 : 0;
      status->set_certificate_identities(identities);
    }
  }
  // Open PollWorkerTask streams, so that a step down can end them at its
  // release (their Workers then reconnect and find the active process).
  class OpenStream {
   public:
    OpenStream(Impl& impl, grpc::ServerContext* context) : impl_(impl), context_(context) {
      std::lock_guard<std::mutex> lock(impl_.streams_mu_);
      impl_.streams_.insert(context_);
    }
    ~OpenStream() {
      std::lock_guard<std::mutex> lock(impl_.streams_mu_);
      impl_.streams_.erase(context_);
    }

   private:
    Impl& impl_;
    grpc::ServerContext* context_;
  };
  void end_worker_streams() {
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (grpc::ServerContext* context : streams_) context->TryCancel();
  }

  // Builds and starts a server on `address` for the given role; the services
  // are built anew (a grpc::Service serves one server in its life).
  // REQUIRES: server_mu_ held.
  Status build_locked(const std::string& address, bool standby) {
    services_.clear();
    services_.push_back(make_flow_service(*this));
    services_.push_back(make_worker_service(*this));
    if (options_.admin_enabled) services_.push_back(make_admin_service(*this));
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(
        address,
        options_.credentials != nullptr ? options_.credentials : grpc::InsecureServerCredentials(),
        &port);
    if (!options_.local_listen.empty()) {
      builder.AddListeningPort(options_.local_listen, grpc::InsecureServerCredentials());
    }
    builder.SetMaxReceiveMessageSize(options_.message_bytes_max);
    // gRPC sets SO_REUSEPORT by default: a second process on the same port would
    // silently share (and steal) connections. Refuse the bind instead.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // Dead Worker connections are noticed within about 20 s.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5'000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    if (standby) {
      // Spec: "A standby closes each client connection after about 3 seconds",
      // so a client that reached it reconnects and finds the active process.
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                                 static_cast<int>(to_ms(options_.standby_connection_age)));
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 500);
    }
    for (auto& service : services_) builder.RegisterService(service.get());
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port == 0) {
      server_.reset();
      return Status::invalid_argument(
          fmt::format("cannot listen on '{}' (address in use, or not host:port)", address));
    }
    port_ = port;
    standby_server_ = standby;
    apply_health_locked();
    return Status::ok();
  }

  // Replaces the running server by one for the other role on the same port.
  // Clients see the connection close and reconnect. REQUIRES: server_mu_ held.
  Status swap_locked(bool standby) {
    if (server_ == nullptr || standby_server_ == standby) return Status::ok();
    // A standby's calls are refusals: at once, a takeover waits for nothing.
    // An active process's calls were answered before it stepped down (the
    // StepDown call itself included); the short grace lets one that arrived
    // just now get its UNAVAILABLE instead of being cancelled.
    const auto grace =
        standby_server_ ? std::chrono::milliseconds(0) : std::chrono::milliseconds(250);
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_->Wait();
    server_.reset();
    // Rebinding right after the close: retry briefly in case the kernel is slow.
    Status built = Status::ok();
    for (int i = 0; i < 50; ++i) {
      built = build_locked(listen_, standby);
      if (built.is_ok()) return built;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return built;
  }

  void apply_health_locked() {
    for (grpc::Server* server : {server_.get(), health_server_.get()}) {
      auto* health = server == nullptr ? nullptr : server->GetHealthCheckService();
      if (health == nullptr) continue;
      for (const char* name : kReadinessNames) health->SetServingStatus(name, serving_);
      health->SetServingStatus(kHotStandbyName, hot_standby_);
    }
  }

  // The health-only plaintext server on options_.health_listen: gRPC's
  // default health service and nothing else. Built once; the API server's
  // swaps at role changes do not touch it. REQUIRES: server_mu_ held.
  Status build_health_locked() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.health_listen, grpc::InsecureServerCredentials(),
                             &health_port_);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // gRPC 1.51 refuses a server without a synchronous service (nothing would
    // poll its completion queue): the generated base of FlowService, whose
    // every method answers UNIMPLEMENTED, is that service.
    unimplemented_ = std::make_unique<FlowService::Service>();
    builder.RegisterService(unimplemented_.get());
    health_server_ = builder.BuildAndStart();
    if (health_server_ == nullptr || health_port_ == 0 ||
        health_server_->GetHealthCheckService() == nullptr) {
      health_server_.reset();
      return Status::invalid_argument(
          fmt::format("cannot listen on '{}' (api.healthListen: address in use, or not host:port)",
                      options_.health_listen));
    }
    apply_health_locked();
    return Status::ok();
  }

  static std::unique_ptr<grpc::Service> make_flow_service(Impl& impl);
  static std::unique_ptr<grpc::Service> make_worker_service(Impl& impl);
  static std::unique_ptr<grpc::Service> make_admin_service(Impl& impl);

  ApiServerOptions options_;
  // Constant after start: the accepted credentials; null: every call open.
  std::shared_ptr<auth::TokenStore> access_;
  std::mutex server_mu_;  // guards the fields below (the server and its health)
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;   // api.healthListen; null without one
  std::unique_ptr<grpc::Service> unimplemented_;  // health_server_'s only registered service
  int health_port_ = 0;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::string listen_;  // host:port with the port actually bound
  int port_ = 0;
  bool standby_server_ = true;
  bool serving_ = false;
  bool hot_standby_ = false;

 private:
  NodeRoleView& role_;
  std::mutex streams_mu_;
  std::set<grpc::ServerContext*> streams_;  // guarded by streams_mu_
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;                         // guarded by watch_mu_
  uint64_t applied_version_ = 0;                    // guarded by watch_mu_
  int step_down_calls_ = 0;                         // guarded by watch_mu_
  std::optional<TimePoint> step_down_answered_at_;  // guarded by watch_mu_
  std::thread watcher_;
};

namespace {

// What both flow services' calls do: the result into the response.
template <typename T, typename R>
Status assign(StatusOr<T> result, R* response) {
  if (!result.is_ok()) return result.status();
  *response = std::move(result).value();
  return Status::ok();
}

// Runs `f` on the active engine; a standby's refusal otherwise.
template <typename F>
grpc::Status call_engine(ApiServer::Impl& api, F&& f) {
  auto engine = api.engine();
  if (!engine.is_ok()) return to_grpc(engine.status());
  return to_grpc(f(*engine.value()));
}

// The first statement of every handler: the access check of this method,
// named by the handler itself (__func__), so that a handler cannot check
// another method's row of the table.
#define DEX_AUTHORIZE(service, context)                                                          \
  do {                                                                                           \
    if (grpc::Status denied = api_.authorize((context), service::service_full_name(), __func__); \
        !denied.ok()) {                                                                          \
      return denied;                                                                             \
    }                                                                                            \
  } while (false)

// dex.FlowService: the dex Flow API (docs/api.md, "Flows"). On a standby
// every call answers UNAVAILABLE naming the active holder, as the others do.
class FlowServiceImpl final : public FlowService::Service {
 public:
  explicit FlowServiceImpl(ApiServer::Impl& api) : api_(api) {}

  // With wait_timeout_ms, the start then waits for the run it answers (the
  // one started, or the one already_started names), as WaitForFlow with that
  // run ID: one round trip instead of two. The start is durable before the
  // wait begins, so an error of the wait (the engine stopped) leaves a retry
  // with the same request ID and ignore_already_started safe.
  grpc::Status StartFlow(grpc::ServerContext* context, const flow::StartFlowRequest* request,
                         flow::StartFlowResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    if (request->wait_timeout_ms() < 0)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "waitTimeoutMs must not be negative");
    return call([&](Engine& e) -> Status {
      if (auto s = assign(e.start_flow(*request), response); !s.is_ok()) return s;
      if (request->wait_timeout_ms() == 0) return Status::ok();
      flow::WaitForFlowRequest wait;
      wait.mutable_flow()->set_flow_id(request->flow_id());
      wait.mutable_flow()->set_run_id(response->run_id());
      wait.set_timeout_ms(request->wait_timeout_ms());
      auto waited = e.wait_for_flow(wait, [context] { return context->IsCancelled(); });
      if (!waited.is_ok()) return waited.status();
      response->set_closed(waited->closed());
      *response->mutable_flow() = std::move(*waited->mutable_flow());
      return Status::ok();
    });
  }
  grpc::Status StopFlow(grpc::ServerContext* context, const flow::StopFlowRequest* request,
                        flow::StopFlowResponse*) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return e.stop_flow(*request); });
  }
  grpc::Status PublishToChannel(grpc::ServerContext* context,
                                const flow::PublishToChannelRequest* request,
                                flow::PublishToChannelResponse*) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return e.publish(*request); });
  }
  grpc::Status SkipTimer(grpc::ServerContext* context, const flow::SkipTimerRequest* request,
                         flow::SkipTimerResponse*) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return e.skip_timer(*request); });
  }
  grpc::Status TriggerContinueAsNew(grpc::ServerContext* context,
                                    const flow::TriggerContinueAsNewRequest* request,
                                    flow::TriggerContinueAsNewResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.continue_as_new(*request), response); });
  }
  grpc::Status UpdateFlowConfig(grpc::ServerContext* context,
                                const flow::UpdateFlowConfigRequest* request,
                                flow::UpdateFlowConfigResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.update_flow_config(*request), response); });
  }
  grpc::Status TimeTravel(grpc::ServerContext* context, const flow::TimeTravelRequest* request,
                          flow::TimeTravelResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.time_travel(*request), response); });
  }
  grpc::Status DescribeFlow(grpc::ServerContext* context, const flow::FlowRef* request,
                            flow::FlowDescription* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.describe_flow(*request), response); });
  }
  grpc::Status GetFlowState(grpc::ServerContext* context, const flow::FlowRef* request,
                            flow::GetFlowStateResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.flow_state(*request), response); });
  }
  grpc::Status GetHistoryEvents(grpc::ServerContext* context,
                                const flow::GetHistoryEventsRequest* request,
                                flow::GetHistoryEventsResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.history(*request), response); });
  }
  grpc::Status WaitForFlow(grpc::ServerContext* context, const flow::WaitForFlowRequest* request,
                           flow::WaitForFlowResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    if (request->timeout_ms() < 0) return negative_timeout();
    return call([&](Engine& e) {
      return assign(e.wait_for_flow(*request, [context] { return context->IsCancelled(); }),
                    response);
    });
  }
  grpc::Status WaitForHistoryEvent(grpc::ServerContext* context,
                                   const flow::WaitForHistoryEventRequest* request,
                                   flow::GetHistoryEventsResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    if (request->timeout_ms() < 0) return negative_timeout();
    return call([&](Engine& e) {
      return assign(
          e.wait_for_history_event(*request, [context] { return context->IsCancelled(); }),
          response);
    });
  }
  grpc::Status WaitForStepCompletion(grpc::ServerContext* context,
                                     const flow::WaitForStepCompletionRequest* request,
                                     flow::WaitForStepCompletionResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    if (request->timeout_ms() < 0) return negative_timeout();
    return call([&](Engine& e) {
      return assign(e.wait_for_step(*request, [context] { return context->IsCancelled(); }),
                    response);
    });
  }

  grpc::Status GetAttributes(grpc::ServerContext* context,
                             const flow::GetAttributesRequest* request,
                             flow::GetAttributesResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.get_attributes(*request), response); });
  }
  grpc::Status SearchFlows(grpc::ServerContext* context, const flow::SearchFlowsRequest* request,
                           flow::SearchFlowsResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.search_flows(*request), response); });
  }
  grpc::Status ListSearchKeys(grpc::ServerContext* context,
                              const flow::ListSearchKeysRequest* request,
                              flow::ListSearchKeysResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.list_search_keys(*request), response); });
  }
  grpc::Status ListSearchValues(grpc::ServerContext* context,
                                const flow::ListSearchValuesRequest* request,
                                flow::ListSearchValuesResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.list_search_values(*request), response); });
  }
  grpc::Status SetAttributes(grpc::ServerContext* context,
                             const flow::SetAttributesRequest* request,
                             flow::SetAttributesResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) { return assign(e.set_attributes(*request), response); });
  }
  grpc::Status WaitForAttribute(grpc::ServerContext* context,
                                const flow::WaitForAttributeRequest* request,
                                flow::WaitForAttributeResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    if (request->timeout_ms() < 0) return negative_timeout();
    return call([&](Engine& e) {
      return assign(e.wait_for_attribute(*request, [context] { return context->IsCancelled(); }),
                    response);
    });
  }
  grpc::Status InvokeRpc(grpc::ServerContext* context, const flow::InvokeRpcRequest* request,
                         flow::InvokeRpcResponse* response) override {
    DEX_AUTHORIZE(FlowService, context);
    return call([&](Engine& e) {
      return assign(e.invoke_rpc(*request, [context] { return context->IsCancelled(); }), response);
    });
  }

 private:
  static grpc::Status negative_timeout() {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "timeoutMs must not be negative");
  }
  template <typename F>
  grpc::Status call(F&& f) {
    return call_engine(api_, std::forward<F>(f));
  }
  ApiServer::Impl& api_;
};

// One Worker stream: the engine writes tasks and pings through it; results are
// acknowledged in order by an acker thread once the engine says they are durable.
class StreamSink final : public WorkerSink {
 public:
  explicit StreamSink(grpc::ServerReaderWriter<ServerMessage, WorkerMessage>* stream)
      : stream_(stream) {}

  bool send_task(const flow::FlowTask& task) override {
    ServerMessage message;
    *message.mutable_flow_task() = task;
    return write(message);
  }
  bool send_ping() override {
    ServerMessage message;
    message.mutable_ping();
    return write(message);
  }
  // Waits until the HelloAck is written (or the stream closed): a task or
  // ping the engine hands out while connect_then_ack runs follows the ack.
  bool write(const ServerMessage& message) {
    std::unique_lock<std::mutex> lock(write_mu_);
    acked_cv_.wait(lock, [&] { return acked_ || closed_; });
    return write_locked(message);
  }
  // Runs `connect` (the engine records the hello's declarations durably and
  // may hand tasks to this sink from then on), then writes `ack` if it
  // succeeded, and only then lets other writes through: the Worker always
  // reads the HelloAck first, and it means the declarations are durable.
  // `connect` runs without the sink's lock, so an engine may write to the
  // sink from any of its threads whatever locks it holds.
  template <typename Connect>
  auto connect_then_ack(Connect connect, const ServerMessage& ack) {
    auto connected = connect();
    std::lock_guard<std::mutex> lock(write_mu_);
    if (connected.is_ok()) {
      write_locked(ack);
    } else {
      closed_ = true;
    }
    acked_ = true;
    acked_cv_.notify_all();
    return connected;
  }
  bool write_locked(const ServerMessage& message) {
    if (closed_) return false;
    if (!stream_->Write(message)) closed_ = true;
    return !closed_;
  }
  void close() {
    std::lock_guard<std::mutex> lock(write_mu_);
    closed_ = true;
    acked_cv_.notify_all();
  }

 private:
  grpc::ServerReaderWriter<ServerMessage, WorkerMessage>* stream_;
  std::mutex write_mu_;
  std::condition_variable acked_cv_;  // acked_ or closed_ set
  bool acked_ = false;                // guarded by write_mu_: the HelloAck was written
  bool closed_ = false;               // guarded by write_mu_
};

class Acker {
 public:
  explicit Acker(std::shared_ptr<StreamSink> sink)
      : sink_(std::move(sink)), thread_([this] { run(); }) {}
  ~Acker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::future<ResultAck> ack) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(std::move(ack));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    while (true) {
      std::future<ResultAck> next;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return done_ || !pending_.empty(); });
        if (pending_.empty()) return;  // done_ and drained
        next = std::move(pending_.front());
        pending_.pop_front();
      }
      ServerMessage message;
      try {
        *message.mutable_result_ack() = next.get();
      } catch (const std::exception& e) {
        // The engine stopped before the result was durable: send no ack, so the
        // Worker keeps the result and re-sends it to the next active process.
        spdlog::debug("result not acknowledged: {}", e.what());
        continue;
      }
      sink_->write(message);
    }
  }
  std::shared_ptr<StreamSink> sink_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::future<ResultAck>> pending_;  // guarded by mu_
  bool done_ = false;                           // guarded by mu_
  std::thread thread_;
};

class WorkerTaskServiceImpl final : public WorkerTaskService::Service {
 public:
  explicit WorkerTaskServiceImpl(ApiServer::Impl& api) : api_(api) {}

  grpc::Status PollWorkerTask(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<ServerMessage, WorkerMessage>* stream) override {
    WorkerMessage first;
    if (grpc::Status denied =
            api_.authorize(context, WorkerTaskService::service_full_name(), __func__);
        !denied.ok()) {
      // Read the hello first, as below: the Worker then gets the reason, not CANCELLED.
      (void)stream->Read(&first);
      return denied;
    }
    auto engine = api_.engine();
    if (!engine.is_ok()) {
      // Read the hello before refusing: answering a stream whose first message
      // is still unread can reach the Worker as CANCELLED instead of the reason.
      (void)stream->Read(&first);
      return to_grpc(engine.status());
    }
    ApiServer::Impl::OpenStream open(api_, context);
    if (!stream->Read(&first)) return grpc::Status::OK;
    if (!first.has_hello()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "the first message of a PollWorkerTask stream must be a WorkerHello");
    }
    auto sink = std::make_shared<StreamSink>(stream);
    ServerMessage hello_ack;
    NodeIdentity identity = api_.identity();
    hello_ack.mutable_hello_ack()->set_node_id(identity.node_id);
    hello_ack.mutable_hello_ack()->set_node_epoch(identity.epoch.to_string());
    auto handle = sink->connect_then_ack(
        [&] { return engine.value()->connect_worker(first.hello(), sink); }, hello_ack);
    if (!handle.is_ok()) return to_grpc(handle.status());
    {
      Acker acker(sink);
      WorkerMessage message;
      while (stream->Read(&message)) {
        if (message.has_heartbeat()) {
          ServerMessage reply;
          *reply.mutable_heartbeat_ack() =
              engine.value()->heartbeat(handle.value(), message.heartbeat());
          sink->write(reply);
        } else if (message.has_flow_result()) {
          acker.push(engine.value()->complete_task(handle.value(), message.flow_result()));
        } else if (message.has_hello()) {
          break;  // a second hello is a protocol error: end the stream below
        }
      }
      engine.value()->disconnect_worker(handle.value());
      // ~Acker waits for the results already handed to the engine.
    }
    sink->close();
    return grpc::Status::OK;
  }

 private:
  ApiServer::Impl& api_;
};

class AdminServiceImpl final : public AdminService::Service {
 public:
  explicit AdminServiceImpl(ApiServer::Impl& api) : api_(api) {}

  grpc::Status Describe(grpc::ServerContext* context, const DescribeRequest*,
                        DescribeResponse* response) override {
    DEX_AUTHORIZE(AdminService, context);
    if (api_.describe_refused()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "a step down or its hold-off is in progress: wait past the hold-off "
                          "and describe again");
    }
    auto engine = api_.engine();
    if (!engine.is_ok()) return to_grpc(engine.status());
    NodeIdentity identity = api_.identity();
    response->set_node_id(identity.node_id);
    response->set_node_epoch(identity.epoch.to_string());  // epochs are decimal strings
    response->set_holder_process_id(identity.holder_process_id);
    for (const auto& r : engine.value()->attribute_sync_reports()) {  // bounded by the stores
      auto* s = response->add_attribute_stores();
      s->set_name(r.store);
      s->set_type(r.type);
      s->set_table(r.table);
      s->set_state(r.state);
      s->set_watermark_slot(r.watermark_slot);
      s->set_lag_slots(r.lag_slots);
      s->set_lag_seconds(r.lag_seconds);
      s->set_transactions(r.transactions);
      s->set_failures(r.failures);
      s->set_rows(r.rows);
      s->set_filtered_fields(r.misfits);
      s->set_last_error(r.last_error);
    }
    api_.describe_access(*response);
    return grpc::Status::OK;
  }

  grpc::Status StepDown(grpc::ServerContext* context, const StepDownRequest* request,
                        StepDownResponse* response) override {
    DEX_AUTHORIZE(AdminService, context);
    if (!api_.role().can_step_down()) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this server cannot step down");
    }
    api_.step_down_call(true);
    auto result = api_.role().step_down(*request);
    api_.step_down_call(false);
    if (!result.is_ok()) return to_grpc(result.status());
    *response = std::move(result).value();
    return grpc::Status::OK;
  }

 private:
  ApiServer::Impl& api_;
};

#undef DEX_AUTHORIZE

}  // namespace

std::unique_ptr<grpc::Service> ApiServer::Impl::make_flow_service(Impl& impl) {
  return std::make_unique<FlowServiceImpl>(impl);
}
std::unique_ptr<grpc::Service> ApiServer::Impl::make_worker_service(Impl& impl) {
  return std::make_unique<WorkerTaskServiceImpl>(impl);
}
std::unique_ptr<grpc::Service> ApiServer::Impl::make_admin_service(Impl& impl) {
  return std::make_unique<AdminServiceImpl>(impl);
}

StatusOr<std::unique_ptr<ApiServer>> ApiServer::start(const ApiServerOptions& options,
                                                      NodeRoleView& role) {
  auto impl = std::make_unique<Impl>(role);
  impl->options_ = options;
  impl->access_ = options.access;
  if (impl->access_ == nullptr && !options.admin_token_sha256.empty()) {
    // The admin keys alone (tests, older callers): AdminService is guarded.
    auth::AccessSettings admin_only;
    for (const std::string& hex : options.admin_token_sha256) {
      auto digest = auth::normalize_sha256(hex);
      if (!digest) return Status::invalid_argument("an admin token digest is not 64 hex digits");
      admin_only.digests.push_back({auth::Role::kAdmin, *digest, "auth.adminTokenSha256"});
    }
    auto store = auth::TokenStore::open(admin_only);
    if (!store.is_ok()) return store.status();
    impl->access_ = std::move(store).value();
  }
  if (impl->access_ != nullptr && !impl->access_->settings().any()) impl->access_.reset();
  {
    std::lock_guard<std::mutex> lock(impl->server_mu_);
    // Every process starts as a standby: it serves nothing until it holds the lease.
    if (Status s = impl->build_locked(options.listen, /*standby=*/true); !s.is_ok()) return s;
    if (!options.health_listen.empty()) {
      if (Status s = impl->build_health_locked(); !s.is_ok()) return s;
    }
    impl->listen_ = options.listen;
    if (auto colon = impl->listen_.rfind(':'); colon != std::string::npos) {
      impl->listen_ = impl->listen_.substr(0, colon + 1) + std::to_string(impl->port_);
    }
  }
  impl->start_watch();
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(impl)));
}

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ApiServer::~ApiServer() { shutdown(seconds(0)); }

int ApiServer::port() const { return impl_->port_; }
int ApiServer::health_port() const { return impl_->health_port_; }
const std::string& ApiServer::listen_address() const { return impl_->listen_; }

bool ApiServer::wait_role_applied(Duration timeout) { return impl_->wait_applied(timeout); }

void ApiServer::shutdown(Duration grace) {
  impl_->stop_watch();
  std::lock_guard<std::mutex> lock(impl_->server_mu_);
  if (impl_->health_server_ != nullptr) {
    impl_->health_server_->Shutdown(std::chrono::system_clock::now());
    impl_->health_server_->Wait();
    impl_->health_server_.reset();
  }
  if (impl_->server_ == nullptr) return;
  impl_->server_->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::duration_cast<std::chrono::system_clock::duration>(grace));
  impl_->server_->Wait();
  impl_->server_.reset();
}

}  // namespace dex
