#include "cli/flow_config_command.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "cli/flow_errors.h"
#include "cli/proto_json.h"
#include "common/random.h"
#include "common/units.h"
#include "sdk/client.h"

namespace dex::cli {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kOp = "flow config";

constexpr const char* kHelp =
    "Change a running run's FlowConfig (docs/flow-rules.md, \"FlowConfig\"), field by field: "
    "each flag given sets that field, each --clear puts one back to the run's declaration's "
    "value; the others stay. Recorded in the run's history (FLOW_CONFIG_UPDATED); flow state "
    "shows the effective config. A lowered continue-as-new threshold the run's history passed "
    "continues the run at once (or once no attempt of it runs). Names the run exactly "
    "(--run-id). Changes the run: needs --yes";

constexpr const char* kExamples =
    "Examples:\n"
    "  dexcli flow config poller-3 --run-id 6f1c... --continue-as-new-after-events 500 --yes\n"
    "  dexcli flow config poller-3 --run-id 6f1c... --durability async "
    "--index-active-step-types false --yes\n"
    "  dexcli flow config poller-3 --run-id 6f1c... --clear durability --yes";

// A --clear name as the API spells it: dashes as underscores, and the
// flag's short name for the durability.
std::string field_name(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  if (name == "durability") return "default_durability";
  return name;
}

}  // namespace

struct FlowConfigCommand::Impl {
  CLI::App* cmd = nullptr;
  std::string flow_id, run_id, request_id;
  std::string events_text, bytes_text, durability_text, store, index_text;
  std::vector<std::string> clear;
  bool yes = false;
  flow::FlowConfig config;  // parsed in check()
  std::vector<std::string> clear_fields;
};

FlowConfigCommand::FlowConfigCommand(CLI::App& flow) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cmd = flow.add_subcommand("config", kHelp);
  m.cmd->footer(kExamples);
  m.cmd->add_option("ID", m.flow_id, "Flow ID")->required();
  m.cmd->add_option("--run-id", m.run_id, "The run to change, named exactly (required)");
  m.cmd->add_option("--continue-as-new-after-events", m.events_text,
                    "Continue as new once the run's history holds this many events (> 0)");
  m.cmd->add_option("--continue-as-new-after-bytes", m.bytes_text,
                    "Continue as new once the run's history holds this many bytes of events: "
                    "a number, or with a unit (64KiB, 1MiB)");
  m.cmd->add_option("--durability", m.durability_text,
                    "sync or async: the durability of Step methods (and the timeout handler) "
                    "whose options set none, for the executions created from now on");
  m.cmd->add_option("--attribute-store", m.store,
                    "The run's Attribute Store: only its current one is accepted (a running "
                    "run's store cannot change)");
  m.cmd->add_option("--index-active-step-types", m.index_text,
                    "true or false: whether ActiveStepTypes holds the run's active Step types "
                    "for flow search");
  m.cmd
      ->add_option("--clear", m.clear,
                   "A field back to the declaration's value: continue-as-new-after-events, "
                   "continue-as-new-after-bytes, durability, attribute-store, "
                   "index-active-step-types; repeatable")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  m.cmd->add_option("--request-id", m.request_id,
                    "Makes a repeat change nothing (default: a fresh ID)");
  m.cmd->add_flag("--yes", m.yes, "Required: confirms that the run's config is to change");
}

FlowConfigCommand::~FlowConfigCommand() = default;

bool FlowConfigCommand::chosen() const { return impl_->cmd->parsed(); }

int FlowConfigCommand::check() {
  Impl& m = *impl_;
  if (m.run_id.empty())
    return usage_error(kOp,
                       "--run-id is required: the config changes for the run you name, exactly "
                       "(flow describe ID shows the latest run's ID)");
  if (!m.events_text.empty()) {
    uint64_t n = 0;
    try {
      size_t used = 0;
      n = std::stoull(m.events_text, &used);
      if (used != m.events_text.size() || m.events_text[0] == '-') n = 0;
    } catch (const std::exception&) {
      n = 0;
    }
    if (n == 0)
      return usage_error(kOp,
                         "--continue-as-new-after-events must be a whole number above 0 "
                         "(--clear continue-as-new-after-events goes back to the "
                         "declaration's)");
    m.config.set_continue_as_new_after_events(n);
  }
  if (!m.bytes_text.empty()) {
    auto n = parse_bytes(m.bytes_text);
    if (!n.is_ok() || *n == 0)
      return usage_error(kOp,
                         "--continue-as-new-after-bytes must be a size above 0 (4096, "
                         "64KiB, 1MiB)");
    m.config.set_continue_as_new_after_bytes(*n);
  }
  if (!m.durability_text.empty()) {
    if (m.durability_text == "sync" || m.durability_text == "SYNC") {
      m.config.set_default_durability(flow::SYNC);
    } else if (m.durability_text == "async" || m.durability_text == "ASYNC") {
      m.config.set_default_durability(flow::ASYNC);
    } else {
      return usage_error(kOp,
                         "--durability must be sync or async, not '" + m.durability_text + "'");
    }
  }
  if (!m.store.empty()) m.config.set_attribute_store(m.store);
  if (!m.index_text.empty()) {
    if (m.index_text == "true" || m.index_text == "yes") {
      m.config.set_index_active_step_types(true);
    } else if (m.index_text == "false" || m.index_text == "no") {
      m.config.set_index_active_step_types(false);
    } else {
      return usage_error(
          kOp, "--index-active-step-types must be true or false, not '" + m.index_text + "'");
    }
  }
  for (const std::string& c : m.clear) m.clear_fields.push_back(field_name(c));
  if (m.clear_fields.empty() && m.config.ByteSizeLong() == 0)
    return usage_error(kOp,
                       "nothing to change: give a field's flag (--continue-as-new-after-events, "
                       "--durability, ...) or --clear FIELD");
  if (!m.yes) return usage_error(kOp, "flow config changes the run: add --yes to confirm");
  return 0;
}

int FlowConfigCommand::run(Client& client) {
  const Impl& m = *impl_;
  const std::string id = m.request_id.empty() ? random_hex_id() : m.request_id;
  auto r = client.update_flow_config(m.flow_id, m.run_id, m.config, m.clear_fields, id);
  if (!r.is_ok()) return request_error(kOp, r.status());
  json out = {{"flowId", m.flow_id}, {"runId", m.run_id}};
  out["config"] = proto_to_json(r->config());
  out["alreadyDone"] = r->already_done();
  if (!r->continued_run_id().empty()) out["continuedRunId"] = r->continued_run_id();
  out["requestId"] = id;
  std::cout << json_text(out, 2) << "\n";
  return 0;
}

}  // namespace dex::cli
