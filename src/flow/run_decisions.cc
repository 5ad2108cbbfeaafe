// RunEditor: Execute's decisions (docs/flow-rules.md, "Decisions"): movements
// to new Step executions, cancels, dead ends and the run's completion.
#include "flow/run_editor.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/result_check.h"

namespace dex::flow {

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
  if (decision.continue_as_new())
    request_continue_as_new(decider == kTimeoutHandlerId
                                ? "the timeout handler decided to continue as new"
                                : "Step execution '" + decider + "' decided to continue as new");
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

}  // namespace dex::flow
