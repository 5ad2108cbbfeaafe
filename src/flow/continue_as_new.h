// Continue-as-new (docs/flow-rules.md, "Continue-as-new"): a run asked to
// (a Step's decision, a client's ContinueAsNew record, its FlowConfig's
// history thresholds) goes on as a new run of its Flow ID once no attempt of
// it runs. The new run holds the old one's state: its Attributes, Channel
// messages, active Step executions (locals, input, attempts, waits), Timers
// at their due times and the flow timeout's deadline; the old run keeps its
// history and closes CONTINUED_AS_NEW, linked to the new one. Internal to
// src/flow: flow_rules.cc calls it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dex/flow_records.pb.h"
#include "flow/apply_result.h"
#include "flow/effects.h"
#include "flow/flow_txn.h"

namespace dex::flow {

// A client's ContinueAsNew record: marks the run's continue-as-new pending
// (continue_pending then does it, in the same apply if the run is quiet).
ApplyResult apply_continue_as_new(FlowTxn& txn, Effects& effects, const ContinueAsNew& r);

// Continues, as new, every run of `candidates` that is running with a
// continue-as-new pending and has no attempt running, no RPC open and no
// timeout handler under way. Answers the new runs (old run -> new run ID).
std::vector<std::pair<RunKey, std::string>> continue_pending(FlowTxn& txn, Effects& effects,
                                                             const std::vector<RunKey>& candidates,
                                                             int64_t at_ms);

// The run ID of the n-th continuation of a chain whose first run is `root`:
// "<root>.c<n>" (a Flow retry's is "<root>.<attempt>").
std::string continued_run_id(std::string_view root, uint32_t n);

}  // namespace dex::flow
