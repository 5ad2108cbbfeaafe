// The Engine behind engine.h (docs/engine.md): opens the local store and
// replays the log through this epoch's EpochStart, applies every durable batch
// in the log writer's on_durable hook, takes snapshots, pings idle Worker
// streams and notices a stopped log writer. What to append and which Worker
// gets which attempt is the flow engine's (flow_engine.h).
#include "engine/engine.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <map>
#include <shared_mutex>
#include <thread>

#include "common/invariant.h"
#include "engine/attribute_sync.h"
#include "engine/flow_blob_sweep.h"
#include "engine/flow_blobs.h"
#include "engine/flow_engine.h"
#include "engine/flow_waits.h"
#include "engine/local_store.h"
#include "engine/rpc_invoker.h"
#include "engine/shared_store.h"
#include "engine/state_machine.h"
#include "log/log_gc.h"
#include "log/log_reader.h"
#include "log/log_writer.h"
#include "snapshot/snapshot.h"

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

// The housekeeping thread wakes at least this often (log writer health).
constexpr Duration kHousekeepingPollMax = milliseconds(100);
constexpr int kReplayTransientRetriesMax = 50;

int64_t system_now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status stopped_status() {
  return Status::stopped("the engine stopped (the lease was lost or released)");
}

class EngineImpl final : public Engine {
 public:
  EngineImpl(EngineOptions options, ObjectStore& store, LogWriter& log, Clock& clock,
             std::unique_ptr<StateMachine> sm)
      : options_(std::move(options)),
        store_(store),
        log_(log),
        clock_(clock),
        workers_(kWorkersMax, options_.worker_ping_interval) {
    local_.sm = std::move(sm);
    if (!options_.now_unix_ms) options_.now_unix_ms = system_now_unix_ms;
    blobs_ = std::make_unique<BlobStore>(store_, clock_, options_.node_id, options_.values);
  }
  ~EngineImpl() override { stop(); }

  Status start();
  void stop() override;
  std::string local_store_report() const override { return local_store_report_; }
  void begin_drain() override {
    if (flow_) flow_->begin_drain();
  }
  size_t attempts_running() const override { return flow_ ? flow_->attempts_running() : 0; }
  StatusOr<SnapshotInfo> snapshot_now() override;
  SnapshotStats snapshot_stats() const override {
    return snapshotter_ ? snapshotter_->stats() : SnapshotStats{};
  }
  void set_local_store_report(std::string how) { local_store_report_ = std::move(how); }

  StatusOr<WorkerHandle> connect_worker(const WorkerHello& hello,
                                        std::shared_ptr<WorkerSink> sink) override;
  void disconnect_worker(WorkerHandle worker) override;
  HeartbeatAck heartbeat(WorkerHandle, const TaskHeartbeat& heartbeat) override {
    if (auto s = check_open(); !s.is_ok()) {
      HeartbeatAck ack;
      ack.set_task_id(heartbeat.task_id());
      ack.set_cancel_requested(true);
      return ack;
    }
    return flow_->heartbeat(heartbeat);
  }
  std::future<ResultAck> complete_task(WorkerHandle worker,
                                       const flow::FlowTaskResult& result) override {
    if (auto s = check_open(); !s.is_ok()) {
      std::promise<ResultAck> p;
      p.set_exception(std::make_exception_ptr(EngineStoppedError("the engine stopped")));
      return p.get_future();
    }
    return flow_->complete(worker, result);
  }

  std::vector<AttributeSyncReport> attribute_sync_reports() const override {
    std::vector<AttributeSyncReport> out;
    for (const auto& sync : syncs_) out.push_back(sync->report());
    return out;
  }

