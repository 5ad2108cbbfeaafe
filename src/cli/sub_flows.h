// A run's place in a SubFlow tree, for `dexcli flow inspect`: the parents it
// reports to (its description) and the children its waits started (its
// history's SUB_FLOW_STARTED and SUB_FLOW_CLOSED events).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "dex/flow_api.pb.h"

namespace dex::cli {

// One SubFlow condition's child, as the parent's history shows it.
struct SubFlowChild {
  std::string step_execution_id;
  uint32_t condition_index = 0;
  std::string flow_id;
  std::string run_id;     // the closed run (after Flow retries, the last), else the started one
  bool attached = false;  // the wait found the run (the reuse policy), rather than starting it
  flow::FlowStatus status = flow::FLOW_STATUS_UNSPECIFIED;  // set once it closed for the wait
  std::string reason;
};

// The children in the order their waits started them.
std::vector<SubFlowChild> sub_flow_children(const std::vector<flow::HistoryEvent>& events);

// {"parents": [{flowId, runId, stepExecutionId, conditionIndex}],
//  "children": [{stepExecutionId, conditionIndex, flowId, runId, attached, status?, reason?}]};
// a child with no status had not closed when its parent's wait ended or the history was read.
nlohmann::ordered_json sub_flows_json(const flow::FlowDescription& flow,
                                      const std::vector<SubFlowChild>& children);
// The same for people: "(none)" when the run has neither.
std::string sub_flows_table(const flow::FlowDescription& flow,
                            const std::vector<SubFlowChild>& children);

}  // namespace dex::cli
