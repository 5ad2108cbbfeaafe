// A Step's, an RPC's and the timeout handler's view of Channel sizes (docs/
// flow-rules.md, "Channels"): how many messages wait in a Channel or a
// ChannelMap instance, how many instances of a map hold messages and which.
// Unit tests read a task the test builds; the end-to-end test publishes
// through a real Client to a real server and reads the sizes in a Step and
// an RPC on a real Worker.
#include <gtest/gtest.h>

#include "live_stack.h"
#include "sdk/condition.h"

namespace dex {
namespace {

using nlohmann::json;

const Channel kInbox("inbox");
const Channel kGo("go");
const ChannelMap kOrders("orders");

// The sizes as one json object: what the Step and the RPC answer.
json sizes(const Context& ctx) {
  return {{"inbox", ctx.channel_size(kInbox)},
          {"a", ctx.channel_size(kOrders.instance("a"))},
          {"orders", ctx.channel_map_size(kOrders)},
          {"keys", ctx.channel_instance_keys(kOrders)}};
}

flow::FlowTask task_with(std::vector<std::tuple<std::string, std::string, uint64_t>> queues) {
  flow::FlowTask t;
  t.set_method(flow::EXECUTE);
  for (auto& [channel, key, size] : queues) {
    auto* c = t.add_channel_sizes();
    c->set_channel(channel);
    c->set_instance_key(key);
    c->set_size(size);
  }
  return t;
}

TEST(ChannelSizes, AContextCountsTheTasksQueuesAndItsOwnPublishes) {
  const flow::FlowTask t = task_with({{"inbox", "", 3}, {"orders", "a", 2}, {"orders", "b", 1}});
  Context ctx(
      t, json::object(), [] {}, [] { return false; });
  EXPECT_EQ(sizes(ctx), (json{{"inbox", 3}, {"a", 2}, {"orders", 2}, {"keys", {"a", "b"}}}));
  EXPECT_EQ(ctx.channel_size(kGo), 0u) << "a Channel with no messages";
  EXPECT_EQ(ctx.channel_size(kOrders.instance("nobody")), 0u);
  ctx.publish(kInbox, 1);
  ctx.publish(kOrders.instance("0-first"), "x");
  ctx.publish(kOrders.instance("0-first"), "y");
  EXPECT_EQ(sizes(ctx),
            (json{{"inbox", 4}, {"a", 2}, {"orders", 3}, {"keys", {"0-first", "a", "b"}}}))
      << "what the method publishes counts, keys stay sorted";
  EXPECT_EQ(ctx.channel_size(kOrders.instance("0-first")), 2u);
}

TEST(ChannelSizes, ATaskWhoseListWasCutAnswersNoSizeRatherThanAWrongOne) {
  flow::FlowTask t = task_with({{"inbox", "", 3}});
  t.set_channel_sizes_truncated(true);
  Context ctx(
      t, json::object(), [] {}, [] { return false; });
  try {
    (void)ctx.channel_size(kInbox);
    FAIL() << "a size from a cut list";
  } catch (const FlowFailure& e) {
    EXPECT_TRUE(e.non_retryable());
    EXPECT_NE(std::string(e.what()).find("inbox"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)ctx.channel_instance_keys(kOrders), FlowFailure);
}

// ---------------------------------------------------------------- end to end

// Read waits for a message on "go", then answers the sizes before and after
// publishing one message to "inbox" and one to orders["z"].
class Read final : public Step {
 public:
  std::string type() const override { return "Read"; }
  bool waits() const override { return true; }
  Wait wait_for(Context&) override { return Wait::any_of({kGo.for_one()}); }
  StepDecision execute(Context& ctx) override {
    json before = sizes(ctx);
    ctx.publish(kInbox, "more");
    ctx.publish(kOrders.instance("z"), "more");
    return StepDecision::graceful_complete(
        {{"before", before}, {"after", sizes(ctx)}, {"go", ctx.channel_size(kGo)}});
  }
};

class Sizes final : public Flow {
 public:
  std::string type() const override { return "Sizes"; }
  std::string start_step() const override { return "Read"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Read>()}; }
  std::vector<Channel> channels() const override { return {kInbox, kGo}; }
  std::vector<ChannelMap> channel_maps() const override { return {kOrders}; }
  std::vector<Rpc> rpcs() const override {
    return {Rpc("sizes", [](Context& ctx, const json&) { return RpcResult(sizes(ctx)); })};
  }
};

class ChannelSizesEndToEnd : public LiveStackTest {
 protected:
  std::vector<std::shared_ptr<Flow>> flows() const override { return {std::make_shared<Sizes>()}; }
};

TEST_F(ChannelSizesEndToEnd, AStepAndAnRpcReadTheSizesOfWhatClientsPublished) {
  auto started = client_->start("Sizes", "sizes-1", json::object());
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  ASSERT_TRUE(client_->publish("sizes-1", "inbox", {1, 2, 3}).is_ok());
  ASSERT_TRUE(client_->publish("sizes-1", "orders", {"a1", "a2"}, "a").is_ok());
  ASSERT_TRUE(client_->publish("sizes-1", "orders", {"b1"}, "b").is_ok());

  auto rpc = client_->invoke_rpc("sizes-1", "sizes", json::object());
  ASSERT_TRUE(rpc.is_ok()) << rpc.status().message();
  EXPECT_EQ(*rpc, (json{{"inbox", 3}, {"a", 2}, {"orders", 2}, {"keys", {"a", "b"}}}));

  // The wait takes the one "go" message: the Step's Execute sees it gone.
  ASSERT_TRUE(client_->publish("sizes-1", "go", {true}).is_ok());
  auto closed = client_->wait_for_flow("sizes-1", kWait);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  ASSERT_EQ(closed->flow().status(), flow::FLOW_COMPLETED) << closed->flow().close_reason();
  ASSERT_EQ(closed->flow().outputs_size(), 1);
  const json out = from_payload(closed->flow().outputs(0).output());
  EXPECT_EQ(out["before"], (json{{"inbox", 3}, {"a", 2}, {"orders", 2}, {"keys", {"a", "b"}}}));
  EXPECT_EQ(out["after"], (json{{"inbox", 4}, {"a", 2}, {"orders", 3}, {"keys", {"a", "b", "z"}}}));
  EXPECT_EQ(out["go"], 0) << "the wait consumed the message that met it";

  // The Step's publishes landed: a new RPC would see them, but the run is
  // closed, so GetFlowState shows them.
  auto state = client_->flow_state("sizes-1");
  ASSERT_TRUE(state.is_ok()) << state.status().message();
  uint64_t inbox = 0;
  for (const auto& q : state->queues())
    if (q.channel() == "inbox") inbox = q.count();
  EXPECT_EQ(inbox, 4u);
}

}  // namespace
}  // namespace dex
