// SubFlows in C++ (docs/flow-rules.md, "SubFlows"): a WaitFor condition that
// starts a child Flow (dex::SubFlow::start, flow.h) and is met when the child
// closes; Execute reads the child's result (Context::sub_flow).
//
//   dex::Wait wait_for(dex::Context& ctx) override {
//     dex::SubFlowOptions child;
//     child.start.timeout(std::chrono::minutes(1)).retry(dex::RetryPolicy{});
//     return dex::Wait::all_of({dex::SubFlow::start("Quote", {{"carrier", "A"}}, child).id("a"),
//                               dex::SubFlow::start("Quote", {{"carrier", "B"}}).id("b")});
//   }
//   dex::StepDecision execute(dex::Context& ctx) override {
//     dex::SubFlowResult a = ctx.sub_flow("a");   // or ctx.sub_flow(0), ctx.sub_flows()
//     if (!a.completed()) return dex::StepDecision::force_fail(a.close_reason);
//     return dex::StepDecision::graceful_complete(a.output());
//   }
//
// The child's Flow ID is derived by the server,
// "<parent flow id>/<step execution id>/<condition index>", with the parent's
// run ID; a repeat of the wait (a retried WaitFor, a replay) finds the same
// child. An any_of that another condition wins leaves the child running, and
// stopping the parent does not stop its children.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "dex/flow.pb.h"
#include "sdk/condition.h"
#include "sdk/start_options.h"

namespace dex {

// What the condition does when the child's derived Flow ID already has a run
// (the server's table: docs/flow-rules.md, "SubFlows").
enum class SubFlowReuse {
  // Attach to a running or COMPLETED run; start anew after any other end (the default).
  kRestartIfPreviousExitsAbnormally,
  // Attach to the run, whatever its end (a closed one meets the condition at once).
  kAttach,
  // Terminate a running run and start anew; start anew after any end.
  kAlwaysRestart,
};

struct SubFlowOptions {
  // The child's start options: timeout and its policy, start delay, initial
  // Attributes (of the child's schema), Flow retry policy. request_id and
  // id_reuse must stay unset: the server derives the one and `reuse` replaces
  // the other (SubFlow::start refuses them).
  StartOptions start = {};
  SubFlowReuse reuse = SubFlowReuse::kRestartIfPreviousExitsAbnormally;
};

// A child Flow that a wait starts: met when the child closes,
// whatever its status; Execute reads it with Context::sub_flow. Throws
// FlowFailure (non-retryable) for options a SubFlow cannot take (request_id,
// id_reuse, ignore_already_started), naming them.
struct SubFlow {
  static Condition start(std::string flow_type, nlohmann::json input = nullptr,
                         const SubFlowOptions& options = {});
};

// One output of a closed run's result: the Step execution that completed it.
struct FlowOutput {
  std::string step_type;
  std::string step_execution_id;
  nlohmann::json output;
};

// A SubFlow condition's child as its parent's wait saw it when it was met.
struct SubFlowResult {
  uint32_t condition_index = 0;
  std::string condition_id;
  bool fired = false;  // the child's close is part of what met the wait
  std::string flow_id;
  std::string run_id;  // the child's last run (after Flow retries, the one that ended them)
  flow::FlowStatus status = flow::FLOW_STATUS_UNSPECIFIED;  // RUNNING: another condition won
  std::vector<FlowOutput> outputs;                          // closed: the child's result
  std::string close_reason;  // FAILED, CANCELED, TERMINATED, TIMED_OUT: why

  bool completed() const { return status == flow::FLOW_COMPLETED; }
  bool closed() const {
    return status != flow::FLOW_RUNNING && status != flow::FLOW_STATUS_UNSPECIFIED;
  }
  // The output of the child's last completing Step (null when none): a child
  // that completes with one GracefulComplete or ForceComplete has just that.
  const nlohmann::json& output() const;
};

}  // namespace dex
