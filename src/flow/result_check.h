// Validation of what Workers and clients send, against a run's declaration
// (docs/flow-rules.md, "Refusals"). Pure. Every message names the bad input.
#pragma once

#include <string>

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
// What depends on the Flow type: HANDLER needs a declared timeout handler.
Status validate_start_for(const FlowDeclaration& declaration, const StartOptions& options);
// A SubFlow condition as far as it can be judged without the store (the type's
// declaration and the derived IDs are the rules' to check).
Status validate_sub_flow(const SubFlowCondition& condition, const std::string& where);
// Checks a Wait that WaitFor returned against the run's declaration.
Status validate_wait(const FlowDeclaration& declaration, const Wait& wait);
// New Step executions (a GoTo's movements, an RPC's next Steps).
Status validate_movements(const FlowDeclaration& declaration,
                          const google::protobuf::RepeatedPtrField<StepMovement>& movements,
                          const std::string& where);
// Attribute writes (a result's, a client's, a start's initial values): each key
// declared, the instance key as its kind asks, the value of the declared type
// (a JSON value an object), at most kPayloadBytesMax. A write without a value
// deletes. The count limit (kAttributesMax) is the rules' to check: it depends
// on the stored state.
Status validate_attribute_writes(const FlowDeclaration& declaration,
                                 const google::protobuf::RepeatedPtrField<Attribute>& writes,
                                 const std::string& where);
// A write that deletes: no value.
bool deletes(const Attribute& write);

}  // namespace dex::flow
