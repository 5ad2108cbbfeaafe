// FlowEngine's Workers and scheduler: declarations at hello, results,
// heartbeats, handing queued attempts to free Workers, sends, due timers and
// attempt timeouts (docs/flow-rules.md, "The flow engine").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "blob/blob_values.h"
#include "common/units.h"
#include "engine/flow_engine.h"
#include "engine/flow_reads.h"
#include "engine/rocks_kv.h"
#include "engine/worker_sink.h"
#include "flow/kv_txn.h"
#include "log/log_writer.h"

namespace dex {
namespace {

// Bounds on one scheduler round.
constexpr size_t kTimersPerRoundMax = 256;
constexpr size_t kAssignmentsPerRoundMax = 256;
// The scheduler wakes at least this often (timers are read from the store).
constexpr Duration kSchedulerPollMax = milliseconds(100);
constexpr size_t kDeclarationsPerHelloMax = 100;

}  // namespace

// ----------------------------------------------------------- Worker streams

Status FlowEngine::connect(WorkerHandle handle, const WorkerHello& hello,
                           std::shared_ptr<WorkerSink> sink) {
  if (static_cast<size_t>(hello.flows_size()) > kDeclarationsPerHelloMax)
    return Status::invalid_argument(fmt::format("the hello declares {} Flow types; the limit is {}",
                                                hello.flows_size(), kDeclarationsPerHelloMax));
  if (hello.flows_size() > 0) {
    flow::FlowRecord record;
    *record.mutable_declare_flows()->mutable_declarations() = hello.flows();
    record.mutable_declare_flows()->set_at_unix_ms(now_ms());
    // Durable before the stream takes tasks: a start of a declared type is
    // accepted from then on, even with no Worker connected.
    auto result = propose_and_wait(std::move(record), false);
    if (!result.is_ok()) return result.status();
    if (result->kind == flow::ApplyKind::kRejected) return refusal(*result);
  }
  std::set<std::string> types;
  for (const auto& d : hello.flows()) types.insert(d.flow_type());
  pool_.add(handle, std::move(sink), clock_.now());
  std::lock_guard<std::mutex> lock(mu_);
  dispatcher_.worker_joined(handle, hello.worker_id(), types, hello.max_concurrent_tasks());
  wake_ = true;
  sched_cv_.notify_all();
  return Status::ok();
}

void FlowEngine::disconnect(WorkerHandle handle) {
  pool_.remove(handle);
  std::lock_guard<std::mutex> lock(mu_);
  // Its running attempts wait for the Worker to come back under its ID (and
  // re-send its results) for the grace, then end NOT_COMPLETED (dispatcher.h).
  dispatcher_.worker_left(handle, clock_.now());
  wake_ = true;
  sched_cv_.notify_all();
}

bool FlowEngine::knows_task(const std::string& task_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return dispatcher_.knows(task_id);
}

std::vector<std::string> FlowEngine::workers_for(const std::string& flow_type) const {
  std::lock_guard<std::mutex> lock(mu_);
  return dispatcher_.workers_for(flow_type);
}

HeartbeatAck FlowEngine::heartbeat(const TaskHeartbeat& heartbeat) {
  HeartbeatAck ack;
  ack.set_task_id(heartbeat.task_id());
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || log_stopped_ || !dispatcher_.heartbeat(heartbeat.task_id(), clock_.now()))
    ack.set_cancel_requested(true);
  return ack;
}

std::future<ResultAck> FlowEngine::complete(WorkerHandle, const flow::FlowTaskResult& result) {
  auto promise = std::make_shared<std::promise<ResultAck>>();
  auto future = promise->get_future();
  handle_result(result, std::move(promise));
  return future;
}

