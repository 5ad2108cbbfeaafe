// FlowEngine: lifecycle, proposals with speculative assignments, the client
// calls and the long polls. Workers, dispatch, timers and timeouts are in
// flow_dispatch.cc.
#include "engine/flow_engine.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "blob/blob_store.h"
#include "engine/flow_reads.h"
#include "engine/flow_timeout_handler.h"
#include "engine/rocks_kv.h"
#include "engine/worker_sink.h"
#include "flow/kv_txn.h"
#include "log/log_writer.h"

namespace dex {
namespace {

Status engine_stopped() {
  // Also what a long poll answers once the engine stopped or its log did.
  return Status::stopped("the engine stopped (the lease was released or lost)");
}

std::string new_run_id() {
  // 128 random bits: unique across processes and restarts without coordination.
  static thread_local std::mt19937_64 gen(std::random_device{}());
  return fmt::format("{:016x}{:016x}", gen(), gen());
}

}  // namespace

FlowEngine::FlowEngine(FlowEngineOptions options, SharedStore& store, LogWriter& log, Clock& clock,
                       WorkerPool& workers, FlowWaits& waits)
    : options_(std::move(options)),
      store_(store),
      log_(log),
      clock_(clock),
      pool_(workers),
      waits_(waits),
      proposer_(log),
      dispatcher_(DispatcherOptions{options_.worker_grace}, options_.epoch.value) {}

FlowEngine::~FlowEngine() { stop(); }

Status FlowEngine::start() {
  // The queued attempts the log left (the EpochStart's recovery included).
  std::map<std::string, std::deque<flow::TaskRef>> queued;
  {
    std::shared_lock<std::shared_mutex> lock(store_.mu);
    if (!store_.sm) return engine_stopped();
    // Times go on from the last record's, whatever this machine's clock says.
    auto floor = store_.sm->time_floor_ms();
    if (!floor.is_ok()) return floor.status();
    proposer_.raise_floor(*floor);
    auto view = store_.sm->flow_view();
    // Bounded by the queued attempts in the store.
    for (auto& [key, value] : view->scan(flow::keys::kTaskQueuePrefix)) {
      const auto sep = key.rfind(flow::keys::kSep);
      flow::TaskRef ref;
      ref.ParseFromString(value);
      queued[key.substr(flow::keys::kTaskQueuePrefix.size(),
                        sep - flow::keys::kTaskQueuePrefix.size())]
          .push_back(std::move(ref));
    }
    if (!view->status().is_ok()) return view->status();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [type, refs] : queued)  // bounded by the queued attempts
      for (const auto& ref : refs) dispatcher_.queued(type, ref);
    wake_ = true;
  }
  scheduler_ = std::thread([this] { run_scheduler(); });
  return Status::ok();
}

void FlowEngine::stop() {
  std::call_once(stop_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      sched_cv_.notify_all();
    }
    waits_.stop(engine_stopped());
    if (scheduler_.joinable()) scheduler_.join();
    fill_.stop();  // before the proposer: a job may end its attempt through it
    proposer_.stop(engine_stopped());
    fail_held(engine_stopped());
  });
}

void FlowEngine::log_stopped(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    log_stopped_ = true;
    sched_cv_.notify_all();
  }
  waits_.stop(engine_stopped());
  proposer_.stop(why);
  fail_held(why);
}

void FlowEngine::begin_drain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
  wake_ = true;
  sched_cv_.notify_all();
}

size_t FlowEngine::attempts_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dispatcher_.attempts_sent();
}

Dispatcher::Gate FlowEngine::gate() const {
  return {log_.lease_valid(), draining_, stopped_ || log_stopped_};
}

void FlowEngine::on_applied(std::vector<FlowRecordResult>& results, const flow::Effects& fx) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& q : fx.queued) dispatcher_.queued(q.flow_type, q.task);
    for (const auto& started : fx.started) {
      switch (dispatcher_.confirmed(started.task_id)) {
        case Dispatcher::Confirmation::kSend:
          sends_.push_back(started.task_id);
          break;
        case Dispatcher::Confirmation::kCheck:
          checks_.push_back(started.task_id);
          break;
        case Dispatcher::Confirmation::kNone:
          break;
      }
    }
    for (const auto& ended : fx.ended) {
      dispatcher_.released(ended.task_id);
      prebuilt_.erase(ended.task_id);
      early_.erase(ended.task_id);
      unhold(ended.task_id);  // answered stale now
    }
    wake_ = true;
    sched_cv_.notify_all();
  }
  if (!fx.closed.empty() || !fx.history.empty() || !fx.steps_done.empty() ||
      !fx.attributes_changed.empty() || !fx.rpcs_done.empty())
    waits_.changed();
  proposer_.applied(results);
}

