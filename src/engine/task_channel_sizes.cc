#include "engine/task_channel_sizes.h"

namespace dex {

void add_channel_sizes(flow::KvFlowTxn& txn, const flow::Run& run, flow::FlowTask& task) {
  // Bounded by the run's queues (and kTaskChannelSizesMax of them kept).
  for (const auto& [key, q] : txn.queues(run.flow_id(), run.run_id())) {
    if (q.next_seq() <= q.first_seq()) continue;
    if (static_cast<size_t>(task.channel_sizes_size()) >= kTaskChannelSizesMax) {
      task.set_channel_sizes_truncated(true);
      return;
    }
    auto* c = task.add_channel_sizes();
    c->set_channel(key.channel);
    c->set_instance_key(key.instance_key);
    c->set_size(q.next_seq() - q.first_seq());
  }
}

}  // namespace dex
