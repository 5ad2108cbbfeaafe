// The flow rules: how each flow record changes the state (docs/flow-rules.md).
// Pure: no clock, thread, socket or database. Every time comes inside the
// record; every read and write goes through the FlowTxn. The same code applies
// records on the active process, on replay, on a hot standby, in the seeded
// simulation (tests/flow/flow_sim_test.cc) and under the fuzzer.
//
// Contract: apply() of the same records in the same order to the same state
// yields the same state and the same results. A record that is refused
// (kStale, kRejected) or repeats one (kUnchanged) writes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dex/flow_records.pb.h"
#include "flow/apply_result.h"
#include "flow/effects.h"
#include "flow/flow_txn.h"
#include "flow/limits.h"

namespace dex::flow {

// Whether an apply keeps the search index (search_index.h) current. Every
// apply that is committed does; a preview that is thrown away may skip it.
enum class SearchIndexing { kUpdate, kSkip };

// Applies one record. Appends to `effects`; never clears it.
ApplyResult apply_record(FlowTxn& txn, const FlowRecord& record, Effects& effects,
                         SearchIndexing indexing = SearchIndexing::kUpdate);

// Recovery at an EpochStart (docs/flow-rules.md, "Recovery"): every attempt
// handed to a Worker ends NOT_COMPLETED at `at_ms`, consuming a retry; queued
// attempts stay queued. Every RPC not done ends NOT_COMPLETED (its caller
// waited on the old process), releasing its lock keys. Keeps the search index.
void recover_attempts(FlowTxn& txn, int64_t at_ms, Effects& effects);

// The current values of the Attributes `task`'s Step type (or RPC, or the
// timeout handler) declares in attribute_reads (an AttributeMap key: every instance), in declared
// order: what the task carries to its Worker. Empty for an unknown task. Reads only.
std::vector<Attribute> task_attributes(FlowTxn& txn, const TaskRef& task);
// The keys task_attributes reads (whether or not they hold values).
std::vector<std::string> task_attribute_reads(FlowTxn& txn, const TaskRef& task);

}  // namespace dex::flow
