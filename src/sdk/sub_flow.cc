// Start options, SubFlow conditions and what Execute reads of their children
// (start_options.h, sub_flow.h; the Context accessors declared in flow.h).
#include "sdk/sub_flow.h"

#include "sdk/flow.h"

namespace dex {

// ---------------------------------------------------------------- start options

flow::RetryPolicy RetryPolicy::proto() const {
  flow::RetryPolicy p;
  p.set_initial_interval_ms(initial_interval.count());
  p.set_backoff_coefficient(backoff_coefficient);
  p.set_maximum_interval_ms(maximum_interval.count());
  if (maximum_attempts) p.set_maximum_attempts(*maximum_attempts);
  p.set_total_duration_ms(total_duration.count());
  return p;
}

StartOptions& StartOptions::timeout(std::chrono::milliseconds d, flow::TimeoutPolicy policy) {
  proto.set_timeout_ms(d.count());
  proto.set_timeout_policy(policy);
  return *this;
}

StartOptions& StartOptions::start_delay(std::chrono::milliseconds d) {
  proto.set_start_delay_ms(d.count());
  return *this;
}

StartOptions& StartOptions::retry(const RetryPolicy& policy) {
  *proto.mutable_retry_policy() = policy.proto();
  return *this;
}

StartOptions& StartOptions::request_id(std::string id) {
  proto.set_request_id(std::move(id));
  return *this;
}

StartOptions& StartOptions::id_reuse(flow::IdReusePolicy policy) {
  proto.set_id_reuse_policy(policy);
  return *this;
}

// ---------------------------------------------------------------- conditions

Condition SubFlow::start(std::string flow_type, nlohmann::json input,
                         const SubFlowOptions& options) {
  const flow::StartOptions& o = options.start.proto;
  const std::string what = "the SubFlow of Flow type '" + flow_type + "'";
  if (!o.request_id().empty())
    throw FlowFailure(what + " sets a request ID: the server derives a SubFlow's", true);
  if (o.id_reuse_policy() != flow::ID_REUSE_POLICY_UNSPECIFIED || o.ignore_already_started())
    throw FlowFailure(what + " sets an ID reuse policy: a SubFlow takes SubFlowOptions::reuse",
                      true);
  flow::Condition c;
  auto* s = c.mutable_sub_flow();
  s->set_flow_type(std::move(flow_type));
  *s->mutable_input() = to_payload(input);
  *s->mutable_options() = o;
  switch (options.reuse) {
    case SubFlowReuse::kRestartIfPreviousExitsAbnormally:
      s->set_reuse_policy(flow::SUB_FLOW_RESTART_IF_PREVIOUS_EXITS_ABNORMALLY);
      break;
    case SubFlowReuse::kAttach:
      s->set_reuse_policy(flow::SUB_FLOW_ATTACH);
      break;
    case SubFlowReuse::kAlwaysRestart:
      s->set_reuse_policy(flow::SUB_FLOW_ALWAYS_RESTART);
      break;
  }
  return Condition(std::move(c));
}

// ---------------------------------------------------------------- results

const nlohmann::json& SubFlowResult::output() const {
  static const nlohmann::json kNull;
  return outputs.empty() ? kNull : outputs.back().output;
}

namespace {

SubFlowResult typed(const flow::ConditionResult& c) {
  const flow::SubFlowResult& r = c.sub_flow();
  SubFlowResult out;
  out.condition_index = c.index();
  out.condition_id = c.condition_id();
  out.fired = c.fired();
  out.flow_id = r.flow_id();
  out.run_id = r.run_id();
  out.status = r.status();
  out.close_reason = r.close_reason();
  for (const auto& o : r.outputs()) {  // bounded by the child's result
    FlowOutput typed_output{o.step_type(), o.step_execution_id(), nullptr};
    try {
      typed_output.output = from_payload(o.output());
    } catch (const nlohmann::json::exception& e) {
      throw FlowFailure("the output of SubFlow '" + r.flow_id() + "' (" + o.step_execution_id() +
                            ") is not valid JSON: " + e.what(),
                        true);
    }
    out.outputs.push_back(std::move(typed_output));
  }
  return out;
}

bool is_sub_flow(const flow::ConditionResult& c) {
  return c.condition().has_sub_flow() || c.has_sub_flow();
}

}  // namespace

SubFlowResult Context::sub_flow(uint32_t condition_index) const {
  for (const auto& c : task_.conditions()) {
    if (c.index() == condition_index && is_sub_flow(c)) return typed(c);
  }
  throw FlowFailure("Step '" + task_.step_type() + "': condition " +
                        std::to_string(condition_index) + " of its wait is not a SubFlow",
                    true);
}

SubFlowResult Context::sub_flow(const std::string& condition_id) const {
  for (const auto& c : task_.conditions()) {
    if (c.condition_id() == condition_id && is_sub_flow(c)) return typed(c);
  }
  throw FlowFailure(
      "Step '" + task_.step_type() + "': its wait has no SubFlow condition '" + condition_id + "'",
      true);
}

std::vector<SubFlowResult> Context::sub_flows() const {
  std::vector<SubFlowResult> out;
  for (const auto& c : task_.conditions()) {  // bounded by the wait's conditions
    if (is_sub_flow(c)) out.push_back(typed(c));
  }
  return out;
}

}  // namespace dex
