// Flow declarations: validation, defaults and lookups (docs/flow-rules.md,
// "Declarations"). Pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "dex/flow.pb.h"

namespace dex::flow {

// Defaults of a method's options (docs/flow-rules.md, "Defaults").
inline constexpr int64_t kAttemptTimeoutDefaultMs = 60'000;
inline constexpr int64_t kRetryInitialIntervalDefaultMs = 1'000;
inline constexpr double kRetryBackoffCoefficientDefault = 2.0;
inline constexpr int64_t kRetryMaximumIntervalFactor = 100;  // x the initial interval
inline constexpr uint32_t kRetryMaximumAttemptsDefault = 3;

// Checks a declaration as a Worker sent it; the message names the bad field.
Status validate_declaration(const FlowDeclaration& declaration);
// The same declaration with every default filled in (validated first).
FlowDeclaration with_defaults(FlowDeclaration declaration);
// A method's options with every default filled in; a durability the options
// leave unset is `durability_default` (a run's FlowConfig's, else SYNC).
MethodOptions method_with_defaults(MethodOptions options, Durability durability_default = SYNC);
// The timeout handler's options with the defaults filled in (a method's, but
// no failure policy: a handler that fails for good ends the run TIMED_OUT).
// Whatever version stored the declaration.
MethodOptions timeout_handler_options(const FlowDeclaration& declaration,
                                      Durability durability_default = SYNC);
// A retry policy (a method's, or a start's Flow retry policy); `where` prefixes
// the field names in the message.
Status validate_retry(const RetryPolicy& retry, const std::string& where);
// The policy with every default filled in (as a method's: 1 s, x2, 100 x
// initial, 3 attempts).
RetryPolicy retry_with_defaults(RetryPolicy retry);
// The backoff before attempt `next` (>= 2): initial * coefficient^(next - 2),
// capped at the maximum interval.
int64_t retry_backoff_ms(const RetryPolicy& retry, uint32_t next);
// Checks options given per execution (a movement's override).
Status validate_step_options(const FlowDeclaration& declaration, const StepOptions& options,
                             std::string_view where);

const StepDeclaration* find_step(const FlowDeclaration& declaration, std::string_view step_type);
const ChannelDeclaration* find_channel(const FlowDeclaration& declaration, std::string_view name);
const AttributeDeclaration* find_attribute(const FlowDeclaration& declaration,
                                           std::string_view key);
const RpcDeclaration* find_rpc(const FlowDeclaration& declaration, std::string_view name);

// A method's or RPC's lock keys: names, at most kLockKeysMax, none twice.
Status validate_lock_keys(const google::protobuf::RepeatedPtrField<std::string>& keys,
                          const std::string& where);

// A run's FlowConfig: the declaration's, each field the start sets overriding it.
FlowConfig effective_config(const FlowConfig& declared, const FlowConfig& start);
// FlowConfig (docs/flow-rules.md, "FlowConfig"). The declaration's config
// with its Attribute Store from either field (FlowDeclaration.attribute_store
// or config.attribute_store), and the start's likewise.
FlowConfig declared_config(const FlowDeclaration& declaration);
FlowConfig start_config(const StartOptions& options);
// Checks a config as a declaration, a start or an update gives it; `where`
// prefixes the field names. `store` is the same level's old attribute_store
// field: when both are set they must agree.
Status validate_config(const FlowConfig& config, std::string_view store, const std::string& where);
// A config's durability for methods that set none (unset: SYNC), and whether
// its runs' active Step types are indexed (unset: yes).
Durability default_durability(const FlowConfig& config);
bool indexes_active_step_types(const FlowConfig& config);
// The config with those defaults written out, as GetFlowState shows it.
FlowConfig config_with_defaults(FlowConfig config);
// FlowConfig's field names, as UpdateFlowConfig's clear_fields names them.
inline constexpr std::string_view kFlowConfigFields[] = {
    "continue_as_new_after_events", "continue_as_new_after_bytes", "default_durability",
    "attribute_store", "index_active_step_types"};

// A name (Flow ID, type, Step type, Channel, instance key): non-empty, at most
// kNameBytesMax bytes, no control characters.
Status validate_name(std::string_view what, std::string_view name);

}  // namespace dex::flow
