// The Worker's machinery. Threads:
//   - the run() thread opens PollWorkerTask streams one after another and reads
//     each until it breaks. With several addresses each round first asks every
//     address's gRPC health at once (sdk/readiness.h) and tries them in that
//     order until a process accepts the stream (HelloAck; a standby refuses it
//     with UNAVAILABLE); it sleeps the reconnect backoff only after a round of
//     refusals, or after an accepted stream broke;
//   - max_concurrent_tasks pool threads run WaitFor, Execute and RPC handlers
//     from a bounded queue;
//   - a supervisor thread cancels a stream that has been silent too long or
//     whose set-up and hello take too long (a frozen process) and, after
//     shutdown(), ends everything when the Worker is idle or the shutdown
//     timeout passes.
// Every final result goes into pending_results_ before it is written and
// leaves it only on its ResultAck (or when the shutdown bound passes), so a
// result written to a stream that then breaks is re-sent on the next accepted
// one, whichever address that is.
#include "sdk/worker.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/random.h"
#include "dex/api.grpc.pb.h"
#include "sdk/addresses.h"
#include "sdk/credentials.h"
#include "sdk/grpc_status.h"
#include "sdk/readiness.h"

namespace dex {

namespace sdk_internal {

// Tasks queued beyond the pool are bounded; past this the Worker answers a
// task with a retryable failure instead of queueing it.
inline constexpr size_t kQueuedTasksMin = 1000;
// A stream that has received nothing (not even a Ping) for this long is
// treated as dead and cancelled: the process froze (SIGSTOP, a stalled host)
// or the network between dropped it, and its standby takes over within the
// lease. The server pings an idle stream every second, so this is three
// missed pings.
inline constexpr Duration kStreamSilenceMax = seconds(3);
// From the start of a new stream's set-up (the connection included) to its
// HelloAck: past this the attempt is cancelled and the next address tried. A
// frozen process accepts TCP connections and then says nothing; an active one
// answers the hello at once, a standby refuses the stream at once.
inline constexpr Duration kHelloWaitMax = seconds(5);
inline constexpr Duration kSupervisorTick = milliseconds(200);
// The longest wait between rounds while a standby answers: the node serves
// again soon (the step-down hold-off is 5 s by default).
inline constexpr Duration kStandbyRetryMax = milliseconds(500);
// At the end of a shutdown, how long the Worker waits for the acks of the
// tasks it hands back (those that arrived after shutdown()).
inline constexpr Duration kHandBackAckWait = seconds(1);

struct TaskState {
  flow::FlowTask task;
  TimePoint deadline = TimePoint::max();
  std::atomic<bool> cancel_requested{false};
};

// One PollWorkerTask stream. Writes are serialized by write_mu; one reader
// (the run() thread) reads concurrently, as gRPC allows.
class Connection {
 public:
  std::string address;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<WorkerMessage, ServerMessage>> stream;
  std::atomic<int64_t> last_receive_ns{0};

  bool write(const WorkerMessage& message) {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (closed_) return false;
    return stream->Write(message);
  }
  // Unblocks the reader and any writer; later writes do nothing. Idempotent.
  void close() {
    context.TryCancel();
    end_writes();
  }
  // Later writes do nothing; the call is not cancelled, so that Finish() after
  // the reader saw the end returns the server's own status (a standby's reason).
  void end_writes() {
    std::lock_guard<std::mutex> lock(write_mu_);
    closed_ = true;
  }

 private:
  std::mutex write_mu_;
  bool closed_ = false;  // protected by write_mu_
};

// How often a failed connection to one address is diagnosed for TLS (and logged).
constexpr Duration kTlsFailureLogInterval = seconds(30);

class WorkerCore {
 public:
  explicit WorkerCore(WorkerOptions options)
      : options_(std::move(options)), random_(std::random_device{}()) {
    if (options_.worker_id.empty()) options_.worker_id = default_worker_id();
    addresses_ = effective_server_addresses(options_.server_addresses, options_.server_address);
    queued_max_ = std::max<size_t>(kQueuedTasksMin, 4 * size_t{options_.max_concurrent_tasks});
  }

  // ----------------------------------------------------------- before run()
  void host(std::shared_ptr<Flow> flow) {
    std::lock_guard<std::mutex> lock(mu_);
    flows_[flow->type()] = std::move(flow);
  }

  Status run();