void FlowEngine::handle_result(const flow::FlowTaskResult& result,
                               std::shared_ptr<std::promise<ResultAck>> promise) {
  ResultAck ack;
  ack.set_task_id(result.task_id());
  // Which attempt: this process's record of it, or the store's running index
  // (a result re-sent on a new stream, or after this process started).
  std::optional<flow::TaskRef> ref;
  bool withdrawn = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dispatcher_.result_waits(result.task_id())) {
      // Its task went out before its record applied, built from a view that
      // may be behind: proposed now, the result could count before the check
      // finds that the Worker ran on inputs the log never gave it.
      if (!stopped_ && !log_stopped_) {
        held_[result.task_id()].push_back({result, std::move(promise)});
        return;
      }
      promise->set_exception(std::make_exception_ptr(EngineStoppedError("the engine stopped")));
      return;
    }
    withdrawn = dispatcher_.refused(result.task_id());
    if (!withdrawn) ref = dispatcher_.task_of(result.task_id());
  }
  if (withdrawn) {
    ack.set_accepted(false);
    ack.set_reason("stale: task '" + result.task_id() +
                   "' went out before its start was written, with inputs its start did not "
                   "apply with; the attempt runs again");
    promise->set_value(ack);
    return;
  }
  if (!ref) {
    auto found = with_view([&](RocksKv& kv) -> StatusOr<std::optional<flow::TaskRef>> {
      flow::KvFlowTxn txn(kv);
      for (auto& [id, r] : txn.running()) {  // bounded by the running attempts
        if (id == result.task_id()) return std::optional<flow::TaskRef>(r);
      }
      return std::optional<flow::TaskRef>();
    });
    if (!found.is_ok()) {
      promise->set_exception(
          std::make_exception_ptr(EngineStoppedError(found.status().to_string())));
      return;
    }
    ref = *found;
  }
  if (!ref) {
    ack.set_accepted(false);
    ack.set_reason("stale: task '" + result.task_id() +
                   "' is not a running attempt (it ended, or a new process took over)");
    promise->set_value(ack);
    return;
  }
  flow::FlowRecord record;
  auto* m = record.mutable_method_result();
  *m->mutable_task() = *ref;
  m->set_task_id(result.task_id());
  m->set_at_unix_ms(now_ms());
  *m->mutable_publishes() = result.publishes();
  *m->mutable_attribute_writes() = result.attribute_writes();
  switch (result.result_case()) {
    case flow::FlowTaskResult::kWait:
      m->set_outcome(flow::ATTEMPT_COMPLETED);
      *m->mutable_wait() = result.wait();
      *m->mutable_locals() = result.locals();
      break;
    case flow::FlowTaskResult::kDecision:
      m->set_outcome(flow::ATTEMPT_COMPLETED);
      *m->mutable_decision() = result.decision();
      break;
    case flow::FlowTaskResult::kRpc:
      m->set_outcome(flow::ATTEMPT_COMPLETED);
      *m->mutable_rpc()->mutable_output() = result.rpc().output();
      *m->mutable_rpc()->mutable_next_steps() = result.rpc().next_steps();
      break;
    case flow::FlowTaskResult::kError:
      m->set_outcome(flow::ATTEMPT_FAILED);
      m->set_error(result.error().message());
      m->set_non_retryable(result.error().non_retryable());
      m->set_retry_after_ms(result.error().retry_after_ms());
      m->clear_publishes();  // a failed attempt's effects never exist
      m->clear_attribute_writes();
      break;
    default:
      m->set_outcome(flow::ATTEMPT_FAILED);
      m->set_error(
          "the Worker sent a result without a wait, a decision, an RPC output or an error");
      m->clear_publishes();
      m->clear_attribute_writes();
  }
  // A result of the wrong kind for its method (a decision for an RPC, ...).
  const bool kind_fits =
      m->outcome() != flow::ATTEMPT_COMPLETED ||
      (ref->method() == flow::WAIT_FOR && result.result_case() == flow::FlowTaskResult::kWait) ||
      ((ref->method() == flow::EXECUTE || ref->method() == flow::ON_TIMEOUT) &&
       result.result_case() == flow::FlowTaskResult::kDecision) ||
      (ref->method() == flow::RPC && result.result_case() == flow::FlowTaskResult::kRpc);
  if (!kind_fits) {
    m->set_outcome(flow::ATTEMPT_FAILED);
    m->set_error(fmt::format("the Worker answered a {} task with a result of another kind",
                             flow::Method_Name(ref->method())));
    m->clear_wait();
    m->clear_decision();
    m->clear_rpc();
    m->clear_locals();
    m->clear_publishes();
    m->clear_attribute_writes();
  }
  // One speculative apply: it assigns the attempts the result starts and
  // judges the result. An invalid wait or decision is the application's bug:
  // the attempt fails with the reason instead (retried by its policy, shown as
  // its last failure).
  std::vector<std::string> reserved;
  // Long values become blobs before the record that references them is
  // appended (docs/engine.md, "Large values").
  std::string refused = store_values(ref->flow_id(), *m);
  if (auto verdict = speculate(record, reserved); verdict.kind == flow::ApplyKind::kRejected) {
    refused = verdict.message;
    settle(reserved);  // not proposed: nothing started
    reserved.clear();
    record.clear_assignments();
    m->set_outcome(flow::ATTEMPT_FAILED);
    m->set_error("invalid result: " + refused);
    m->clear_wait();
    m->clear_decision();
    m->clear_rpc();
    m->clear_locals();
    m->clear_publishes();
    m->clear_attribute_writes();
    speculate(record, reserved);
  }
  propose_speculated(
      std::move(record), std::move(reserved),
      [promise, ack, refused](StatusOr<flow::ApplyResult> r) mutable {
        if (!r.is_ok()) {
          promise->set_exception(
              std::make_exception_ptr(EngineStoppedError(r.status().to_string())));
          return;
        }
        ack.set_accepted(r->kind == flow::ApplyKind::kApplied && refused.empty());
        if (!refused.empty())
          ack.set_reason("refused: " + refused + " (the attempt counts as FAILED)");
        else if (r->kind != flow::ApplyKind::kApplied)
          ack.set_reason(std::string(flow::apply_kind_name(r->kind)) + ": " + r->message);
        promise->set_value(ack);
      });
}

