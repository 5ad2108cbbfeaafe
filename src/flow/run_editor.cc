#include "flow/run_editor.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/lock_table.h"
#include "flow/result_check.h"
#include "flow/wait_eval.h"

namespace dex::flow {
namespace {

// The most runs a snapshot follows along one Flow ID's retry chain.

bool is_active_phase(Phase phase) {
  return phase == PHASE_WAIT_FOR || phase == PHASE_WAITING || phase == PHASE_EXECUTE;
}

const char* method_name(Method method) { return method == WAIT_FOR ? "WaitFor" : "Execute"; }

const MethodOptions& options_of(const StepExecution& step, Method method) {
  return method == WAIT_FOR ? step.options().wait_for() : step.options().execute();
}

// The backoff before attempt `next` (>= 2): initial * coefficient^(next - 2),
// capped at the maximum interval.
int64_t backoff_ms(const RetryPolicy& retry, uint32_t next) {
  double backoff = static_cast<double>(retry.initial_interval_ms()) *
                   std::pow(retry.backoff_coefficient(), static_cast<double>(next - 2));
  const auto cap = static_cast<double>(retry.maximum_interval_ms());
  if (!(backoff <= cap)) backoff = cap;  // also catches overflow to inf
  return static_cast<int64_t>(backoff);
}

}  // namespace

const char* flow_status_name(FlowStatus status) {
  switch (status) {
    case FLOW_RUNNING:
      return "RUNNING";
    case FLOW_COMPLETED:
      return "COMPLETED";
    case FLOW_FAILED:
      return "FAILED";
    case FLOW_CANCELED:
      return "CANCELED";
    case FLOW_TERMINATED:
      return "TERMINATED";
    case FLOW_TIMED_OUT:
      return "TIMED_OUT";
    default:
      return "UNSPECIFIED";
  }
}

std::string rpc_parent(std::string_view rpc_name) { return "rpc:" + std::string(rpc_name); }

std::string sub_flow_id(std::string_view parent_flow_id, std::string_view step_execution_id,
                        uint32_t index) {
  return std::string(parent_flow_id) + "/" + std::string(step_execution_id) + "/" +
         std::to_string(index);
}

std::string sub_flow_request_id(std::string_view parent_run_id, std::string_view step_execution_id,
                                uint32_t index) {
  return "subflow:" + std::string(parent_run_id) + "/" + std::string(step_execution_id) + "/" +
         std::to_string(index);
}

std::string retry_run_id(std::string_view first_run_id, uint32_t attempt) {
  return std::string(first_run_id) + "." + std::to_string(attempt);
}

SubFlowResult sub_flow_result(const Run& run) {
  SubFlowResult r;
  r.set_flow_id(run.flow_id());
  r.set_run_id(run.run_id());
  r.set_status(run.status());
  if (run.status() != FLOW_RUNNING) {
    *r.mutable_outputs() = run.outputs();
    r.set_close_reason(run.close_reason());
  }
  return r;
}

bool retry_pending(const Run& run) {
  return run.status() != FLOW_RUNNING && run.retry_at_ms() != 0;
}

void schedule_retention(FlowTxn& txn, Effects& effects, Run& run, int64_t closed_ms) {
  DEX_INVARIANT(run.status() != FLOW_RUNNING, "only a closed run expires");
  if (run.retention_ms() <= 0 || run.expire_at_ms() != 0) return;
  run.set_expire_at_ms(later_ms(closed_ms, run.retention_ms()));
  TimerKey key;
  key.set_flow_id(run.flow_id());
  key.set_run_id(run.run_id());
  key.set_kind(RETENTION);
  txn.put_timer(key, run.expire_at_ms());
  effects.timers_set.push_back(run.expire_at_ms());
}

std::string flow_timeout_reason(const Run& run) {
  return "the flow timeout of " + std::to_string(run.options().timeout_ms()) + " ms passed";
}

Status check_attribute_room(FlowTxn& txn, const std::string& flow_id, const std::string& run_id,
                            uint32_t count,
                            const google::protobuf::RepeatedPtrField<Attribute>& writes) {
  std::map<std::pair<std::string, std::string>, bool> exists;  // as the writes leave it
  int64_t n = count;
  for (const auto& w : writes) {  // bounded by kAttributesMax writes
    const auto id = std::pair(w.key(), w.instance_key());
    auto it = exists.find(id);
    const bool was = it != exists.end()
                         ? it->second
                         : txn.attribute(flow_id, run_id, w.key(), w.instance_key()).has_value();
    const bool is = !deletes(w);
    n += static_cast<int64_t>(is) - static_cast<int64_t>(was);
    if (n > static_cast<int64_t>(kAttributesMax))
      return Status::precondition_failed(
          "writing Attribute '" + w.key() + "'" +
          (w.instance_key().empty() ? "" : " instance '" + w.instance_key() + "'") +
          " would store more than " + std::to_string(kAttributesMax) +
          " Attribute instances in run '" + run_id + "' of Flow '" + flow_id + "'");
    exists[id] = is;
  }
  return Status::ok();
}

std::string step_execution_id(std::string_view step_type, uint32_t n) {
  return std::string(step_type) + "-" + std::to_string(n);
}

RunEditor::RunEditor(FlowTxn& txn, Effects& effects, Run run, FlowDeclaration declaration,
                     int64_t at_ms)
    : txn_(txn),
      effects_(effects),
      run_(std::move(run)),
      declaration_(std::move(declaration)),
      at_ms_(at_ms) {}

StepExecution* RunEditor::step(std::string_view id) {
  auto it = steps_.find(id);
  if (it != steps_.end()) return &it->second;
  auto loaded = txn_.step(run_.flow_id(), run_.run_id(), id);
  if (!loaded) return nullptr;
  return &steps_.emplace(std::string(id), std::move(*loaded)).first->second;
}

RpcExecution* RunEditor::rpc(std::string_view id) {
  auto it = rpcs_.find(id);
  if (it != rpcs_.end()) return &it->second;
  auto loaded = txn_.rpc(run_.flow_id(), run_.run_id(), id);
  if (!loaded) return nullptr;
  return &rpcs_.emplace(std::string(id), std::move(*loaded)).first->second;
}

TaskRef RunEditor::rpc_ref(const RpcExecution& rpc) const {
  TaskRef ref;
  ref.set_flow_id(run_.flow_id());
  ref.set_run_id(run_.run_id());
  ref.set_step_execution_id(rpc.rpc_id());
  ref.set_method(RPC);
  ref.set_attempt(1);
  return ref;
}

TaskRef RunEditor::task_ref(const StepExecution& step) const {
  TaskRef ref;
  ref.set_flow_id(run_.flow_id());
  ref.set_run_id(run_.run_id());
  ref.set_step_execution_id(step.step_execution_id());
  ref.set_method(step.method().method());
  ref.set_attempt(step.method().attempt());
  return ref;
}

TimerKey RunEditor::timer_key(TimerKind kind) const {
  TimerKey key;
  key.set_flow_id(run_.flow_id());
  key.set_run_id(run_.run_id());
  key.set_kind(kind);
  return key;
}

void RunEditor::put_timer(const TimerKey& key, int64_t fire_at_ms) {
  txn_.put_timer(key, fire_at_ms);
  effects_.timers_set.push_back(fire_at_ms);
}

void RunEditor::add_event(HistoryEvent event) {
  event.set_seq(run_.next_event());
  event.set_at_ms(at_ms_);
  run_.set_next_event(run_.next_event() + 1);
  txn_.put_event(run_.flow_id(), run_.run_id(), event);
  events_added_ = true;
}

StepExecution& RunEditor::create_step(const std::string& step_type, const Payload& input,
                                      const StepOptions* override_options,
                                      const std::string& parent,
                                      const std::string& recovery_error) {
  const StepDeclaration* decl = find_step(declaration_, step_type);
  DEX_INVARIANT(decl != nullptr, "a Step execution of an undeclared type (validated before)");
  DEX_INVARIANT(static_cast<size_t>(run_.active_size()) < kActiveStepsMax,
                "too many active executions (validated before)");
  uint32_t n = 1;
  bool counted = false;
  for (auto& counter : *run_.mutable_counters()) {  // bounded by the declared Step types
    if (counter.step_type() == step_type) {
      n = counter.count() + 1;
      counter.set_count(n);
      counted = true;
      break;
    }
  }
  if (!counted) {
    auto* counter = run_.add_counters();
    counter->set_step_type(step_type);
    counter->set_count(1);
  }
  StepExecution step;
  step.set_flow_id(run_.flow_id());
  step.set_run_id(run_.run_id());
  step.set_step_execution_id(step_execution_id(step_type, n));
  step.set_step_type(step_type);
  *step.mutable_input() = input;
  step.set_parent_execution_id(parent);
  StepOptions options = override_options != nullptr ? *override_options : decl->options();
  *options.mutable_wait_for() = method_with_defaults(options.wait_for());
  *options.mutable_execute() = method_with_defaults(options.execute());
  *step.mutable_options() = std::move(options);
  step.set_recovery_error(recovery_error);
  step.set_created_ms(at_ms_);
  step.set_phase(decl->has_wait_for() ? PHASE_WAIT_FOR : PHASE_EXECUTE);
  DEX_INVARIANT(txn_.step(run_.flow_id(), run_.run_id(), step.step_execution_id()) == std::nullopt,
                "a Step execution ID is used twice");
  run_.add_active(step.step_execution_id());
  const std::string id = step.step_execution_id();
  auto& stored = steps_.emplace(id, std::move(step)).first->second;
  queue_method(stored, decl->has_wait_for() ? WAIT_FOR : EXECUTE, 1);
  return stored;
}

void RunEditor::queue_method(StepExecution& step, Method method, uint32_t attempt, bool acquire) {
  DEX_INVARIANT(attempt >= 1, "attempts count from 1");
  auto* state = step.mutable_method();
  if (state->method() != method) {
    state->Clear();
    state->set_method(method);
  }
  state->set_attempt(attempt);
  state->clear_task_id();
  state->clear_worker_id();
  state->clear_retry_at_ms();
  state->clear_queue_seq();
  const MethodOptions& options = options_of(step, method);
  if (acquire && !take_locks(step.step_execution_id(), method, attempt, options.lock_keys())) {
    state->set_state(TASK_LOCKED);
    return;
  }
  enqueue(*state, task_ref(step), options.durability());
}

void RunEditor::enqueue(MethodState& state, const TaskRef& ref, Durability durability) {
  state.set_state(TASK_QUEUED);
  state.set_queue_seq(txn_.enqueue_task(run_.flow_type(), ref));
  effects_.queued.push_back({run_.flow_type(), ref, state.queue_seq(), durability});
}

void RunEditor::start(MethodState& state, const TaskRef& ref, const std::string& task_id,
                      const std::string& worker_id) {
  DEX_INVARIANT(state.state() == TASK_QUEUED, "only a queued attempt starts");
  txn_.dequeue_task(run_.flow_type(), state.queue_seq());
  state.set_state(TASK_RUNNING);
  state.clear_queue_seq();
  state.set_task_id(task_id);
  state.set_worker_id(worker_id);
  state.set_started_ms(at_ms_);
  if (state.first_attempt_ms() == 0) state.set_first_attempt_ms(at_ms_);
  txn_.put_running(task_id, ref);
  effects_.started.push_back({ref, task_id, worker_id});
}

void RunEditor::start_attempt(StepExecution& step, const std::string& task_id,
                              const std::string& worker_id) {
  start(*step.mutable_method(), task_ref(step), task_id, worker_id);
}

void RunEditor::withdraw_attempt(StepExecution& step) {
  auto* state = step.mutable_method();
  DEX_INVARIANT(state->state() == TASK_RUNNING, "only a running attempt is withdrawn");
  txn_.delete_running(state->task_id());
  // The attempt has not ended: it keeps its lock keys.
  queue_method(step, state->method(), state->attempt(), false);
}

// ------------------------------------------------------------------- locks

void RunEditor::lock_event(HistoryKind kind, const std::string& holder, Method method,
                           uint32_t attempt, const std::vector<std::string>& keys) {
  HistoryEvent event;
  event.set_kind(kind);
  event.set_step_execution_id(holder);
  event.set_method(method);
  event.set_attempt(attempt);
  for (const auto& k : keys) event.add_lock_keys(k);
  add_event(std::move(event));
}

bool RunEditor::take_locks(const std::string& holder, Method method, uint32_t attempt,
                           const google::protobuf::RepeatedPtrField<std::string>& keys) {
  if (!LockTable(run_).take(holder, method, keys)) return false;
  if (!keys.empty())
    lock_event(LOCKS_ACQUIRED, holder, method, attempt, {keys.begin(), keys.end()});
  return true;
}

void RunEditor::release_locks(const std::string& holder, Method method, uint32_t attempt) {
  const std::vector<std::string> released = LockTable(run_).release(holder, method);
  if (!released.empty()) lock_event(LOCKS_RELEASED, holder, method, attempt, released);
}

void RunEditor::drop_waiter(const std::string& holder, Method method) {
  LockTable(run_).drop_waiter(holder, method);
}

void RunEditor::grant_waiters() {
  for (const LockWaiter& w : LockTable(run_).grant()) {  // bounded by the run's waiters
    MethodState* state = nullptr;
    TaskRef ref;
    Durability durability = ASYNC;
    if (w.method() == RPC) {
      RpcExecution* r = rpc(w.holder());
      DEX_INVARIANT(r != nullptr, "a lock waiter's RPC exists");
      state = r->mutable_method();
      ref = rpc_ref(*r);
    } else {
      StepExecution* st = step(w.holder());
      DEX_INVARIANT(st != nullptr, "a lock waiter's execution exists");
      state = st->mutable_method();
      ref = task_ref(*st);
      durability = options_of(*st, w.method()).durability();
    }
    DEX_INVARIANT(state->state() == TASK_LOCKED && state->method() == w.method(),
                  "a lock waiter is a locked attempt");
    lock_event(LOCKS_ACQUIRED, w.holder(), w.method(), state->attempt(),
               {w.keys().begin(), w.keys().end()});
    enqueue(*state, ref, durability);
  }
}

void RunEditor::clear_method(StepExecution& step, AttemptOutcome running_outcome) {
  clear_state(*step.mutable_method(), task_ref(step), running_outcome);
}

void RunEditor::clear_state(MethodState& state, const TaskRef& ref,
                            AttemptOutcome running_outcome) {
  const std::string& holder = ref.step_execution_id();
  switch (state.state()) {
    case TASK_RUNNING:
      txn_.delete_running(state.task_id());
      effects_.ended.push_back({ref, state.task_id(), state.worker_id(), running_outcome});
      release_locks(holder, state.method(), state.attempt());
      break;
    case TASK_QUEUED:
      txn_.dequeue_task(run_.flow_type(), state.queue_seq());
      release_locks(holder, state.method(), state.attempt());
      break;
    case TASK_LOCKED:
      drop_waiter(holder, state.method());
      break;
    case TASK_BACKOFF: {
      TimerKey key = timer_key(RETRY);
      key.set_step_execution_id(holder);
      key.set_method(state.method());
      txn_.delete_timer(key, state.retry_at_ms());
      break;
    }
    default:
      break;
  }
  state.set_state(TASK_STATE_UNSPECIFIED);
  state.clear_task_id();
  state.clear_worker_id();
  state.clear_queue_seq();
  state.clear_retry_at_ms();
}

std::optional<int64_t> RunEditor::next_attempt_at(const MethodState& state,
                                                  const RetryPolicy& retry, uint32_t attempt,
                                                  bool non_retryable) const {
  const int64_t retry_at = later_ms(at_ms_, backoff_ms(retry, attempt + 1));
  const bool attempts_left = retry.maximum_attempts() == 0 || attempt < retry.maximum_attempts();
  const bool time_left = retry.total_duration_ms() == 0 ||
                         later_ms(retry_at, -state.first_attempt_ms()) <= retry.total_duration_ms();
  if (non_retryable || !attempts_left || !time_left) return std::nullopt;
  return retry_at;
}

void RunEditor::back_off(MethodState& state, const std::string& holder, int64_t retry_at) {
  state.set_state(TASK_BACKOFF);
  state.set_retry_at_ms(retry_at);
  TimerKey key = timer_key(RETRY);
  key.set_step_execution_id(holder);
  key.set_method(state.method());
  put_timer(key, retry_at);
}

void RunEditor::finish_step(StepExecution& step, Phase phase) {
  DEX_INVARIANT(is_active_phase(step.phase()), "only an active execution finishes");
  clear_method(step, ATTEMPT_NOT_COMPLETED);
  if (step.phase() == PHASE_WAITING) {
    for (int i = 0; i < step.wait().conditions_size(); ++i) {  // bounded by kConditionsMax
      if (step.wait().conditions(i).has_timer() && !step.conditions(i).fired()) {
        TimerKey key = timer_key(CONDITION);
        key.set_step_execution_id(step.step_execution_id());
        key.set_condition_index(static_cast<uint32_t>(i));
        txn_.delete_timer(key, step.conditions(i).timer_at_ms());
      }
    }
  }
  step.set_phase(phase);
  auto* active = run_.mutable_active();
  auto it = std::find(active->begin(), active->end(), step.step_execution_id());
  DEX_INVARIANT(it != active->end(), "an active execution is in the run's active list");
  active->erase(it);
  effects_.steps_done.push_back(RunItem{{run_.flow_id(), run_.run_id()}, step.step_execution_id()});
}

void RunEditor::attempt_failed(StepExecution& step, AttemptOutcome outcome,
                               const std::string& error, bool non_retryable) {
  auto* state = step.mutable_method();
  const Method method = state->method();
  const MethodOptions& options = options_of(step, method);
  const uint32_t attempt = state->attempt();
  clear_method(step, outcome);
  auto* failure = state->mutable_last_failure();
  failure->set_attempt(attempt);
  failure->set_outcome(outcome);
  failure->set_error(error);
  failure->set_at_ms(at_ms_);

  if (auto retry_at = next_attempt_at(*state, options.retry(), attempt, non_retryable)) {
    state->set_attempt(attempt + 1);
    if (*retry_at <= at_ms_) {
      queue_method(step, method, attempt + 1);
      return;
    }
    back_off(*state, step.step_execution_id(), *retry_at);
    return;
  }
  const std::string why = step.step_execution_id() + " " + method_name(method) + " failed after " +
                          std::to_string(attempt) + (attempt == 1 ? " attempt: " : " attempts: ") +
                          error;
  HistoryEvent event;
  event.set_kind(method == WAIT_FOR ? WAIT_FOR_FAILED : EXECUTE_FAILED);
  event.set_step_execution_id(step.step_execution_id());
  event.set_attempt(attempt);
  event.set_error(error);
  add_event(std::move(event));
  if (method == WAIT_FOR && options.failure_policy() == PROCEED_TO_EXECUTE) {
    step.set_wait_for_failed(true);
    step.set_recovery_error(error);
    step.set_phase(PHASE_EXECUTE);
    queue_method(step, EXECUTE, 1);
    return;
  }
  if (method == EXECUTE && options.failure_policy() == PROCEED_TO_STEP) {
    finish_step(step, PHASE_FAILED);
    create_step(options.recovery_step_type(), step.input(), nullptr, step.step_execution_id(),
                error);
    return;
  }
  finish_step(step, PHASE_FAILED);
  close(FLOW_FAILED, why);
}

void RunEditor::retry_due(StepExecution& step) {
  auto* state = step.mutable_method();
  DEX_INVARIANT(state->state() == TASK_BACKOFF, "only a backoff ends in a retry");
  queue_method(step, state->method(), state->attempt());
}

void RunEditor::append_publishes(const google::protobuf::RepeatedPtrField<Publish>& publishes) {
  for (const auto& publish : publishes) {  // bounded by kPublishMessagesMax in all
    QueueKey key{run_.flow_id(), run_.run_id(), publish.channel(), publish.instance_key()};
    ChannelQueue queue = txn_.queue(key).value_or(ChannelQueue());
    for (const auto& message : publish.messages()) {
      txn_.put_message(key, queue.next_seq(), message);
      queue.set_next_seq(queue.next_seq() + 1);
    }
    txn_.put_queue(key, queue);
  }
}

uint64_t RunEditor::queued_count(const QueueKey& key) {
  auto queue = txn_.queue(key);
  if (!queue) return 0;
  DEX_INVARIANT(queue->next_seq() >= queue->first_seq(), "a queue's bounds are ordered");
  return queue->next_seq() - queue->first_seq();
}

void RunEditor::consume(StepExecution& step, uint32_t index, uint64_t count) {
  const ChannelCondition& c = step.wait().conditions(index).channel();
  QueueKey key{run_.flow_id(), run_.run_id(), c.channel(), c.instance_key()};
  auto queue = txn_.queue(key);
  DEX_INVARIANT(queue.has_value() || count == 0, "messages are taken from an existing queue");
  if (count == 0) return;
  auto* state = step.mutable_conditions(static_cast<int>(index));
  for (uint64_t i = 0; i < count; ++i) {  // bounded by the queue's length
    const uint64_t seq = queue->first_seq();
    auto message = txn_.message(key, seq);
    DEX_INVARIANT(message.has_value(), "a queue holds every message between its bounds");
    *state->add_messages() = std::move(*message);
    txn_.delete_message(key, seq);
    queue->set_first_seq(seq + 1);
  }
  txn_.put_queue(key, *queue);
}

void RunEditor::match_waits() {
  if (run_.status() != FLOW_RUNNING) return;
  std::vector<std::pair<uint64_t, std::string>> waiting;
  for (const auto& id : run_.active()) {  // bounded by kActiveStepsMax
    StepExecution* s = step(id);
    DEX_INVARIANT(s != nullptr, "an active execution exists");
    if (s->phase() == PHASE_WAITING) waiting.emplace_back(s->wait_seq(), id);
  }
  std::sort(waiting.begin(), waiting.end());
  for (const auto& [seq, id] : waiting) {  // bounded by kActiveStepsMax
    StepExecution& s = *step(id);
    std::vector<ConditionState> states(s.conditions().begin(), s.conditions().end());
    WaitMatch match = match_wait(s.wait(), states, [&](const ChannelCondition& c) {
      return queued_count({run_.flow_id(), run_.run_id(), c.channel(), c.instance_key()});
    });
    if (!match.met) continue;
    HistoryEvent event;
    event.set_kind(WAIT_COMPLETED);
    event.set_step_execution_id(id);
    for (uint32_t i : match.satisfied) {  // bounded by kConditionsMax
      auto* state = s.mutable_conditions(static_cast<int>(i));
      state->set_satisfied(true);
      if (s.wait().conditions(i).has_channel()) {
        consume(s, i, match.take[i]);
        state->set_fired(true);
      }
    }
    for (int i = 0; i < s.wait().conditions_size(); ++i) {  // bounded by kConditionsMax
      if (s.wait().conditions(i).has_sub_flow() && !s.conditions(i).has_sub_flow()) {
        auto* state = s.mutable_conditions(i);
        *state->mutable_sub_flow() = running_child(state->child_flow_id(), state->child_run_id());
      }
      const auto& state = s.conditions(i);
      if (s.wait().conditions(i).has_timer() && !state.fired()) {
        TimerKey key = timer_key(CONDITION);
        key.set_step_execution_id(id);
        key.set_condition_index(static_cast<uint32_t>(i));
        txn_.delete_timer(key, state.timer_at_ms());
      }
      auto* result = event.add_conditions();
      result->set_index(static_cast<uint32_t>(i));
      result->set_condition_id(s.wait().conditions(i).condition_id());
      result->set_fired(state.satisfied());
      result->set_skipped(state.skipped());
      *result->mutable_messages() = state.messages();
      *result->mutable_condition() = s.wait().conditions(i);
      if (state.has_sub_flow()) *result->mutable_sub_flow() = state.sub_flow();
    }
    add_event(std::move(event));
    s.set_phase(PHASE_EXECUTE);
    queue_method(s, EXECUTE, 1);
  }
}

void RunEditor::fire_condition(StepExecution& step, uint32_t index, bool skipped) {
  auto* state = step.mutable_conditions(static_cast<int>(index));
  DEX_INVARIANT(!state->fired(), "a Timer fires once");
  TimerKey key = timer_key(CONDITION);
  key.set_step_execution_id(step.step_execution_id());
  key.set_condition_index(index);
  txn_.delete_timer(key, state->timer_at_ms());
  state->set_fired(true);
  state->set_skipped(skipped);
}

// A child that has not closed for good (another condition won): a RUNNING
// snapshot of its latest run, also when that run closed with its Flow retry
// pending (the Flow goes on as the next run, as its parent would have waited).
SubFlowResult RunEditor::running_child(const std::string& flow_id, const std::string& run_id) {
  auto child = txn_.run(flow_id, run_id);
  DEX_INVARIANT(child.has_value(), "a SubFlow condition's child run exists");
  // Bounded by kRetryChainMax: a retry chain is as long as its runs.
  for (size_t hops = 0; !child->next_run_id().empty() && hops < kRetryChainMax; ++hops) {
    auto next = txn_.run(flow_id, child->next_run_id());
    if (!next) break;  // its retry has not started yet
    child = std::move(next);
  }
  DEX_INVARIANT(child->status() == FLOW_RUNNING || retry_pending(*child),
                "a child that closed for good has told its waiting parent");
  SubFlowResult r = sub_flow_result(*child);
  r.set_status(FLOW_RUNNING);
  r.clear_outputs();
  r.clear_close_reason();
  return r;
}

bool RunEditor::sub_flow_closed(const SubFlowParent& parent, const Run& child) {
  if (run_.status() != FLOW_RUNNING) return false;
  StepExecution* s = step(parent.step_execution_id());
  const int i = static_cast<int>(parent.condition_index());
  if (s == nullptr || s->phase() != PHASE_WAITING || i >= s->wait().conditions_size() ||
      !s->wait().conditions(i).has_sub_flow() ||
      s->conditions(i).child_flow_id() != child.flow_id() || s->conditions(i).fired())
    return false;  // the wait was met, or the execution ended, before the child closed
  auto* state = s->mutable_conditions(i);
  state->set_fired(true);
  state->set_child_run_id(child.run_id());
  *state->mutable_sub_flow() = sub_flow_result(child);
  HistoryEvent event;
  event.set_kind(SUB_FLOW_CLOSED);
  event.set_step_execution_id(s->step_execution_id());
  event.set_condition_index(parent.condition_index());
  event.set_child_flow_id(child.flow_id());
  event.set_child_run_id(child.run_id());
  event.set_status(child.status());
  event.set_reason(child.close_reason());
  add_event(std::move(event));
  match_waits();
  return true;
}

void RunEditor::complete_method(StepExecution& step, const MethodResult& result, HistoryKind kind,
                                HistoryEvent event) {
  event.set_kind(kind);
  event.set_step_execution_id(step.step_execution_id());
  event.set_attempt(result.task().attempt());
  *event.mutable_attribute_writes() = result.attribute_writes();
  add_event(std::move(event));
  clear_method(step, ATTEMPT_COMPLETED);
  write_attributes(result.attribute_writes());
  append_publishes(result.publishes());
}

void RunEditor::complete_wait_for(StepExecution& step, const MethodResult& result,
                                  const std::map<uint32_t, SubFlowChild>& children) {
  HistoryEvent event;
  *event.mutable_wait() = result.wait();
  complete_method(step, result, WAIT_FOR_COMPLETED, std::move(event));
  *step.mutable_locals() = result.locals();
  if (result.wait().kind() == SKIP) {
    step.set_phase(PHASE_EXECUTE);
    queue_method(step, EXECUTE, 1);
    match_waits();  // the publishes may meet other waits
    return;
  }
  *step.mutable_wait() = result.wait();
  step.set_wait_seq(run_.next_wait_seq());
  run_.set_next_wait_seq(run_.next_wait_seq() + 1);
  step.set_wait_ms(at_ms_);
  step.set_phase(PHASE_WAITING);
  step.clear_conditions();
  for (int i = 0; i < result.wait().conditions_size(); ++i) {  // bounded by kConditionsMax
    const Condition& c = result.wait().conditions(i);
    auto* state = step.add_conditions();
    if (c.has_sub_flow()) {
      const SubFlowChild& child = children.at(static_cast<uint32_t>(i));
      state->set_child_flow_id(child.flow_id);
      state->set_child_run_id(child.run_id);
      if (child.closed) {  // attached to a run that closed for good: met now
        state->set_fired(true);
        *state->mutable_sub_flow() = *child.closed;
      }
      HistoryEvent event;
      event.set_kind(SUB_FLOW_STARTED);
      event.set_step_execution_id(step.step_execution_id());
      event.set_condition_index(static_cast<uint32_t>(i));
      event.set_child_flow_id(child.flow_id);
      event.set_child_run_id(child.run_id);
      event.set_attached(child.attached);
      add_event(std::move(event));
      continue;
    }
    if (!c.has_timer()) continue;
    const int64_t at = c.timer().has_duration_ms() ? later_ms(at_ms_, c.timer().duration_ms())
                                                   : c.timer().at_unix_ms();
    state->set_timer_at_ms(at);
    if (at <= at_ms_) {
      state->set_fired(true);  // due already: no timer to wait for
      continue;
    }
    TimerKey key = timer_key(CONDITION);
    key.set_step_execution_id(step.step_execution_id());
    key.set_condition_index(static_cast<uint32_t>(i));
    put_timer(key, at);
  }
  match_waits();
}

void RunEditor::cancel_steps(const std::string& self, const std::string* parent,
                             const StepDecision& decision) {
  if (decision.cancel_step_types_size() == 0 && !decision.cancel_siblings()) return;
  const std::vector<std::string> active(run_.active().begin(), run_.active().end());
  for (const auto& id : active) {  // bounded by kActiveStepsMax
    StepExecution& other = *step(id);
    if (id == self) continue;
    const bool by_type =
        std::find(decision.cancel_step_types().begin(), decision.cancel_step_types().end(),
                  other.step_type()) != decision.cancel_step_types().end();
    const bool sibling =
        decision.cancel_siblings() && (parent == nullptr || other.parent_execution_id() == *parent);
    if (by_type || sibling) finish_step(other, PHASE_CANCELED);
  }
}

bool RunEditor::channels_empty(const google::protobuf::RepeatedPtrField<ChannelRef>& channels) {
  std::vector<std::pair<QueueKey, ChannelQueue>> all;
  bool listed = false;
  for (const auto& ref : channels) {  // bounded by kChannelsMax
    if (!ref.all_instances()) {
      if (queued_count({run_.flow_id(), run_.run_id(), ref.channel(), ref.instance_key()}) > 0)
        return false;
      continue;
    }
    if (!listed) {
      all = txn_.queues(run_.flow_id(), run_.run_id());
      listed = true;
    }
    for (const auto& [key, queue] : all) {  // bounded by the run's queues
      if (key.channel == ref.channel() && queue.next_seq() > queue.first_seq()) return false;
    }
  }
  return true;
}

void RunEditor::apply_decision(const std::string& step_type, const std::string& decider,
                               const StepDecision& decision) {
  auto add_output = [&](const Payload& output) {
    auto* out = run_.add_outputs();
    out->set_step_type(step_type);
    out->set_step_execution_id(decider);
    *out->mutable_output() = output;
  };
  auto go = [&](const google::protobuf::RepeatedPtrField<StepMovement>& movements) {
    for (const auto& m : movements) {  // bounded by kMovementsMax
      create_step(m.step_type(), m.input(), m.has_options() ? &m.options() : nullptr, decider, "");
    }
  };
  switch (decision.kind_case()) {
    case StepDecision::kGoTo:
      go(decision.go_to().movements());
      break;
    case StepDecision::kGracefulComplete:
      add_output(decision.graceful_complete());
      run_.set_graceful_complete(true);
      break;
    case StepDecision::kForceComplete:
      add_output(decision.force_complete());
      close(FLOW_COMPLETED, "");
      break;
    case StepDecision::kForceFail:
      close(FLOW_FAILED, decision.force_fail());
      break;
    case StepDecision::kDeadEnd:
      break;
    case StepDecision::kForceCompleteIfChannelsEmpty: {
      const auto& c = decision.force_complete_if_channels_empty();
      if (channels_empty(c.channels())) {
        add_output(c.output());
        close(FLOW_COMPLETED, "");
      } else {
        go(c.otherwise());
      }
      break;
    }
    default:
      DEX_INVARIANT(false, "a decision without a kind (validated before)");
  }
}

void RunEditor::complete_execute(StepExecution& step, const MethodResult& result) {
  HistoryEvent event;
  *event.mutable_decision() = result.decision();
  complete_method(step, result, EXECUTE_COMPLETED, std::move(event));
  finish_step(step, PHASE_DONE);
  cancel_steps(step.step_execution_id(), &step.parent_execution_id(), result.decision());
  apply_decision(step.step_type(), step.step_execution_id(), result.decision());
  match_waits();
  maybe_complete();
}

void RunEditor::maybe_complete() {
  if (run_.status() == FLOW_RUNNING && run_.graceful_complete() && run_.active_size() == 0 &&
      !run_.start_pending())
    close(FLOW_COMPLETED, "");
}

void RunEditor::create_start_step() {
  run_.set_start_pending(false);
  if (!declaration_.start_step_type().empty())
    create_step(declaration_.start_step_type(), run_.input(), nullptr, "", "");
}

void RunEditor::close(FlowStatus status, const std::string& reason, bool by_client) {
  if (run_.status() != FLOW_RUNNING) return;
  DEX_INVARIANT(status != FLOW_RUNNING && status != FLOW_STATUS_UNSPECIFIED,
                "a run closes to an end");
  const std::vector<std::string> active(run_.active().begin(), run_.active().end());
  for (const auto& id : active) {  // bounded by kActiveStepsMax
    StepExecution* s = step(id);
    DEX_INVARIANT(s != nullptr, "an active execution exists");
    finish_step(*s, PHASE_CANCELED);
  }
  const std::vector<std::string> open(run_.rpcs_open().begin(), run_.rpcs_open().end());
  for (const auto& id : open) {  // bounded by the run's open RPCs
    RpcExecution* r = rpc(id);
    DEX_INVARIANT(r != nullptr && !r->done(), "an open RPC exists");
    end_rpc(
        *r, ATTEMPT_FAILED,
        std::string("the run closed (") + flow_status_name(status) + ") before the RPC completed");
  }
  // The timeout handler, if it runs, is told (its Worker learns it ended).
  if (run_.timeout_handler().state() != TASK_STATE_UNSPECIFIED)
    clear_state(*run_.mutable_timeout_handler(), handler_ref(), ATTEMPT_NOT_COMPLETED);
  if (run_.options().timeout_ms() > 0 && !run_.timeout_handled())
    txn_.delete_timer(timer_key(FLOW_TIMEOUT),
                      later_ms(run_.start_ms(), run_.options().timeout_ms()));
  if (run_.start_pending())
    txn_.delete_timer(timer_key(START_DELAY),
                      later_ms(run_.start_ms(), run_.options().start_delay_ms()));
  run_.set_start_pending(false);
  run_.set_status(status);
  run_.set_close_ms(at_ms_);
  run_.set_close_reason(reason);
  HistoryEvent event;
  event.set_kind(FLOW_CLOSED);
  event.set_status(status);
  event.set_reason(reason);
  if (!by_client && (status == FLOW_FAILED || status == FLOW_TIMED_OUT) &&
      run_.options().has_retry_policy()) {
    const RetryPolicy retry = retry_with_defaults(run_.options().retry_policy());
    const uint32_t attempt = std::max<uint32_t>(run_.flow_attempt(), 1);
    const int64_t retry_at = later_ms(at_ms_, backoff_ms(retry, attempt + 1));
    const bool attempts_left = retry.maximum_attempts() == 0 || attempt < retry.maximum_attempts();
    const bool time_left = retry.total_duration_ms() == 0 ||
                           later_ms(retry_at, -run_.first_start_ms()) <= retry.total_duration_ms();
    if (attempts_left && time_left) {
      const std::string first = run_.first_run_id().empty() ? run_.run_id() : run_.first_run_id();
      run_.set_retry_at_ms(retry_at);
      run_.set_next_run_id(retry_run_id(first, attempt + 1));
      put_timer(timer_key(FLOW_RETRY), retry_at);
      event.set_next_run_id(run_.next_run_id());
      event.set_retry_at_ms(retry_at);
    }
  }
  add_event(std::move(event));
  // Closed for good: kept for its retention. A run with a Flow retry pending
  // goes with the run that ends its retry chain.
  if (run_.retry_at_ms() == 0) schedule_retention(txn_, effects_, run_, at_ms_);
  effects_.closed.push_back({run_.flow_id(), run_.run_id(), status});
}

// -------------------------------------------------------------- Attributes

void RunEditor::write_attributes(const google::protobuf::RepeatedPtrField<Attribute>& writes) {
  uint32_t count = run_.attribute_count();
  for (const auto& w : writes) {  // bounded by kAttributesMax writes
    const bool was =
        txn_.attribute(run_.flow_id(), run_.run_id(), w.key(), w.instance_key()).has_value();
    if (deletes(w)) {
      if (!was) continue;  // nothing to delete
      txn_.delete_attribute(run_.flow_id(), run_.run_id(), w.key(), w.instance_key());
      --count;
    } else {
      txn_.put_attribute(run_.flow_id(), run_.run_id(), w);
      if (!was) ++count;
    }
    attributes_changed_ = true;
  }
  DEX_INVARIANT(count <= kAttributesMax, "the Attribute count was checked before");
  run_.set_attribute_count(count);
}

// -------------------------------------------------------------------- RPCs

void RunEditor::invoke_rpc(const InvokeRpc& r, const RpcDeclaration& declaration) {
  RpcExecution x;
  x.set_flow_id(run_.flow_id());
  x.set_run_id(run_.run_id());
  x.set_rpc_id(r.rpc_id());
  x.set_name(r.name());
  *x.mutable_input() = r.input();
  x.set_request_id(r.request_id());
  x.set_deadline_ms(later_ms(at_ms_, r.timeout_ms()));
  x.set_created_ms(at_ms_);
  x.mutable_method()->set_method(RPC);
  x.mutable_method()->set_attempt(1);
  if (RpcExecution* old = rpc(r.rpc_id()); old != nullptr) {  // a done one runs anew
    DEX_INVARIANT(old->done(), "only a done RPC is replaced");
    auto* done = run_.mutable_rpcs_done();
    auto it = std::find(done->begin(), done->end(), r.rpc_id());
    if (it != done->end()) done->erase(it);
  }
  RpcExecution& stored = rpcs_.insert_or_assign(r.rpc_id(), std::move(x)).first->second;
  run_.add_rpcs_open(r.rpc_id());
  const TaskRef ref = rpc_ref(stored);
  txn_.put_open_rpc(ref);
  TimerKey key = timer_key(RPC_DEADLINE);
  key.set_step_execution_id(r.rpc_id());
  put_timer(key, stored.deadline_ms());
  if (!take_locks(r.rpc_id(), RPC, 1, declaration.lock_keys())) {
    stored.mutable_method()->set_state(TASK_LOCKED);
    return;
  }
  // The caller waits and a lost RPC is not retried: no need to sync first.
  enqueue(*stored.mutable_method(), ref, ASYNC);
}

void RunEditor::start_rpc_attempt(RpcExecution& rpc, const std::string& task_id,
                                  const std::string& worker_id) {
  start(*rpc.mutable_method(), rpc_ref(rpc), task_id, worker_id);
}

void RunEditor::withdraw_rpc(RpcExecution& rpc) {
  auto* state = rpc.mutable_method();
  DEX_INVARIANT(state->state() == TASK_RUNNING, "only a running RPC is withdrawn");
  txn_.delete_running(state->task_id());
  state->clear_task_id();
  state->clear_worker_id();
  enqueue(*state, rpc_ref(rpc), ASYNC);  // it keeps its lock keys
}

void RunEditor::end_rpc_attempt(RpcExecution& rpc, AttemptOutcome outcome) {
  auto* state = rpc.mutable_method();
  switch (state->state()) {
    case TASK_RUNNING:
      txn_.delete_running(state->task_id());
      effects_.ended.push_back({rpc_ref(rpc), state->task_id(), state->worker_id(), outcome});
      release_locks(rpc.rpc_id(), RPC, 1);
      break;
    case TASK_QUEUED:
      txn_.dequeue_task(run_.flow_type(), state->queue_seq());
      release_locks(rpc.rpc_id(), RPC, 1);
      break;
    case TASK_LOCKED:
      drop_waiter(rpc.rpc_id(), RPC);
      break;
    default:
      DEX_INVARIANT(false, "an open RPC's attempt is queued, locked or running");
  }
  state->set_state(TASK_STATE_UNSPECIFIED);
  state->clear_task_id();
  state->clear_worker_id();
  state->clear_queue_seq();
  TimerKey key = timer_key(RPC_DEADLINE);
  key.set_step_execution_id(rpc.rpc_id());
  txn_.delete_timer(key, rpc.deadline_ms());
  rpc.set_done(true);
  rpc.set_outcome(outcome);
  txn_.delete_open_rpc(rpc_ref(rpc));
  auto* open = run_.mutable_rpcs_open();
  auto it = std::find(open->begin(), open->end(), rpc.rpc_id());
  DEX_INVARIANT(it != open->end(), "an open RPC is listed in its run");
  open->erase(it);
  const std::string id = rpc.rpc_id();
  effects_.rpcs_done.push_back(RunItem{{run_.flow_id(), run_.run_id()}, id});
  run_.add_rpcs_done(id);
  // Bounded: the oldest done RPC is forgotten (a retry of it would run anew).
  while (static_cast<size_t>(run_.rpcs_done_size()) > kRpcsDoneKept) {
    const std::string oldest = run_.rpcs_done(0);
    run_.mutable_rpcs_done()->erase(run_.mutable_rpcs_done()->begin());
    rpcs_.erase(oldest);
    txn_.delete_rpc(run_.flow_id(), run_.run_id(), oldest);
  }
}

void RunEditor::end_rpc(RpcExecution& rpc, AttemptOutcome outcome, const std::string& error) {
  DEX_INVARIANT(!rpc.done() && outcome != ATTEMPT_COMPLETED, "an open RPC ends not completed");
  rpc.set_error(error);
  HistoryEvent event;
  event.set_kind(RPC_FAILED);
  event.set_step_execution_id(rpc.rpc_id());
  event.set_rpc_name(rpc.name());
  event.set_error(error);
  event.set_method(RPC);
  event.set_attempt(1);
  add_event(std::move(event));
  end_rpc_attempt(rpc, outcome);
}

void RunEditor::complete_rpc(RpcExecution& rpc, const MethodResult& result) {
  DEX_INVARIANT(!rpc.done(), "an open RPC completes");
  const std::string name = rpc.name();
  *rpc.mutable_output() = result.rpc().output();
  HistoryEvent event;
  event.set_kind(RPC_COMPLETED);
  event.set_step_execution_id(rpc.rpc_id());
  event.set_rpc_name(name);
  event.set_method(RPC);
  event.set_attempt(1);
  *event.mutable_output() = result.rpc().output();
  *event.mutable_attribute_writes() = result.attribute_writes();
  add_event(std::move(event));
  end_rpc_attempt(rpc, ATTEMPT_COMPLETED);  // `rpc` may be gone from rpcs_ (retention) after
  write_attributes(result.attribute_writes());
  append_publishes(result.publishes());
  for (const auto& m : result.rpc().next_steps()) {  // bounded by kMovementsMax
    create_step(m.step_type(), m.input(), m.has_options() ? &m.options() : nullptr,
                rpc_parent(name), "");
  }
  match_waits();
}

void RunEditor::flush() {
  if (run_.status() == FLOW_RUNNING) grant_waiters();
  for (auto& [id, s] : steps_) txn_.put_step(s);  // bounded by the executions touched
  for (auto& [id, r] : rpcs_) txn_.put_rpc(r);    // bounded by the RPCs touched
  txn_.put_run(run_);
  if (attributes_changed_)
    effects_.attributes_changed.push_back(RunKey{run_.flow_id(), run_.run_id()});
  auto entry = txn_.flow_id(run_.flow_id());
  DEX_INVARIANT(entry.has_value(), "a run's Flow ID has an entry");
  if (entry->run_id() == run_.run_id() && entry->status() != run_.status()) {
    entry->set_status(run_.status());
    txn_.put_flow_id(*entry);
  }
  if (events_added_) effects_.history.push_back(RunKey{run_.flow_id(), run_.run_id()});
}

}  // namespace dex::flow