  void shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) spdlog::info("worker {}: shutting down", options_.worker_id);
    stopping_ = true;
    cv_.notify_all();
  }

  // Waits until run() is not running (for the destructor).
  void wait_run_returned() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !in_run_; });
  }

  const std::string& worker_id() const { return options_.worker_id; }

  WorkerStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    WorkerStats s = stats_;
    s.running = running_;
    return s;
  }

  // ---------------------------------------------------- from Context
  void send_heartbeat(const TaskState& task) {
    WorkerMessage message;
    message.mutable_heartbeat()->set_task_id(task.task.task_id());
    std::shared_ptr<Connection> conn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      conn = current_;
      if (conn) ++stats_.heartbeats_sent;
    }
    if (conn) conn->write(message);
  }

 private:
  // Opens one stream to `address` and serves it until it breaks. Returns
  // whether a process accepted it (HelloAck): the active one. Sets
  // *refused_by_standby when a process answered and refused it (a standby).
  bool serve_stream(const std::string& address, bool* refused_by_standby);
  // Logs that `address` refused the Worker's token (UNAUTHENTICATED or
  // PERMISSION_DENIED), at most every kCredentialRefusalLogInterval per reason.
  void log_credential_refusal(const std::string& address, const grpc::Status& status);
  // With TLS, logs why a connection to `address` fails (sdk/tls_options.h).
  void log_tls_failure(const std::string& address);
  // The readiness of every address for dex.WorkerTaskService, asked at once
  // over fresh channels, by `deadline`.
  std::vector<sdk_internal::Readiness> probe(TimePoint deadline);
  void on_task(const flow::FlowTask& task);
  void on_result_ack(const ResultAck& ack);
  void on_heartbeat_ack(const HeartbeatAck& ack);
  void pool_loop();
  void supervise();
  flow::FlowTaskResult run_flow(const std::shared_ptr<TaskState>& state);
  // Keeps `result` until acknowledged and writes it to the current stream.
  void deliver(const std::string& task_id, WorkerMessage result);
  // Sleeps `d` unless the Worker finishes first. Returns !finished_.
  bool sleep_unless_finished(Duration d);
  bool idle_locked() const { return queue_.empty() && running_ == 0 && pending_results_.empty(); }
  Duration next_backoff_locked() {
    Duration d = backoff_;
    backoff_ = std::min(backoff_ * 2, options_.reconnect_backoff_max);
    return random_.between(d / 2, d);
  }

  // Constant after construction.
  WorkerOptions options_;
  std::vector<std::string> addresses_;
  size_t queued_max_ = kQueuedTasksMin;

  // Touched only by the run() thread.
  std::unique_ptr<WorkerTaskService::Stub> stub_;
  // The token each stream sends (credentials.h; thread-safe).
  sdk_internal::TokenSource token_{options_.token, options_.token_file};
  // The last credential refusal logged, and when.
  std::string last_refusal_;
  TimePoint last_refusal_at_;
  // The last TLS failure found per address, and when it was looked for: a
  // Worker reconnects every second, so it is diagnosed (and logged) again only
  // after kTlsFailureLogInterval.
  std::map<std::string, std::pair<std::string, TimePoint>> tls_failures_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // state changes: stopping_, finished_, idleness, in_run_
  std::condition_variable pool_cv_;  // queue_ and pool_stop_
  // Protected by mu_.
  std::map<std::string, std::shared_ptr<Flow>> flows_;  // by type; fixed once run() starts
  bool in_run_ = false;
  bool ran_ = false;
  bool stopping_ = false;  // shutdown() was called
  bool finished_ = false;  // idle after shutdown, or the shutdown bound passed
  bool pool_stop_ = false;
  std::shared_ptr<Connection> current_;     // the accepted stream results are written to, if any
  std::shared_ptr<Connection> connecting_;  // a stream waiting for its HelloAck, if any
  std::deque<std::shared_ptr<TaskState>> queue_;
  std::map<std::string, std::shared_ptr<TaskState>> tasks_;  // queued or running, by task ID
  uint32_t running_ = 0;
  // Results (WorkerMessage.flow_result), sent or not, until acknowledged, by task ID.
  std::map<std::string, WorkerMessage> pending_results_;
  // Tasks received after shutdown(), neither run nor answered.
  std::set<std::string> held_;
  bool handing_back_ = false;  // held_ was answered; later tasks are ignored
  // Why the active process refused this Worker (INVALID_ARGUMENT: a Flow
  // declaration or the hello is wrong). Retrying cannot help, so run() stops
  // and returns it.
  Status refused_ = Status::ok();
  WorkerStats stats_;
  Duration backoff_{0};
  Random random_;
};