  StatusOr<flow::StartFlowResponse> start_flow(const flow::StartFlowRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    if (auto s = check_store(r.options().attribute_store(), "the start's attributeStore");
        !s.is_ok())
      return s;
    if (auto s = check_store(r.options().config().attribute_store(),
                             "the start's config.attributeStore");
        !s.is_ok())
      return s;
    auto in = values_in(blobs_.get(), r.flow_id(), r);
    if (!in.is_ok()) return in.status();
    return flow_->start_flow(*in);
  }
  Status stop_flow(const flow::StopFlowRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->stop_flow(r);
  }
  Status publish(const flow::PublishToChannelRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    auto in = values_in(blobs_.get(), r.flow_id(), r);
    if (!in.is_ok()) return in.status();
    return flow_->publish(*in);
  }
  Status skip_timer(const flow::SkipTimerRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->skip_timer(r);
  }
  StatusOr<flow::TimeTravelResponse> time_travel(const flow::TimeTravelRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return values_out(blobs_.get(), flow_->time_travel(r));
  }
  StatusOr<flow::TriggerContinueAsNewResponse> continue_as_new(
      const flow::TriggerContinueAsNewRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->continue_as_new(r);
  }
  StatusOr<flow::UpdateFlowConfigResponse> update_flow_config(
      const flow::UpdateFlowConfigRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->update_flow_config(r);
  }
  StatusOr<flow::FlowDescription> describe_flow(const flow::FlowRef& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return values_out(blobs_.get(), flow_->describe(r));
  }
  StatusOr<flow::GetFlowStateResponse> flow_state(const flow::FlowRef& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return values_out(blobs_.get(), flow_->state(r));
  }
  StatusOr<flow::GetHistoryEventsResponse> history(
      const flow::GetHistoryEventsRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return history_out(blobs_.get(), flow_->history(r));
  }
  StatusOr<flow::WaitForFlowResponse> wait_for_flow(
      const flow::WaitForFlowRequest& r, const std::function<bool()>& cancelled) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return values_out(
        blobs_.get(),
        waits_.wait_for_flow(r.flow(), long_poll_deadline(clock_, r.timeout_ms()), cancelled));
  }
  StatusOr<flow::GetHistoryEventsResponse> wait_for_history_event(
      const flow::WaitForHistoryEventRequest& r, const std::function<bool()>& cancelled) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return history_out(blobs_.get(), waits_.wait_for_history_event(
                                         r, long_poll_deadline(clock_, r.timeout_ms()), cancelled));
  }
  StatusOr<flow::WaitForStepCompletionResponse> wait_for_step(
      const flow::WaitForStepCompletionRequest& r,
      const std::function<bool()>& cancelled) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return waits_.wait_for_step(r, long_poll_deadline(clock_, r.timeout_ms()), cancelled);
  }
  StatusOr<flow::GetAttributesResponse> get_attributes(
      const flow::GetAttributesRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return values_out(blobs_.get(), flow_->get_attributes(r));
  }
  StatusOr<flow::SearchFlowsResponse> search_flows(const flow::SearchFlowsRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->search_flows(r);
  }
  StatusOr<flow::ListSearchKeysResponse> list_search_keys(
      const flow::ListSearchKeysRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->list_search_keys(r);
  }
  StatusOr<flow::ListSearchValuesResponse> list_search_values(
      const flow::ListSearchValuesRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    return flow_->list_search_values(r);
  }
  StatusOr<flow::SetAttributesResponse> set_attributes(
      const flow::SetAttributesRequest& r) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    auto in = values_in(blobs_.get(), r.flow().flow_id(), r);
    if (!in.is_ok()) return in.status();
    return flow_->set_attributes(*in);
  }
  StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(
      const flow::WaitForAttributeRequest& r, const std::function<bool()>& cancelled) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    if (r.value().has_blob())
      return Status::invalid_argument("value carries a blob reference: only the server sets one");
    return values_out(blobs_.get(), waits_.wait_for_attribute(
                                        r, long_poll_deadline(clock_, r.timeout_ms()), cancelled));
  }
  StatusOr<flow::InvokeRpcResponse> invoke_rpc(const flow::InvokeRpcRequest& r,
                                               const std::function<bool()>& cancelled) override {
    if (auto s = check_open(); !s.is_ok()) return s;
    auto in = values_in(blobs_.get(), r.flow().flow_id(), r);
    if (!in.is_ok()) return in.status();
    return values_out(blobs_.get(), rpcs_->invoke(*in, cancelled));
  }

 private:
  void on_durable(Slot slot, const proto::LogBatch& batch);
  // InvalidArgument unless `name` is empty or a configured Attribute Store.
  Status check_store(const std::string& name, std::string_view what) const;
  void start_attribute_syncs();
  // Tells EngineOptions::on_attempt_ended / on_flow_ended (/ on_applied) what `fx` did.
  void report_ended(const flow::Effects& fx) const;
  Status check_open();
  // A stopped log writer or a failed store: refuse further work, once.
  void mark_log_stopped(const Status& why);
  void run_housekeeping();
  void ping_idle_workers();

  // Constant after construction.
  EngineOptions options_;
  ObjectStore& store_;
  LogWriter& log_;
  Clock& clock_;

  // The local store; reset by stop(). Readers hold local_.mu shared, stop()
  // unique. Lock order: local_.mu before mu_; never take it while holding mu_.
  SharedStore local_;

  mutable std::mutex mu_;
  std::condition_variable housekeeping_cv_;  // stopped_
  bool stopped_ = false;                     // guarded by mu_
  bool log_stopped_ = false;                 // guarded by mu_
  // The Worker streams (thread-safe; the flow engine adds and removes them).
  // Declared before flow_, which holds a reference to it.
  WorkerPool workers_;
  std::thread housekeeping_;
  std::string local_store_report_;            // set before start()
  TimePoint started_at_;                      // set by start(), after the EpochStart
  std::atomic<uint64_t> records_applied_{0};  // since open, replay included
  Slot next_live_slot_;  // the log writer's thread only (set by start() before the attach)
  std::unique_ptr<BlobStore> blobs_;          // created by the constructor; outlives flow_
  std::unique_ptr<Snapshotter> snapshotter_;  // created by start()
  std::unique_ptr<BlobSweeper> sweeper_;      // created by start(); stopped before sm closes
  FlowWaits waits_{local_, clock_};           // the long polls; outlives flow_, which tells it
  std::unique_ptr<FlowEngine> flow_;          // created by start(), before any call
  std::unique_ptr<RpcInvoker> rpcs_;          // created by start(), over flow_ and waits_
  // One per Attribute Store, created by start() over flow_; stopped first.
  std::vector<std::unique_ptr<AttributeSync>> syncs_;
  std::once_flag stop_once_;
};

