// AttrRpcDemo: the smallest Flow with Attributes and RPCs, which dexcli's
// tests drive (tests/server/test_cli_attributes_rpc.py relies on exactly this).
//  - Attribute `status` (string), AttributeMap `counts` (int64; written only
//    by clients, with SetAttributes);
//  - RPC `describe`: answers {"status": <status>} (null when it has none);
//  - RPC `set-status`, input {"status": "<s>"}: writes status, answers {"ok": true};
//  - Step Demo (the start Step): its WaitFor writes status "started" and waits
//    for one message on Channel `done`; its Execute completes the run with
//    {"done": <the message>, "status": <status>, "counts": {<instance>: n}}.
// Input: anything (unused).
#include "example_flows.h"

namespace dex::examples {
namespace {

const Attribute<std::string> kStatus{"status"};
const AttributeMap<int64_t> kCounts{"counts"};
const Channel kDone("done");

class Demo final : public WaitingStep {
 public:
  std::string type() const override { return "Demo"; }
  Wait wait_for(Context& ctx) override {
    kStatus.set(ctx, "started");  // committed with the Wait
    return Wait::any_of({kDone.for_one()});
  }
  StepDecision execute(Context& ctx) override {
    json counts = json::object();
    for (const auto& [instance, n] : kCounts.all(ctx)) counts[instance] = n;
    const auto status = kStatus.get(ctx);
    return StepDecision::graceful_complete({{"done", ctx.messages(kDone).at(0)},
                                            {"status", status ? json(*status) : json(nullptr)},
                                            {"counts", counts}});
  }
};

RpcResult describe(Context& ctx, const json&) {
  const auto status = kStatus.get(ctx);
  return json{{"status", status ? json(*status) : json(nullptr)}};
}

RpcResult set_status(Context& ctx, const json& input) {
  if (!input.is_object() || !input.contains("status") || !input["status"].is_string())
    throw FlowFailure("set-status takes {\"status\": \"<a string>\"}, not " + input.dump(), true);
  kStatus.set(ctx, input["status"].get<std::string>());
  return json{{"ok", true}};
}

class AttrRpcDemo final : public Flow {
 public:
  std::string type() const override { return "AttrRpcDemo"; }
  std::string start_step() const override { return "Demo"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Demo>()}; }
  std::vector<Channel> channels() const override { return {kDone}; }
  std::vector<AttributeDef> attributes() const override { return {kStatus, kCounts}; }
  std::vector<Rpc> rpcs() const override {
    // Each reads only `status` (a task carries what its handler reads).
    return {Rpc("describe", describe, RpcOptions{{}, {kStatus}}),
            Rpc("set-status", set_status, RpcOptions{{}, {kStatus}})};
  }
};

}  // namespace

std::shared_ptr<Flow> attr_rpc_demo() { return std::make_shared<AttrRpcDemo>(); }

}  // namespace dex::examples
