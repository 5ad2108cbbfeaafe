#include "flow/run_editor.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/lock_table.h"
#include "flow/result_check.h"
#include "flow/wait_eval.h"

namespace dex::flow {

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
    case FLOW_CONTINUED_AS_NEW:
      return "CONTINUED_AS_NEW";
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

std::string continued_to(FlowTxn& txn, const std::string& flow_id, const std::string& run_id) {
  std::string at = run_id;
  for (size_t hops = 0; hops < kRetryChainMax; ++hops) {  // bounded: see the header
    auto run = txn.run(flow_id, at);
    if (!run || run->status() != FLOW_CONTINUED_AS_NEW || run->next_run_id().empty()) return at;
    at = run->next_run_id();
  }
  return at;
}

std::optional<Run> current_child(FlowTxn& txn, const ConditionState& c) {
  auto child = txn.run(c.child_flow_id(), c.child_run_id());
  for (size_t hops = 0; child && child->status() != FLOW_RUNNING && !child->next_run_id().empty() &&
                        hops < kRetryChainMax;
       ++hops) {
    auto next = txn.run(c.child_flow_id(), child->next_run_id());
    if (!next) break;  // a retry not started yet
    child = std::move(next);
  }
  return child;
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

std::string RunEditor::type_of(const TaskRef& ref) const {
  // Only from what is loaded (an attempt being changed is): loading here would
  // write back a copy in flush().
  if (ref.method() == ON_TIMEOUT) return std::string();
  if (ref.method() == RPC) {
    auto it = rpcs_.find(ref.step_execution_id());
    return it != rpcs_.end() ? it->second.name() : std::string();
  }
  auto it = steps_.find(ref.step_execution_id());
  return it != steps_.end() ? it->second.step_type() : std::string();
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
  run_.set_history_bytes(run_.history_bytes() + event.ByteSizeLong());
  txn_.put_event(run_.flow_id(), run_.run_id(), event);
  events_added_ = true;
  if (const std::string passed = history_threshold_passed(); !passed.empty())
    request_continue_as_new(passed);  // adds one event; pending then, so no recursion
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
  // A durability the Step leaves unset is the run's FlowConfig's default.
  const Durability durability = default_durability(run_.config());
  *options.mutable_wait_for() = method_with_defaults(options.wait_for(), durability);
  *options.mutable_execute() = method_with_defaults(options.execute(), durability);
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
    const int64_t retry_at = later_ms(at_ms_, retry_backoff_ms(retry, attempt + 1));
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
  effects_.closed.push_back({run_.flow_id(), run_.run_id(), status, run_.flow_type()});
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