Status WorkerCore::run() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ran_) return Status::invalid_argument("Worker::run() may be called once");
    if (flows_.empty()) {
      return Status::invalid_argument("the worker hosts no Flow: call host() before run()");
    }
    for (const auto& [type, flow] : flows_) {
      if (Status s = flow->validate(); !s.is_ok()) return s;
    }
    if (options_.max_concurrent_tasks < 1) {
      return Status::invalid_argument("max_concurrent_tasks must be at least 1");
    }
    if (Status s = validate_server_addresses(addresses_); !s.is_ok()) return s;
    if (auto token = token_.get(); !token.is_ok()) return token.status();
    if (Status s = check_tls_options(options_.tls); !s.is_ok()) return s;
    if (options_.reconnect_backoff_initial <= Duration::zero() ||
        options_.reconnect_backoff_max < options_.reconnect_backoff_initial) {
      return Status::invalid_argument(
          "the reconnect backoff needs 0 < reconnect_backoff_initial <= reconnect_backoff_max");
    }
    ran_ = true;
    in_run_ = true;
    backoff_ = options_.reconnect_backoff_initial;
  }
  auto mark_returned = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    in_run_ = false;
    cv_.notify_all();
  };

  std::vector<std::thread> pool;
  pool.reserve(options_.max_concurrent_tasks);
  for (uint32_t i = 0; i < options_.max_concurrent_tasks; ++i) {
    pool.emplace_back([this] { pool_loop(); });
  }
  std::thread supervisor([this] { supervise(); });

  spdlog::info("worker {}: hosting {} Flow type(s) on {} with up to {} concurrent tasks",
               options_.worker_id, flows_.size(), join_addresses(addresses_),
               options_.max_concurrent_tasks);
  const size_t n = addresses_.size();
  size_t first = 0;  // where the rotation starts: the address accepted last
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Refused: open no other stream; wait for the shutdown to finish.
      if (!refused_.is_ok()) cv_.wait(lock, [&] { return finished_; });
      if (finished_) break;
    }
    const TimePoint round_start = SystemClock::instance().now();
    // With several addresses, ask them all at once which one is active, so
    // that the round neither starts at a standby nor waits on a frozen process.
    std::vector<size_t> order{0};
    std::vector<sdk_internal::Readiness> readiness;
    if (n > 1) {
      readiness = probe(round_start + sdk_internal::kReadinessProbeTimeout);
      order = sdk_internal::search_order(readiness, first);
    }
    // A process answered and is not the active one: a standby, so the node is
    // changing hands (a step down's hold-off, a takeover) and serves again soon.
    bool standby_in_round =
        std::count(readiness.begin(), readiness.end(), sdk_internal::Readiness::kNotServing) > 0;
    bool accepted = false;
    for (size_t i : order) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (finished_) break;
      }
      bool refused_by_standby = false;
      accepted = serve_stream(addresses_[i], &refused_by_standby);
      standby_in_round = standby_in_round || refused_by_standby;
      if (accepted) {
        first = i;
        break;
      }
    }
    Duration delay;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) break;
      // The active process went away, or only the connection broke: search
      // again after the initial backoff.
      if (accepted) backoff_ = options_.reconnect_backoff_initial;
      delay = next_backoff_locked();
      // Polling a standby is one cheap refusal, so keep the wait short rather
      // than let the backoff grow past the moment the node serves again; the
      // round's own time (a probe that waited on a silent address) counts.
      if (!accepted && standby_in_round) {
        delay = std::max(Duration::zero(), std::min(delay, kStandbyRetryMax) -
                                               (SystemClock::instance().now() - round_start));
        // A node that answered is about to serve: its listener swap at the
        // role change refuses connections for a moment, and that refusal
        // must not wait out a backoff grown during the standby's refusals.
        backoff_ = std::min(backoff_, kStandbyRetryMax);
      }
    }
    if (n == 1) {
      spdlog::info("worker {}: reconnecting to {} in {} ms", options_.worker_id, addresses_[0],
                   to_ms(delay));
    } else if (accepted) {
      spdlog::info("worker {}: looking for the active process in {} ms", options_.worker_id,
                   to_ms(delay));
    } else {
      std::vector<std::string> silent;
      for (size_t i = 0; i < n; ++i) {
        if (readiness[i] == sdk_internal::Readiness::kNoAnswer) silent.push_back(addresses_[i]);
      }
      spdlog::info(
          "worker {}: none of the {} addresses accepted the task stream{}; trying them "
          "again in {} ms",
          options_.worker_id, n,
          silent.empty() ? std::string()
                         : " (no answer within " +
                               std::to_string(to_ms(sdk_internal::kReadinessProbeTimeout)) +
                               " ms from " + join_addresses(silent) + ")",
          to_ms(delay));
    }
    if (!sleep_unless_finished(delay)) break;
  }

  supervisor.join();
  for (auto& t : pool) t.join();
  spdlog::info("worker {}: stopped", options_.worker_id);
  Status refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    refused = refused_;
  }
  mark_returned();
  return refused;
}

