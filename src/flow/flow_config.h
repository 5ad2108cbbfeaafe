// FlowConfig at runtime (docs/flow-rules.md, "FlowConfig"): a client's
// UpdateFlowConfig changes a running run's effective FlowConfig field by
// field and records the change in its history (FLOW_CONFIG_UPDATED). Internal
// to src/flow: flow_rules.cc applies the record here.
#pragma once

#include "dex/flow_records.pb.h"
#include "flow/apply_result.h"
#include "flow/effects.h"
#include "flow/flow_txn.h"

namespace dex::flow {

// Applies an UpdateFlowConfig record (checked whole before anything is
// written). A lowered continue-as-new threshold the run's history passed
// already asks for a continue-as-new at once (apply_record then continues the
// run if no attempt of it runs).
ApplyResult apply_update_flow_config(FlowTxn& txn, Effects& effects, const UpdateFlowConfig& r);

}  // namespace dex::flow
