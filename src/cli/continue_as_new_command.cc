#include "cli/continue_as_new_command.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/flow_errors.h"
#include "cli/proto_json.h"
#include "common/random.h"
#include "sdk/client.h"

namespace dex::cli {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kOp = "flow continue-as-new";

constexpr const char* kHelp =
    "Continue a run as a new run of its Flow ID: the new run (\"<first run>.c<n>\") holds its "
    "Attributes, Channel messages, active Step executions (same IDs), Timers and timeout "
    "deadline, and starts with a short history; the old run closes CONTINUED_AS_NEW, linked to "
    "it. At once when no attempt of the run runs, else as soon as none does (pending). Names "
    "the Flow ID's latest run exactly (--run-id). Changes the run: needs --yes";

constexpr const char* kExamples =
    "Examples:\n"
    "  dexcli flow continue-as-new poller-3 --run-id 6f1c... --reason \"long history\" --yes\n"
    "  dexcli flow wait poller-3 --run-id 6f1c...   # waits for the run the chain ends with";

}  // namespace

struct ContinueAsNewCommand::Impl {
  CLI::App* cmd = nullptr;
  std::string flow_id, run_id, reason, request_id;
  bool yes = false;
};

ContinueAsNewCommand::ContinueAsNewCommand(CLI::App& flow) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cmd = flow.add_subcommand("continue-as-new", kHelp);
  m.cmd->footer(kExamples);
  m.cmd->add_option("ID", m.flow_id, "Flow ID")->required();
  m.cmd->add_option("--run-id", m.run_id, "The Flow ID's latest run, named exactly (required)");
  m.cmd->add_option("--reason", m.reason, "Why: in the run's history and its close reason");
  m.cmd->add_option("--request-id", m.request_id,
                    "Makes a repeat change nothing (default: a fresh ID)");
  m.cmd->add_flag("--yes", m.yes, "Required: confirms the continue-as-new");
}

ContinueAsNewCommand::~ContinueAsNewCommand() = default;

bool ContinueAsNewCommand::chosen() const { return impl_->cmd->parsed(); }

int ContinueAsNewCommand::check() {
  const Impl& m = *impl_;
  if (m.run_id.empty())
    return usage_error(kOp,
                       "--run-id is required: continue-as-new applies to the run you name, "
                       "exactly (flow describe ID shows the latest run's ID)");
  if (!m.yes) return usage_error(kOp, "continue-as-new changes the run: add --yes to confirm");
  return 0;
}

int ContinueAsNewCommand::run(Client& client) {
  const Impl& m = *impl_;
  const std::string id = m.request_id.empty() ? random_hex_id() : m.request_id;
  auto r = client.continue_as_new(m.flow_id, m.run_id, m.reason, id);
  if (!r.is_ok()) return request_error(kOp, r.status());
  json out = {{"flowId", m.flow_id}, {"runId", m.run_id}};
  if (!r->new_run_id().empty()) {
    out["newRunId"] = r->new_run_id();
    out["pending"] = false;
  } else {
    out["pending"] = true;
    out["message"] =
        r->already_done()
            ? "a continue-as-new of this run is pending already: it continues once no attempt "
              "of it runs"
            : "pending: the run continues as new once no attempt of it runs (flow wait --run-id "
              "follows it)";
  }
  out["alreadyDone"] = r->already_done();
  out["requestId"] = id;
  std::cout << json_text(out, 2) << "\n";
  return 0;
}

}  // namespace dex::cli
