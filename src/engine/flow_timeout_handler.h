// The engine's reads for the Flow's timeout handler (method ON_TIMEOUT;
// docs/flow-rules.md, "Timeout handler"): its task, whether its attempt is
// queued, its durability, and what GetFlowState shows of it. Pure functions
// over a FlowTxn, like flow_reads.h.
#pragma once

#include <optional>
#include <string>

#include "dex/flow_api.pb.h"
#include "flow/kv_txn.h"

namespace dex {

// The handler's task for the attempt `ref` names, if the run still waits for it.
std::optional<flow::FlowTask> build_handler_task(flow::KvFlowTxn& txn, const flow::Run& run,
                                                 const flow::TaskRef& ref,
                                                 const std::string& task_id);
// Whether the handler's attempt `ref` is queued.
bool handler_queued(const flow::Run& run, const flow::TaskRef& ref);
// The durability of the run's handler (its declaration's, SYNC by default).
flow::Durability handler_durability(flow::KvFlowTxn& txn, const flow::Run& run);
// The handler while it runs (queued, running or backing off), as GetFlowState shows it.
std::optional<flow::StepExecutionView> timeout_handler_view(const flow::Run& run);

}  // namespace dex