// ----------------------------------------------------------- proposals

flow::ApplyResult FlowEngine::speculate(flow::FlowRecord& record,
                                        std::vector<std::string>& reserved) {
  std::shared_lock<std::shared_mutex> store_lock(store_.mu);
  if (!store_.sm) return {flow::ApplyKind::kStale, flow::RefusalCode::kNone, "stopped", ""};
  auto scratch = store_.sm->flow_scratch();
  flow::KvFlowTxn txn(*scratch);
  flow::Effects fx;
  flow::ApplyResult verdict = flow::apply_record(txn, record, fx, flow::SearchIndexing::kSkip);
  if (verdict.kind != flow::ApplyKind::kApplied || fx.queued.empty()) return verdict;
  std::lock_guard<std::mutex> lock(mu_);
  const Dispatcher::Gate open = gate();
  if (!open.open()) return verdict;
  record.set_at_unix_ms(now_ms());
  for (const auto& q : fx.queued) {  // bounded by the record's new attempts
    auto a = dispatcher_.reserve(q.task, q.flow_type, open);
    if (!a) continue;  // it stays queued; dispatch hands it out later
    auto* out = record.add_assignments();
    *out->mutable_task() = q.task;
    out->set_task_id(a->task_id);
    out->set_worker_id(a->worker_id);
    if (sent_before_applied(txn, q.task, q.durability) && !holds_lock_keys(txn, q.task))
      if (auto task = build_task(txn, q.task, a->task_id)) prebuilt_[a->task_id] = *std::move(task);
    reserved.push_back(a->task_id);
  }
  return verdict;
}

void FlowEngine::settle(const std::vector<std::string>& reserved) {
  std::lock_guard<std::mutex> lock(mu_);
  // A slot freed: the scheduler looks at the queues again.
  if (dispatcher_.settle(reserved) > 0) wake_ = true;
  for (const auto& task_id : reserved) {  // bounded by the record's assignments
    if (dispatcher_.knows(task_id)) continue;
    prebuilt_.erase(task_id);
    // Sent early by a record that did not start it: its results are stale.
    early_.erase(task_id);
    unhold(task_id);
  }
}

void FlowEngine::propose(flow::FlowRecord record, bool speculative,
                         std::function<void(StatusOr<flow::ApplyResult>)> done) {
  std::vector<std::string> reserved;
  if (speculative) speculate(record, reserved);
  propose_speculated(std::move(record), std::move(reserved), std::move(done));
}

void FlowEngine::propose_speculated(flow::FlowRecord record, std::vector<std::string> reserved,
                                    std::function<void(StatusOr<flow::ApplyResult>)> done) {
  proposer_.propose(std::move(record),
                    [this, reserved, done = std::move(done)](StatusOr<flow::ApplyResult> result) {
                      // The attempts its assignments started, whatever its
                      // verdict (a TimerFired gone stale still starts them).
                      settle(reserved);
                      done(std::move(result));
                    });
  send_prebuilt(reserved);
}

StatusOr<flow::ApplyResult> FlowEngine::propose_and_wait(flow::FlowRecord record,
                                                         bool speculative) {
  auto promise = std::make_shared<std::promise<StatusOr<flow::ApplyResult>>>();
  auto future = promise->get_future();
  propose(std::move(record), speculative,
          [promise](StatusOr<flow::ApplyResult> r) { promise->set_value(std::move(r)); });
  return future.get();
}

Status refusal(const flow::ApplyResult& r) {
  switch (r.code) {
    case flow::RefusalCode::kInvalidArgument:
      return Status::invalid_argument(r.message);
    case flow::RefusalCode::kNotFound:
      return Status::not_found(r.message);
    case flow::RefusalCode::kFailedPrecondition:
      return Status::precondition_failed(r.message);
    case flow::RefusalCode::kAlreadyExists:
      return Status::already_exists(r.message);
    case flow::RefusalCode::kNone:
      break;
  }
  return Status::precondition_failed(r.message);
}

// ----------------------------------------------------------- client calls

StatusOr<flow::StartFlowResponse> FlowEngine::start_flow(const flow::StartFlowRequest& request) {
  flow::FlowRecord record;
  auto* s = record.mutable_start_flow();
  s->set_flow_id(request.flow_id());
  s->set_run_id(new_run_id());
  s->set_flow_type(request.flow_type());
  *s->mutable_input() = request.input();
  *s->mutable_options() = request.options();
  s->set_at_unix_ms(now_ms());
  s->set_retention_ms(options_.retention_ms);
  const std::string run_id = s->run_id();
  auto result = propose_and_wait(std::move(record), true);
  if (!result.is_ok()) return result.status();
  if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  flow::StartFlowResponse out;
  out.set_run_id(result->run_id.empty() ? run_id : result->run_id);
  out.set_already_started(out.run_id() != run_id);
  return out;
}