// ----------------------------------------------------------- scheduler

void FlowEngine::run_scheduler() {
  std::optional<int64_t> next_timer_ms;
  // Bounded by stop(): every wait ends by kSchedulerPollMax, the next timer or
  // the next attempt deadline.
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const TimePoint now = clock_.now();
      TimePoint wake = now + kSchedulerPollMax;
      // The wall clock of timers, turned into the scheduler's clock.
      if (next_timer_ms) wake = std::min(wake, now + milliseconds(*next_timer_ms - now_ms()));
      wake = dispatcher_.next_wake(wake);
      clock_.wait_until(lock, sched_cv_, wake, [&] { return stopped_ || wake_; });
      if (stopped_) return;
      wake_ = false;
      if (log_stopped_) continue;
    }
    send_started();
    check_early();
    handle_unheld();
    next_timer_ms = fire_timers();
    end_due_attempts();
    dispatch();
  }
}

void FlowEngine::send(const std::string& task_id, const flow::FlowTask& task, bool early) {
  // Spec (Lease): a process whose lease is no longer valid hands out nothing.
  // The attempt stays assigned; the next holder's recovery ends it.
  if (!log_.lease_valid()) return;
  std::shared_ptr<WorkerSink> sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Checked and set in one step: an ASYNC task may be offered by both
    // send_prebuilt and send_started, and goes out once. Timeouts run from
    // the hand-over.
    WorkerHandle worker = 0;
    if (!dispatcher_.begin_send(task_id, clock_.now(), task.attempt_timeout_ms(),
                                task.heartbeat_timeout_ms(), &worker, early))
      return;
    prebuilt_.erase(task_id);
    if (early) early_[task_id] = task;           // as sent, for check_early
    if (worker != 0) sink = pool_.sink(worker);  // null: the stream ended meanwhile
  }
  // A task leaves with its blob values in place (docs/engine.md, "Large values").
  if (sink && options_.blobs != nullptr && has_blob_refs(task)) {
    fill_.post([this, task_id, task, sink] {
      flow::FlowTask with_values = task;
      if (!put_values_back(task_id, with_values)) return;  // it ends FAILED
      // The read may have taken a while: the lease or the attempt may be gone.
      if (!log_.lease_valid()) return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_ || !dispatcher_.live(task_id)) return;
      }
      deliver(task_id, sink, with_values);
    });
    return;
  }
  deliver(task_id, sink, task);
}

