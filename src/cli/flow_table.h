// dexcli's `--output table` for people reading one run: readable UTC times
// with their age, readable durations, newest first. Not a stable format:
// tools read the JSON (proto_json.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dex/flow_api.pb.h"

namespace dex::cli {

// "2026-12-01 21:44:13.120 UTC (5.2s ago)"; "-" for 0.
std::string time_text(int64_t unix_ms, int64_t now_unix_ms);
// "850ms", "5.2s", "3m12s", "2h05m", "3d04h".
std::string age_text(int64_t ms);

std::string describe_table(const flow::FlowDescription& flow, int64_t now_unix_ms);

struct StateFilter {
  std::string step_type;  // "": every type
  std::string phase;      // "": every phase (as printed: WAITING, EXECUTE, ...)
};
// The run, then its active Step executions newest first, then the Workers
// hosting the type and the hints.
std::string state_table(const flow::GetFlowStateResponse& state, const StateFilter& filter,
                        const std::vector<std::string>& hints, int64_t now_unix_ms);

// The events newest first.
std::string history_table(const std::vector<flow::HistoryEvent>& events, int64_t now_unix_ms);

// What a reader of the state should know: a Step waiting for a Worker while no
// Worker of this server hosts the Flow type, a run waiting on nothing.
std::vector<std::string> state_hints(const flow::GetFlowStateResponse& state);

}  // namespace dex::cli
