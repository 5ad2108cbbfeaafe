#include "flow/declaration.h"

#include <cmath>
#include <set>

#include <google/protobuf/util/message_differencer.h>

#include "flow/limits.h"

namespace dex::flow {
namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

Status check_duration(int64_t ms, const std::string& what) {
  if (ms < 0) return Status::invalid_argument(what + " must not be negative");
  if (ms > kDurationMsMax) return Status::invalid_argument(what + " is longer than ten years");
  return Status::ok();
}

Status validate_reads(const FlowDeclaration& decl,
                      const google::protobuf::RepeatedPtrField<std::string>& reads,
                      const std::string& where) {
  std::set<std::string_view> seen;
  for (const auto& key : reads) {  // bounded by the request's size
    if (find_attribute(decl, key) == nullptr)
      return Status::invalid_argument(where + " reads Attribute " + quoted(key) +
                                      ", which Flow type " + quoted(decl.flow_type()) +
                                      " does not declare");
    if (!seen.insert(key).second)
      return Status::invalid_argument(where + " reads Attribute " + quoted(key) + " twice");
  }
  return Status::ok();
}

Status validate_method(const FlowDeclaration& decl, const MethodOptions& options, bool execute,
                       const std::string& where) {
  if (auto s = validate_lock_keys(options.lock_keys(), where + ".lockKeys"); !s.is_ok()) return s;
  if (auto s = check_duration(options.attempt_timeout_ms(), where + ".attemptTimeoutMs");
      !s.is_ok())
    return s;
  if (auto s = check_duration(options.heartbeat_timeout_ms(), where + ".heartbeatTimeoutMs");
      !s.is_ok())
    return s;
  if (!Durability_IsValid(options.durability()))
    return Status::invalid_argument(where + ".durability is not SYNC or ASYNC");
  if (auto s = validate_retry(options.retry(), where); !s.is_ok()) return s;
  switch (options.failure_policy()) {
    case FAILURE_POLICY_UNSPECIFIED:
    case FAIL_FLOW:
      if (!options.recovery_step_type().empty())
        return Status::invalid_argument(where +
                                        ".recoveryStepType is set but the failure policy is not "
                                        "PROCEED_TO_STEP");
      return Status::ok();
    case PROCEED_TO_EXECUTE:
      if (execute)
        return Status::invalid_argument(
            where + ".failurePolicy PROCEED_TO_EXECUTE applies to WaitFor only");
      return Status::ok();
    case PROCEED_TO_STEP:
      if (!execute)
        return Status::invalid_argument(where +
                                        ".failurePolicy PROCEED_TO_STEP applies to Execute only");
      if (find_step(decl, options.recovery_step_type()) == nullptr)
        return Status::invalid_argument(
            where + ".recoveryStepType " + quoted(options.recovery_step_type()) +
            " is not a declared Step type of Flow type " + quoted(decl.flow_type()));
      return Status::ok();
    default:
      return Status::invalid_argument(where + ".failurePolicy is not a known policy");
  }
}

Status validate_timeout_handler(const FlowDeclaration& decl, const std::string& type) {
  if (!decl.has_timeout_handler()) {
    if (decl.has_on_timeout())
      return Status::invalid_argument(type +
                                      " gives onTimeout options but hasTimeoutHandler is false");
    return Status::ok();
  }
  const std::string where = type + " onTimeout";
  const MethodOptions& o = decl.on_timeout().options();
  if (!o.lock_keys().empty())
    return Status::invalid_argument(where +
                                    ".options.lockKeys: the timeout handler takes no lock keys");
  if (o.failure_policy() != FAILURE_POLICY_UNSPECIFIED && o.failure_policy() != FAIL_FLOW)
    return Status::invalid_argument(
        where + ".options.failurePolicy: a timeout handler that fails ends the run TIMED_OUT");
  if (auto s = validate_method(decl, o, true, where + ".options"); !s.is_ok()) return s;
  return validate_reads(decl, decl.on_timeout().attribute_reads(), where);
}

}  // namespace

