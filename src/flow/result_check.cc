#include "flow/result_check.h"

#include <string>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <set>

#include "common/json_value.h"
#include "flow/declaration.h"
#include "flow/limits.h"

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

Status validate_channel(const FlowDeclaration& decl, const ChannelCondition& c,
                        const std::string& where) {
  const ChannelDeclaration* channel = find_channel(decl, c.channel());
  if (channel == nullptr)
    return Status::invalid_argument(where + " names Channel " + quoted(c.channel()) +
                                    ", which Flow type " + quoted(decl.flow_type()) +
                                    " does not declare");
  if (channel->is_map()) {
    if (auto s = validate_name(where + " instanceKey of ChannelMap " + quoted(c.channel()),
                               c.instance_key());
        !s.is_ok())
      return s;
  } else if (!c.instance_key().empty()) {
    return Status::invalid_argument(where + " gives an instanceKey, but " + quoted(c.channel()) +
                                    " is a Channel, not a ChannelMap");
  }
  switch (c.match()) {
    case FOR_ONE:
      return Status::ok();
    case FOR_N:
    case AT_LEAST:
      if (c.min() < 1) return Status::invalid_argument(where + " needs n >= 1");
      return Status::ok();
    case AT_MOST:
      if (c.max() < 1) return Status::invalid_argument(where + " needs n >= 1");
      return Status::ok();
    case AT_LEAST_AT_MOST:
      if (c.max() < 1 || c.min() > c.max())
        return Status::invalid_argument(where + " needs 0 <= min <= max and max >= 1");
      return Status::ok();
    default:
      return Status::invalid_argument(where +
                                      " has no match kind (ForOne, ForN, AtLeast, "
                                      "AtMost, AtLeastAtMost)");
  }
}

}  // namespace

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

namespace {

const char* type_name(AttributeType type) {
  switch (type) {
    case ATTRIBUTE_STRING:
      return "STRING";
    case ATTRIBUTE_INT64:
      return "INT64";
    case ATTRIBUTE_DOUBLE:
      return "DOUBLE";
    case ATTRIBUTE_BOOL:
      return "BOOL";
    case ATTRIBUTE_DATETIME:
      return "DATETIME";
    case ATTRIBUTE_JSON:
      return "JSON";
    case ATTRIBUTE_BYTES:
      return "BYTES";
    default:
      return "UNSPECIFIED";
  }
}

AttributeType type_of(const AttributeValue& v) {
  switch (v.value_case()) {
    case AttributeValue::kStringValue:
      return ATTRIBUTE_STRING;
    case AttributeValue::kInt64Value:
      return ATTRIBUTE_INT64;
    case AttributeValue::kDoubleValue:
      return ATTRIBUTE_DOUBLE;
    case AttributeValue::kBoolValue:
      return ATTRIBUTE_BOOL;
    case AttributeValue::kDatetimeUnixMs:
      return ATTRIBUTE_DATETIME;
    case AttributeValue::kJsonValue:
      return ATTRIBUTE_JSON;
    case AttributeValue::kBytesValue:
      return ATTRIBUTE_BYTES;
    default:
      return ATTRIBUTE_TYPE_UNSPECIFIED;
  }
}

Status validate_keyword_array(const AttributeValue& v, const std::string& where,
                              const std::string& what) {
  google::protobuf::ListValue list;
  auto parsed = google::protobuf::util::JsonStringToMessage(v.json_value(), &list);
  if (!parsed.ok())
    return Status::invalid_argument(
        where + ": the value of " + what +
        ", indexed KEYWORD_ARRAY, is not a JSON array: " + std::string(parsed.message()));
  for (const auto& item : list.values())  // bounded by the value's size
    if (!item.has_string_value())
      return Status::invalid_argument(where + ": the value of " + what +
                                      ", indexed KEYWORD_ARRAY, holds an element that is not a "
                                      "string");
  return Status::ok();
}

Status validate_attribute(const FlowDeclaration& decl, const Attribute& a,
                          const std::string& where) {
  const AttributeDeclaration* d = find_attribute(decl, a.key());
  if (d == nullptr)
    return Status::invalid_argument(where + " writes Attribute " + quoted(a.key()) +
                                    ", which Flow type " + quoted(decl.flow_type()) +
                                    " does not declare");
  const std::string what = (d->is_map() ? "AttributeMap " : "Attribute ") + quoted(a.key());
  if (d->is_map()) {
    if (auto s = validate_name(where + " instanceKey of " + what, a.instance_key()); !s.is_ok())
      return s;
  } else if (!a.instance_key().empty()) {
    return Status::invalid_argument(where + " gives an instance key, but " + quoted(a.key()) +
                                    " is an Attribute, not an AttributeMap");
  }
  if (deletes(a)) return Status::ok();
  const AttributeValue& v = a.value();
  if (type_of(v) != d->type())
    return Status::invalid_argument(where + " writes a " + type_name(type_of(v)) + " value to " +
                                    what + ", which is declared " + type_name(d->type()));
  size_t bytes = 0;
  if (v.has_string_value()) bytes = v.string_value().size();
  if (v.has_json_value()) bytes = v.json_value().size();
  if (v.has_bytes_value()) bytes = v.bytes_value().size();
  if (bytes > kPayloadBytesMax)
    return Status::invalid_argument(where + ": the value of " + what + " is " +
                                    std::to_string(bytes) + " bytes; the limit is " +
                                    std::to_string(kPayloadBytesMax));
  // A long value is a blob the engine wrote (docs/engine.md, "Large values"):
  // the oneof names its type with nothing in it, and the engine checked a
  // JSON value before it wrote the blob.
  if (v.has_blob()) {
    if (bytes != 0 || v.has_int64_value() || v.has_double_value() || v.has_bool_value() ||
        v.has_datetime_unix_ms())
      return Status::invalid_argument(where + ": the value of " + what +
                                      " has a blob reference beside a value held inline");
    return Status::ok();
  }
  if (v.has_json_value()) {
    // A JSON Attribute holds any JSON value (null included: a value, not a
    // delete); one indexed KEYWORD_ARRAY holds an array of strings, the
    // keywords its index takes (docs/search.md).
    if (auto s = check_json_value(v.json_value()); !s.is_ok())
      return Status::invalid_argument(where + ": the value of " + what + " is " + s.message());
    if (d->index().type() == INDEX_KEYWORD_ARRAY) return validate_keyword_array(v, where, what);
  }
  return Status::ok();
}

}  // namespace

