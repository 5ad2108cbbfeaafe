// Reading the run journal (docs/flow-rules.md, "Run journal"): a run's state
// as it stood after any of its records, rebuilt by folding its RunDeltas in
// order. Time travel and continue-as-new start a new run from such an image;
// check_state verifies that folding the whole journal gives the stored state.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dex/flow_records.pb.h"
#include "flow/flow_txn.h"

namespace dex::flow {

// One run's state: what KvFlowTxn keeps under the run (its record, Step
// executions, Channel queues and messages, Attributes, RPCs).
struct RunImage {
  Run run;
  std::map<std::string, StepExecution> steps;                          // by execution ID
  std::map<std::pair<std::string, std::string>, ChannelQueue> queues;  // (channel, instance)
  std::map<std::tuple<std::string, std::string, uint64_t>, Payload> messages;  // + seq
  std::map<std::pair<std::string, std::string>, AttributeValue> attributes;    // (key, instance)
  std::map<std::string, RpcExecution> rpcs;                                    // by RPC ID
};

// The run after its first `count` deltas (1 ≤ count ≤ deltas.size(); the
// first delta is the run's start and holds its whole record).
RunImage fold_journal(const std::vector<RunDelta>& deltas, size_t count);

// Writes the image through `txn` as the rules store a run's state (no index
// entries): what check_state compares with the stored run.
void store_image(FlowTxn& txn, const RunImage& image);

}  // namespace dex::flow
