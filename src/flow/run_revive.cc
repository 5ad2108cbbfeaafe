// RunEditor: bringing a run's state at a point of its history back to life in
// a new run (docs/flow-rules.md, "Time travel").
#include "common/invariant.h"
#include "flow/limits.h"
#include "flow/run_editor.h"

namespace dex::flow {

void RunEditor::revive_step(StepExecution step, int64_t point_ms, const std::string& from_run_id) {
  DEX_INVARIANT(step.flow_id() == run_.flow_id() && step.run_id() == run_.run_id(),
                "a revived execution belongs to the new run");
  const std::string id = step.step_execution_id();
  StepExecution& s = steps_.insert_or_assign(id, std::move(step)).first->second;
  // Whatever its method was doing at the point (running on a Worker, queued,
  // backing off, waiting for a lock) was the old run's.
  switch (s.phase()) {
    case PHASE_WAIT_FOR:
      s.clear_method();
      queue_method(s, WAIT_FOR, 1);
      return;
    case PHASE_EXECUTE:
      s.clear_method();
      queue_method(s, EXECUTE, 1);
      return;
    case PHASE_WAITING:
      break;
    default:
      return;  // done, failed or canceled: kept as it was
  }
  for (int i = 0; i < s.conditions_size(); ++i) {  // bounded by kConditionsMax
    ConditionState& c = *s.mutable_conditions(i);
    if (!c.fired() && !c.child_flow_id().empty()) {
      revive_sub_flow(s, static_cast<uint32_t>(i), from_run_id);
      continue;
    }
    if (c.fired() || c.timer_at_ms() == 0) continue;
    const int64_t left = std::max<int64_t>(0, ms_between(point_ms, c.timer_at_ms()));
    c.set_timer_at_ms(later_ms(at_ms_, left));
    if (left == 0) {
      c.set_fired(true);  // due at the point already: met by match_waits
      continue;
    }
    TimerKey key = timer_key(CONDITION);
    key.set_step_execution_id(id);
    key.set_condition_index(static_cast<uint32_t>(i));
    put_timer(key, c.timer_at_ms());
  }
}

void RunEditor::revive_sub_flow(StepExecution& s, uint32_t index, const std::string& from_run_id) {
  ConditionState& c = *s.mutable_conditions(static_cast<int>(index));
  auto child = current_child(txn_, c);
  DEX_INVARIANT(child.has_value() && !retry_pending(*child), "a revived wait's child was checked");
  c.set_child_run_id(child->run_id());
  if (child->status() == FLOW_RUNNING) {
    for (auto& p : *child->mutable_parents()) {  // bounded by the child's parents
      if (p.flow_id() == run_.flow_id() && p.run_id() == from_run_id &&
          p.step_execution_id() == s.step_execution_id() && p.condition_index() == index)
        p.set_run_id(run_.run_id());
    }
    txn_.put_run(*child);
    return;
  }
  // It closed after the point: the wait sees its end now (match_waits).
  c.set_fired(true);
  *c.mutable_sub_flow() = sub_flow_result(*child);
  HistoryEvent event;
  event.set_kind(SUB_FLOW_CLOSED);
  event.set_step_execution_id(s.step_execution_id());
  event.set_condition_index(index);
  event.set_child_flow_id(child->flow_id());
  event.set_child_run_id(child->run_id());
  event.set_status(child->status());
  event.set_reason(child->close_reason());
  add_event(std::move(event));
}

void RunEditor::revive_handler() {
  DEX_INVARIANT(declaration_.has_timeout_handler(), "a revived handler is declared (checked)");
  run_.clear_timeout_handler();
  queue_handler(1);
}

}  // namespace dex::flow