bool WorkerCore::sleep_unless_finished(Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return finished_; });
}

std::vector<sdk_internal::Readiness> WorkerCore::probe(TimePoint deadline) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& address : addresses_) {
    channels.push_back(make_channel(address, options_.reconnect_backoff_initial,
                                    options_.reconnect_backoff_max, options_.tls));
  }
  return sdk_internal::probe_readiness(channels, WorkerTaskService::service_full_name(), deadline);
}

bool WorkerCore::serve_stream(const std::string& address, bool* refused_by_standby) {
  // A fresh channel each time: whichever process answers at the address now.
  auto channel = make_channel(address, options_.reconnect_backoff_initial,
                              options_.reconnect_backoff_max, options_.tls);
  stub_ = WorkerTaskService::NewStub(channel);
  auto conn = std::make_shared<Connection>();
  conn->address = address;
  conn->last_receive_ns = SystemClock::instance().now().time_since_epoch().count();
  {
    // The supervisor bounds everything from here to the HelloAck: opening the
    // stream waits for the connection, which a frozen process never completes.
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return false;
    connecting_ = conn;
  }
  // The token as it is now: a rotated token file is read again (credentials.h).
  if (auto token = token_.get(); token.is_ok() && !token.value().empty()) {
    conn->context.AddMetadata("authorization", "Bearer " + token.value());
  }
  conn->stream = stub_->PollWorkerTask(&conn->context);

  WorkerMessage hello;
  hello.mutable_hello()->set_worker_id(options_.worker_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [type, flow] : flows_)
      *hello.mutable_hello()->add_flows() = flow->declaration();
  }
  hello.mutable_hello()->set_max_concurrent_tasks(options_.max_concurrent_tasks);
  bool hello_sent = conn->write(hello);
  if (hello_sent) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.streams_opened;
    if (finished_) conn->close();
  }

  bool accepted = false;
  ServerMessage message;
  while (hello_sent && conn->stream->Read(&message)) {
    conn->last_receive_ns = SystemClock::instance().now().time_since_epoch().count();
    switch (message.kind_case()) {
      case ServerMessage::kHelloAck: {
        if (accepted) break;
        accepted = true;
        // Results go to this stream only once the process accepted it: a
        // standby's refusal loses nothing, and the unacknowledged results are
        // re-sent first. Published and snapshotted under one lock: a result
        // delivered before this is in the snapshot, one delivered after is
        // written by deliver().
        std::vector<WorkerMessage> resend;
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (connecting_ == conn) connecting_.reset();
          if (finished_) {
            conn->close();
            break;
          }
          current_ = conn;
          ++stats_.streams_accepted;
          stats_.connected_address = address;
          for (const auto& [id, result] : pending_results_) resend.push_back(result);
          stats_.results_resent += resend.size();
        }
        spdlog::info("worker {}: connected to {} (node {}, epoch {}){}", options_.worker_id,
                     address, message.hello_ack().node_id(), message.hello_ack().node_epoch(),
                     resend.empty() ? std::string()
                                    : "; re-sending " + std::to_string(resend.size()) +
                                          " unacknowledged result(s)");
        for (auto& result : resend) {
          if (!conn->write(result)) break;
        }
        break;
      }
      case ServerMessage::kFlowTask:
        on_task(message.flow_task());
        break;
      case ServerMessage::kPing:
        break;
      case ServerMessage::kResultAck:
        on_result_ack(message.result_ack());
        break;
      case ServerMessage::kHeartbeatAck:
        on_heartbeat_ack(message.heartbeat_ack());
        break;
      default:
        spdlog::warn("worker {}: ignoring a server message of unknown kind {}", options_.worker_id,
                     static_cast<int>(message.kind_case()));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_ == conn) {
      current_.reset();
      stats_.connected_address.clear();
    }
    if (connecting_ == conn) connecting_.reset();
    if (!accepted) ++stats_.streams_refused;
  }
  // The reader saw the end: the server's status is there to read. Otherwise
  // (the hello could not be written) cancel, so Finish() cannot wait.
  if (hello_sent) {
    conn->end_writes();
  } else {
    conn->close();
  }
  grpc::Status status = conn->stream->Finish();
  bool finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished = finished_;
  }
  if (!finished && status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    // The server ends a stream with INVALID_ARGUMENT only for its hello: a
    // Flow declaration it refuses, or a worker ID or concurrency over a limit.
    std::lock_guard<std::mutex> lock(mu_);
    refused_ = Status::invalid_argument(fmt::format(
        "{} refused this Worker: {} (the Worker stops: fix the Flows it hosts or its options)",
        address, status.error_message()));
    spdlog::error("worker {}: {}", options_.worker_id, refused_.message());
    stopping_ = true;
    cv_.notify_all();
    return accepted;
  }
  if (!finished && (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                    status.error_code() == grpc::StatusCode::PERMISSION_DENIED)) {
    log_credential_refusal(address, status);
    return accepted;
  }
  if (!finished) {
    std::string why = status_from_grpc(status, address, Duration::zero()).message();
    if (!accepted && is_connection_failure(status.error_message())) {
      log_tls_failure(address);
    }
    if (accepted) {
      spdlog::warn("worker {}: task stream ended: {}", options_.worker_id, why);
    } else {
      spdlog::info("worker {}: {} did not accept the task stream: {}", options_.worker_id, address,
                   why);
    }
  }
  // A process answered (a standby's UNAVAILABLE, or a CANCELLED this Worker
  // did not ask for), rather than nothing listening.
  *refused_by_standby = !accepted && hello_sent &&
                        ((status.error_code() == grpc::StatusCode::UNAVAILABLE &&
                          !sdk_internal::is_connection_failure(status.error_message())) ||
                         status.error_code() == grpc::StatusCode::CANCELLED);
  return accepted;
}

