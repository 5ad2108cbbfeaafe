// dexcli's JSON output: API messages mapped by hand so that enums print as
// their names without the prefix ("COMPLETED"), node epochs as decimal
// strings, durations as in definition files ("200ms"), and flow and Step
// inputs and outputs as embedded JSON values rather than strings. Keys are
// camelCase; empty optional fields are left out.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "dex/api.pb.h"

namespace dex::cli {

nlohmann::ordered_json to_json(const FlowType& flow_type);
nlohmann::ordered_json to_json(const Flow& flow);
nlohmann::ordered_json to_json(const DescribeResponse& describe);
nlohmann::ordered_json to_json(const RegisterFlowTypeResponse& response);
nlohmann::ordered_json to_json(const ListFlowTypesResponse& response);
nlohmann::ordered_json to_json(const StartFlowResponse& response);
nlohmann::ordered_json to_json(const ListFlowsResponse& response);
nlohmann::ordered_json to_json(const CancelFlowResponse& response);
nlohmann::ordered_json to_json(const WaitFlowResponse& response);
// expectedNodeId, expectedNodeEpoch, nodeId, releasedNodeEpoch,
// leaseReacquisitionHoldOff ("5s"), leaseHolderAfterStepDown,
// leaseHolderUnknownDetail (only when unknown), activeNodeEpoch and
// activeHolderProcessId (only when known). Epochs stay decimal strings.
nlohmann::ordered_json to_json(const StepDownResponse& response);

// TAKEN_OVER_BY_ANOTHER_PROCESS → "takenOverByAnotherProcess",
// TAKEN_BACK_BY_THIS_PROCESS → "takenBackByThisProcess", anything else
// (UNKNOWN, or a value this dexcli does not know) → "unknown".
std::string lease_holder_name(LeaseHolderAfterStepDown holder);

// "RUNNING" → FLOW_STATUS_RUNNING (any case); nullopt for anything else.
std::optional<FlowStatus> parse_flow_status(std::string_view name);

// JSON text as a JSON value; text that does not parse stays a string, and
// empty text is null.
nlohmann::ordered_json embed_json(const std::string& text);

}  // namespace dex::cli
