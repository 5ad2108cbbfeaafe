// The Engine behind engine.h: proposals through the log, apply in the log
// writer's on_durable hook, and the scheduler thread (docs/engine.md).
#include "engine/engine.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "common/random.h"
#include "config/config.h"
#include "engine/flow_engine.h"
#include "engine/flow_type.h"
#include "engine/local_store.h"
#include "engine/shared_store.h"
#include "engine/state_machine.h"
#include "log/log_gc.h"
#include "log/log_reader.h"

namespace dex {

// ------------------------------------------------------------ EngineLogHook

EngineLogHook::Target EngineLogHook::on_durable() const {
  std::shared_ptr<State> state = state_;
  return [state](Slot slot, const proto::LogBatch& batch) {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->target) state->target(slot, batch);
  };
}

void EngineLogHook::attach(Target target) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->target = std::move(target);
}

void EngineLogHook::detach() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->target = nullptr;
}

namespace {

// Bounds of the scheduler's work per wake-up (docs/engine.md, "Scheduler").
constexpr size_t kTimersPerRoundMax = 1000;
constexpr size_t kDispatchesPerRoundMax = 1000;
// The scheduler wakes at least this often (writer health, timers on a wall clock
// that may jump).
constexpr Duration kSchedulerPollMax = milliseconds(100);
constexpr uint32_t kListPageSizeDefault = 100;
constexpr uint32_t kListPageSizeMax = 1000;
constexpr int kReplayTransientRetriesMax = 50;

int64_t system_now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string step_key(std::string_view flow_id, std::string_view step) {
  std::string s(flow_id);
  s += '\0';
  s += step;
  return s;
}

Status stopped_status() {
  return Status::stopped("the engine stopped (the lease was lost or released)");
}

// Flow ids become store keys: no control characters (docs/engine.md, "Limits").
Status validate_flow_id(std::string_view id) {
  if (id.size() > kFlowIdBytesMax) {
    return Status::invalid_argument(
        fmt::format("flow_id is {} bytes, over the limit of {}", id.size(), kFlowIdBytesMax));
  }
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7f) {
      return Status::invalid_argument("flow_id contains a control character");
    }
  }
  return Status::ok();
}

std::string truncate(std::string s, size_t max) {
  if (s.size() > max) s.resize(max);
  return s;
}

class EngineImpl final : public Engine {
 public:
  EngineImpl(EngineOptions options, ObjectStore& store, LogWriter& log, Clock& clock,
             std::unique_ptr<StateMachine> sm)
      : options_(std::move(options)), store_(store), log_(log), clock_(clock) {
    local_.sm = std::move(sm);
    if (!options_.now_unix_ms) options_.now_unix_ms = system_now_unix_ms;
  }
  ~EngineImpl() override { stop(); }

  Status start();
  void stop() override;
  std::string local_store_report() const override { return local_store_report_; }
  void begin_drain() override;
  size_t attempts_running() const override;
  StatusOr<SnapshotInfo> snapshot_now() override;
  Snapshotter::Stats snapshot_stats() const override {
    return snapshotter_ ? snapshotter_->stats() : Snapshotter::Stats{};
  }
  void set_local_store_report(std::string how) { local_store_report_ = std::move(how); }

  StatusOr<RegisterFlowTypeResponse> register_flow_type(const RegisterFlowTypeRequest&) override;
  StatusOr<FlowType> get_flow_type(const std::string& name) override;
  StatusOr<ListFlowTypesResponse> list_flow_types() override;
  StatusOr<StartFlowResponse> start_flow(const StartFlowRequest&) override;
  StatusOr<Flow> get_flow(const std::string& flow_id) override;
  StatusOr<ListFlowsResponse> list_flows(const ListFlowsRequest&) override;
  StatusOr<CancelFlowResponse> cancel_flow(const CancelFlowRequest&) override;
  StatusOr<WaitFlowResponse> wait_flow(const std::string& flow_id, TimePoint deadline,
                                       const std::function<bool()>& cancelled) override;
  StatusOr<WorkerHandle> connect_worker(const WorkerHello& hello,
                                        std::shared_ptr<WorkerSink> sink) override;
  void disconnect_worker(WorkerHandle worker) override;
  HeartbeatAck heartbeat(WorkerHandle worker, const TaskHeartbeat& heartbeat) override;
  std::future<ResultAck> complete_task(WorkerHandle worker, const TaskResult& result) override;

