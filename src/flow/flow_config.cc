#include "flow/flow_config.h"

#include <algorithm>
#include <set>
#include <string>
#include <string_view>

#include <google/protobuf/util/message_differencer.h>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/limits.h"
#include "flow/run_editor.h"

namespace dex::flow {
namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }
std::string store_name(std::string_view s) { return s.empty() ? "none" : quoted(s); }

ApplyResult rejected(RefusalCode code, std::string why) {
  return {ApplyKind::kRejected, code, std::move(why), ""};
}

// Client writes remember their request IDs per kind (flow_rules.cc).
constexpr std::string_view kConfigRequest = "config:";

bool is_config_field(std::string_view name) {
  return std::find(std::begin(kFlowConfigFields), std::end(kFlowConfigFields), name) !=
         std::end(kFlowConfigFields);
}

std::string config_field_list() {
  std::string out;
  for (std::string_view f : kFlowConfigFields) {  // bounded: five fields
    if (!out.empty()) out += ", ";
    out += f;
  }
  return out;
}

// Whether the update sets field `name` (an unset field keeps the run's value).
bool sets(const FlowConfig& c, std::string_view name) {
  if (name == "continue_as_new_after_events") return c.continue_as_new_after_events() > 0;
  if (name == "continue_as_new_after_bytes") return c.continue_as_new_after_bytes() > 0;
  if (name == "default_durability") return c.default_durability() != DURABILITY_UNSPECIFIED;
  if (name == "attribute_store") return !c.attribute_store().empty();
  if (name == "index_active_step_types") return c.has_index_active_step_types();
  DEX_INVARIANT(false, "a FlowConfig field name (checked before)");
  return false;
}

// Copies field `name` from `from` to `to`, unset included.
void copy_field(const FlowConfig& from, std::string_view name, FlowConfig& to) {
  if (name == "continue_as_new_after_events") {
    to.set_continue_as_new_after_events(from.continue_as_new_after_events());
  } else if (name == "continue_as_new_after_bytes") {
    to.set_continue_as_new_after_bytes(from.continue_as_new_after_bytes());
  } else if (name == "default_durability") {
    to.set_default_durability(from.default_durability());
  } else if (name == "attribute_store") {
    to.set_attribute_store(from.attribute_store());
  } else if (name == "index_active_step_types") {
    if (from.has_index_active_step_types()) {
      to.set_index_active_step_types(from.index_active_step_types());
    } else {
      to.clear_index_active_step_types();
    }
  } else {
    DEX_INVARIANT(false, "a FlowConfig field name (checked before)");
  }
}

Status check_request(const UpdateFlowConfig& r) {
  if (auto s = validate_name("flowId", r.flow_id()); !s.is_ok()) return s;
  if (r.run_id().empty())
    return Status::invalid_argument(
        "a FlowConfig update needs the exact runId of the run it changes");
  if (auto s = validate_name("runId", r.run_id()); !s.is_ok()) return s;
  if (r.request_id().size() > kNameBytesMax)
    return Status::invalid_argument("requestId is longer than " + std::to_string(kNameBytesMax) +
                                    " bytes");
  if (auto s = validate_config(r.config(), "", "config"); !s.is_ok()) return s;
  if (static_cast<size_t>(r.clear_fields_size()) > std::size(kFlowConfigFields))
    return Status::invalid_argument("clearFields names more fields than FlowConfig has");
  std::set<std::string_view> cleared;
  for (const auto& f : r.clear_fields()) {  // bounded: checked just above
    if (!is_config_field(f))
      return Status::invalid_argument("clearFields: " + quoted(f) + " is not a FlowConfig field (" +
                                      config_field_list() + ")");
    if (!cleared.insert(f).second)
      return Status::invalid_argument("clearFields names " + quoted(f) + " twice");
    if (sets(r.config(), f))
      return Status::invalid_argument(
          "FlowConfig field " + quoted(f) +
          " is both set and cleared: set it, or clear it back to the declaration's value");
  }
  bool any = !cleared.empty();
  for (std::string_view f : kFlowConfigFields) any = any || sets(r.config(), f);  // bounded: five
  if (!any)
    return Status::invalid_argument(
        "the FlowConfig update sets no field and clears none: nothing to change");
  return Status::ok();
}

}  // namespace

ApplyResult apply_update_flow_config(FlowTxn& txn, Effects& effects, const UpdateFlowConfig& r) {
  if (auto s = check_request(r); !s.is_ok())
    return rejected(RefusalCode::kInvalidArgument, s.message());
  auto run = txn.run(r.flow_id(), r.run_id());
  if (!run)
    return rejected(RefusalCode::kNotFound,
                    "Flow " + quoted(r.flow_id()) + " has no run " + quoted(r.run_id()));
  // A repeat first: applying it again could undo a later update.
  const std::string request = std::string(kConfigRequest) + r.request_id();
  const auto& seen = run->write_requests();  // bounded by kWriteRequestsRemembered
  if (!r.request_id().empty() && std::find(seen.begin(), seen.end(), request) != seen.end())
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "a repeated FlowConfig update",
            run->run_id()};
  if (run->status() != FLOW_RUNNING)
    return rejected(RefusalCode::kFailedPrecondition,
                    "run " + quoted(r.run_id()) + " of Flow " + quoted(r.flow_id()) + " is " +
                        flow_status_name(run->status()) +
                        ": only a running run's FlowConfig changes");
  auto decl = txn.declaration(run->flow_type(), run->declaration_version());
  DEX_INVARIANT(decl.has_value(), "a run's declaration version is stored");

  // The run's config as it stands (a run started before FlowConfig named the
  // Attribute Store keeps it in Run.attribute_store only).
  FlowConfig before = run->config();
  before.set_attribute_store(run->attribute_store());
  const FlowConfig declared = declared_config(decl->declaration());
  FlowConfig after = before;
  for (const auto& f : r.clear_fields()) copy_field(declared, f, after);  // bounded: five
  for (std::string_view f : kFlowConfigFields) {                          // bounded: five
    if (sets(r.config(), f)) copy_field(r.config(), f, after);
  }
  if (after.attribute_store() != before.attribute_store())
    return rejected(RefusalCode::kFailedPrecondition,
                    "the Attribute Store of a running run cannot change (from " +
                        store_name(before.attribute_store()) + " to " +
                        store_name(after.attribute_store()) +
                        "): a store's row of the run holds every synced write since its start, "
                        "so a store taken on now would miss the writes made before the change "
                        "and one left would keep a row that no longer follows the run; start a "
                        "new run to sync to another store");
  if (google::protobuf::util::MessageDifferencer::Equals(before, after))
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "the FlowConfig is unchanged",
            run->run_id()};

  RunEditor scope(txn, effects, *run, decl->declaration(), r.at_unix_ms());
  if (!r.request_id().empty()) {
    auto* remembered = scope.run().mutable_write_requests();
    remembered->Add(std::string(request));
    // Bounded: the oldest is forgotten.
    if (static_cast<size_t>(remembered->size()) > kWriteRequestsRemembered)
      remembered->erase(remembered->begin());
  }
  *scope.run().mutable_config() = after;
  HistoryEvent event;
  event.set_kind(FLOW_CONFIG_UPDATED);
  *event.mutable_old_config() = before;
  *event.mutable_new_config() = after;
  // With the new config in place: a threshold the history passed already
  // asks for a continue-as-new here (RunEditor::history_threshold_passed).
  scope.add_event(std::move(event));
  scope.flush();
  return {ApplyKind::kApplied, RefusalCode::kNone, "", r.run_id()};
}

}  // namespace dex::flow
