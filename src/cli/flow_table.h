// dexcli's `--output table` for people reading one run: readable UTC times
// with their age, readable durations, newest first. Not a stable format:
// tools read the JSON (proto_json.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/time_text.h"
#include "dex/flow_api.pb.h"

namespace dex::cli {

// Columns padded to their widest cell (the last one is not padded), the
// header first: the layout of every dexcli table.
std::string render_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

std::string describe_table(const flow::FlowDescription& flow, int64_t now_unix_ms);

struct StateFilter {
  std::string step_type;  // "": every type
  std::string phase;      // "": every phase (as printed: WAITING, EXECUTE, ...)
};
// The run, then its active Step executions newest first, the ended ones the
// state lists (newest first; the filter applies to both), the queued Channel
// messages, the Attributes, then the Workers hosting the type, the run's
// FlowConfig and the hints.
std::string state_table(const flow::GetFlowStateResponse& state, const StateFilter& filter,
                        const std::vector<std::string>& hints, int64_t now_unix_ms);

// A run's FlowConfig in one line (unset fields as their defaults), and what
// an update changed ("durability SYNC -> ASYNC, ...").
std::string config_text(const flow::FlowConfig& config);
std::string config_change_text(const flow::FlowConfig& before, const flow::FlowConfig& after);

// The events newest first.
std::string history_table(const std::vector<flow::HistoryEvent>& events, int64_t now_unix_ms);

// What a reader of the state should know: a Step waiting for a Worker while no
// Worker of this server hosts the Flow type, a run waiting on nothing.
std::vector<std::string> state_hints(const flow::GetFlowStateResponse& state);

}  // namespace dex::cli