  // dex.flow.FlowService and Flow results: the flow engine's (flow_engine.h).
  StatusOr<flow::StartFlowResponse> flow_start(const flow::StartFlowRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->start_flow(r);
  }
  Status flow_stop(const flow::StopFlowRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->stop_flow(r);
  }
  Status flow_publish(const flow::PublishToChannelRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->publish(r);
  }
  Status flow_skip_timer(const flow::SkipTimerRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->skip_timer(r);
  }
  StatusOr<flow::FlowDescription> flow_describe(const flow::FlowRef& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->describe(r);
  }
  StatusOr<flow::GetFlowStateResponse> flow_state(const flow::FlowRef& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->state(r);
  }
  StatusOr<flow::GetHistoryEventsResponse> flow_history(
      const flow::GetHistoryEventsRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->history(r);
  }
  StatusOr<flow::WaitForFlowResponse> flow_wait(const flow::WaitForFlowRequest& r,
                                                const std::function<bool()>& cancelled) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->wait_for_flow(r.flow(), long_poll_deadline(clock_, r.timeout_ms()), cancelled);
  }
  StatusOr<flow::GetHistoryEventsResponse> flow_wait_history(
      const flow::WaitForHistoryEventRequest& r, const std::function<bool()>& cancelled) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->wait_for_history_event(r, long_poll_deadline(clock_, r.timeout_ms()), cancelled);
  }
  StatusOr<flow::WaitForStepCompletionResponse> flow_wait_step(
      const flow::WaitForStepCompletionRequest& r,
      const std::function<bool()>& cancelled) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->wait_for_step(r, long_poll_deadline(clock_, r.timeout_ms()), cancelled);
  }
  std::future<ResultAck> complete_flow_task(WorkerHandle worker,
                                            const flow::FlowTaskResult& result) override {
    return flow_->complete(worker, result);
  }

 private:
  // Runs once: on the writer thread with the record's result after it was
  // applied, or with Stopped. Must not block or append.
  using Callback = std::function<void(StatusOr<RecordResult>)>;

  struct WorkerConn {
    std::string worker_id;
    std::vector<std::string> queues;
    uint32_t capacity = 1;
    uint32_t in_use = 0;  // running_ entries dispatched to this stream
    std::shared_ptr<WorkerSink> sink;
    TimePoint last_sent;
    bool broken = false;  // a send failed: the stream is gone, send nothing more
  };
  // An attempt this process dispatched and that has not ended (by task id).
  struct Running {
    StepTask task;
    WorkerHandle worker = 0;
    bool async = false;
    bool sent = false;    // handed to the sink (timeouts run from then)
    bool ending = false;  // a timeout's AttemptEnded is proposed
    TimePoint start_deadline;
    std::optional<TimePoint> heartbeat_deadline;
  };

  void propose(proto::EngineRecord record, Callback done);
  StatusOr<RecordResult> propose_and_wait(proto::EngineRecord record);
  void on_durable(Slot slot, const proto::LogBatch& batch);
  void fail_pending(const Status& why);
  // The final statuses of the flows `fx` ended, read from the store just
  // applied; empty unless on_flow_ended is set. REQUIRES: local_.sm usable (local_.mu
  // held, or open() before any other thread runs).
  std::vector<FlowStatus> ended_flow_statuses(const ApplyEffects& fx) const;
  // Tells EngineOptions::on_attempt_ended / on_flow_ended what `fx` ended.
  void report_ended(const ApplyEffects& fx, const std::vector<FlowStatus>& flows) const;
  // REQUIRES: mu_ held.
  void erase_running_locked(const std::string& task_id);
  // REQUIRES: mu_ held. The task is about to be handed to its Worker.
  void mark_sending_locked(Running& running);
  // A send failed: withdraw the attempt, mark the stream broken.
  void withdraw_undelivered(const StepTask& task);
  // Proposes AttemptWithdrawn for a task no Worker received.
  void propose_withdrawal(const StepTask& task);
  Status check_open();

  void run_scheduler();
  void send_queued();
  void fire_timers();
  void enforce_timeouts();
  void dispatch();
  void ping_idle_workers();
  TimePoint next_wake();
  StatusOr<StepTask> build_task(const proto::StoredFlow& stored, const std::string& step,
                                const std::string& task_id);
  int64_t now_ms() const { return options_.now_unix_ms(); }

  // Constant after construction.
  EngineOptions options_;
  ObjectStore& store_;
  LogWriter& log_;
  Clock& clock_;

  // The local store; reset by stop(). Readers hold local_.mu shared, stop()
  // unique. Lock order: local_.mu before mu_; never take it while holding mu_.
  SharedStore local_;

  mutable std::mutex mu_;
  std::condition_variable sched_cv_;  // wake_ set or stopped_
  std::condition_variable flow_cv_;   // a flow ended (flow_version_), or stopped_
  bool stopped_ = false;              // guarded by mu_
  bool wake_ = false;                 // guarded by mu_
  bool log_stopped_ = false;          // guarded by mu_
  bool draining_ = false;             // guarded by mu_: a step down hands out nothing new
  uint64_t flow_version_ = 0;         // guarded by mu_
  uint64_t next_proposal_ = 1;        // guarded by mu_
  uint64_t next_task_ = 1;            // guarded by mu_
  WorkerHandle next_worker_ = 1;      // guarded by mu_
  // Bounded by the log writer's queue: every entry has a record queued or in flight.
  std::unordered_map<uint64_t, Callback> pending_;  // guarded by mu_
  // Bounded by kWorkersMax.
  std::map<WorkerHandle, WorkerConn> workers_;  // guarded by mu_
  // Bounded by the capacity of the Workers that ever connected in this process.
  std::unordered_map<std::string, Running> running_;  // guarded by mu_
  std::set<std::string> dispatching_;                 // guarded by mu_; flow\0step keys
  std::set<std::string> firing_;                      // guarded by mu_; flow\0step keys
  std::deque<std::string> sends_;                     // guarded by mu_; SYNC task ids to send
  WorkerHandle dispatch_cursor_ = 0;                  // scheduler thread only
  std::thread scheduler_;
  std::string local_store_report_;            // set before start()
  TimePoint started_at_;                      // set by start(), after the EpochStart
  std::atomic<uint64_t> records_applied_{0};  // since open, replay included
  std::unique_ptr<Snapshotter> snapshotter_;  // created by start()
  std::unique_ptr<FlowEngine> flow_;          // created by start(), before any call
  std::once_flag stop_once_;
};

// ------------------------------------------------------------- proposals

void EngineImpl::propose(proto::EngineRecord record, Callback done) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || log_stopped_) {
      done(stopped_status());
      return;
    }
    id = next_proposal_++;
    pending_[id] = std::move(done);
  }
  record.set_proposal_id(id);
  proto::LogRecord log_record;
  *log_record.mutable_engine() = std::move(record);
  // Never with mu_ held: append may block on a full queue while the writer
  // thread waits for mu_ in on_durable.
  auto appended = log_.append(std::move(log_record));
  if (appended.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    auto slot = appended.get();
    if (!slot.is_ok()) {
      Callback cb;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = pending_.find(id); it != pending_.end()) {
          cb = std::move(it->second);
          pending_.erase(it);
        }
      }
      if (cb) {
        cb(slot.status().code() == Code::kInvalidArgument
               ? slot.status()
               : Status::stopped(
                     fmt::format("the log writer stopped: {}", slot.status().message())));
      }
    }
  }
}

StatusOr<RecordResult> EngineImpl::propose_and_wait(proto::EngineRecord record) {
  auto promise = std::make_shared<std::promise<StatusOr<RecordResult>>>();
  auto future = promise->get_future();
  propose(std::move(record),
          [promise](StatusOr<RecordResult> r) { promise->set_value(std::move(r)); });
  // Resolves: the record is applied, or the writer's failure or stop() fails it.
  return future.get();
}

void EngineImpl::fail_pending(const Status& why) {
  std::unordered_map<uint64_t, Callback> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed.swap(pending_);
  }
  for (auto& [id, cb] : failed) cb(why);
}

void EngineImpl::erase_running_locked(const std::string& task_id) {
  auto it = running_.find(task_id);
  if (it == running_.end()) return;
  if (auto w = workers_.find(it->second.worker); w != workers_.end() && w->second.in_use > 0) {
    --w->second.in_use;
  }
  running_.erase(it);
  wake_ = true;  // capacity freed
}