bool deletes(const Attribute& write) {
  return !write.has_value() || write.value().value_case() == AttributeValue::VALUE_NOT_SET;
}

Status validate_attribute_writes(const FlowDeclaration& decl,
                                 const google::protobuf::RepeatedPtrField<Attribute>& writes,
                                 const std::string& where) {
  if (static_cast<size_t>(writes.size()) > kAttributesMax)
    return Status::invalid_argument(where + " has more than " + std::to_string(kAttributesMax) +
                                    " Attribute writes");
  for (int i = 0; i < writes.size(); ++i) {  // bounded by kAttributesMax
    if (auto s = validate_attribute(decl, writes[i], where + "[" + std::to_string(i) + "]");
        !s.is_ok())
      return s;
  }
  return Status::ok();
}

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
  if (auto s = validate_attribute_writes(decl, r.attribute_writes(), "attributeWrites"); !s.is_ok())
    return s;
  if (r.task().method() == RPC) {
    if (r.has_wait() || r.has_decision())
      return Status::invalid_argument("an RPC returns an output, not a wait or a decision");
    if (auto s = validate_payload("the RPC output", r.rpc().output()); !s.is_ok()) return s;
    return validate_movements(decl, r.rpc().next_steps(), "nextSteps");
  }
  const std::string what =
      r.task().method() == ON_TIMEOUT ? "the timeout handler" : "a Step method";
  if (r.has_rpc()) return Status::invalid_argument(what + " returns no RPC output");
  if (r.task().method() == WAIT_FOR) {
    if (r.has_decision()) return Status::invalid_argument("WaitFor returns a wait, not a decision");
    if (auto s = validate_payload("the locals", r.locals()); !s.is_ok()) return s;
    return validate_wait(decl, r.wait());
  }
  if (r.has_wait())
    return Status::invalid_argument(
        (r.task().method() == ON_TIMEOUT ? "the timeout handler" : "Execute") +
        std::string(" returns a decision, not a wait"));
  return validate_decision(decl, r.decision());
}

Status validate_start_options(const StartOptions& o) {
  if (o.timeout_ms() < 0 || o.timeout_ms() > kDurationMsMax)
    return Status::invalid_argument("timeout must be between 0 and ten years");
  if (o.start_delay_ms() < 0 || o.start_delay_ms() > kDurationMsMax)
    return Status::invalid_argument("startDelay must be between 0 and ten years");
  if (!TimeoutPolicy_IsValid(o.timeout_policy()))
    return Status::invalid_argument("timeoutPolicy is not FAIL, CANCEL or HANDLER");
  if (o.timeout_ms() == 0 && o.timeout_policy() != TIMEOUT_POLICY_UNSPECIFIED)
    return Status::invalid_argument("timeoutPolicy is set without a timeout");
  if (!IdReusePolicy_IsValid(o.id_reuse_policy()))
    return Status::invalid_argument("idReusePolicy is not a known policy");
  if (!o.attribute_store().empty()) {
    if (auto s = validate_name("attributeStore", o.attribute_store()); !s.is_ok()) return s;
  }
  if (auto s = validate_config(o.config(), o.attribute_store(), "config"); !s.is_ok()) return s;
  if (o.request_id().size() > kNameBytesMax)
    return Status::invalid_argument("requestId is longer than " + std::to_string(kNameBytesMax) +
                                    " bytes");
  if (o.has_retry_policy()) {
    if (auto s = validate_retry(o.retry_policy(), "retryPolicy"); !s.is_ok()) return s;
  }
  return Status::ok();
}

