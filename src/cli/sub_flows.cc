#include "cli/sub_flows.h"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "cli/proto_json.h"

namespace dex::cli {

namespace {

std::string status_text(flow::FlowStatus s) {
  return enum_value_text(*flow::FlowStatus_descriptor(), s);
}

}  // namespace

std::vector<SubFlowChild> sub_flow_children(const std::vector<flow::HistoryEvent>& events) {
  std::vector<SubFlowChild> out;
  std::map<std::pair<std::string, uint32_t>, size_t> at;  // (execution, condition) -> out index
  for (const flow::HistoryEvent& e : events) {            // bounded by the events given
    const auto key = std::pair(e.step_execution_id(), e.condition_index());
    if (e.kind() == flow::SUB_FLOW_STARTED) {
      SubFlowChild c;
      c.step_execution_id = e.step_execution_id();
      c.condition_index = e.condition_index();
      c.flow_id = e.child_flow_id();
      c.run_id = e.child_run_id();
      c.attached = e.attached();
      at[key] = out.size();
      out.push_back(std::move(c));
    } else if (e.kind() == flow::SUB_FLOW_CLOSED) {
      auto it = at.find(key);
      if (it == at.end()) continue;  // its start is before the events given
      SubFlowChild& c = out[it->second];
      c.run_id = e.child_run_id();
      c.status = e.status();
      c.reason = e.reason();
    }
  }
  return out;
}

nlohmann::ordered_json sub_flows_json(const flow::FlowDescription& flow,
                                      const std::vector<SubFlowChild>& children) {
  nlohmann::ordered_json parents = nlohmann::ordered_json::array();
  for (const flow::SubFlowParent& p : flow.parents()) parents.push_back(proto_to_json(p));
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const SubFlowChild& c : children) {  // bounded by the children given
    nlohmann::ordered_json j = {{"stepExecutionId", c.step_execution_id},
                                {"conditionIndex", c.condition_index},
                                {"flowId", c.flow_id},
                                {"runId", c.run_id},
                                {"attached", c.attached}};
    if (c.status != flow::FLOW_STATUS_UNSPECIFIED) j["status"] = status_text(c.status);
    if (!c.reason.empty()) j["reason"] = c.reason;
    list.push_back(std::move(j));
  }
  return {{"parents", parents}, {"children", list}};
}

std::string sub_flows_table(const flow::FlowDescription& flow,
                            const std::vector<SubFlowChild>& children) {
  std::string out;
  for (const flow::SubFlowParent& p : flow.parents()) {
    out += fmt::format("parent  {} run {} ({} condition {})\n", p.flow_id(), p.run_id(),
                       p.step_execution_id(), p.condition_index());
  }
  for (const SubFlowChild& c : children) {  // bounded by the children given
    std::string state = c.status == flow::FLOW_STATUS_UNSPECIFIED ? "open" : status_text(c.status);
    if (!c.reason.empty()) state += ": " + c.reason;
    out +=
        fmt::format("child   {} run {} ({} condition {}{}) {}\n", c.flow_id, c.run_id,
                    c.step_execution_id, c.condition_index, c.attached ? ", attached" : "", state);
  }
  return out.empty() ? "(none)\n" : out;
}

}  // namespace dex::cli