Status FlowEngine::stop_flow(const flow::StopFlowRequest& request) {
  flow::FlowRecord record;
  auto* s = record.mutable_stop_flow();
  s->set_flow_id(request.flow_id());
  s->set_run_id(request.run_id());
  s->set_mode(request.mode());
  s->set_reason(request.reason());
  s->set_request_id(request.request_id());
  s->set_at_unix_ms(now_ms());
  auto result = propose_and_wait(std::move(record), false);
  if (!result.is_ok()) return result.status();
  // Unchanged: a repeated request ID, answered as its first try was.
  if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  return Status::ok();
}

Status FlowEngine::publish(const flow::PublishToChannelRequest& request) {
  flow::FlowRecord record;
  auto* p = record.mutable_publish();
  p->set_flow_id(request.flow_id());
  p->set_run_id(request.run_id());
  p->mutable_publish()->set_channel(request.channel());
  p->mutable_publish()->set_instance_key(request.instance_key());
  *p->mutable_publish()->mutable_messages() = request.messages();
  p->set_request_id(request.request_id());
  p->set_at_unix_ms(now_ms());
  auto result = propose_and_wait(std::move(record), true);
  if (!result.is_ok()) return result.status();
  // Unchanged: a repeated request ID, answered as its first try was.
  if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  return Status::ok();
}

Status FlowEngine::skip_timer(const flow::SkipTimerRequest& request) {
  flow::FlowRecord record;
  auto* s = record.mutable_skip_timer();
  s->set_flow_id(request.flow().flow_id());
  s->set_run_id(request.flow().run_id());
  s->set_step_execution_id(request.step_execution_id());
  if (request.timer_case() == flow::SkipTimerRequest::kConditionIndex)
    s->set_condition_index(request.condition_index());
  else if (request.timer_case() == flow::SkipTimerRequest::kRunTimer)
    s->set_run_timer(request.run_timer());
  else if (request.timer_case() == flow::SkipTimerRequest::kConditionId)
    s->set_condition_id(request.condition_id());
  s->set_request_id(request.request_id());
  s->set_at_unix_ms(now_ms());
  auto result = propose_and_wait(std::move(record), true);
  if (!result.is_ok()) return result.status();
  // Unchanged: a repeated request ID, answered as its first try was.
  if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  return Status::ok();
}

StatusOr<flow::TimeTravelResponse> FlowEngine::time_travel(const flow::TimeTravelRequest& request) {
  flow::FlowRecord record;
  auto* t = record.mutable_time_travel();
  t->set_flow_id(request.flow().flow_id());
  t->set_run_id(request.flow().run_id());
  t->set_new_run_id(new_run_id());
  *t->mutable_point() = request.point();
  t->set_reason(request.reason());
  t->set_request_id(request.request_id());
  t->set_at_unix_ms(now_ms());
  if (request.dry_run()) return time_travel_preview(record);
  const std::string run_id = t->new_run_id();
  auto result = propose_and_wait(std::move(record), true);
  if (!result.is_ok()) return result.status();
  if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  flow::TimeTravelResponse out;
  out.set_run_id(result->run_id.empty() ? run_id : result->run_id);
  out.set_already_done(result->kind == flow::ApplyKind::kUnchanged);
  return out;
}

StatusOr<flow::TriggerContinueAsNewResponse> FlowEngine::continue_as_new(
    const flow::TriggerContinueAsNewRequest& request) {
  flow::FlowRecord record;
  auto* c = record.mutable_continue_as_new();
  c->set_flow_id(request.flow().flow_id());
  c->set_run_id(request.flow().run_id());
  c->set_reason(request.reason());
  c->set_request_id(request.request_id());
  c->set_at_unix_ms(now_ms());
  auto result = propose_and_wait(std::move(record), true);
  if (!result.is_ok()) return result.status();
  if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  flow::TriggerContinueAsNewResponse out;
  out.set_new_run_id(result->run_id);
  out.set_already_done(result->kind == flow::ApplyKind::kUnchanged);
  return out;
}