void EngineImpl::report_ended(const flow::Effects& fx) const {
  if (options_.on_attempt_ended) {
    for (const auto& ended : fx.ended) options_.on_attempt_ended(ended.outcome);
  }
  if (options_.on_flow_ended) {
    for (const auto& closed : fx.closed) options_.on_flow_ended(closed.status);
  }
  if (options_.on_runs_deleted && !fx.runs_deleted.empty())
    options_.on_runs_deleted(fx.runs_deleted.size());
  if (options_.on_applied) options_.on_applied(fx);
}

void EngineImpl::mark_log_stopped(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (log_stopped_) return;
    log_stopped_ = true;
  }
  spdlog::warn("engine: {}; the engine refuses further work", why.message());
  if (flow_) flow_->log_stopped(why);
}

// The log writer's on_durable, on its thread, in slot order (docs/engine.md,
// "How the engine uses the log"): apply, then tell the flow engine.
void EngineImpl::on_durable(Slot slot, const proto::LogBatch& batch) {
  // This process's writer writes the slots after its EpochStart one by one:
  // a batch that was not delivered would leave the store behind the log.
  if (slot != next_live_slot_) {
    spdlog::error("engine: log slot {} was delivered where slot {} was expected", slot.value,
                  next_live_slot_.value);
    mark_log_stopped(Status::corruption(fmt::format("log slot {} was not applied before slot {}",
                                                    next_live_slot_.value, slot.value)));
    return;
  }
  next_live_slot_ = slot.next();
  StatusOr<ApplyOutcome> outcome = Status::stopped("not applied");
  {
    std::shared_lock<std::shared_mutex> sm_lock(local_.mu);
    if (!local_.sm) return;
    outcome = local_.sm->apply(slot, batch);
  }
  if (!outcome.is_ok()) {
    // The local store failed: nothing more can be applied in order. Stop
    // serving; a restart replays the log.
    spdlog::error("engine: applying log slot {} failed: {}", slot.value,
                  outcome.status().to_string());
    mark_log_stopped(
        Status::stopped(fmt::format("the local store failed: {}", outcome.status().message())));
    return;
  }
  if (outcome->skipped) return;
  records_applied_ += batch.records_size();
  report_ended(outcome->flow_effects);
  if (flow_) flow_->on_applied(outcome->flow_results, outcome->flow_effects);
  for (auto& sync : syncs_) sync->wake();
}

