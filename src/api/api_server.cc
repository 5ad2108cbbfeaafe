#include "api/api_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <openssl/crypto.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

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

TimePoint steady_deadline(const grpc::ServerContext* context) {
  auto remaining = context->deadline() - std::chrono::system_clock::now();
  auto now = SystemClock::instance().now();
  if (remaining > std::chrono::hours(24 * 365)) return now + std::chrono::hours(24 * 365);
  return now + std::chrono::duration_cast<Duration>(remaining);
}

}  // namespace

// Shared by the services: the role and the engine to call.
class ApiServer::Impl {
 public:
  // The engine to serve with, or UNAVAILABLE naming why there is none. The
  // pointer counts as a use until it is dropped: wait_engine_unused() lets the
  // owner delete the engine only after every call that got it is done with it.
  StatusOr<std::shared_ptr<Engine>> engine() {
    std::function<bool()> lease_valid;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (engine_ == nullptr) return Status::stopped(inactive_reason_);
      lease_valid = lease_valid_;
    }
    // Checked on every call, outside the lock: a process resumed after a freeze
    // longer than its lease must not answer from state another process may have
    // changed since (spec: Health and probes).
    if (!lease_valid()) {
      set_inactive(fmt::format("the lease of node {} is no longer valid", identity().node_id));
      return Status::stopped("the lease of this process is no longer valid");
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (engine_ == nullptr) return Status::stopped(inactive_reason_);
    ++engine_users_;
    // Not an owner: the deleter only ends the use.
    return std::shared_ptr<Engine>(engine_, [this](Engine*) {
      std::lock_guard<std::mutex> lock(mu_);
      if (--engine_users_ == 0) engine_unused_.notify_all();
    });
  }
  bool wait_engine_unused(Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return engine_unused_.wait_for(lock, timeout, [this] { return engine_users_ == 0; });
  }
  NodeIdentity identity() const {
    std::lock_guard<std::mutex> lock(mu_);
    return identity_;
  }
  void set_active(Engine* engine, NodeIdentity identity, std::function<bool()> lease_valid) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      engine_ = engine;
      identity_ = std::move(identity);
      lease_valid_ = std::move(lease_valid);
    }
    set_readiness(true);
  }
  void set_inactive(std::string why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      engine_ = nullptr;
      inactive_reason_ = std::move(why);
    }
    set_readiness(false);
  }
  void set_readiness(bool serving) {
    std::lock_guard<std::mutex> lock(server_mu_);
    serving_ = serving;
    if (serving) hot_standby_ = false;
    apply_health_locked();
  }
  // The admin credential check (spec: admin credentials): with tokens
  // configured, the call must carry "authorization: Bearer <token>" whose
  // SHA-256 equals one of them, compared in constant time over all of them.
  grpc::Status check_admin(const grpc::ServerContext* context) const {
    if (options_.admin_token_sha256.empty()) return grpc::Status::OK;
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("authorization");
    std::string token;
    if (it != metadata.end()) {
      std::string value(it->second.data(), it->second.size());
      if (value.rfind("Bearer ", 0) == 0) token = value.substr(7);
    }
    if (token.empty()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this call needs an admin credential (authorization: Bearer <token>)");
    }
    const std::string hex = sha256_hex(token);
    int matched = 0;
    for (const std::string& accepted : options_.admin_token_sha256) {
      if (accepted.size() == hex.size()) {
        matched |= CRYPTO_memcmp(accepted.data(), hex.data(), hex.size()) == 0 ? 1 : 0;
      }
    }
    if (matched == 0) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the admin credential was refused");
    }
    return grpc::Status::OK;
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

  StepDownHandler step_down_handler() const {
    std::lock_guard<std::mutex> lock(mu_);
    return step_down_handler_;
  }
  void set_step_down_handler(StepDownHandler handler) {
    std::lock_guard<std::mutex> lock(mu_);
    step_down_handler_ = std::move(handler);
  }
  bool stepping_down() const { return stepping_down_.load(); }
  void set_stepping_down(bool value) { stepping_down_ = value; }

  void set_hot_standby(bool hot) {
    std::lock_guard<std::mutex> lock(server_mu_);
    if (serving_) hot = false;  // the active process is never a hot standby
    if (hot == hot_standby_) return;
    hot_standby_ = hot;
    apply_health_locked();
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
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
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
    if (server_ == nullptr) return;
    auto* health = server_->GetHealthCheckService();
    if (health == nullptr) return;
    for (const char* name : kReadinessNames) health->SetServingStatus(name, serving_);
    health->SetServingStatus(kHotStandbyName, hot_standby_);
  }

  static std::unique_ptr<grpc::Service> make_flow_service(Impl& impl);
  static std::unique_ptr<grpc::Service> make_worker_service(Impl& impl);
  static std::unique_ptr<grpc::Service> make_admin_service(Impl& impl);

  ApiServerOptions options_;
  std::mutex server_mu_;  // guards the fields below (the server and its health)
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::string listen_;  // host:port with the port actually bound
  int port_ = 0;
  bool standby_server_ = true;
  bool serving_ = false;
  bool hot_standby_ = false;

 private:
  mutable std::mutex mu_;
  Engine* engine_ = nullptr;   // guarded by mu_
  uint64_t engine_users_ = 0;  // guarded by mu_
  std::condition_variable engine_unused_;
  std::function<bool()> lease_valid_;                            // guarded by mu_
  NodeIdentity identity_;                                        // guarded by mu_
  std::string inactive_reason_ = "this process is starting up";  // guarded by mu_
  StepDownHandler step_down_handler_;                            // guarded by mu_
  std::mutex streams_mu_;
  std::set<grpc::ServerContext*> streams_;  // guarded by streams_mu_
  std::atomic<bool> stepping_down_{false};
};