void FlowEngine::deliver(const std::string& task_id, const std::shared_ptr<WorkerSink>& sink,
                         const flow::FlowTask& task) {
  if (sink && sink->send_task(task)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dispatcher_.worker_broken(dispatcher_.worker_of(task_id));
  }
  withdraw(task_id);
}

void FlowEngine::send_prebuilt(const std::vector<std::string>& reserved) {
  for (const auto& task_id : reserved) {  // bounded by the record's assignments
    std::optional<flow::FlowTask> task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = prebuilt_.find(task_id);
      if (it == prebuilt_.end()) continue;
      task = it->second;
    }
    send(task_id, *task, /*early=*/true);
  }
}

void FlowEngine::check_early() {
  // Bounded by the early tasks whose records applied since the last round.
  while (true) {
    std::string task_id;
    flow::TaskRef ref;
    flow::FlowTask sent;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (checks_.empty() || stopped_) return;
      task_id = checks_.front();
      checks_.pop_front();
      auto known = dispatcher_.task_of(task_id);
      auto it = early_.find(task_id);
      if (!known || it == early_.end()) continue;  // ended meanwhile: its results are stale
      ref = *std::move(known);
      sent = it->second;
    }
    auto built = with_view([&](RocksKv& kv) -> StatusOr<std::optional<flow::FlowTask>> {
      flow::KvFlowTxn txn(kv);
      return build_task(txn, ref, task_id);
    });
    if (!built.is_ok()) {  // the store stopped: its results wait for the stop
      std::lock_guard<std::mutex> lock(mu_);
      checks_.push_front(task_id);
      return;
    }
    // Ended meanwhile (nothing to build): its ending answers its results.
    if (!built->has_value()) continue;
    const bool same = same_task_inputs(sent, built->value());
    {
      std::lock_guard<std::mutex> lock(mu_);
      early_.erase(task_id);
      // Ending (a timeout, its Worker gone): its results wait for the end.
      if (!dispatcher_.checked(task_id, same)) continue;
      unhold(task_id);
      if (same) continue;
    }
    // Its record applied otherwise than the view it was built from said (a
    // record in flight met the same wait first, ...): what the Worker runs
    // is not what the log started. Withdrawn, it runs again, with the same
    // number, on what the store holds; its Worker's results are stale.
    spdlog::info(
        "flow engine: task {} ({}/{} {} attempt {}) went out with inputs its start did "
        "not apply with; withdrawn to run again",
        task_id, ref.flow_id(), ref.step_execution_id(), flow::Method_Name(ref.method()),
        ref.attempt());
    withdraw(task_id);
  }
}

void FlowEngine::unhold(const std::string& task_id) {
  auto it = held_.find(task_id);
  if (it == held_.end()) return;
  for (auto& h : it->second) unheld_.push_back(std::move(h));  // bounded by the results held
  held_.erase(it);
  wake_ = true;
  sched_cv_.notify_all();
}