Status validate_retry(const RetryPolicy& retry, const std::string& where) {
  for (auto [ms, name] : {std::pair{retry.initial_interval_ms(), ".retry.initialIntervalMs"},
                          {retry.maximum_interval_ms(), ".retry.maximumIntervalMs"},
                          {retry.total_duration_ms(), ".retry.totalDurationMs"}}) {
    if (auto s = check_duration(ms, where + name); !s.is_ok()) return s;
  }
  if (retry.initial_interval_ms() * kRetryMaximumIntervalFactor > kDurationMsMax &&
      retry.maximum_interval_ms() == 0)
    return Status::invalid_argument(where +
                                    ".retry.initialIntervalMs is too long without a "
                                    "maximumIntervalMs");
  if (retry.initial_interval_ms() < 0)
    return Status::invalid_argument(where + ".retry.initialIntervalMs must not be negative");
  if (retry.backoff_coefficient() != 0 && !(retry.backoff_coefficient() >= 1.0))
    return Status::invalid_argument(where + ".retry.backoffCoefficient must be at least 1");
  if (retry.maximum_interval_ms() < 0)
    return Status::invalid_argument(where + ".retry.maximumIntervalMs must not be negative");
  if (retry.maximum_interval_ms() > 0 && retry.initial_interval_ms() > 0 &&
      retry.maximum_interval_ms() < retry.initial_interval_ms())
    return Status::invalid_argument(where +
                                    ".retry.maximumIntervalMs must not be below initialIntervalMs");
  if (retry.total_duration_ms() < 0)
    return Status::invalid_argument(where + ".retry.totalDurationMs must not be negative");
  return Status::ok();
}

Status validate_name(std::string_view what, std::string_view name) {
  if (name.empty()) return Status::invalid_argument(std::string(what) + " is empty");
  if (name.size() > kNameBytesMax)
    return Status::invalid_argument(std::string(what) + " is longer than " +
                                    std::to_string(kNameBytesMax) + " bytes");
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f)
      return Status::invalid_argument(std::string(what) + " contains a control character");
  }
  return Status::ok();
}

Status validate_lock_keys(const google::protobuf::RepeatedPtrField<std::string>& keys,
                          const std::string& where) {
  if (static_cast<size_t>(keys.size()) > kLockKeysMax)
    return Status::invalid_argument(where + " has more than " + std::to_string(kLockKeysMax) +
                                    " keys");
  std::set<std::string_view> seen;
  for (int i = 0; i < keys.size(); ++i) {  // bounded by kLockKeysMax
    if (auto s = validate_name(where + "[" + std::to_string(i) + "]", keys[i]); !s.is_ok())
      return s;
    if (!seen.insert(keys[i]).second)
      return Status::invalid_argument(where + " names " + quoted(keys[i]) + " twice");
  }
  return Status::ok();
}

const AttributeDeclaration* find_attribute(const FlowDeclaration& declaration,
                                           std::string_view key) {
  for (const auto& a : declaration.attributes()) {  // bounded by kAttributeKeysMax
    if (a.key() == key) return &a;
  }
  return nullptr;
}

const RpcDeclaration* find_rpc(const FlowDeclaration& declaration, std::string_view name) {
  for (const auto& r : declaration.rpcs()) {  // bounded by kRpcTypesMax
    if (r.name() == name) return &r;
  }
  return nullptr;
}

const StepDeclaration* find_step(const FlowDeclaration& declaration, std::string_view step_type) {
  for (const auto& step : declaration.steps()) {  // bounded by kStepTypesMax
    if (step.step_type() == step_type) return &step;
  }
  return nullptr;
}

const ChannelDeclaration* find_channel(const FlowDeclaration& declaration, std::string_view name) {
  for (const auto& channel : declaration.channels()) {  // bounded by kChannelsMax
    if (channel.name() == name) return &channel;
  }
  return nullptr;
}

Status validate_step_options(const FlowDeclaration& declaration, const StepOptions& options,
                             std::string_view where) {
  if (auto s =
          validate_method(declaration, options.wait_for(), false, std::string(where) + ".waitFor");
      !s.is_ok())
    return s;
  return validate_method(declaration, options.execute(), true, std::string(where) + ".execute");
}