std::vector<FlowStatus> EngineImpl::ended_flow_statuses(const ApplyEffects& fx) const {
  std::vector<FlowStatus> statuses;
  if (!options_.on_flow_ended) return statuses;
  for (const auto& flow_id : fx.flows_ended) {
    auto stored = local_.sm->flow(flow_id);
    if (!stored.is_ok() || !stored->has_value()) {
      spdlog::warn("engine: flow '{}' ended but could not be read back for metrics: {}", flow_id,
                   stored.is_ok() ? "not found" : stored.status().to_string());
      continue;
    }
    statuses.push_back(stored->value().flow().status());
  }
  return statuses;
}

void EngineImpl::report_ended(const ApplyEffects& fx, const std::vector<FlowStatus>& flows) const {
  if (options_.on_attempt_ended) {
    for (const auto& ended : fx.attempts_ended) options_.on_attempt_ended(ended.outcome);
  }
  if (options_.on_flow_ended) {
    for (FlowStatus status : flows) options_.on_flow_ended(status);
  }
}

// The log writer's on_durable, on its thread, in slot order (docs/engine.md,
// "How the engine uses the log"): apply, then tell the scheduler and the callers.
void EngineImpl::on_durable(Slot slot, const proto::LogBatch& batch) {
  StatusOr<ApplyOutcome> outcome = Status::stopped("not applied");
  std::vector<FlowStatus> ended_flows;
  {
    std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
    if (!local_.sm) return;
    outcome = local_.sm->apply(slot, batch);
    if (outcome.is_ok()) ended_flows = ended_flow_statuses(outcome->effects);
  }
  if (outcome.is_ok() && !outcome->skipped) records_applied_ += batch.records_size();
  if (!outcome.is_ok()) {
    // The local store failed: nothing more can be applied in order. Stop
    // serving; a restart replays the log.
    spdlog::error("engine: applying log slot {} failed: {}", slot.value,
                  outcome.status().to_string());
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_stopped_ = true;
      sched_cv_.notify_all();
      flow_cv_.notify_all();
    }
    const Status why =
        Status::stopped(fmt::format("the local store failed: {}", outcome.status().message()));
    fail_pending(why);
    if (flow_) flow_->log_stopped(why);
    return;
  }
  std::vector<std::pair<Callback, RecordResult>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& result : outcome->results) {
      if (result.proposal_id == 0) continue;
      auto it = pending_.find(result.proposal_id);
      if (it == pending_.end()) continue;
      done.emplace_back(std::move(it->second), std::move(result));
      pending_.erase(it);
    }
    const ApplyEffects& fx = outcome->effects;
    for (const auto& ended : fx.attempts_ended) erase_running_locked(ended.task_id);
    for (const auto& task_id : fx.attempts_withdrawn) erase_running_locked(task_id);
    if (!fx.flows_ended.empty()) {
      ++flow_version_;
      flow_cv_.notify_all();
    }
    if (!fx.ready.empty() || !fx.timers_set.empty() || !fx.attempts_ended.empty()) wake_ = true;
    if (wake_) sched_cv_.notify_all();
  }
  report_ended(outcome->effects, ended_flows);
  for (auto& [cb, result] : done) cb(std::move(result));
  if (flow_) flow_->on_applied(outcome->flow_results, outcome->flow_effects);
}

Status EngineImpl::check_open() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || log_stopped_) return stopped_status();
  return Status::ok();
}

// ----------------------------------------------------------------- open

Status EngineImpl::start() {
  started_at_ = clock_.now();
  const Slot epoch_slot = log_.epoch_start_slot();
  auto last = local_.sm->last_applied();
  if (!last.is_ok()) return last.status();
  // A store ahead of the log belongs to another log (or the log was deleted).
  if (last->has_value() && last->value() >= epoch_slot) {
    return Status::corruption(fmt::format(
        "local store '{}' has applied log slot {}, but this epoch's EpochStart is at slot {}: the "
        "store is ahead of the node's log (another node's store, or a deleted log). Delete the "
        "local store to rebuild it from the log",
        options_.local_store_path.string(), last->value().value, epoch_slot.value));
  }
  Slot start_slot;
  auto bounds = find_log_bounds(store_, options_.node_id, {},
                                last->has_value() ? last->value().next() : kFirstSlot);
  if (!bounds.is_ok()) return bounds.status();
  if (last->has_value()) {
    start_slot = last->value().next();
  } else {
    start_slot = bounds->first;
  }
  if (start_slot < bounds->first) {
    return Status::corruption(fmt::format(
        "local store '{}' needs log slot {}, but the log starts at slot {} (collected): delete "
        "the local store to rebuild it",
        options_.local_store_path.string(), start_slot.value, bounds->first.value));
  }
  // Replay through this epoch's EpochStart: its apply is the recovery.
  LogReader reader(store_, options_.node_id, start_slot);
  int transient = 0;
  // Bounded: each iteration applies one slot up to epoch_slot, or retries a
  // transient error at most kReplayTransientRetriesMax times.
  while (reader.next_slot() <= epoch_slot) {
    auto next = reader.next();
    if (!next.is_ok()) {
      if (next.status().is_transient() && ++transient <= kReplayTransientRetriesMax) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      return next.status();
    }
    if (!next->has_value()) break;
    const LogEntry& entry = next->value();
    if (entry.slot > epoch_slot) break;
    auto applied = local_.sm->apply(entry.slot, entry.batch);
    if (!applied.is_ok()) return applied.status();
    if (!applied->skipped) records_applied_ += entry.batch.records_size();
    // This epoch's recovery is this process's: report what it ended (earlier
    // slots were reported by the processes that applied them live).
    if (entry.slot == epoch_slot && !applied->skipped) {
      report_ended(applied->effects, ended_flow_statuses(applied->effects));
    }
  }
  auto now_last = local_.sm->last_applied();
  if (!now_last.is_ok()) return now_last.status();
  if (!now_last->has_value() || now_last->value() != epoch_slot) {
    return Status::corruption(
        fmt::format("replaying the log ended at slot {} before this epoch's EpochStart at slot {}",
                    now_last->has_value() ? std::to_string(now_last->value().value) : "none",
                    epoch_slot.value));
  }
  auto running = local_.sm->running_attempts();
  if (!running.is_ok()) return running.status();
  assert(running->empty() && "recovery ends every running attempt at the EpochStart");
  flow_ = std::make_unique<FlowEngine>(FlowEngineOptions{options_.epoch, options_.now_unix_ms},
                                       local_, log_, clock_);
  if (auto s = flow_->start(); !s.is_ok()) return s;
  options_.log_hook->attach(
      [this](Slot slot, const proto::LogBatch& batch) { on_durable(slot, batch); });
  scheduler_ = std::thread([this] { run_scheduler(); });

  Snapshotter::Options so;
  so.node_id = options_.node_id;
  so.process_id = options_.process_id;
  so.epoch = options_.epoch;
  so.policy = options_.snapshots;
  so.scratch_dir = std::filesystem::path(options_.local_store_path.string() + ".checkpoint");
  so.request = options_.snapshot_request;
  Snapshotter::Source source;
  source.records_applied = [this] { return records_applied_.load(); };
  source.checkpoint = [this](const std::filesystem::path& dir) -> StatusOr<std::optional<Slot>> {
    std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
    if (!local_.sm) return stopped_status();
    return local_.sm->checkpoint(dir);
  };
  source.gc_guard = [this] {
    GcGuard guard;
    guard.log_end = log_.next_slot();
    guard.epoch_start_slot = log_.epoch_start_slot();
    guard.lease_valid = [this] { return log_.lease_valid(); };
    guard.epoch_settled = clock_.now() - started_at_ >= kEpochSettleTime;
    return guard;
  };
  source.now_unix_ms = options_.now_unix_ms;
  snapshotter_ = std::make_unique<Snapshotter>(store_, clock_, std::move(so), std::move(source));
  snapshotter_->start();
  return Status::ok();
}