void FlowEngine::handle_unheld() {
  // Bounded by the results released since the last round.
  while (true) {
    HeldResult h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (unheld_.empty() || stopped_) return;
      h = std::move(unheld_.front());
      unheld_.pop_front();
    }
    handle_result(h.result, std::move(h.promise));
  }
}

void FlowEngine::fail_held(const Status& why) {
  std::vector<HeldResult> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, held] : held_)  // bounded by the results held
      for (auto& h : held) out.push_back(std::move(h));
    for (auto& h : unheld_) out.push_back(std::move(h));  // bounded by the results released
    held_.clear();
    unheld_.clear();
  }
  for (auto& h : out)  // bounded by the results held
    h.promise->set_exception(std::make_exception_ptr(EngineStoppedError(why.to_string())));
}

void FlowEngine::send_started() {
  // Bounded by the attempts started since the last round.
  while (true) {
    std::string task_id;
    flow::TaskRef ref;
    bool drain = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (sends_.empty() || stopped_) return;
      task_id = sends_.front();
      sends_.pop_front();
      if (!dispatcher_.unsent(task_id)) continue;
      ref = *dispatcher_.task_of(task_id);
      drain = draining_;
      if (drain) dispatcher_.mark_ending(task_id);
    }
    if (drain) {
      // Stepping down: never handed to a Worker, so withdrawn, not failed; the
      // next active process dispatches it with the same number.
      withdraw(task_id);
      continue;
    }
    auto task = with_view([&](RocksKv& kv) -> StatusOr<std::optional<flow::FlowTask>> {
      flow::KvFlowTxn txn(kv);
      return build_task(txn, ref, task_id);
    });
    if (!task.is_ok() || !task->has_value()) continue;  // ended meanwhile
    send(task_id, task->value());
  }
}

void FlowEngine::withdraw(const std::string& task_id) {
  flow::TaskRef ref;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto known = dispatcher_.task_of(task_id);
    if (!known) return;
    dispatcher_.mark_ending(task_id);
    ref = *std::move(known);
  }
  flow::FlowRecord record;
  *record.mutable_attempt_withdrawn()->mutable_task() = ref;
  record.mutable_attempt_withdrawn()->set_task_id(task_id);
  record.mutable_attempt_withdrawn()->set_at_unix_ms(now_ms());
  propose(std::move(record), false, [this, task_id](StatusOr<flow::ApplyResult>) {
    // Withdrawn (queued again: the applied effects re-queue it) or already
    // ended: either way this process no longer runs it, and its Worker's
    // slot is free. A drain waits for attempts_running() to reach 0.
    std::lock_guard<std::mutex> lock(mu_);
    dispatcher_.released(task_id);
    prebuilt_.erase(task_id);
    early_.erase(task_id);
    unhold(task_id);  // answered stale now
    wake_ = true;
    sched_cv_.notify_all();
  });
}

std::optional<int64_t> FlowEngine::fire_timers() {
  const int64_t now = now_ms();
  std::optional<int64_t> next;  // the first timer not due yet
  auto due = with_view([&](RocksKv& kv) -> StatusOr<std::vector<std::string>> {
    std::vector<std::string> keys;
    for (auto& [key, value] : kv.scan_first(flow::keys::kTimerPrefix, kTimersPerRoundMax, "")) {
      flow::TimerKey k;
      int64_t at = 0;
      if (!flow::keys::parse_timer(key, &k, &at)) break;
      if (at > now) {  // in due order: the rest are later
        next = at;
        break;
      }
      keys.push_back(key);
    }
    return keys;
  });
  if (!due.is_ok()) {
    spdlog::error("flow engine: reading timers: {}", due.status().to_string());
    return now + to_ms(kSchedulerPollMax);
  }
  // A full round leaves more due: come back at once.
  if (due->size() == kTimersPerRoundMax) next = now;
  std::vector<std::string> to_fire;
  {
    std::lock_guard<std::mutex> lock(mu_);
    to_fire = dispatcher_.timers_to_fire(*due);  // not those already proposed
  }
  for (const std::string& key : to_fire) {  // bounded by kTimersPerRoundMax
    flow::FlowRecord record;
    int64_t at = 0;
    flow::keys::parse_timer(key, record.mutable_timer_fired()->mutable_key(), &at);
    record.mutable_timer_fired()->set_fire_at_ms(at);
    record.mutable_timer_fired()->set_at_unix_ms(now);
    propose(std::move(record), true, [this, key](StatusOr<flow::ApplyResult>) {
      std::lock_guard<std::mutex> lock(mu_);
      dispatcher_.timer_settled(key);
      // A timer still due (its record was refused) is looked at again.
      wake_ = true;
      sched_cv_.notify_all();
    });
  }
  return next;
}