Status validate_declaration(const FlowDeclaration& decl) {
  if (auto s = validate_name("flowType", decl.flow_type()); !s.is_ok()) return s;
  const std::string type = "Flow type " + quoted(decl.flow_type());
  if (static_cast<size_t>(decl.steps_size()) > kStepTypesMax)
    return Status::invalid_argument(type + " declares more than " + std::to_string(kStepTypesMax) +
                                    " Step types");
  if (static_cast<size_t>(decl.channels_size()) > kChannelsMax)
    return Status::invalid_argument(type + " declares more than " + std::to_string(kChannelsMax) +
                                    " Channels");
  if (static_cast<size_t>(decl.attributes_size()) > kAttributeKeysMax)
    return Status::invalid_argument(type + " declares more than " +
                                    std::to_string(kAttributeKeysMax) + " Attributes");
  if (static_cast<size_t>(decl.rpcs_size()) > kRpcTypesMax)
    return Status::invalid_argument(type + " declares more than " + std::to_string(kRpcTypesMax) +
                                    " RPCs");
  std::set<std::string> attributes;
  for (int i = 0; i < decl.attributes_size(); ++i) {  // bounded by kAttributeKeysMax
    const auto& a = decl.attributes(i);
    const std::string where = type + " attributes[" + std::to_string(i) + "]";
    if (auto s = validate_name(where + ".key", a.key()); !s.is_ok()) return s;
    if (!attributes.insert(a.key()).second)
      return Status::invalid_argument(type + " declares Attribute " + quoted(a.key()) + " twice");
    if (a.type() == ATTRIBUTE_TYPE_UNSPECIFIED || !AttributeType_IsValid(a.type()))
      return Status::invalid_argument(type + " declares Attribute " + quoted(a.key()) +
                                      " without a known type");
    if (a.sync() && a.is_map())
      return Status::invalid_argument(type + " declares AttributeMap " + quoted(a.key()) +
                                      " as synced: only plain Attributes sync (one column each)");
  }
  if (!decl.attribute_store().empty()) {
    if (auto s = validate_name(type + " attributeStore", decl.attribute_store()); !s.is_ok())
      return s;
  }
  if (auto s = validate_config(decl.config(), decl.attribute_store(), type + " config"); !s.is_ok())
    return s;
  std::set<std::string> rpcs;
  for (int i = 0; i < decl.rpcs_size(); ++i) {  // bounded by kRpcTypesMax
    const auto& r = decl.rpcs(i);
    const std::string where = type + " rpcs[" + std::to_string(i) + "]";
    if (auto s = validate_name(where + ".name", r.name()); !s.is_ok()) return s;
    if (!rpcs.insert(r.name()).second)
      return Status::invalid_argument(type + " declares RPC " + quoted(r.name()) + " twice");
    const std::string rpc = type + " RPC " + quoted(r.name());
    if (auto s = validate_lock_keys(r.lock_keys(), rpc + " lockKeys"); !s.is_ok()) return s;
    if (auto s = validate_reads(decl, r.attribute_reads(), rpc); !s.is_ok()) return s;
  }
  std::set<std::string> seen;
  for (int i = 0; i < decl.steps_size(); ++i) {  // bounded by kStepTypesMax
    const auto& step = decl.steps(i);
    const std::string where = type + " steps[" + std::to_string(i) + "]";
    if (auto s = validate_name(where + ".stepType", step.step_type()); !s.is_ok()) return s;
    if (!seen.insert(step.step_type()).second)
      return Status::invalid_argument(type + " declares Step type " + quoted(step.step_type()) +
                                      " twice");
    if (auto s = validate_step_options(decl, step.options(), where + ".options"); !s.is_ok())
      return s;
    if (auto s = validate_reads(decl, step.attribute_reads(),
                                type + " Step type " + quoted(step.step_type()));
        !s.is_ok())
      return s;
  }
  if (auto s = validate_timeout_handler(decl, type); !s.is_ok()) return s;
  if (!decl.start_step_type().empty() && find_step(decl, decl.start_step_type()) == nullptr)
    return Status::invalid_argument(type + ": the start Step type " +
                                    quoted(decl.start_step_type()) + " is not declared");
  std::set<std::string> channels;
  for (int i = 0; i < decl.channels_size(); ++i) {  // bounded by kChannelsMax
    const auto& channel = decl.channels(i);
    if (auto s = validate_name(type + " channels[" + std::to_string(i) + "].name", channel.name());
        !s.is_ok())
      return s;
    if (!channels.insert(channel.name()).second)
      return Status::invalid_argument(type + " declares Channel " + quoted(channel.name()) +
                                      " twice");
  }
  return Status::ok();
}

RetryPolicy retry_with_defaults(RetryPolicy retry) {
  if (retry.initial_interval_ms() == 0)
    retry.set_initial_interval_ms(kRetryInitialIntervalDefaultMs);
  if (retry.backoff_coefficient() == 0)
    retry.set_backoff_coefficient(kRetryBackoffCoefficientDefault);
  if (retry.maximum_interval_ms() == 0)
    retry.set_maximum_interval_ms(retry.initial_interval_ms() * kRetryMaximumIntervalFactor);
  if (!retry.has_maximum_attempts()) retry.set_maximum_attempts(kRetryMaximumAttemptsDefault);
  return retry;
}

