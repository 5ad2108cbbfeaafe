// The Channel sizes every FlowTask carries (docs/flow-rules.md, "Channel
// sizes"): what a Step, an RPC or the timeout handler reads of its run's
// queues. A pure function over a FlowTxn.
#pragma once

#include <cstddef>

#include "dex/flow_api.pb.h"
#include "flow/kv_txn.h"

namespace dex {

// Adds the run's non-empty Channel queues and their sizes to `task`
// (FlowTask.channel_sizes), in key order, at most kTaskChannelSizesMax
// (channel_sizes_truncated past that). A snapshot of the view the task is
// built from: messages may arrive, or other Steps' waits take them, since.
inline constexpr size_t kTaskChannelSizesMax = 10'000;
void add_channel_sizes(flow::KvFlowTxn& txn, const flow::Run& run, flow::FlowTask& task);

}  // namespace dex