void FlowEngine::propose_ending(const Dispatcher::Ending& ending) {
  flow::FlowRecord record;
  auto* m = record.mutable_method_result();
  *m->mutable_task() = ending.task;
  m->set_task_id(ending.task_id);
  m->set_outcome(ending.outcome);
  m->set_error(ending.why);
  m->set_at_unix_ms(now_ms());
  propose(std::move(record), true, [](StatusOr<flow::ApplyResult>) {});
}

void FlowEngine::end_due_attempts() {
  std::vector<Dispatcher::Ending> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    due = dispatcher_.due(clock_.now());
  }
  for (const auto& ending : due) propose_ending(ending);  // bounded by the attempts held
}

void FlowEngine::dispatch() {
  // Free slots by Flow type, fairly: the least busy Worker first.
  std::vector<std::pair<flow::TaskRef, std::string>> candidates;  // task, type
  if (!log_.lease_valid()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    candidates = dispatcher_.candidates(kAssignmentsPerRoundMax, gate());
  }
  if (candidates.empty()) return;
  // Only attempts the store still has queued (the cache may be stale).
  using Live = std::vector<std::pair<std::optional<flow::FlowTask>, bool>>;  // task, ASYNC
  auto live = with_view([&](RocksKv& kv) -> StatusOr<Live> {
    flow::KvFlowTxn txn(kv);
    Live tasks;
    for (const auto& [ref, type] : candidates) {  // bounded by kAssignmentsPerRoundMax
      if (!still_queued(txn, ref)) {
        tasks.emplace_back(std::nullopt, false);
        continue;
      }
      tasks.emplace_back(build_task(txn, ref, ""),
                         sent_before_applied(txn, ref, method_durability(txn, ref)));
    }
    return tasks;
  });
  if (!live.is_ok()) return;
  flow::FlowRecord record;
  std::vector<std::string> reserved;
  {
    std::lock_guard<std::mutex> lock(mu_);
    record.set_at_unix_ms(now_ms());
    const Dispatcher::Gate open = gate();
    for (size_t i = 0; i < candidates.size(); ++i) {  // bounded by kAssignmentsPerRoundMax
      if (!(*live)[i].first) continue;
      const auto& [ref, type] = candidates[i];
      auto a = dispatcher_.assign(ref, type, open);
      if (!a) {
        dispatcher_.requeue(type, ref);
        continue;
      }
      auto* out = record.add_assignments();
      *out->mutable_task() = ref;
      out->set_task_id(a->task_id);
      out->set_worker_id(a->worker_id);
      // ASYNC: sent while the assignment is written (send_prebuilt); SYNC:
      // once it is durable and applied (send_started).
      if ((*live)[i].second) {
        flow::FlowTask task = *(*live)[i].first;
        task.set_task_id(a->task_id);
        prebuilt_[a->task_id] = std::move(task);
      }
      reserved.push_back(a->task_id);
    }
  }
  if (reserved.empty()) return;
  proposer_.propose(std::move(record),
                    [this, reserved](StatusOr<flow::ApplyResult>) { settle(reserved); });
  send_prebuilt(reserved);
}

}  // namespace dex