StatusOr<flow::UpdateFlowConfigResponse> FlowEngine::update_flow_config(
    const flow::UpdateFlowConfigRequest& request) {
  flow::FlowRecord record;
  auto* u = record.mutable_update_flow_config();
  u->set_flow_id(request.flow().flow_id());
  u->set_run_id(request.flow().run_id());
  *u->mutable_config() = request.config();
  *u->mutable_clear_fields() = request.clear_fields();
  u->set_request_id(request.request_id());
  u->set_at_unix_ms(now_ms());
  auto result = propose_and_wait(std::move(record), true);
  if (!result.is_ok()) return result.status();
  if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  flow::UpdateFlowConfigResponse out;
  out.set_already_done(result->kind == flow::ApplyKind::kUnchanged);
  if (result->kind == flow::ApplyKind::kApplied && result->run_id != request.flow().run_id())
    out.set_continued_run_id(result->run_id);
  // The config as the run holds it now (a later update may have come first).
  auto config = with_view([&](RocksKv& kv) -> StatusOr<flow::FlowConfig> {
    flow::KvFlowTxn txn(kv);
    auto run = txn.run(request.flow().flow_id(), request.flow().run_id());
    if (!run) return Status::not_found("the run is gone (retention)");
    return config_view(*run);
  });
  if (config.is_ok()) *out.mutable_config() = std::move(*config);
  return out;
}

StatusOr<flow::TimeTravelResponse> FlowEngine::time_travel_preview(const flow::FlowRecord& record) {
  std::shared_lock<std::shared_mutex> store_lock(store_.mu);
  if (!store_.sm) return Status::transient("the flow engine is stopped");
  auto scratch = store_.sm->flow_scratch();  // never committed
  flow::KvFlowTxn txn(*scratch);
  flow::Effects fx;
  const flow::ApplyResult verdict =
      flow::apply_record(txn, record, fx, flow::SearchIndexing::kSkip);
  if (verdict.kind == flow::ApplyKind::kRejected) return refusal(verdict);
  flow::TimeTravelResponse out;
  out.set_run_id(verdict.run_id);
  out.set_already_done(verdict.kind == flow::ApplyKind::kUnchanged);
  auto run = txn.run(record.time_travel().flow_id(), verdict.run_id);
  if (!run) return out;
  *out.mutable_start()->mutable_flow() = describe_run(txn, *run);
  for (auto& v : active_steps(txn, *run)) *out.mutable_start()->add_active() = std::move(v);
  if (auto h = timeout_handler_view(*run)) *out.mutable_start()->mutable_timeout_handler() = *h;
  // The queues, Attributes and config as GetFlowState would show them; the
  // values within half the budget, since `attributes` repeats the Attributes.
  add_state_contents(txn, *run, state_values_max() / 2, *out.mutable_start());
  for (auto& a : txn.attributes(run->flow_id(), run->run_id(), "")) *out.add_attributes() = a;
  return out;
}

uint64_t FlowEngine::state_values_max() const {
  // Half the message budget at most: the rest of the state fits beside the values.
  return options_.blobs == nullptr
             ? kStateValueBytesMax
             : std::min(kStateValueBytesMax, options_.blobs->settings().message_bytes_max / 2);
}

// ----------------------------------------------------------- reads

StatusOr<flow::FlowDescription> FlowEngine::describe(const flow::FlowRef& ref) {
  return with_view([&](RocksKv& kv) -> StatusOr<flow::FlowDescription> {
    flow::KvFlowTxn txn(kv);
    auto run = resolve_run(txn, ref);
    if (!run.is_ok()) return run.status();
    return describe_run(txn, *run);
  });
}

StatusOr<flow::GetFlowStateResponse> FlowEngine::state(const flow::FlowRef& ref) {
  auto out = with_view([&](RocksKv& kv) -> StatusOr<flow::GetFlowStateResponse> {
    flow::KvFlowTxn txn(kv);
    auto run = resolve_run(txn, ref);
    if (!run.is_ok()) return run.status();
    flow::GetFlowStateResponse r;
    *r.mutable_flow() = describe_run(txn, *run);
    for (auto& v : active_steps(txn, *run)) *r.add_active() = std::move(v);
    if (auto h = timeout_handler_view(*run)) *r.mutable_timeout_handler() = std::move(*h);
    add_state_contents(txn, *run, state_values_max(), r);
    return r;
  });
  if (!out.is_ok()) return out;
  for (auto& w : workers_for(out->flow().flow_type())) out->add_workers(std::move(w));
  return out;
}

StatusOr<flow::GetHistoryEventsResponse> FlowEngine::history(
    const flow::GetHistoryEventsRequest& request) {
  if (request.page_size() > kHistoryPageMax)
    return Status::invalid_argument(
        fmt::format("pageSize {} is above the limit of {}", request.page_size(), kHistoryPageMax));
  const uint32_t page = request.page_size() == 0 ? kHistoryPageDefault : request.page_size();
  return with_view([&](RocksKv& kv) -> StatusOr<flow::GetHistoryEventsResponse> {
    flow::KvFlowTxn txn(kv);
    auto run = resolve_run(txn, request.flow());
    if (!run.is_ok()) return run.status();
    return history_page(kv, *run, request.after_seq(), request.from_start(), page);
  });
}

}  // namespace dex