namespace {

class FlowServiceImpl final : public FlowService::Service {
 public:
  explicit FlowServiceImpl(ApiServer::Impl& api) : api_(api) {}

  grpc::Status RegisterFlowType(grpc::ServerContext*, const RegisterFlowTypeRequest* request,
                                RegisterFlowTypeResponse* response) override {
    return call([&](Engine& e) { return assign(e.register_flow_type(*request), response); });
  }
  grpc::Status GetFlowType(grpc::ServerContext*, const GetFlowTypeRequest* request,
                           FlowType* response) override {
    return call([&](Engine& e) { return assign(e.get_flow_type(request->name()), response); });
  }
  grpc::Status ListFlowTypes(grpc::ServerContext*, const ListFlowTypesRequest*,
                             ListFlowTypesResponse* response) override {
    return call([&](Engine& e) { return assign(e.list_flow_types(), response); });
  }
  grpc::Status StartFlow(grpc::ServerContext*, const StartFlowRequest* request,
                         StartFlowResponse* response) override {
    return call([&](Engine& e) { return assign(e.start_flow(*request), response); });
  }
  grpc::Status GetFlow(grpc::ServerContext*, const GetFlowRequest* request,
                       Flow* response) override {
    return call([&](Engine& e) { return assign(e.get_flow(request->flow_id()), response); });
  }
  grpc::Status ListFlows(grpc::ServerContext*, const ListFlowsRequest* request,
                         ListFlowsResponse* response) override {
    return call([&](Engine& e) { return assign(e.list_flows(*request), response); });
  }
  grpc::Status CancelFlow(grpc::ServerContext*, const CancelFlowRequest* request,
                          CancelFlowResponse* response) override {
    return call([&](Engine& e) { return assign(e.cancel_flow(*request), response); });
  }
  grpc::Status WaitFlow(grpc::ServerContext* context, const WaitFlowRequest* request,
                        WaitFlowResponse* response) override {
    if (request->timeout_ms() < 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "timeout_ms must not be negative");
    }
    TimePoint deadline = steady_deadline(context);
    if (request->timeout_ms() > 0) {
      deadline =
          std::min(deadline, SystemClock::instance().now() + milliseconds(request->timeout_ms()));
    }
    return call([&](Engine& e) {
      return assign(
          e.wait_flow(request->flow_id(), deadline, [context] { return context->IsCancelled(); }),
          response);
    });
  }

 private:
  template <typename T, typename R>
  static Status assign(StatusOr<T> result, R* response) {
    if (!result.is_ok()) return result.status();
    *response = std::move(result).value();
    return Status::ok();
  }
  template <typename F>
  grpc::Status call(F&& f) {
    auto engine = api_.engine();
    if (!engine.is_ok()) return to_grpc(engine.status());
    return to_grpc(f(*engine.value()));
  }
  ApiServer::Impl& api_;
};

// One Worker stream: the engine writes tasks and pings through it; results are
// acknowledged in order by an acker thread once the engine says they are durable.
class StreamSink final : public WorkerSink {
 public:
  explicit StreamSink(grpc::ServerReaderWriter<ServerMessage, WorkerMessage>* stream)
      : stream_(stream) {}