MethodOptions method_with_defaults(MethodOptions options, Durability durability_default) {
  if (options.attempt_timeout_ms() == 0) options.set_attempt_timeout_ms(kAttemptTimeoutDefaultMs);
  *options.mutable_retry() = retry_with_defaults(options.retry());
  if (options.failure_policy() == FAILURE_POLICY_UNSPECIFIED) options.set_failure_policy(FAIL_FLOW);
  // SYNC unless asked otherwise: a start that is durable before the Worker
  // gets it never runs twice with one number (docs/flow-rules.md, "Defaults").
  // A run's FlowConfig may choose another default (docs/flow-rules.md, "FlowConfig").
  if (options.durability() == DURABILITY_UNSPECIFIED)
    options.set_durability(durability_default == DURABILITY_UNSPECIFIED ? SYNC
                                                                        : durability_default);
  return options;
}

MethodOptions timeout_handler_options(const FlowDeclaration& declaration,
                                      Durability durability_default) {
  MethodOptions options =
      method_with_defaults(declaration.on_timeout().options(), durability_default);
  options.clear_failure_policy();
  return options;
}

namespace {

// Stored with every default but the durability: a method that sets none takes
// its run's FlowConfig's default when an execution of it is created.
MethodOptions stored_with_defaults(const MethodOptions& declared) {
  MethodOptions options = method_with_defaults(declared);
  options.set_durability(declared.durability());
  return options;
}

}  // namespace

FlowDeclaration with_defaults(FlowDeclaration declaration) {
  for (auto& step : *declaration.mutable_steps()) {
    *step.mutable_options()->mutable_wait_for() = stored_with_defaults(step.options().wait_for());
    *step.mutable_options()->mutable_execute() = stored_with_defaults(step.options().execute());
  }
  if (declaration.has_timeout_handler()) {
    const Durability declared = declaration.on_timeout().options().durability();
    MethodOptions options = timeout_handler_options(declaration);
    options.set_durability(declared);
    *declaration.mutable_on_timeout()->mutable_options() = std::move(options);
  }
  return declaration;
}

int64_t retry_backoff_ms(const RetryPolicy& retry, uint32_t next) {
  double backoff = static_cast<double>(retry.initial_interval_ms()) *
                   std::pow(retry.backoff_coefficient(), static_cast<double>(next - 2));
  const auto cap = static_cast<double>(retry.maximum_interval_ms());
  if (!(backoff <= cap)) backoff = cap;  // also catches overflow to inf
  return static_cast<int64_t>(backoff);
}

FlowConfig effective_config(const FlowConfig& declared, const FlowConfig& start) {
  FlowConfig out = declared;
  if (start.continue_as_new_after_events() > 0)
    out.set_continue_as_new_after_events(start.continue_as_new_after_events());
  if (start.continue_as_new_after_bytes() > 0)
    out.set_continue_as_new_after_bytes(start.continue_as_new_after_bytes());
  if (start.default_durability() != DURABILITY_UNSPECIFIED)
    out.set_default_durability(start.default_durability());
  if (!start.attribute_store().empty()) out.set_attribute_store(start.attribute_store());
  if (start.has_index_active_step_types())
    out.set_index_active_step_types(start.index_active_step_types());
  return out;
}

FlowConfig declared_config(const FlowDeclaration& declaration) {
  FlowConfig out = declaration.config();
  if (out.attribute_store().empty()) out.set_attribute_store(declaration.attribute_store());
  return out;
}

FlowConfig start_config(const StartOptions& options) {
  FlowConfig out = options.config();
  if (out.attribute_store().empty()) out.set_attribute_store(options.attribute_store());
  return out;
}

Status validate_config(const FlowConfig& config, std::string_view store, const std::string& where) {
  if (!Durability_IsValid(config.default_durability()))
    return Status::invalid_argument(where + ".defaultDurability is not SYNC or ASYNC");
  if (!config.attribute_store().empty()) {
    if (auto s = validate_name(where + ".attributeStore", config.attribute_store()); !s.is_ok())
      return s;
    if (!store.empty() && store != config.attribute_store())
      return Status::invalid_argument(
          where + ".attributeStore " + quoted(config.attribute_store()) +
          " disagrees with attributeStore " + quoted(store) +
          ": both name the Attribute Store, so set one of them (or both the same)");
  }
  return Status::ok();
}

Durability default_durability(const FlowConfig& config) {
  return config.default_durability() == DURABILITY_UNSPECIFIED ? SYNC : config.default_durability();
}

bool indexes_active_step_types(const FlowConfig& config) {
  return !config.has_index_active_step_types() || config.index_active_step_types();
}

FlowConfig config_with_defaults(FlowConfig config) {
  config.set_default_durability(default_durability(config));
  config.set_index_active_step_types(indexes_active_step_types(config));
  return config;
}

}  // namespace dex::flow
