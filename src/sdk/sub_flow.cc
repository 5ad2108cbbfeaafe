// Start options, SubFlow conditions and what Execute reads of their children
// (start_options.h, sub_flow.h); Context's SubFlow accessors are in flow.cc.
#include "sdk/sub_flow.h"

#include "sdk/condition.h"

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

StartOptions& StartOptions::config(const flow::FlowConfig& config) {
  *proto.mutable_config() = config;
  return *this;
}
StartOptions& StartOptions::attribute_store(std::string name) {
  proto.set_attribute_store(std::move(name));
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

}  // namespace dex
