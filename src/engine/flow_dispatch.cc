// FlowEngine's Workers and scheduler: declarations at hello, results,
// heartbeats, handing queued attempts to free Workers, sends, due timers and
// attempt timeouts (docs/flow-rules.md, "The flow engine").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "blob/blob_values.h"
#include "config/config.h"
#include "engine/engine.h"
#include "engine/flow_engine.h"
#include "engine/flow_reads.h"
#include "engine/rocks_kv.h"
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

// One attempt of one method of one Step execution, as a set key.
std::string ref_key(const flow::TaskRef& r) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", r.flow_id(), r.run_id(), r.step_execution_id(),
                     static_cast<int>(r.method()), r.attempt());
}

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
  std::lock_guard<std::mutex> lock(mu_);
  Worker w;
  w.worker_id = hello.worker_id();
  for (const auto& d : hello.flows()) w.flow_types.insert(d.flow_type());
  w.capacity = hello.max_concurrent_tasks() == 0 ? 1 : hello.max_concurrent_tasks();
  w.sink = std::move(sink);
  workers_[handle] = std::move(w);
  wake_ = true;
  sched_cv_.notify_all();
  return Status::ok();
}

void FlowEngine::disconnect(WorkerHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  // Its running attempts keep their timeouts: the result may come on the
  // Worker's next stream.
  workers_.erase(handle);
}

bool FlowEngine::knows_task(const std::string& task_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_.contains(task_id);
}

std::vector<std::string> FlowEngine::workers_for(const std::string& flow_type) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> ids;
  for (const auto& [handle, w] : workers_)
    if (w.flow_types.contains(flow_type)) ids.insert(w.worker_id);
  return {ids.begin(), ids.end()};
}

HeartbeatAck FlowEngine::heartbeat(const TaskHeartbeat& heartbeat) {
  HeartbeatAck ack;
  ack.set_task_id(heartbeat.task_id());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(heartbeat.task_id());
  if (it == running_.end() || it->second.ending || stopped_ || log_stopped_) {
    ack.set_cancel_requested(true);
    return ack;
  }
  if (it->second.heartbeat_timeout_ms > 0)
    it->second.heartbeat_deadline = clock_.now() + milliseconds(it->second.heartbeat_timeout_ms);
  return ack;
}

std::future<ResultAck> FlowEngine::complete(WorkerHandle, const flow::FlowTaskResult& result) {
  auto promise = std::make_shared<std::promise<ResultAck>>();
  auto future = promise->get_future();
  ResultAck ack;
  ack.set_task_id(result.task_id());
  // Which attempt: this process's record of it, or the store's running index
  // (a result re-sent on a new stream, or after this process started).
  std::optional<flow::TaskRef> ref;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = running_.find(result.task_id()); it != running_.end()) ref = it->second.task;
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
      return future;
    }
    ref = *found;
  }
  if (!ref) {
    ack.set_accepted(false);
    ack.set_reason("stale: task '" + result.task_id() +
                   "' is not a running attempt (it ended, or a new process took over)");
    promise->set_value(ack);
    return future;
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
    settle(reserved, false);
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
  return future;
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
      for (const auto& [id, r] : running_) {  // bounded by the Workers' capacity
        if (!r.sent || r.ending) continue;
        wake = std::min(wake, r.deadline);
        if (r.heartbeat_deadline) wake = std::min(wake, *r.heartbeat_deadline);
      }
      clock_.wait_until(lock, sched_cv_, wake, [&] { return stopped_ || wake_; });
      if (stopped_) return;
      wake_ = false;
      if (log_stopped_) continue;
    }
    send_started();
    next_timer_ms = fire_timers();
    enforce_timeouts();
    dispatch();
  }
}

void FlowEngine::send(const std::string& task_id, const flow::FlowTask& task) {
  // Spec (Lease): a process whose lease is no longer valid hands out nothing.
  // The attempt stays assigned; the next holder's recovery ends it.
  if (!log_.lease_valid()) return;
  std::shared_ptr<WorkerSink> sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(task_id);
    if (it == running_.end()) return;  // ended meanwhile (a cancel)
    Running& r = it->second;
    // Checked and set in one step: an ASYNC task may be offered by both
    // send_prebuilt and send_started, and goes out once.
    if (r.sent || r.ending) return;
    auto w = workers_.find(r.worker);
    if (w != workers_.end() && !w->second.broken) sink = w->second.sink;
    // Timeouts run from the hand-over.
    r.sent = true;
    r.attempt_timeout_ms = task.attempt_timeout_ms();
    r.heartbeat_timeout_ms = task.heartbeat_timeout_ms();
    r.deadline = clock_.now() + milliseconds(task.attempt_timeout_ms());
    if (task.heartbeat_timeout_ms() > 0)
      r.heartbeat_deadline = clock_.now() + milliseconds(task.heartbeat_timeout_ms());
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
        auto it = running_.find(task_id);
        if (stopped_ || it == running_.end() || it->second.ending) return;
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
    if (auto w = workers_.find(running_.contains(task_id) ? running_[task_id].worker : 0);
        w != workers_.end())
      w->second.broken = true;
  }
  withdraw(task_id);
}