  bool send_task(const StepTask& task) override {
    ServerMessage message;
    *message.mutable_task() = task;
    return write(message);
  }
  bool send_ping() override {
    ServerMessage message;
    message.mutable_ping();
    return write(message);
  }
  bool write(const ServerMessage& message) {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (closed_) return false;
    if (!stream_->Write(message)) closed_ = true;
    return !closed_;
  }
  void close() {
    std::lock_guard<std::mutex> lock(write_mu_);
    closed_ = true;
  }

 private:
  grpc::ServerReaderWriter<ServerMessage, WorkerMessage>* stream_;
  std::mutex write_mu_;
  bool closed_ = false;  // guarded by write_mu_
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
    auto engine = api_.engine();
    WorkerMessage first;
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
    if (!sink->write(hello_ack)) return grpc::Status::OK;
    auto handle = engine.value()->connect_worker(first.hello(), sink);
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
        } else if (message.has_result()) {
          acker.push(engine.value()->complete_task(handle.value(), message.result()));
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
    if (grpc::Status auth = api_.check_admin(context); !auth.ok()) return auth;
    if (api_.stepping_down()) {
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
    return grpc::Status::OK;
  }

  grpc::Status StepDown(grpc::ServerContext* context, const StepDownRequest* request,
                        StepDownResponse* response) override {
    if (grpc::Status auth = api_.check_admin(context); !auth.ok()) return auth;
    StepDownHandler handler = api_.step_down_handler();
    if (!handler) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this server cannot step down");
    }
    auto result = handler(*request);
    if (!result.is_ok()) return to_grpc(result.status());
    *response = std::move(result).value();
    return grpc::Status::OK;
  }

 private:
  ApiServer::Impl& api_;
};

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

StatusOr<std::unique_ptr<ApiServer>> ApiServer::start(const ApiServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options_ = options;
  std::lock_guard<std::mutex> lock(impl->server_mu_);
  // Every process starts as a standby: it serves nothing until it holds the lease.
  if (Status s = impl->build_locked(options.listen, /*standby=*/true); !s.is_ok()) return s;
  impl->listen_ = options.listen;
  if (auto colon = impl->listen_.rfind(':'); colon != std::string::npos) {
    impl->listen_ = impl->listen_.substr(0, colon + 1) + std::to_string(impl->port_);
  }
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(impl)));
}

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ApiServer::~ApiServer() { shutdown(seconds(0)); }

int ApiServer::port() const { return impl_->port_; }
const std::string& ApiServer::listen_address() const { return impl_->listen_; }

void ApiServer::set_active(Engine* engine, NodeIdentity identity,
                           std::function<bool()> lease_valid) {
  if (Status s = activate(engine, std::move(identity), std::move(lease_valid)); !s.is_ok()) {
    spdlog::error("cannot serve as the active process: {}", s.to_string());
  }
}

Status ApiServer::activate(Engine* engine, NodeIdentity identity,
                           std::function<bool()> lease_valid) {
  {
    std::lock_guard<std::mutex> lock(impl_->server_mu_);
    if (Status s = impl_->swap_locked(/*standby=*/false); !s.is_ok()) return s;
  }
  impl_->set_active(engine, std::move(identity), std::move(lease_valid));
  return Status::ok();
}

Status ApiServer::set_standby(bool hot) {
  impl_->set_inactive("this process is a standby: the active process of the node serves");
  {
    std::lock_guard<std::mutex> lock(impl_->server_mu_);
    if (Status s = impl_->swap_locked(/*standby=*/true); !s.is_ok()) return s;
  }
  impl_->set_hot_standby(hot);
  return Status::ok();
}

void ApiServer::set_hot_standby(bool hot) { impl_->set_hot_standby(hot); }

void ApiServer::set_step_down_handler(StepDownHandler handler) {
  impl_->set_step_down_handler(std::move(handler));
}

void ApiServer::set_stepping_down(bool stepping_down) { impl_->set_stepping_down(stepping_down); }

void ApiServer::end_worker_streams() { impl_->end_worker_streams(); }

bool ApiServer::wait_engine_unused(Duration timeout) { return impl_->wait_engine_unused(timeout); }

void ApiServer::set_inactive(std::string why) { impl_->set_inactive(std::move(why)); }

void ApiServer::shutdown(Duration grace) {
  impl_->set_inactive("this process is shutting down");
  std::lock_guard<std::mutex> lock(impl_->server_mu_);
  if (impl_->server_ == nullptr) return;
  impl_->server_->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::duration_cast<std::chrono::system_clock::duration>(grace));
  impl_->server_->Wait();
  impl_->server_.reset();
}

}  // namespace dex
