// RunEditor: bringing a run's state at a point of its history back to life in
// a new run (docs/flow-rules.md, "Time travel").
#include "common/invariant.h"
#include "flow/limits.h"
#include "flow/run_editor.h"

namespace dex::flow {

void RunEditor::revive_step(StepExecution step, int64_t point_ms) {
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

void RunEditor::revive_handler() {
  DEX_INVARIANT(declaration_.has_timeout_handler(), "a revived handler is declared (checked)");
  run_.clear_timeout_handler();
  queue_handler(1);
}

}  // namespace dex::flow