StatusOr<SnapshotInfo> EngineImpl::snapshot_now() {
  if (auto s = check_open(); !s.is_ok()) return s;
  return snapshotter_->snapshot_now();
}

void EngineImpl::stop() {
  // Once; a concurrent second caller waits for the first.
  std::call_once(stop_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      sched_cv_.notify_all();
      flow_cv_.notify_all();
    }
    // A snapshot in progress stops at its next request.
    if (snapshotter_) snapshotter_->stop();
    // Waits for a delivery in progress; none follows.
    if (options_.log_hook) options_.log_hook->detach();
    if (scheduler_.joinable()) scheduler_.join();
    if (flow_) flow_->stop();
    fail_pending(stopped_status());
    std::unique_lock<std::shared_mutex> sm_lock(local_.mu);
    local_.sm.reset();
  });
}

// ----------------------------------------------------------- flow service

StatusOr<RegisterFlowTypeResponse> EngineImpl::register_flow_type(
    const RegisterFlowTypeRequest& request) {
  if (auto s = check_open(); !s.is_ok()) return s;
  StatusOr<FlowType> type =
      Status::invalid_argument("RegisterFlowTypeRequest has neither flow_type nor definition");
  if (request.has_flow_type()) {
    type = validate_flow_type(request.flow_type());
  } else if (request.source_case() == RegisterFlowTypeRequest::kDefinition) {
    type = parse_flow_type(request.definition());
  }
  if (!type.is_ok()) return type.status();
  proto::EngineRecord record;
  *record.mutable_register_flow_type()->mutable_flow_type() = type.value();
  auto result = propose_and_wait(std::move(record));
  if (!result.is_ok()) return result.status();
  if (result->kind == ApplyKind::kRejected) return Status::invalid_argument(result->message);
  RegisterFlowTypeResponse response;
  *response.mutable_flow_type() = type.value();
  response.set_changed(result->kind == ApplyKind::kApplied);
  return response;
}

StatusOr<FlowType> EngineImpl::get_flow_type(const std::string& name) {
  if (auto s = check_open(); !s.is_ok()) return s;
  std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
  if (!local_.sm) return stopped_status();
  auto type = local_.sm->flow_type(name);
  if (!type.is_ok()) return type.status();
  if (!type->has_value()) return Status::not_found(fmt::format("no flow type '{}'", name));
  return type->value();
}

StatusOr<ListFlowTypesResponse> EngineImpl::list_flow_types() {
  if (auto s = check_open(); !s.is_ok()) return s;
  std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
  if (!local_.sm) return stopped_status();
  auto types = local_.sm->flow_types();
  if (!types.is_ok()) return types.status();
  ListFlowTypesResponse response;
  for (auto& t : types.value()) *response.add_flow_types() = std::move(t);
  return response;
}

StatusOr<StartFlowResponse> EngineImpl::start_flow(const StartFlowRequest& request) {
  if (auto s = check_open(); !s.is_ok()) return s;
  if (request.flow_type().empty()) return Status::invalid_argument("flow_type is empty");
  if (auto s = validate_flow_id(request.flow_id()); !s.is_ok()) return s;
  if (request.input().size() > kFlowInputBytesMax) {
    return Status::invalid_argument(fmt::format("input is {} bytes, over the limit of {}",
                                                request.input().size(), kFlowInputBytesMax));
  }
  std::string input = request.input().empty() ? "{}" : request.input();
  try {
    auto parsed = nlohmann::json::parse(input);
    (void)parsed;
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid_argument(fmt::format("input is not valid JSON: {}", e.what()));
  }
  std::string flow_id = request.flow_id();
  {
    std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
    if (!local_.sm) return stopped_status();
    auto type = local_.sm->flow_type(request.flow_type());
    if (!type.is_ok()) return type.status();
    if (!type->has_value()) {
      return Status::invalid_argument(fmt::format("unknown flow type '{}'", request.flow_type()));
    }
    if (!flow_id.empty()) {
      // Idempotent: an existing flow is returned without a write.
      auto existing = local_.sm->flow(flow_id);
      if (!existing.is_ok()) return existing.status();
      if (existing->has_value()) {
        StartFlowResponse response;
        *response.mutable_flow() = existing->value().flow();
        response.set_already_existed(true);
        return response;
      }
    }
  }
  if (flow_id.empty()) flow_id = random_hex_id();
  proto::EngineRecord record;
  auto* start = record.mutable_start_flow();
  start->set_flow_id(flow_id);
  start->set_flow_type(request.flow_type());
  start->set_input(input);
  start->set_at_unix_ms(now_ms());
  auto result = propose_and_wait(std::move(record));
  if (!result.is_ok()) return result.status();
  if (result->kind == ApplyKind::kRejected) return Status::invalid_argument(result->message);
  auto flow = get_flow(flow_id);
  if (!flow.is_ok()) return flow.status();
  StartFlowResponse response;
  *response.mutable_flow() = std::move(flow).value();
  response.set_already_existed(result->kind == ApplyKind::kUnchanged);
  return response;
}

