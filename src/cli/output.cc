#include "cli/output.h"

#include <algorithm>
#include <cctype>

#include "config/config.h"

namespace dex::cli {

namespace {

using json = nlohmann::ordered_json;

// The enum value's name without its prefix: FLOW_STATUS_COMPLETED → "COMPLETED".
std::string short_name(const std::string& full, std::string_view prefix) {
  if (full.empty()) return "UNKNOWN";
  if (full.rfind(prefix, 0) == 0) return full.substr(prefix.size());
  return full;
}

std::string status_name(FlowStatus s) { return short_name(FlowStatus_Name(s), "FLOW_STATUS_"); }
std::string status_name(StepStatus s) { return short_name(StepStatus_Name(s), "STEP_STATUS_"); }
std::string outcome_name(AttemptOutcome o) {
  // UNSPECIFIED means the attempt still runs.
  if (o == ATTEMPT_OUTCOME_UNSPECIFIED) return "RUNNING";
  return short_name(AttemptOutcome_Name(o), "ATTEMPT_OUTCOME_");
}
std::string dispatch_name(DispatchMode d) {
  if (d == DISPATCH_MODE_UNSPECIFIED) return "SYNC";
  return short_name(DispatchMode_Name(d), "DISPATCH_MODE_");
}

std::string duration_text(int64_t ms) { return format_duration(milliseconds(ms)); }

json to_json(const StepDef& step) {
  json out = {{"name", step.name()}};
  if (!step.task_queue().empty()) out["taskQueue"] = step.task_queue();
  if (step.after_size() > 0) {
    json after = json::array();
    for (const std::string& name : step.after()) after.push_back(name);
    out["after"] = after;
  }
  if (step.has_retry()) {
    const RetryPolicy& r = step.retry();
    json retry = json::object();
    if (r.max_attempts() != 0) retry["maxAttempts"] = r.max_attempts();
    if (r.initial_interval_ms() != 0)
      retry["initialInterval"] = duration_text(r.initial_interval_ms());
    if (r.backoff_coefficient() != 0) retry["backoffCoefficient"] = r.backoff_coefficient();
    if (r.max_interval_ms() != 0) retry["maxInterval"] = duration_text(r.max_interval_ms());
    out["retry"] = retry;
  }
  if (step.start_to_close_timeout_ms() != 0) {
    out["startToCloseTimeout"] = duration_text(step.start_to_close_timeout_ms());
  }
  if (step.heartbeat_timeout_ms() != 0) {
    out["heartbeatTimeout"] = duration_text(step.heartbeat_timeout_ms());
  }
  if (step.sleep_ms() != 0) {
    out["sleep"] = duration_text(step.sleep_ms());
  } else {
    out["dispatch"] = dispatch_name(step.dispatch());
  }
  return out;
}

json to_json(const Attempt& attempt) {
  json out = {{"number", attempt.number()}, {"outcome", outcome_name(attempt.outcome())}};
  if (!attempt.worker_id().empty()) out["workerId"] = attempt.worker_id();
  if (attempt.started_at_ms() != 0) out["startedAtMs"] = attempt.started_at_ms();
  if (attempt.ended_at_ms() != 0) out["endedAtMs"] = attempt.ended_at_ms();
  if (!attempt.error().empty()) out["error"] = attempt.error();
  return out;
}

json to_json(const Step& step) {
  json attempts = json::array();
  for (const Attempt& a : step.attempts()) attempts.push_back(to_json(a));
  json out = {
      {"name", step.name()}, {"status", status_name(step.status())}, {"attempts", attempts}};
  if (!step.output().empty()) out["output"] = embed_json(step.output());
  if (!step.error().empty()) out["error"] = step.error();
  if (step.wake_at_ms() != 0) out["wakeAtMs"] = step.wake_at_ms();
  return out;
}

}  // namespace

json embed_json(const std::string& text) {
  if (text.empty()) return nullptr;
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return text;
  return value;
}

json to_json(const FlowType& flow_type) {
  json steps = json::array();
  for (const StepDef& s : flow_type.steps()) steps.push_back(to_json(s));
  return {{"name", flow_type.name()}, {"steps", steps}};
}

json to_json(const Flow& flow) {
  json steps = json::array();
  for (const Step& s : flow.steps()) steps.push_back(to_json(s));
  json out = {{"flowId", flow.flow_id()},
              {"flowType", flow.flow_type()},
              {"status", status_name(flow.status())},
              {"input", flow.input().empty() ? json::object() : embed_json(flow.input())},
              {"steps", steps}};
  if (!flow.error().empty()) out["error"] = flow.error();
  if (flow.created_at_ms() != 0) out["createdAtMs"] = flow.created_at_ms();
  if (flow.ended_at_ms() != 0) out["endedAtMs"] = flow.ended_at_ms();
  return out;
}

json to_json(const DescribeResponse& describe) {
  // node_epoch is already a decimal string on the wire; it stays one.
  return {{"nodeId", describe.node_id()},
          {"nodeEpoch", describe.node_epoch()},
          {"holderProcessId", describe.holder_process_id()}};
}

json to_json(const RegisterFlowTypeResponse& response) {
  return {{"flowType", to_json(response.flow_type())}, {"changed", response.changed()}};
}

json to_json(const ListFlowTypesResponse& response) {
  json types = json::array();
  for (const FlowType& t : response.flow_types()) types.push_back(to_json(t));
  return {{"flowTypes", types}};
}

json to_json(const StartFlowResponse& response) {
  return {{"flow", to_json(response.flow())}, {"alreadyExisted", response.already_existed()}};
}

json to_json(const ListFlowsResponse& response) {
  json flows = json::array();
  for (const Flow& f : response.flows()) flows.push_back(to_json(f));
  json out = {{"flows", flows}};
  if (!response.next_page_token().empty()) out["nextPageToken"] = response.next_page_token();
  return out;
}

json to_json(const CancelFlowResponse& response) { return {{"flow", to_json(response.flow())}}; }

json to_json(const WaitFlowResponse& response) {
  return {{"flow", to_json(response.flow())}, {"ended", response.ended()}};
}

std::string lease_holder_name(LeaseHolderAfterStepDown holder) {
  switch (holder) {
    case TAKEN_OVER_BY_ANOTHER_PROCESS:
      return "takenOverByAnotherProcess";
    case TAKEN_BACK_BY_THIS_PROCESS:
      return "takenBackByThisProcess";
    default:
      return "unknown";
  }
}

json to_json(const StepDownResponse& response) {
  json out = {
      {"expectedNodeId", response.expected_node_id()},
      {"expectedNodeEpoch", response.expected_node_epoch()},
      {"nodeId", response.node_id()},
      {"releasedNodeEpoch", response.released_node_epoch()},
      {"leaseReacquisitionHoldOff",
       format_duration(milliseconds(response.lease_reacquisition_hold_off_ms()))},
      {"leaseHolderAfterStepDown", lease_holder_name(response.lease_holder_after_step_down())}};
  const bool known = response.lease_holder_after_step_down() == TAKEN_OVER_BY_ANOTHER_PROCESS ||
                     response.lease_holder_after_step_down() == TAKEN_BACK_BY_THIS_PROCESS;
  if (!known) {
    std::string detail = response.lease_holder_unknown_detail();
    if (detail.empty() && response.lease_holder_after_step_down() != UNKNOWN) {
      detail = "the server did not say which process holds the lease";
    }
    out["leaseHolderUnknownDetail"] = detail;
  }
  if (!response.active_node_epoch().empty()) out["activeNodeEpoch"] = response.active_node_epoch();
  if (!response.active_holder_process_id().empty()) {
    out["activeHolderProcessId"] = response.active_holder_process_id();
  }
  return out;
}

std::optional<FlowStatus> parse_flow_status(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  FlowStatus status;
  if (upper.empty() || upper == "UNSPECIFIED") return std::nullopt;
  if (!FlowStatus_Parse("FLOW_STATUS_" + upper, &status)) return std::nullopt;
  return status;
}

}  // namespace dex::cli