Status EngineImpl::check_store(const std::string& name, std::string_view what) const {
  if (name.empty()) return Status::ok();
  for (const auto& s : options_.attribute_stores) {
    if (s.settings.name == name) return Status::ok();
  }
  return Status::invalid_argument(
      fmt::format("{} names Attribute Store \"{}\", which this server does not configure "
                  "(attributeStore.stores)",
                  what, name));
}

void EngineImpl::start_attribute_syncs() {
  uint64_t seed = options_.epoch.value * 7919;
  for (const auto& s : options_.attribute_stores) {  // bounded by the configured stores
    DEX_INVARIANT(s.table != nullptr, "a configured store has its table");
    AttributeSyncOptions o;
    o.store = s.settings;
    o.common = options_.attribute_store_settings;
    o.epoch = options_.epoch;
    o.process = options_.process_id.value;
    o.budget = options_.attribute_sync_budget;
    o.lease_remaining = options_.lease_remaining;
    o.now_unix_ms = options_.now_unix_ms;
    o.on_report = options_.on_attribute_sync;
    o.seed = ++seed;
    syncs_.push_back(std::make_unique<AttributeSync>(std::move(o), *s.table, local_, *flow_,
                                                     blobs_.get(), clock_));
    syncs_.back()->start();
  }
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
    if (entry.slot == epoch_slot && !applied->skipped) report_ended(applied->flow_effects);
  }
  auto now_last = local_.sm->last_applied();
  if (!now_last.is_ok()) return now_last.status();
  if (!now_last->has_value() || now_last->value() != epoch_slot) {
    return Status::corruption(
        fmt::format("replaying the log ended at slot {} before this epoch's EpochStart at slot {}",
                    now_last->has_value() ? std::to_string(now_last->value().value) : "none",
                    epoch_slot.value));
  }
  flow_ = std::make_unique<FlowEngine>(
      FlowEngineOptions{options_.epoch, options_.now_unix_ms, blobs_.get(),
                        options_.flow_retention_ms, options_.worker_reconnect_grace},
      local_, log_, clock_, workers_, waits_);
  rpcs_ = std::make_unique<RpcInvoker>(*flow_, waits_, local_, clock_, options_.epoch,
                                       options_.now_unix_ms);
  // Attached before the flow engine starts: its first round proposes due
  // timers and queued attempts at once, and a batch that became durable
  // before the hook was attached would never be applied (its callers never
  // answered, a timer never fired again, the store behind its own log).
  next_live_slot_ = epoch_slot.next();
  options_.log_hook->attach(
      [this](Slot slot, const proto::LogBatch& batch) { on_durable(slot, batch); });
  if (auto s = flow_->start(); !s.is_ok()) return s;
  housekeeping_ = std::thread([this] { run_housekeeping(); });

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

  // Blobs no run references: only here, in the active process, after the
  // replay through this epoch's EpochStart.
  BlobSweepOptions bo;
  bo.interval = options_.values.collect_interval;
  bo.min_age = options_.values.collect_min_age;
  bo.now_unix_ms = options_.now_unix_ms;
  bo.lease_valid = [this] { return log_.lease_valid(); };
  bo.on_pass = options_.on_blobs_collected;
  sweeper_ = std::make_unique<BlobSweeper>(*blobs_, local_, clock_, std::move(bo));
  sweeper_->start();
  start_attribute_syncs();
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
      housekeeping_cv_.notify_all();
    }
    // The syncs end at their next action; one waiting for its watermark
    // record's answer is answered when the flow engine stops, below (after a
    // lost lease the log may never answer it), so they are joined after that.
    for (auto& sync : syncs_) sync->request_stop();
    // A snapshot in progress stops at its next request, a blob collection
    // pass at its next page or delete.
    if (snapshotter_) snapshotter_->stop();
    if (sweeper_) sweeper_->stop();
    // Waits for a delivery in progress; none follows.
    if (options_.log_hook) options_.log_hook->detach();
    if (housekeeping_.joinable()) housekeeping_.join();
    if (flow_) flow_->stop();
    // A sync transaction in flight ends within its budget.
    for (auto& sync : syncs_) sync->stop();
    std::unique_lock<std::shared_mutex> sm_lock(local_.mu);
    local_.sm.reset();
  });
}

