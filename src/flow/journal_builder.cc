#include "flow/journal_builder.h"

#include "common/invariant.h"

namespace dex::flow {

void JournalBuilder::run(const Run& run, bool existed) {
  Pending& p = pending_[RunKey{run.flow_id(), run.run_id()}];
  if (!p.existed) p.existed = existed;
  p.run = run;
}

void JournalBuilder::step(const StepExecution& step) {
  pending_[RunKey{step.flow_id(), step.run_id()}].steps[step.step_execution_id()] = step;
}

void JournalBuilder::queue(const RunKey& run, const std::string& channel,
                           const std::string& instance, const ChannelQueue& queue) {
  pending_[run].queues[{channel, instance}] = queue;
}

void JournalBuilder::message(const RunKey& run, const std::string& channel,
                             const std::string& instance, uint64_t seq, const Payload* payload) {
  auto& slot = pending_[run].messages[{channel, instance, seq}];
  if (payload != nullptr)
    slot = *payload;
  else
    slot.reset();
}

void JournalBuilder::attribute(const RunKey& run, const std::string& key,
                               const std::string& instance, const AttributeValue* value) {
  auto& slot = pending_[run].attributes[{key, instance}];
  if (value != nullptr)
    slot = *value;
  else
    slot.reset();
}

void JournalBuilder::rpc(const RunKey& run, const std::string& rpc_id, const RpcExecution* rpc) {
  auto& slot = pending_[run].rpcs[rpc_id];
  if (rpc != nullptr)
    slot = *rpc;
  else
    slot.reset();
}

void JournalBuilder::forget(const RunKey& run) { pending_.erase(run); }

std::vector<std::pair<RunKey, RunDelta>> JournalBuilder::take(int64_t at_ms) {
  std::vector<std::pair<RunKey, RunDelta>> out;
  out.reserve(pending_.size());
  for (auto& [key, p] : pending_) {  // bounded by the runs this record changed
    RunDelta d;
    d.set_at_ms(at_ms);
    if (p.run) {
      DEX_INVARIANT(p.run->flow_id() == key.flow_id && p.run->run_id() == key.run_id,
                    "a journaled run is its own");
      *d.mutable_run() = std::move(*p.run);
      if (p.existed.value_or(false)) {
        d.mutable_run()->clear_input();
        d.mutable_run()->clear_options();
      }
    }
    for (auto& [id, s] : p.steps) *d.add_steps() = std::move(s);
    for (auto& [ci, q] : p.queues) {
      auto* j = d.add_queues();
      j->set_channel(ci.first);
      j->set_instance_key(ci.second);
      *j->mutable_queue() = std::move(q);
    }
    for (auto& [cis, m] : p.messages) {
      auto* j = d.add_messages();
      j->set_channel(std::get<0>(cis));
      j->set_instance_key(std::get<1>(cis));
      j->set_seq(std::get<2>(cis));
      if (m)
        *j->mutable_payload() = std::move(*m);
      else
        j->set_deleted(true);
    }
    for (auto& [ki, v] : p.attributes) {
      auto* j = d.add_attributes();
      j->mutable_attribute()->set_key(ki.first);
      j->mutable_attribute()->set_instance_key(ki.second);
      if (v)
        *j->mutable_attribute()->mutable_value() = std::move(*v);
      else
        j->set_deleted(true);
    }
    for (auto& [id, r] : p.rpcs) {
      auto* j = d.add_rpcs();
      if (r) {
        *j->mutable_rpc() = std::move(*r);
      } else {
        j->mutable_rpc()->set_flow_id(key.flow_id);
        j->mutable_rpc()->set_run_id(key.run_id);
        j->mutable_rpc()->set_rpc_id(id);
        j->set_deleted(true);
      }
    }
    out.emplace_back(key, std::move(d));
  }
  pending_.clear();
  return out;
}

}  // namespace dex::flow