Status validate_start_for(const FlowDeclaration& declaration, const StartOptions& o) {
  if (o.timeout_policy() == TIMEOUT_HANDLER && !declaration.has_timeout_handler())
    return Status::invalid_argument(
        "timeoutPolicy HANDLER needs a timeout handler, and Flow type '" + declaration.flow_type() +
        "' declares none");
  return Status::ok();
}

Status validate_sub_flow(const SubFlowCondition& c, const std::string& where) {
  if (auto s = validate_name(where + " flowType", c.flow_type()); !s.is_ok()) return s;
  if (auto s = validate_payload("the SubFlow's input", c.input()); !s.is_ok()) return s;
  if (auto s = validate_start_options(c.options()); !s.is_ok())
    return Status::invalid_argument(where + " options: " + s.message());
  if (c.options().id_reuse_policy() != ID_REUSE_POLICY_UNSPECIFIED ||
      !c.options().request_id().empty() || c.options().ignore_already_started())
    return Status::invalid_argument(
        where +
        " options set idReusePolicy, requestId or ignoreAlreadyStarted; a SubFlow uses its "
        "reusePolicy and a derived request ID instead");
  if (!SubFlowReusePolicy_IsValid(c.reuse_policy()))
    return Status::invalid_argument(where + " reusePolicy is not a known policy");
  return Status::ok();
}

Status validate_wait(const FlowDeclaration& decl, const Wait& wait) {
  if (wait.kind() == SKIP) {
    if (wait.conditions_size() != 0 || wait.combinations_size() != 0)
      return Status::invalid_argument("a skipped wait has no conditions");
    return Status::ok();
  }
  if (wait.kind() != ANY_OF && wait.kind() != ALL_OF && wait.kind() != ANY_COMBINATION_OF)
    return Status::invalid_argument(
        "the wait has no kind (AnyOf, AllOf, AnyCombinationOf or skip)");
  if (wait.conditions_size() == 0)
    return Status::invalid_argument(
        "the wait has no conditions (return skip to run Execute "
        "at once)");
  if (static_cast<size_t>(wait.conditions_size()) > kConditionsMax)
    return Status::invalid_argument("the wait has more than " + std::to_string(kConditionsMax) +
                                    " conditions");
  std::set<std::string> ids;
  for (int i = 0; i < wait.conditions_size(); ++i) {  // bounded by kConditionsMax
    const Condition& c = wait.conditions(i);
    const std::string where = "condition " + std::to_string(i);
    if (!c.condition_id().empty()) {
      if (auto s = validate_name(where + " conditionId", c.condition_id()); !s.is_ok()) return s;
      if (!ids.insert(c.condition_id()).second)
        return Status::invalid_argument(where + ": conditionId " + quoted(c.condition_id()) +
                                        " is used twice");
    } else if (wait.kind() == ANY_COMBINATION_OF) {
      return Status::invalid_argument(where +
                                      " has no conditionId; AnyCombinationOf needs one "
                                      "on every condition");
    }
    if (c.has_timer()) {
      if (c.timer().when_case() == TimerCondition::WHEN_NOT_SET)
        return Status::invalid_argument(where + " is a Timer without a duration or a time");
      if (c.timer().has_duration_ms() &&
          (c.timer().duration_ms() < 0 || c.timer().duration_ms() > kDurationMsMax))
        return Status::invalid_argument(where +
                                        " is a Timer whose duration is negative or "
                                        "longer than ten years");
    } else if (c.has_channel()) {
      if (auto s = validate_channel(decl, c.channel(), where); !s.is_ok()) return s;
    } else if (c.has_sub_flow()) {
      if (auto s = validate_sub_flow(c.sub_flow(), where + " (SubFlow)"); !s.is_ok()) return s;
    } else {
      return Status::invalid_argument(where +
                                      " is neither a Timer, a Channel nor a SubFlow condition");
    }
  }
  if (wait.kind() != ANY_COMBINATION_OF) {
    if (wait.combinations_size() != 0)
      return Status::invalid_argument("combinations are for AnyCombinationOf only");
    return Status::ok();
  }
  if (wait.combinations_size() == 0)
    return Status::invalid_argument("AnyCombinationOf has no combinations of condition IDs");
  for (int g = 0; g < wait.combinations_size(); ++g) {  // bounded by kConditionsMax in practice
    const auto& group = wait.combinations(g);
    if (group.condition_ids_size() == 0)
      return Status::invalid_argument("combination " + std::to_string(g) + " is empty");
    for (const auto& id : group.condition_ids()) {
      if (!ids.contains(id))
        return Status::invalid_argument("combination " + std::to_string(g) + " names conditionId " +
                                        quoted(id) + ", which no condition has");
    }
  }
  if (static_cast<size_t>(wait.combinations_size()) > kConditionsMax)
    return Status::invalid_argument("AnyCombinationOf has more than " +
                                    std::to_string(kConditionsMax) + " combinations");
  return Status::ok();
}

}  // namespace dex::flow