StatusOr<Flow> EngineImpl::get_flow(const std::string& flow_id) {
  if (auto s = check_open(); !s.is_ok()) return s;
  if (flow_id.empty()) return Status::invalid_argument("flow_id is empty");
  if (auto s = validate_flow_id(flow_id); !s.is_ok()) return s;
  std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
  if (!local_.sm) return stopped_status();
  auto stored = local_.sm->flow(flow_id);
  if (!stored.is_ok()) return stored.status();
  if (!stored->has_value()) return Status::not_found(fmt::format("no flow '{}'", flow_id));
  return stored->value().flow();
}

StatusOr<ListFlowsResponse> EngineImpl::list_flows(const ListFlowsRequest& request) {
  if (auto s = check_open(); !s.is_ok()) return s;
  uint32_t page_size = request.page_size() == 0 ? kListPageSizeDefault : request.page_size();
  if (page_size > kListPageSizeMax) {
    return Status::invalid_argument(
        fmt::format("page_size {} is over the limit of {}", page_size, kListPageSizeMax));
  }
  if (!FlowStatus_IsValid(request.status())) {
    return Status::invalid_argument(
        fmt::format("unknown status {}", static_cast<int>(request.status())));
  }
  if (auto s = validate_flow_id(request.page_token()); !s.is_ok()) {
    return Status::invalid_argument("page_token is not one this server returned");
  }
  std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
  if (!local_.sm) return stopped_status();
  return local_.sm->list_flows(request.status(), page_size, request.page_token());
}

StatusOr<CancelFlowResponse> EngineImpl::cancel_flow(const CancelFlowRequest& request) {
  if (auto s = check_open(); !s.is_ok()) return s;
  auto existing = get_flow(request.flow_id());
  if (!existing.is_ok()) return existing.status();
  CancelFlowResponse response;
  if (existing->status() == FLOW_STATUS_RUNNING) {
    proto::EngineRecord record;
    record.mutable_cancel_flow()->set_flow_id(request.flow_id());
    record.mutable_cancel_flow()->set_at_unix_ms(now_ms());
    auto result = propose_and_wait(std::move(record));
    if (!result.is_ok()) return result.status();
    if (result->kind == ApplyKind::kRejected) return Status::not_found(result->message);
    existing = get_flow(request.flow_id());
    if (!existing.is_ok()) return existing.status();
  }
  *response.mutable_flow() = std::move(existing).value();
  return response;
}

StatusOr<WaitFlowResponse> EngineImpl::wait_flow(const std::string& flow_id, TimePoint deadline,
                                                 const std::function<bool()>& cancelled) {
  // Bounded by `deadline`, `cancelled` and stop().
  while (true) {
    uint64_t version;
    {
      std::lock_guard<std::mutex> lock(mu_);
      version = flow_version_;
    }
    auto flow = get_flow(flow_id);
    if (!flow.is_ok()) return flow.status();
    WaitFlowResponse response;
    bool ended = flow->status() != FLOW_STATUS_RUNNING;
    *response.mutable_flow() = std::move(flow).value();
    response.set_ended(ended);
    if (ended || clock_.now() >= deadline || (cancelled && cancelled())) return response;
    std::unique_lock<std::mutex> lock(mu_);
    TimePoint until = std::min(deadline, clock_.now() + kSchedulerPollMax);
    clock_.wait_until(lock, flow_cv_, until, [&] {
      return flow_version_ != version || stopped_ || log_stopped_ || (cancelled && cancelled());
    });
    if (stopped_ || log_stopped_) return stopped_status();
  }
}

// ------------------------------------------------------- worker service

StatusOr<Engine::WorkerHandle> EngineImpl::connect_worker(const WorkerHello& hello,
                                                          std::shared_ptr<WorkerSink> sink) {
  if (hello.worker_id().empty()) return Status::invalid_argument("worker_id is empty");
  if (hello.worker_id().size() > kWorkerIdBytesMax) {
    return Status::invalid_argument(fmt::format("worker_id is {} bytes, over the limit of {}",
                                                hello.worker_id().size(), kWorkerIdBytesMax));
  }
  if (hello.task_queues().empty() && hello.flows().empty())
    return Status::invalid_argument("the hello names no task queue and declares no Flow type");
  if (static_cast<size_t>(hello.task_queues_size()) > kWorkerTaskQueuesMax) {
    return Status::invalid_argument(fmt::format("{} task_queues, over the limit of {}",
                                                hello.task_queues_size(), kWorkerTaskQueuesMax));
  }
  for (const auto& q : hello.task_queues()) {
    if (auto s = validate_name(q, kTaskQueueBytesMax, "task queue"); !s.is_ok()) return s;
  }
  if (hello.max_concurrent_tasks() > kWorkerConcurrentTasksMax) {
    return Status::invalid_argument(fmt::format("max_concurrent_tasks {} is over the limit of {}",
                                                hello.max_concurrent_tasks(),
                                                kWorkerConcurrentTasksMax));
  }
  if (!sink) return Status::invalid_argument("no sink");
  std::unique_lock<std::mutex> lock(mu_);
  if (stopped_ || log_stopped_) return stopped_status();
  if (workers_.size() >= kWorkersMax) {
    return Status::invalid_argument(
        fmt::format("{} Worker streams are connected, the limit", kWorkersMax));
  }
  WorkerConn conn;
  conn.worker_id = hello.worker_id();
  conn.queues.assign(hello.task_queues().begin(), hello.task_queues().end());
  std::sort(conn.queues.begin(), conn.queues.end());
  conn.queues.erase(std::unique(conn.queues.begin(), conn.queues.end()), conn.queues.end());
  conn.capacity = std::max<uint32_t>(1, hello.max_concurrent_tasks());
  conn.sink = std::move(sink);
  conn.last_sent = clock_.now();
  WorkerHandle handle = next_worker_++;
  auto flow_sink = conn.sink;
  workers_[handle] = std::move(conn);
  wake_ = true;
  sched_cv_.notify_all();
  if (hello.flows().empty()) return handle;
  lock.unlock();
  // Records the declarations durably first (a log write): without mu_.
  if (auto s = flow_->connect(handle, hello, std::move(flow_sink)); !s.is_ok()) {
    std::lock_guard<std::mutex> relock(mu_);
    workers_.erase(handle);
    return s;
  }
  return handle;
}

