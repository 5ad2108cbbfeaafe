// dexcli's JSON output of the admin calls, mapped by hand so that node epochs
// stay decimal strings and durations read as in config files ("5s"). Keys are
// camelCase. The flow commands' output is proto_json.h's.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "dex/api.pb.h"

namespace dex::cli {

nlohmann::ordered_json to_json(const DescribeResponse& describe);
// expectedNodeId, expectedNodeEpoch, nodeId, releasedNodeEpoch,
// leaseReacquisitionHoldOff ("5s"), leaseHolderAfterStepDown,
// leaseHolderUnknownDetail (only when unknown), activeNodeEpoch and
// activeHolderProcessId (only when known). Epochs stay decimal strings.
nlohmann::ordered_json to_json(const StepDownResponse& response);

// TAKEN_OVER_BY_ANOTHER_PROCESS → "takenOverByAnotherProcess",
// TAKEN_BACK_BY_THIS_PROCESS → "takenBackByThisProcess", anything else
// (UNKNOWN, or a value this dexcli does not know) → "unknown".
std::string lease_holder_name(LeaseHolderAfterStepDown holder);

// JSON text as a JSON value; text that does not parse stays a string, and
// empty text is null.
nlohmann::ordered_json embed_json(const std::string& text);

}  // namespace dex::cli