void WorkerCore::log_tls_failure(const std::string& address) {
  if (!tls_active(options_.tls)) return;
  const TimePoint now = SystemClock::instance().now();
  auto& [last, at] = tls_failures_[address];
  // At most once per interval and address, whatever it found: a diagnosis of
  // a frozen process waits out its timeout on this (the run) thread.
  if (at != TimePoint{} && now - at < kTlsFailureLogInterval) return;
  at = now;
  const std::string why = diagnose_tls(address, options_.tls, seconds(1));
  if (why.empty()) return;
  last = why;
  spdlog::error("worker {}: cannot connect to {} over TLS: {}", options_.worker_id, address, why);
}

// A refused credential is logged again after this long (a Worker reconnects
// every second).
constexpr Duration kCredentialRefusalLogInterval = seconds(30);

// The server refused the Worker's credential: it keeps retrying (the token
// file, or the server's, may be rotated to fix it), and says so as an error,
// again only when the reason changes or after a while.
void WorkerCore::log_credential_refusal(const std::string& address, const grpc::Status& status) {
  const TimePoint now = SystemClock::instance().now();
  const std::string why = status_from_grpc(status, address, Duration::zero()).message();
  if (why == last_refusal_ && now - last_refusal_at_ < kCredentialRefusalLogInterval) return;
  last_refusal_ = why;
  last_refusal_at_ = now;
  spdlog::error(
      "worker {}: {} refused this Worker's credential: {} (give WorkerOptions::token or "
      "token_file, $DEX_TOKEN or $DEX_TOKEN_FILE a token of the worker role; retrying)",
      options_.worker_id, address, why);
}