void FlowEngine::send_prebuilt(const std::vector<std::string>& reserved) {
  for (const auto& task_id : reserved) {  // bounded by the record's assignments
    std::optional<flow::FlowTask> task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = running_.find(task_id);
      if (it == running_.end() || !it->second.prebuilt || it->second.sent) continue;
      task = it->second.prebuilt;
    }
    send(task_id, *task);
  }
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
      auto it = running_.find(task_id);
      if (it == running_.end() || it->second.sent) continue;
      ref = it->second.task;
      drain = draining_;
      if (drain) it->second.ending = true;
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
    auto it = running_.find(task_id);
    if (it == running_.end()) return;
    it->second.ending = true;
    ref = it->second.task;
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
    auto it = running_.find(task_id);
    if (it == running_.end()) return;
    if (auto w = workers_.find(it->second.worker); w != workers_.end() && w->second.in_use > 0)
      --w->second.in_use;
    running_.erase(it);
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
  for (const std::string& key : due.value()) {  // bounded by kTimersPerRoundMax
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!firing_.insert(key).second) continue;  // already proposed
    }
    flow::FlowRecord record;
    int64_t at = 0;
    flow::keys::parse_timer(key, record.mutable_timer_fired()->mutable_key(), &at);
    record.mutable_timer_fired()->set_fire_at_ms(at);
    record.mutable_timer_fired()->set_at_unix_ms(now);
    propose(std::move(record), true, [this, key](StatusOr<flow::ApplyResult>) {
      std::lock_guard<std::mutex> lock(mu_);
      firing_.erase(key);
      // A timer still due (its record was refused) is looked at again.
      wake_ = true;
      sched_cv_.notify_all();
    });
  }
  return next;
}

void FlowEngine::propose_timeout(const std::string& task_id, const std::string& why) {
  flow::TaskRef ref;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(task_id);
    if (it == running_.end()) return;
    ref = it->second.task;
  }
  flow::FlowRecord record;
  auto* m = record.mutable_method_result();
  *m->mutable_task() = ref;
  m->set_task_id(task_id);
  m->set_outcome(flow::ATTEMPT_TIMED_OUT);
  m->set_error(why);
  m->set_at_unix_ms(now_ms());
  propose(std::move(record), true, [](StatusOr<flow::ApplyResult>) {});
}

void FlowEngine::enforce_timeouts() {
  std::vector<std::pair<std::string, std::string>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimePoint now = clock_.now();
    for (auto& [task_id, r] : running_) {  // bounded by the Workers' capacity
      if (!r.sent || r.ending) continue;
      std::string why;
      if (now >= r.deadline)
        why = fmt::format("the attempt timeout of {} passed",
                          format_duration(milliseconds(r.attempt_timeout_ms)));
      else if (r.heartbeat_deadline && now >= *r.heartbeat_deadline)
        why = fmt::format("no heartbeat within the heartbeat timeout of {}",
                          format_duration(milliseconds(r.heartbeat_timeout_ms)));
      if (why.empty()) continue;
      r.ending = true;
      due.emplace_back(task_id, std::move(why));
    }
  }
  for (const auto& [task_id, why] : due) propose_timeout(task_id, why);
}

void FlowEngine::dispatch() {
  // Free slots by Flow type, fairly: the least busy Worker first.
  std::vector<std::pair<flow::TaskRef, std::string>> candidates;  // task, type
  if (!log_.lease_valid()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || log_stopped_ || draining_) return;
    // The cache may name an attempt twice (queued by one record, queued again
    // by a withdrawal) or one this process has assigned and not yet seen
    // applied: each is handed out once.
    std::set<std::string> taken;
    for (const auto& [id, r] : running_) {  // bounded by the Workers' capacity
      if (!r.ending) taken.insert(ref_key(r.task));
    }
    std::map<std::string, uint32_t> free;
    for (const auto& [handle, w] : workers_) {
      if (w.broken || w.in_use >= w.capacity) continue;
      for (const auto& type : w.flow_types) free[type] += w.capacity - w.in_use;
    }
    for (auto& [type, n] : free) {  // bounded by the declared types
      auto q = queued_.find(type);
      while (q != queued_.end() && !q->second.empty() && n > 0 &&
             candidates.size() < kAssignmentsPerRoundMax) {
        flow::TaskRef ref = std::move(q->second.front());
        q->second.pop_front();
        if (!taken.insert(ref_key(ref)).second) continue;
        candidates.emplace_back(std::move(ref), type);
        --n;
      }
    }
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
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!(*live)[i].first) continue;
      const auto& [ref, type] = candidates[i];
      Worker* chosen = nullptr;
      WorkerHandle chosen_handle = 0;
      for (auto& [handle, w] : workers_) {
        if (w.broken || w.in_use >= w.capacity || !w.flow_types.contains(type)) continue;
        if (chosen == nullptr || w.in_use < chosen->in_use) {
          chosen = &w;
          chosen_handle = handle;
        }
      }
      if (chosen == nullptr) {
        queued_[type].push_front(ref);
        continue;
      }
      const std::string task_id = next_task_id();
      auto* a = record.add_assignments();
      *a->mutable_task() = ref;
      a->set_task_id(task_id);
      a->set_worker_id(chosen->worker_id);
      ++chosen->in_use;
      Running r;
      r.task = ref;
      r.flow_type = type;
      r.worker = chosen_handle;
      // ASYNC: sent while the assignment is written (send_prebuilt); SYNC:
      // once it is durable and applied (send_started).
      if ((*live)[i].second) {
        flow::FlowTask task = *(*live)[i].first;
        task.set_task_id(task_id);
        r.prebuilt = std::move(task);
      }
      running_[task_id] = std::move(r);
      reserved.push_back(task_id);
    }
  }
  if (reserved.empty()) return;
  proposer_.propose(std::move(record), [this, reserved](StatusOr<flow::ApplyResult> result) {
    settle(reserved, result.is_ok());
  });
  send_prebuilt(reserved);
}

}  // namespace dex