// ----------------------------------------------------------- Worker streams

StatusOr<Engine::WorkerHandle> EngineImpl::connect_worker(const WorkerHello& hello,
                                                          std::shared_ptr<WorkerSink> sink) {
  if (hello.worker_id().empty()) return Status::invalid_argument("worker_id is empty");
  if (hello.worker_id().size() > kWorkerIdBytesMax) {
    return Status::invalid_argument(fmt::format("worker_id is {} bytes, over the limit of {}",
                                                hello.worker_id().size(), kWorkerIdBytesMax));
  }
  if (hello.flows().empty()) return Status::invalid_argument("the hello declares no Flow type");
  for (const auto& d : hello.flows()) {  // bounded by the hello's declarations
    if (auto s = check_store(d.attribute_store(), fmt::format("Flow type \"{}\"", d.flow_type()));
        !s.is_ok())
      return s;
    if (auto s = check_store(d.config().attribute_store(),
                             fmt::format("Flow type \"{}\" config", d.flow_type()));
        !s.is_ok())
      return s;
  }
  if (hello.max_concurrent_tasks() > kWorkerConcurrentTasksMax) {
    return Status::invalid_argument(fmt::format("max_concurrent_tasks {} is over the limit of {}",
                                                hello.max_concurrent_tasks(),
                                                kWorkerConcurrentTasksMax));
  }
  if (!sink) return Status::invalid_argument("no sink");
  if (auto s = check_open(); !s.is_ok()) return s;
  auto handle = workers_.new_handle();
  if (!handle.is_ok()) return handle.status();
  // Records the declarations durably first (a log write), then adds the
  // stream to the pool: it takes tasks and pings from then on.
  if (auto s = flow_->connect(*handle, hello, std::move(sink)); !s.is_ok()) return s;
  return *handle;
}

void EngineImpl::disconnect_worker(WorkerHandle worker) {
  // Its running attempts wait for the Worker to come back for the grace
  // (EngineOptions::worker_reconnect_grace); their results may come on a new stream.
  if (flow_)
    flow_->disconnect(worker);
  else
    workers_.remove(worker);
}

// ----------------------------------------------------------- housekeeping

void EngineImpl::ping_idle_workers() {
  for (auto& sink : workers_.due_pings(clock_.now())) (void)sink->send_ping();
}

void EngineImpl::run_housekeeping() {
  // One round per wake-up; runs until stop().
  while (true) {
    if (!log_.is_open()) mark_log_stopped(Status::stopped("the log writer stopped"));
    ping_idle_workers();
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) return;
    const TimePoint wake = workers_.next_ping(clock_.now() + kHousekeepingPollMax);
    clock_.wait_until(lock, housekeeping_cv_, wake, [&] { return stopped_; });
    if (stopped_) return;
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
  if (!options.attribute_stores.empty() && !options.lease_remaining) {
    return Status::invalid_argument("EngineOptions: attribute_stores need lease_remaining");
  }
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
