// RunEditor: waits (docs/flow-rules.md, "Waits"): Channel messages queued and
// consumed, conditions fired, waits matched, SubFlow children as a wait sees
// them, and the completion of a WaitFor.
#include "flow/run_editor.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/result_check.h"
#include "flow/wait_eval.h"

namespace dex::flow {

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

}  // namespace dex::flow
