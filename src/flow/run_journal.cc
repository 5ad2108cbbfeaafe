#include "flow/run_journal.h"

#include "common/invariant.h"

namespace dex::flow {

namespace {

void fold_run(RunImage& image, const Run& written, bool first) {
  Run run = written;
  // Input and options are in the first delta only (journal_builder.h).
  if (!first) {
    if (!run.has_input() && image.run.has_input()) *run.mutable_input() = image.run.input();
    if (!run.has_options() && image.run.has_options()) *run.mutable_options() = image.run.options();
  }
  image.run = std::move(run);
}

void fold_delta(RunImage& image, const RunDelta& d, bool first) {
  if (d.has_run()) fold_run(image, d.run(), first);
  for (const auto& s : d.steps()) image.steps[s.step_execution_id()] = s;
  for (const auto& q : d.queues()) image.queues[{q.channel(), q.instance_key()}] = q.queue();
  for (const auto& m : d.messages()) {  // bounded by the delta's messages
    const auto key = std::make_tuple(m.channel(), m.instance_key(), m.seq());
    if (m.deleted())
      image.messages.erase(key);
    else
      image.messages[key] = m.payload();
  }
  for (const auto& a : d.attributes()) {
    const auto key = std::make_pair(a.attribute().key(), a.attribute().instance_key());
    if (a.deleted())
      image.attributes.erase(key);
    else
      image.attributes[key] = a.attribute().value();
  }
  for (const auto& r : d.rpcs()) {
    if (r.deleted())
      image.rpcs.erase(r.rpc().rpc_id());
    else
      image.rpcs[r.rpc().rpc_id()] = r.rpc();
  }
}

}  // namespace

RunImage fold_journal(const std::vector<RunDelta>& deltas, size_t count) {
  DEX_INVARIANT(count >= 1 && count <= deltas.size(), "a fold covers 1 to all deltas");
  DEX_INVARIANT(deltas.front().has_run(), "a run's first delta holds its record");
  RunImage image;
  for (size_t i = 0; i < count; ++i) fold_delta(image, deltas[i], i == 0);  // bounded by count
  return image;
}

void store_image(FlowTxn& txn, const RunImage& image) {
  const std::string& flow_id = image.run.flow_id();
  const std::string& run_id = image.run.run_id();
  txn.put_run(image.run);
  for (const auto& [id, s] : image.steps) txn.put_step(s);
  for (const auto& [ci, q] : image.queues)
    txn.put_queue(QueueKey{flow_id, run_id, ci.first, ci.second}, q);
  for (const auto& [cis, m] : image.messages)
    txn.put_message(QueueKey{flow_id, run_id, std::get<0>(cis), std::get<1>(cis)}, std::get<2>(cis),
                    m);
  for (const auto& [ki, v] : image.attributes) {
    Attribute a;
    a.set_key(ki.first);
    a.set_instance_key(ki.second);
    *a.mutable_value() = v;
    txn.put_attribute(flow_id, run_id, a);
  }
  for (const auto& [id, r] : image.rpcs) txn.put_rpc(r);
}

}  // namespace dex::flow
