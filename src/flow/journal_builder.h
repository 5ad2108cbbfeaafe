// The run journal's writer (docs/flow-rules.md, "Run journal"): collects one
// record's writes to each run's state and turns them into one RunDelta per
// run. KvFlowTxn feeds it every state write; the rules end each record with
// FlowTxn::journal, which stores what it built. Pure: no store of its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dex/flow_records.pb.h"
#include "flow/effects.h"

namespace dex::flow {

class JournalBuilder {
 public:
  // `existed`: the run was stored before this record (a later delta then
  // leaves out its input and options, which never change).
  void run(const Run& run, bool existed);
  void step(const StepExecution& step);
  void queue(const RunKey& run, const std::string& channel, const std::string& instance,
             const ChannelQueue& queue);
  void message(const RunKey& run, const std::string& channel, const std::string& instance,
               uint64_t seq, const Payload* payload);  // nullptr: deleted
  void attribute(const RunKey& run, const std::string& key, const std::string& instance,
                 const AttributeValue* value);  // nullptr: deleted
  void rpc(const RunKey& run, const std::string& rpc_id, const RpcExecution* rpc);
  // The run was deleted (retention): its journal goes with it.
  void forget(const RunKey& run);
  // Whether run() was called for it since the last take (whether it existed
  // before is then known).
  bool run_known(const RunKey& run) const {
    auto it = pending_.find(run);
    return it != pending_.end() && it->second.existed.has_value();
  }

  // One delta per run written since the last take, in run order; forgets them.
  std::vector<std::pair<RunKey, RunDelta>> take(int64_t at_ms);

 private:
  struct Pending {
    std::optional<Run> run;
    std::optional<bool> existed;  // set by the first run()
    std::map<std::string, StepExecution> steps;
    std::map<std::pair<std::string, std::string>, ChannelQueue> queues;
    std::map<std::tuple<std::string, std::string, uint64_t>, std::optional<Payload>> messages;
    std::map<std::pair<std::string, std::string>, std::optional<AttributeValue>> attributes;
    std::map<std::string, std::optional<RpcExecution>> rpcs;
  };
  // Bounded by the runs one record (or one recovery) changes.
  std::map<RunKey, Pending> pending_;
};

}  // namespace dex::flow
