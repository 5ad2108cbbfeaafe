#include "cli/output.h"

#include "config/config.h"

namespace dex::cli {

using json = nlohmann::ordered_json;

json embed_json(const std::string& text) {
  if (text.empty()) return nullptr;
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return text;
  return value;
}

json to_json(const DescribeResponse& describe) {
  // node_epoch is already a decimal string on the wire; it stays one.
  json out = {{"nodeId", describe.node_id()},
              {"nodeEpoch", describe.node_epoch()},
              {"holderProcessId", describe.holder_process_id()}};
  if (describe.attribute_stores_size() > 0) {
    json stores = json::array();
    for (const auto& s : describe.attribute_stores()) {  // bounded by the configured stores
      stores.push_back({{"name", s.name()},
                        {"type", s.type()},
                        {"table", s.table()},
                        {"state", s.state()},
                        {"watermarkSlot", s.watermark_slot()},
                        {"lagSlots", s.lag_slots()},
                        {"lagSeconds", s.lag_seconds()},
                        {"transactions", s.transactions()},
                        {"failures", s.failures()},
                        {"rows", s.rows()},
                        {"filteredFields", s.filtered_fields()},
                        {"lastError", s.last_error()}});
    }
    out["attributeStores"] = std::move(stores);
  }
  // What access is configured (docs/api.md, "Access"): counts and paths only.
  if (!describe.access_mode().empty()) {
    json roles = json::array();
    for (const auto& r : describe.access_roles()) {  // one per role
      json files = json::array();
      for (const std::string& file : r.token_files()) files.push_back(file);
      roles.push_back({{"role", r.role()},
                       {"tokenFiles", std::move(files)},
                       {"tokenDigests", r.token_digests()},
                       {"tokensAccepted", r.tokens_accepted()},
                       {"certificateIdentities", r.certificate_identities()}});
    }
    out["access"] = {{"mode", describe.access_mode()}, {"roles", std::move(roles)}};
  }
  return out;
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

}  // namespace dex::cli