void EngineImpl::disconnect_worker(WorkerHandle worker) {
  if (flow_) flow_->disconnect(worker);
  std::lock_guard<std::mutex> lock(mu_);
  // Its running attempts keep their timeouts; their results may come on a new stream.
  workers_.erase(worker);
}

HeartbeatAck EngineImpl::heartbeat(WorkerHandle, const TaskHeartbeat& heartbeat) {
  if (flow_ && flow_->knows_task(heartbeat.task_id())) return flow_->heartbeat(heartbeat);
  HeartbeatAck ack;
  ack.set_task_id(heartbeat.task_id());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(heartbeat.task_id());
  if (it == running_.end() || it->second.ending || stopped_ || log_stopped_) {
    // The attempt ended (result, timeout, cancel, recovery) or was never started here.
    ack.set_cancel_requested(true);
    return ack;
  }
  if (it->second.task.heartbeat_timeout_ms() > 0) {
    it->second.heartbeat_deadline =
        clock_.now() + milliseconds(it->second.task.heartbeat_timeout_ms());
  }
  return ack;
}

std::future<ResultAck> EngineImpl::complete_task(WorkerHandle, const TaskResult& result) {
  auto promise = std::make_shared<std::promise<ResultAck>>();
  auto future = promise->get_future();
  ResultAck ack;
  ack.set_task_id(result.task_id());
  proto::EngineRecord record;
  auto* ended = record.mutable_attempt_ended();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || log_stopped_) {
      promise->set_exception(std::make_exception_ptr(EngineStoppedError("the engine stopped")));
      return future;
    }
    auto it = running_.find(result.task_id());
    if (it == running_.end()) {
      // Every attempt still running was dispatched by this process (recovery
      // ended the older ones), so an unknown task id names an ended attempt.
      ack.set_accepted(false);
      ack.set_reason(fmt::format(
          "stale: task '{}' is not a running attempt (it already ended, or it was never started)",
          result.task_id()));
      promise->set_value(ack);
      return future;
    }
    ended->set_flow_id(it->second.task.flow_id());
    ended->set_step(it->second.task.step());
  }
  ended->set_task_id(result.task_id());
  ended->set_at_unix_ms(now_ms());
  if (result.has_failure()) {
    ended->set_outcome(ATTEMPT_OUTCOME_FAILED);
    ended->set_error(truncate(result.failure().message(), kTaskErrorBytesMax));
    ended->set_non_retryable(result.failure().non_retryable());
  } else if (result.result_case() == TaskResult::kOutput) {
    const std::string& output = result.output();
    std::string why;
    if (output.size() > kStepOutputBytesMax) {
      why = fmt::format("the output is {} bytes, over the limit of {}", output.size(),
                        kStepOutputBytesMax);
    } else if (!nlohmann::json::accept(output)) {
      why = "the output is not valid JSON";
    }
    if (why.empty()) {
      ended->set_outcome(ATTEMPT_OUTCOME_COMPLETED);
      ended->set_output(output);
    } else {
      // A bad output fails the attempt (docs/engine.md, "Results").
      ended->set_outcome(ATTEMPT_OUTCOME_FAILED);
      ended->set_error(why);
    }
  } else {
    ended->set_outcome(ATTEMPT_OUTCOME_FAILED);
    ended->set_error("the result carried neither output nor failure");
  }
  propose(std::move(record), [promise, ack](StatusOr<RecordResult> r) mutable {
    if (!r.is_ok()) {
      promise->set_exception(std::make_exception_ptr(EngineStoppedError(r.status().to_string())));
      return;
    }
    ack.set_accepted(r->kind == ApplyKind::kApplied);
    if (!ack.accepted())
      ack.set_reason(fmt::format("{}: {}", apply_kind_name(r->kind), r->message));
    promise->set_value(ack);
  });
  return future;
}

// ------------------------------------------------------------ scheduler

StatusOr<StepTask> EngineImpl::build_task(const proto::StoredFlow& stored, const std::string& step,
                                          const std::string& task_id) {
  const Flow& flow = stored.flow();
  int index = -1;
  for (int i = 0; i < flow.steps_size(); ++i) {
    if (flow.steps(i).name() == step) index = i;
  }
  if (index < 0)
    return Status::corruption(fmt::format("flow '{}' has no step '{}'", flow.flow_id(), step));
  const StepDef& def = stored.flow_type().steps(index);
  // The Step's input: the flow input and the outputs of its dependencies
  // (docs/engine.md, "Step input").
  nlohmann::json input = nlohmann::json::object();
  input["flow"] = nlohmann::json::parse(flow.input(), nullptr, /*allow_exceptions=*/false);
  if (input["flow"].is_discarded()) input["flow"] = flow.input();
  input["steps"] = nlohmann::json::object();
  for (const auto& dep : def.after()) {
    for (const auto& s : flow.steps()) {
      if (s.name() != dep) continue;
      auto out = nlohmann::json::parse(s.output(), nullptr, false);
      input["steps"][dep] = out.is_discarded() ? nlohmann::json(s.output()) : out;
    }
  }
  StepTask task;
  task.set_task_id(task_id);
  task.set_flow_id(flow.flow_id());
  task.set_flow_type(flow.flow_type());
  task.set_step(step);
  task.set_attempt(static_cast<uint32_t>(flow.steps(index).attempts_size()) + 1);
  task.set_task_queue(def.task_queue());
  task.set_input(input.dump());
  task.set_start_to_close_timeout_ms(def.start_to_close_timeout_ms());
  task.set_heartbeat_timeout_ms(def.heartbeat_timeout_ms());
  return task;
}

