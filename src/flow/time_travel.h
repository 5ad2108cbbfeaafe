// Time travel (docs/flow-rules.md, "Time travel"): a TimeTravel record starts
// a new run of the Flow ID from a point of its latest run's history, rebuilt
// from the run journal (run_journal.h). Internal to src/flow: flow_rules.cc
// applies the record here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dex/flow_records.pb.h"
#include "flow/apply_result.h"
#include "flow/effects.h"
#include "flow/flow_txn.h"
#include "flow/run_journal.h"

namespace dex::flow {

// Where a point lies in a run's journal.
struct TravelPoint {
  size_t deltas = 0;              // the fold's length: the state after that many deltas
  int64_t at_ms = 0;              // the time of the record at the point
  std::string step_execution_id;  // a Step point: the execution that starts again
};

// Resolves `point` against the run's journal: the last state at or before it
// in which the run was still RUNNING. A refusal (kind kRejected) names what
// the run lacks.
ApplyResult resolve_point(const std::vector<RunDelta>& deltas, const Run& run,
                          const TimeTravelPoint& point, TravelPoint* out);

// What `image` holds that `decl` (the Flow type's latest declaration) cannot
// host, as a sentence; empty: fine.
std::string unhostable(const RunImage& image, const FlowDeclaration& decl);

// Applies a TimeTravel record (checked whole before anything is written).
ApplyResult apply_time_travel(FlowTxn& txn, Effects& effects, const TimeTravel& r);

}  // namespace dex::flow