void WorkerCore::on_task(const flow::FlowTask& task) {
  std::string refusal;
  const std::string& id = task.task_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tasks_.count(id) != 0 || pending_results_.count(id) != 0 || held_.count(id) != 0) {
      spdlog::debug("worker {}: task {} received again; ignored", options_.worker_id, id);
      return;
    }
    ++stats_.tasks_received;
    if (stopping_) {
      // Not started, and not answered yet: an answer would free the stream's
      // capacity on the server, which would send the next task at once, and
      // each refusal costs the Step an attempt. Held tasks keep that capacity
      // taken; they are handed back when the shutdown ends (supervise()).
      if (handing_back_) {
        spdlog::warn(
            "worker {}: task {} arrived while the worker hands tasks back; ignored (the "
            "server times it out)",
            options_.worker_id, id);
      } else {
        held_.insert(id);
      }
      return;
    }
    if (queue_.size() >= queued_max_) {
      refusal = "worker " + options_.worker_id + " has " + std::to_string(queue_.size()) +
                " tasks queued; the task was not started";
    } else {
      auto state = std::make_shared<TaskState>();
      state->task = task;
      if (task.attempt_timeout_ms() > 0)
        state->deadline = SystemClock::instance().now() + milliseconds(task.attempt_timeout_ms());
      tasks_[id] = state;
      queue_.push_back(std::move(state));
      pool_cv_.notify_one();
      return;
    }
  }
  spdlog::warn("worker {}: {}", options_.worker_id, refusal);
  WorkerMessage message;
  message.mutable_flow_result()->set_task_id(id);
  message.mutable_flow_result()->mutable_error()->set_message(refusal);
  deliver(id, std::move(message));
}

void WorkerCore::on_result_ack(const ResultAck& ack) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_results_.find(ack.task_id());
  if (it == pending_results_.end()) {
    spdlog::debug("worker {}: ack for task {} with no pending result", options_.worker_id,
                  ack.task_id());
    return;
  }
  pending_results_.erase(it);
  if (ack.accepted()) {
    ++stats_.results_accepted;
  } else {
    ++stats_.results_refused;
    // A stale result is expected after a takeover (recovery ended the attempt
    // and runs it again): information, not a problem to look into.
    const bool stale = ack.reason().rfind("stale", 0) == 0;
    spdlog::log(stale ? spdlog::level::info : spdlog::level::warn,
                "worker {}: the result of task {} was refused and is dropped: {}",
                options_.worker_id, ack.task_id(),
                ack.reason().empty() ? "(no reason given)" : ack.reason());
  }
  cv_.notify_all();
}

