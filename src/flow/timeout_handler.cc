// The Flow's timeout handler (TimeoutPolicy TIMEOUT_HANDLER; docs/flow-rules.md,
// "Timeout handler"): when the flow timeout fires, one run of the handler
// (method ON_TIMEOUT, attempts by its options) decides what happens to the run,
// like an Execute. The run's Step executions keep running meanwhile.
#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/run_editor.h"

namespace dex::flow {

TaskRef RunEditor::handler_ref() const {
  TaskRef ref;
  ref.set_flow_id(run_.flow_id());
  ref.set_run_id(run_.run_id());
  ref.set_step_execution_id(std::string(kTimeoutHandlerId));
  ref.set_method(ON_TIMEOUT);
  ref.set_attempt(run_.timeout_handler().attempt());
  return ref;
}

void RunEditor::queue_handler(uint32_t attempt) {
  DEX_INVARIANT(attempt >= 1, "attempts count from 1");
  auto* state = run_.mutable_timeout_handler();
  state->set_method(ON_TIMEOUT);
  state->set_attempt(attempt);
  state->clear_task_id();
  state->clear_worker_id();
  state->clear_retry_at_ms();
  state->clear_queue_seq();
  // No lock keys (validate_declaration): straight to the task queue.
  enqueue(*state, handler_ref(),
          timeout_handler_options(declaration_, default_durability(run_.config())).durability());
}

void RunEditor::start_timeout_handler(const std::string& why) {
  DEX_INVARIANT(run_.status() == FLOW_RUNNING && !run_.timeout_handled(),
                "the timeout handler starts once, in a running run");
  DEX_INVARIANT(declaration_.has_timeout_handler(), "the run's declaration has a handler");
  run_.set_timeout_handled(true);  // the run has no flow timeout any more
  run_.clear_timeout_handler();
  HistoryEvent event;
  event.set_kind(TIMEOUT_HANDLER_STARTED);
  event.set_step_execution_id(std::string(kTimeoutHandlerId));
  event.set_method(ON_TIMEOUT);
  event.set_attempt(1);
  event.set_reason(why);
  add_event(std::move(event));
  queue_handler(1);
}

void RunEditor::start_handler_attempt(const std::string& task_id, const std::string& worker_id) {
  start(*run_.mutable_timeout_handler(), handler_ref(), task_id, worker_id);
}

void RunEditor::withdraw_handler() {
  auto* state = run_.mutable_timeout_handler();
  DEX_INVARIANT(state->state() == TASK_RUNNING, "only a running handler attempt is withdrawn");
  txn_.delete_running(state->task_id());
  queue_handler(state->attempt());
}

void RunEditor::complete_handler(const MethodResult& result) {
  DEX_INVARIANT(run_.timeout_handler().state() == TASK_RUNNING, "a running handler completes");
  HistoryEvent event;
  event.set_kind(TIMEOUT_HANDLER_COMPLETED);
  event.set_step_execution_id(std::string(kTimeoutHandlerId));
  event.set_method(ON_TIMEOUT);
  event.set_attempt(result.task().attempt());
  *event.mutable_decision() = result.decision();
  *event.mutable_attribute_writes() = result.attribute_writes();
  add_event(std::move(event));
  clear_state(*run_.mutable_timeout_handler(), handler_ref(), ATTEMPT_COMPLETED);
  write_attributes(result.attribute_writes());
  append_publishes(result.publishes());
  // Its siblings are every active execution: it stands beside the whole run.
  const std::string self(kTimeoutHandlerId);
  cancel_steps(self, nullptr, result.decision());
  apply_decision("", self, result.decision());
  match_waits();
  maybe_complete();
}

void RunEditor::handler_failed(AttemptOutcome outcome, const std::string& error, bool non_retryable,
                               int64_t retry_after_ms) {
  auto* state = run_.mutable_timeout_handler();
  DEX_INVARIANT(state->state() != TASK_STATE_UNSPECIFIED, "a handler attempt is under way");
  const uint32_t attempt = state->attempt();
  clear_state(*state, handler_ref(), outcome);
  auto* failure = state->mutable_last_failure();
  failure->set_attempt(attempt);
  failure->set_outcome(outcome);
  failure->set_error(error);
  failure->set_at_ms(at_ms_);
  const MethodOptions options = timeout_handler_options(declaration_);
  if (auto retry_at =
          next_attempt_at(*state, options.retry(), attempt, non_retryable, retry_after_ms)) {
    state->set_attempt(attempt + 1);
    if (*retry_at <= at_ms_) {
      queue_handler(attempt + 1);
      return;
    }
    back_off(*state, std::string(kTimeoutHandlerId), *retry_at);
    return;
  }
  HistoryEvent event;
  event.set_kind(TIMEOUT_HANDLER_FAILED);
  event.set_step_execution_id(std::string(kTimeoutHandlerId));
  event.set_method(ON_TIMEOUT);
  event.set_attempt(attempt);
  event.set_error(error);
  add_event(std::move(event));
  close(FLOW_TIMED_OUT, flow_timeout_reason(run_) + " and its timeout handler failed after " +
                            std::to_string(attempt) +
                            (attempt == 1 ? " attempt: " : " attempts: ") + error);
}

void RunEditor::handler_retry_due() {
  auto* state = run_.mutable_timeout_handler();
  DEX_INVARIANT(state->state() == TASK_BACKOFF, "only a backoff ends in a retry");
  queue_handler(state->attempt());
}

}  // namespace dex::flow
