// E2ECounter: a counter that RPCs add to under a lock, which the engine's
// failover tests drive (they rely on exactly this):
//  - AttributeMap `applied` (int64): per RPC input "id", the n it added;
//    Attribute `total` (int64); AttributeMap `note` (string), written only by
//    clients with SetAttributes;
//  - RPC `add` (lock key "counter"; reads total and applied), input
//    {"id": "<id>", "n": <int>}: an id already applied answers
//    {"total": <total>, "repeat": true} and writes nothing; otherwise it
//    writes total + n and applied[id] = n and answers {"total": <new total>}.
//    With the lock, no two adds of a run read the same total; with `applied`,
//    an add sent again under another request ID is counted once;
//  - Step Count (the start Step): WaitFor waits for one message on Channel
//    `stop`; Execute (lock key "counter", so after every add that holds it)
//    completes the run with {"total": <total>}.
// Input: anything (unused).
#include "example_flows.h"

namespace dex::examples {
namespace {

const AttributeMap<int64_t> kApplied{"applied"};
const Attribute<int64_t> kTotal{"total"};
const AttributeMap<std::string> kNote{"note"};
const Channel kStop("stop");
const char* const kCounterLock = "counter";

class Count final : public WaitingStep {
 public:
  std::string type() const override { return "Count"; }
  StepOptions options() const override {
    StepOptions o;
    o.execute.lock_keys = {kCounterLock};
    return o;
  }
  AttributeReads attribute_reads() const override { return {kTotal}; }
  Wait wait_for(Context&) override { return Wait::any_of({kStop.for_one()}); }
  StepDecision execute(Context& ctx) override {
    return StepDecision::graceful_complete({{"total", kTotal.get(ctx).value_or(0)}});
  }
};

RpcResult add(Context& ctx, const json& input) {
  if (!input.is_object() || !input.contains("id") || !input["id"].is_string() ||
      input["id"].get<std::string>().empty() || !input.contains("n") ||
      !input["n"].is_number_integer())
    throw FlowFailure("add takes {\"id\": \"<non-empty>\", \"n\": <integer>}, not " + input.dump(),
                      true);
  const std::string id = input["id"].get<std::string>();
  const int64_t total = kTotal.get(ctx).value_or(0);
  if (kApplied.get(ctx, id)) return json{{"total", total}, {"repeat", true}};
  const int64_t n = input["n"].get<int64_t>();
  kTotal.set(ctx, total + n);
  kApplied.set(ctx, id, n);
  return json{{"total", total + n}};
}

class E2ECounter final : public Flow {
 public:
  std::string type() const override { return "E2ECounter"; }
  std::string start_step() const override { return "Count"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Count>()}; }
  std::vector<Channel> channels() const override { return {kStop}; }
  std::vector<AttributeDef> attributes() const override { return {kApplied, kTotal, kNote}; }
  std::vector<Rpc> rpcs() const override {
    return {Rpc("add", add, RpcOptions{{kCounterLock}, {kTotal, kApplied}})};
  }
};

}  // namespace

std::shared_ptr<Flow> e2e_counter() { return std::make_shared<E2ECounter>(); }

}  // namespace dex::examples