void EngineImpl::dispatch() {
  // Which streams have room, and for which queues; in handle order, starting
  // after the last one served (round robin).
  struct Slot_ {
    WorkerHandle handle;
    std::string worker_id;
    std::vector<std::string> queues;
    uint32_t free;
    std::shared_ptr<WorkerSink> sink;
  };
  std::vector<Slot_> slots;
  std::set<std::string> skip;
  // A process whose lease is no longer valid (resumed after a freeze, before
  // its keeper notices) hands Workers no new task: an ASYNC dispatch would
  // otherwise be sent before its start could be refused (spec: Health and probes).
  if (!log_.lease_valid()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || log_stopped_ || draining_) return;
    auto add = [&](const auto& entry) {
      const WorkerConn& w = entry.second;
      if (!w.broken && w.in_use < w.capacity) {
        slots.push_back({entry.first, w.worker_id, w.queues, w.capacity - w.in_use, w.sink});
      }
    };
    for (auto it = workers_.upper_bound(dispatch_cursor_); it != workers_.end(); ++it) add(*it);
    for (auto it = workers_.begin(); it != workers_.end() && it->first <= dispatch_cursor_; ++it) {
      add(*it);
    }
    skip = dispatching_;
  }
  size_t dispatched = 0;
  for (auto& slot : slots) {
    for (const auto& queue : slot.queues) {
      if (slot.free == 0 || dispatched >= kDispatchesPerRoundMax) break;
      std::vector<ApplyEffects::StepRef> refs;
      {
        std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
        if (!local_.sm) return;
        auto got = local_.sm->ready_steps(queue, slot.free,
                                          [&](const std::string& f, const std::string& s) {
                                            return skip.contains(step_key(f, s));
                                          });
        if (!got.is_ok()) {
          spdlog::error("engine: reading ready queue '{}': {}", queue, got.status().to_string());
          return;
        }
        refs = std::move(got).value();
      }
      for (const auto& ref : refs) {
        if (slot.free == 0) break;  // full, or its stream broke
        StatusOr<StepTask> task = Status::not_found("");
        bool async = false;
        {
          std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
          if (!local_.sm) return;
          auto stored = local_.sm->flow(ref.flow_id);
          if (!stored.is_ok() || !stored->has_value()) continue;
          std::string task_id;
          {
            std::lock_guard<std::mutex> lock(mu_);
            task_id = fmt::format("e{}.{}", options_.epoch.value, next_task_++);
          }
          task = build_task(stored->value(), ref.step, task_id);
          if (!task.is_ok()) continue;
          for (const auto& def : stored->value().flow_type().steps()) {
            if (def.name() == ref.step) async = def.dispatch() == DISPATCH_MODE_ASYNC;
          }
        }
        const std::string key = step_key(ref.flow_id, ref.step);
        skip.insert(key);
        const std::string task_id = task->task_id();
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto w = workers_.find(slot.handle);
          if (w == workers_.end() || stopped_) break;
          ++w->second.in_use;
          dispatching_.insert(key);
          Running running;
          running.task = task.value();
          running.worker = slot.handle;
          running.async = async;
          running_[task_id] = std::move(running);
        }
        --slot.free;
        ++dispatched;
        dispatch_cursor_ = slot.handle;
        proto::EngineRecord record;
        auto* started = record.mutable_attempt_started();
        started->set_flow_id(ref.flow_id);
        started->set_step(ref.step);
        started->set_attempt(task->attempt());
        started->set_task_id(task_id);
        started->set_worker_id(slot.worker_id);
        started->set_at_unix_ms(now_ms());
        // SYNC: the task is sent once its start is durable and applied. ASYNC:
        // sent now, while the start is written (docs/engine.md, "Dispatch").
        propose(std::move(record), [this, key, task_id, async](StatusOr<RecordResult> r) {
          std::lock_guard<std::mutex> lock(mu_);
          dispatching_.erase(key);
          if (!r.is_ok() || r->kind != ApplyKind::kApplied) {
            erase_running_locked(task_id);
            return;
          }
          if (!async) {
            sends_.push_back(task_id);
            wake_ = true;
            sched_cv_.notify_all();
          }
        });
        if (async) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (auto it = running_.find(task_id); it != running_.end()) {
              mark_sending_locked(it->second);
            }
          }
          if (!slot.sink->send_task(task.value())) {
            withdraw_undelivered(task.value());
            slot.free = 0;
          }
        }
      }
    }
  }
}

void EngineImpl::mark_sending_locked(Running& running) {
  // Timeouts run from the hand-over; set before the send, so that a fast
  // Worker's heartbeat is never overwritten.
  const TimePoint now = clock_.now();
  running.sent = true;
  running.start_deadline = now + milliseconds(running.task.start_to_close_timeout_ms());
  if (running.task.heartbeat_timeout_ms() > 0) {
    running.heartbeat_deadline = now + milliseconds(running.task.heartbeat_timeout_ms());
  }
  if (auto w = workers_.find(running.worker); w != workers_.end()) w->second.last_sent = now;
}

void EngineImpl::withdraw_undelivered(const StepTask& task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(task.task_id());
    if (it == running_.end()) return;
    it->second.ending = true;
    if (auto w = workers_.find(it->second.worker); w != workers_.end()) w->second.broken = true;
  }
  // The stream was gone: the Worker never received the task (docs/engine.md,
  // "Undelivered tasks").
  propose_withdrawal(task);
}

void EngineImpl::propose_withdrawal(const StepTask& task) {
  // Appended after its AttemptStarted, so applied after it.
  proto::EngineRecord withdraw;
  auto* wd = withdraw.mutable_attempt_withdrawn();
  wd->set_flow_id(task.flow_id());
  wd->set_step(task.step());
  wd->set_task_id(task.task_id());
  wd->set_at_unix_ms(now_ms());
  propose(std::move(withdraw), [](StatusOr<RecordResult>) {});
}

void EngineImpl::begin_drain() {
  if (flow_) flow_->begin_drain();
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
  wake_ = true;
  sched_cv_.notify_all();
}

size_t EngineImpl::attempts_running() const {
  const size_t flows = flow_ ? flow_->attempts_running() : 0;
  std::lock_guard<std::mutex> lock(mu_);
  return running_.size() + flows;
}

void EngineImpl::send_queued() {
  std::vector<StepTask> withdraw;  // draining: queued SYNC tasks never sent
  struct Withdraw {
    EngineImpl* self;
    std::vector<StepTask>* tasks;
    ~Withdraw() {
      for (const StepTask& t : *tasks) self->propose_withdrawal(t);
    }
  } withdraw_at_exit{this, &withdraw};
  // Bounded by the SYNC starts applied since the last round.
  while (true) {
    StepTask task;
    std::shared_ptr<WorkerSink> sink;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (sends_.empty() || stopped_) return;
      std::string task_id = sends_.front();
      sends_.pop_front();
      auto it = running_.find(task_id);
      if (it == running_.end()) continue;  // ended meanwhile (cancel)
      task = it->second.task;
      if (draining_) {
        // Stepping down: never handed to a Worker, so withdrawn, not failed:
        // the next active process dispatches it again with the same number.
        it->second.ending = true;
        withdraw.push_back(task);
        continue;
      }
      if (auto w = workers_.find(it->second.worker); w != workers_.end() && !w->second.broken) {
        sink = w->second.sink;
      }
      mark_sending_locked(it->second);
    }
    if (!sink || !sink->send_task(task)) withdraw_undelivered(task);
  }
}

