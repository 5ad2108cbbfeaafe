// Validation of what Workers and clients send, against a run's declaration
// (docs/flow-rules.md, "Refusals"). Pure. Every message names the bad input.
#pragma once

#include "common/status.h"
#include "dex/flow.pb.h"
#include "dex/flow_records.pb.h"

namespace dex::flow {

Status validate_payload(const char* what, const Payload& payload);
Status validate_publishes(const FlowDeclaration& declaration,
                          const google::protobuf::RepeatedPtrField<Publish>& publishes);
Status validate_decision(const FlowDeclaration& declaration, const StepDecision& decision);
// A method result of `method` (the wait, locals, decision, publishes).
Status validate_method_result(const FlowDeclaration& declaration, const MethodResult& result);
Status validate_start_options(const StartOptions& options);

}  // namespace dex::flow
