#include "flow/result_check.h"

#include <string>

#include "flow/declaration.h"
#include "flow/flow_rules.h"
#include "flow/wait_eval.h"

namespace dex::flow {
namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

Status validate_channel_ref(const FlowDeclaration& decl, const std::string& channel,
                            const std::string& instance_key, bool all_instances,
                            const std::string& where) {
  const ChannelDeclaration* c = find_channel(decl, channel);
  if (c == nullptr)
    return Status::invalid_argument(where + " names Channel " + quoted(channel) +
                                    ", which Flow type " + quoted(decl.flow_type()) +
                                    " does not declare");
  if (c->is_map() && !all_instances)
    return validate_name(where + " instanceKey of ChannelMap " + quoted(channel), instance_key);
  if (!c->is_map() && (!instance_key.empty() || all_instances))
    return Status::invalid_argument(where + " gives an instance, but " + quoted(channel) +
                                    " is a Channel, not a ChannelMap");
  return Status::ok();
}

Status validate_movements(const FlowDeclaration& decl,
                          const google::protobuf::RepeatedPtrField<StepMovement>& movements,
                          const std::string& where) {
  if (static_cast<size_t>(movements.size()) > kMovementsMax)
    return Status::invalid_argument(where + " has more than " + std::to_string(kMovementsMax) +
                                    " movements");
  for (int i = 0; i < movements.size(); ++i) {  // bounded by kMovementsMax
    const auto& m = movements[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (find_step(decl, m.step_type()) == nullptr)
      return Status::invalid_argument(at + " goes to Step type " + quoted(m.step_type()) +
                                      ", which Flow type " + quoted(decl.flow_type()) +
                                      " does not declare");
    if (auto s = validate_payload("a movement's input", m.input()); !s.is_ok()) return s;
    if (m.has_options()) {
      if (auto s = validate_step_options(decl, m.options(), at + ".options"); !s.is_ok()) return s;
    }
  }
  return Status::ok();
}

}  // namespace

Status validate_payload(const char* what, const Payload& payload) {
  if (payload.data().size() > kPayloadBytesMax)
    return Status::invalid_argument(std::string(what) + " is " +
                                    std::to_string(payload.data().size()) +
                                    " bytes; the limit is " + std::to_string(kPayloadBytesMax));
  return Status::ok();
}

Status validate_publishes(const FlowDeclaration& decl,
                          const google::protobuf::RepeatedPtrField<Publish>& publishes) {
  size_t messages = 0;
  for (int i = 0; i < publishes.size(); ++i) {  // bounded by kPublishMessagesMax below
    const auto& p = publishes[i];
    const std::string where = "publish " + std::to_string(i);
    if (auto s = validate_channel_ref(decl, p.channel(), p.instance_key(), false, where);
        !s.is_ok())
      return s;
    if (p.messages_size() == 0) return Status::invalid_argument(where + " has no messages");
    messages += static_cast<size_t>(p.messages_size());
    if (messages > kPublishMessagesMax)
      return Status::invalid_argument("more than " + std::to_string(kPublishMessagesMax) +
                                      " messages published at once");
    for (const auto& m : p.messages()) {
      if (auto s = validate_payload("a Channel message", m); !s.is_ok()) return s;
    }
  }
  return Status::ok();
}

Status validate_decision(const FlowDeclaration& decl, const StepDecision& d) {
  for (const auto& type : d.cancel_step_types()) {
    if (find_step(decl, type) == nullptr)
      return Status::invalid_argument("the decision cancels Step type " + quoted(type) +
                                      ", which Flow type " + quoted(decl.flow_type()) +
                                      " does not declare");
  }
  switch (d.kind_case()) {
    case StepDecision::kGoTo:
      if (d.go_to().movements_size() == 0)
        return Status::invalid_argument("GoTo without a movement (use DeadEnd to end a branch)");
      return validate_movements(decl, d.go_to().movements(), "movements");
    case StepDecision::kGracefulComplete:
      return validate_payload("the output", d.graceful_complete());
    case StepDecision::kForceComplete:
      return validate_payload("the output", d.force_complete());
    case StepDecision::kForceFail:
      if (d.force_fail().size() > kPayloadBytesMax)
        return Status::invalid_argument("the failure reason is too long");
      return Status::ok();
    case StepDecision::kDeadEnd:
      return Status::ok();
    case StepDecision::kForceCompleteIfChannelsEmpty: {
      const auto& c = d.force_complete_if_channels_empty();
      if (c.channels_size() == 0)
        return Status::invalid_argument("ForceCompleteIfChannelsEmpty names no Channel");
      for (int i = 0; i < c.channels_size(); ++i) {
        const auto& ref = c.channels(i);
        if (auto s =
                validate_channel_ref(decl, ref.channel(), ref.instance_key(), ref.all_instances(),
                                     "channels[" + std::to_string(i) + "]");
            !s.is_ok())
          return s;
      }
      if (auto s = validate_payload("the output", c.output()); !s.is_ok()) return s;
      return validate_movements(decl, c.otherwise(), "otherwise");
    }
    default:
      return Status::invalid_argument(
          "the Step decision has no kind (GoTo, GoToMulti, "
          "GracefulComplete, ForceComplete, ForceFail, DeadEnd, "
          "ForceCompleteIfChannelsEmpty)");
  }
}

Status validate_method_result(const FlowDeclaration& decl, const MethodResult& r) {
  switch (r.outcome()) {
    case ATTEMPT_COMPLETED:
      break;
    case ATTEMPT_FAILED:
    case ATTEMPT_TIMED_OUT:
    case ATTEMPT_NOT_COMPLETED:
      if (r.error().size() > kPayloadBytesMax)
        return Status::invalid_argument("the error is too long");
      return Status::ok();
    default:
      return Status::invalid_argument("the result has no outcome");
  }
  if (auto s = validate_publishes(decl, r.publishes()); !s.is_ok()) return s;
  if (r.task().method() == WAIT_FOR) {
    if (r.has_decision()) return Status::invalid_argument("WaitFor returns a wait, not a decision");
    if (auto s = validate_payload("the locals", r.locals()); !s.is_ok()) return s;
    return validate_wait(decl, r.wait());
  }
  if (r.has_wait()) return Status::invalid_argument("Execute returns a decision, not a wait");
  return validate_decision(decl, r.decision());
}

Status validate_start_options(const StartOptions& o) {
  if (o.timeout_ms() < 0 || o.timeout_ms() > kDurationMsMax)
    return Status::invalid_argument("timeout must be between 0 and ten years");
  if (o.start_delay_ms() < 0 || o.start_delay_ms() > kDurationMsMax)
    return Status::invalid_argument("startDelay must be between 0 and ten years");
  if (!TimeoutPolicy_IsValid(o.timeout_policy()))
    return Status::invalid_argument("timeoutPolicy is not FAIL or CANCEL");
  if (o.timeout_ms() == 0 && o.timeout_policy() != TIMEOUT_POLICY_UNSPECIFIED)
    return Status::invalid_argument("timeoutPolicy is set without a timeout");
  if (!IdReusePolicy_IsValid(o.id_reuse_policy()))
    return Status::invalid_argument("idReusePolicy is not a known policy");
  if (o.request_id().size() > kNameBytesMax)
    return Status::invalid_argument("requestId is longer than " + std::to_string(kNameBytesMax) +
                                    " bytes");
  return Status::ok();
}

}  // namespace dex::flow