void WorkerCore::on_heartbeat_ack(const HeartbeatAck& ack) {
  if (!ack.cancel_requested()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(ack.task_id());
  if (it != tasks_.end()) it->second->cancel_requested = true;
}

void WorkerCore::pool_loop() {
  while (true) {
    std::shared_ptr<TaskState> state;
    {
      std::unique_lock<std::mutex> lock(mu_);
      pool_cv_.wait(lock, [&] { return pool_stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // pool_stop_
      state = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
      assert(running_ <= options_.max_concurrent_tasks);
    }
    WorkerMessage result;
    *result.mutable_flow_result() = run_flow(state);
    std::shared_ptr<Connection> conn;
    bool keep;
    {
      // One critical section from "running" to "pending": the Worker never
      // looks idle while a result is in between.
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.erase(state->task.task_id());
      --running_;
      ++stats_.tasks_finished;
      keep = !finished_;
      if (keep) {
        pending_results_[state->task.task_id()] = result;
        conn = current_;
      }
      cv_.notify_all();
    }
    if (!keep) {
      spdlog::warn("worker {}: task {} finished after the shutdown timeout; its result is dropped",
                   options_.worker_id, state->task.task_id());
    } else if (conn) {  // otherwise sent when the next stream opens
      conn->write(result);
    }
  }
}

flow::FlowTaskResult WorkerCore::run_flow(const std::shared_ptr<TaskState>& state) {
  std::shared_ptr<Flow> flow;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = flows_.find(state->task.flow_type());
    if (it != flows_.end()) flow = it->second;  // flows_ is fixed once run() starts
  }
  if (!flow) {
    flow::FlowTaskResult result;
    result.set_task_id(state->task.task_id());
    result.mutable_error()->set_message("worker " + options_.worker_id + " hosts no Flow type '" +
                                        state->task.flow_type() + "'");
    return result;
  }
  return run_flow_task(
      *flow, state->task, [this, state] { send_heartbeat(*state); },
      [state] {
        return state->cancel_requested.load() || SystemClock::instance().now() >= state->deadline;
      });
}

void WorkerCore::deliver(const std::string& task_id, WorkerMessage result) {
  std::shared_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_results_[task_id] = result;
    conn = current_;
  }
  if (!conn) return;  // sent when the next stream opens
  conn->write(result);
}

void WorkerCore::supervise() {
  std::unique_lock<std::mutex> lock(mu_);
  // Serving: cancel a stream that went silent (a peer that vanished without
  // closing the connection).
  while (!stopping_) {
    cv_.wait_for(lock, kSupervisorTick, [&] { return stopping_; });
    if (stopping_) continue;
    if (connecting_) {
      TimePoint opened(Duration(connecting_->last_receive_ns.load()));
      if (SystemClock::instance().now() - opened > kHelloWaitMax) {
        spdlog::warn(
            "worker {}: no answer to the hello from {} within {} s (set-up included); "
            "giving up on it",
            options_.worker_id, connecting_->address, to_ms(kHelloWaitMax) / 1000);
        auto conn = connecting_;
        connecting_.reset();
        lock.unlock();
        conn->close();
        lock.lock();
      }
    }
    if (!current_) continue;
    TimePoint last(Duration(current_->last_receive_ns.load()));
    if (SystemClock::instance().now() - last > kStreamSilenceMax) {
      spdlog::warn("worker {}: nothing received for {} s; reconnecting", options_.worker_id,
                   to_ms(kStreamSilenceMax) / 1000);
      auto conn = current_;
      current_.reset();
      lock.unlock();
      conn->close();
      lock.lock();
    }
  }
  // Shutting down: wait until idle (every task finished, every result
  // acknowledged) or the bound passes.
  TimePoint deadline = SystemClock::instance().now() + options_.shutdown_timeout;
  bool idle =
      SystemClock::instance().wait_until(lock, cv_, deadline, [&] { return idle_locked(); });
  if (!idle) {
    spdlog::warn(
        "worker {}: shutdown timeout passed with {} task(s) running, {} queued and {} result(s) "
        "unacknowledged; giving up on them",
        options_.worker_id, running_, queue_.size(), pending_results_.size());
  }
  // Hand back the tasks that arrived after shutdown() as retryable failures,
  // so the server re-dispatches them after the Step's retry interval instead
  // of waiting for their attempt timeout.
  if (!held_.empty()) {
    handing_back_ = true;
    std::vector<WorkerMessage> refusals;
    for (const std::string& id : held_) {
      WorkerMessage refusal;
      refusal.mutable_flow_result()->set_task_id(id);
      refusal.mutable_flow_result()->mutable_error()->set_message(
          "worker " + options_.worker_id + " is shutting down; the task was not started");
      pending_results_[id] = refusal;
      refusals.push_back(std::move(refusal));
    }
    spdlog::info("worker {}: handing back {} task(s) that arrived after shutdown",
                 options_.worker_id, held_.size());
    held_.clear();
    auto conn = current_;
    lock.unlock();
    for (auto& refusal : refusals) {
      if (!conn || !conn->write(refusal)) break;  // re-sent if a new stream opens in time
    }
    lock.lock();
    SystemClock::instance().wait_until(lock, cv_, SystemClock::instance().now() + kHandBackAckWait,
                                       [&] { return pending_results_.empty(); });
  }
  finished_ = true;
  for (auto& [id, task] : tasks_) task->cancel_requested = true;
  for (const auto& task : queue_) tasks_.erase(task->task.task_id());
  queue_.clear();
  pool_stop_ = true;
  pool_cv_.notify_all();
  cv_.notify_all();
  auto conn = std::move(current_);
  current_.reset();
  auto connecting = std::move(connecting_);
  connecting_.reset();
  lock.unlock();
  if (conn) conn->close();
  if (connecting) connecting->close();
}

}  // namespace sdk_internal

// ---------------------------------------------------------------------- Worker

Worker::Worker(WorkerOptions options)
    : core_(std::make_unique<sdk_internal::WorkerCore>(std::move(options))) {}

Worker::~Worker() {
  core_->shutdown();
  core_->wait_run_returned();
}

void Worker::host(std::shared_ptr<Flow> flow) { core_->host(std::move(flow)); }
Status Worker::run() { return core_->run(); }
void Worker::shutdown() { core_->shutdown(); }
const std::string& Worker::worker_id() const { return core_->worker_id(); }
WorkerStats Worker::stats() const { return core_->stats(); }

std::string default_worker_id() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "unknown");
  }
  return std::string(host) + "-" + std::to_string(getpid());
}

}  // namespace dex