void EngineImpl::fire_timers() {
  std::vector<StateMachine::Timer> due;
  {
    std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
    if (!local_.sm) return;
    auto got = local_.sm->timers(now_ms(), kTimersPerRoundMax);
    if (!got.is_ok()) {
      spdlog::error("engine: reading timers: {}", got.status().to_string());
      return;
    }
    due = std::move(got).value();
  }
  for (const auto& timer : due) {
    const std::string key = step_key(timer.flow_id, timer.step);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!firing_.insert(key).second) continue;  // already proposed
    }
    proto::EngineRecord record;
    auto* fired = record.mutable_timer_fired();
    fired->set_flow_id(timer.flow_id);
    fired->set_step(timer.step);
    fired->set_wake_at_ms(timer.wake_at_ms);
    fired->set_at_unix_ms(now_ms());
    propose(std::move(record), [this, key](StatusOr<RecordResult>) {
      std::lock_guard<std::mutex> lock(mu_);
      firing_.erase(key);
    });
  }
}

void EngineImpl::enforce_timeouts() {
  std::vector<proto::EngineRecord> records;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimePoint now = clock_.now();
    for (auto& [task_id, r] : running_) {
      if (!r.sent || r.ending) continue;
      std::string why;
      if (now >= r.start_deadline) {
        why = fmt::format("start-to-close timeout of {} passed",
                          format_duration(milliseconds(r.task.start_to_close_timeout_ms())));
      } else if (r.heartbeat_deadline && now >= *r.heartbeat_deadline) {
        why = fmt::format("no heartbeat within the heartbeat timeout of {}",
                          format_duration(milliseconds(r.task.heartbeat_timeout_ms())));
      }
      if (why.empty()) continue;
      r.ending = true;
      proto::EngineRecord record;
      auto* ended = record.mutable_attempt_ended();
      ended->set_flow_id(r.task.flow_id());
      ended->set_step(r.task.step());
      ended->set_task_id(task_id);
      ended->set_outcome(ATTEMPT_OUTCOME_TIMED_OUT);
      ended->set_error(why);
      records.push_back(std::move(record));
    }
  }
  for (auto& record : records) {
    record.mutable_attempt_ended()->set_at_unix_ms(now_ms());
    propose(std::move(record), [](StatusOr<RecordResult>) {});
  }
}

void EngineImpl::ping_idle_workers() {
  std::vector<std::pair<WorkerHandle, std::shared_ptr<WorkerSink>>> idle;
  const TimePoint now = clock_.now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [handle, w] : workers_) {
      if (!w.broken && now - w.last_sent >= options_.worker_ping_interval) {
        idle.emplace_back(handle, w.sink);
        w.last_sent = now;
      }
    }
  }
  for (auto& [handle, sink] : idle) (void)sink->send_ping();
}

TimePoint EngineImpl::next_wake() {
  const TimePoint now = clock_.now();
  TimePoint wake = now + kSchedulerPollMax;
  std::optional<int64_t> timer;
  {
    std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
    if (local_.sm) {
      auto next = local_.sm->next_timer_ms();
      if (next.is_ok()) timer = next.value();
    }
  }
  if (timer) wake = std::min(wake, now + milliseconds(std::max<int64_t>(0, *timer - now_ms())));
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, r] : running_) {
    if (!r.sent || r.ending) continue;
    wake = std::min(wake, r.start_deadline);
    if (r.heartbeat_deadline) wake = std::min(wake, *r.heartbeat_deadline);
  }
  for (const auto& [handle, w] : workers_) {
    wake = std::min(wake, w.last_sent + options_.worker_ping_interval);
  }
  return wake;
}

void EngineImpl::run_scheduler() {
  // Bounded per round by kDispatchesPerRoundMax and kTimersPerRoundMax; runs until stop().
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      wake_ = false;
    }
    if (!log_.is_open()) {
      bool first;
      {
        std::lock_guard<std::mutex> lock(mu_);
        first = !log_stopped_;
        log_stopped_ = true;
        flow_cv_.notify_all();
      }
      if (first) spdlog::warn("engine: the log writer stopped; the engine refuses further work");
      fail_pending(Status::stopped("the log writer stopped"));
      if (first && flow_) flow_->log_stopped(Status::stopped("the log writer stopped"));
    } else {
      send_queued();
      fire_timers();
      enforce_timeouts();
      dispatch();
      ping_idle_workers();
    }
    TimePoint wake = next_wake();
    std::unique_lock<std::mutex> lock(mu_);
    clock_.wait_until(lock, sched_cv_, wake, [&] { return wake_ || stopped_; });
  }
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::open(EngineOptions options, ObjectStore& store,
                                               LogWriter& log, Clock& clock) {
  if (options.node_id.empty()) return Status::invalid_argument("EngineOptions: node_id is empty");
  if (options.epoch == Epoch(0)) return Status::invalid_argument("EngineOptions: epoch is 0");
  if (options.local_store_path.empty()) {
    return Status::invalid_argument("EngineOptions: local_store_path is empty");
  }
  if (!options.log_hook) {
    return Status::invalid_argument(
        "EngineOptions: log_hook is required (install log_hook->on_durable() as the LogWriter's "
        "on_durable)");
  }
  if (!log.is_open()) return Status::stopped("the log writer is not open");
  std::unique_ptr<StateMachine> handed;
  if (options.handed_store) handed = std::move(options.handed_store->sm);
  auto local =
      open_local_store(store, options.node_id, options.local_store_path, log.epoch_start_slot(),
                       options.snapshot_request, std::move(handed));
  if (!local.is_ok()) return local.status();
  auto engine =
      std::make_unique<EngineImpl>(std::move(options), store, log, clock, std::move(local->sm));
  engine->set_local_store_report(std::move(local->how));
  if (auto s = engine->start(); !s.is_ok()) {
    engine->stop();
    return s;
  }
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace dex
