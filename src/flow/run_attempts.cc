// RunEditor: a method's attempts (docs/flow-rules.md, "Failures, retries and
// recovery"): queueing behind lock keys, starting, withdrawing, ending,
// retries with backoff, failure policies.
#include "flow/run_editor.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/lock_table.h"
#include "flow/result_check.h"

namespace dex::flow {
namespace {

bool is_active_phase(Phase phase) {
  return phase == PHASE_WAIT_FOR || phase == PHASE_WAITING || phase == PHASE_EXECUTE;
}

const char* method_name(Method method) { return method == WAIT_FOR ? "WaitFor" : "Execute"; }

const MethodOptions& options_of(const StepExecution& step, Method method) {
  return method == WAIT_FOR ? step.options().wait_for() : step.options().execute();
}

}  // namespace

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
  state.set_queued_ms(at_ms_);
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
  effects_.started.push_back(
      {ref, task_id, worker_id, run_.flow_type(), type_of(ref), state.queued_ms(), at_ms_});
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
      effects_.ended.push_back({ref, state.task_id(), state.worker_id(), running_outcome,
                                run_.flow_type(), type_of(ref), state.started_ms(), at_ms_});
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
                                                  bool non_retryable,
                                                  int64_t retry_after_ms) const {
  // The Worker's delay replaces the backoff; a bad one (negative, or past the
  // limit) is clamped, so a record applies the same everywhere.
  const int64_t delay = retry_after_ms > 0 ? std::min(retry_after_ms, kRetryAfterMaxMs)
                                           : retry_backoff_ms(retry, attempt + 1);
  const int64_t retry_at = later_ms(at_ms_, delay);
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
                               const std::string& error, bool non_retryable,
                               int64_t retry_after_ms) {
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

  if (auto retry_at =
          next_attempt_at(*state, options.retry(), attempt, non_retryable, retry_after_ms)) {
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

}  // namespace dex::flow
