// An InvokeRpc's own lock keys (InvokeRpcOptions::lock_keys) end to end: a
// Worker and a Client against a real ApiServer over a real Engine (the
// LiveStackTest fixture of live_stack.h). Two calls of one RPC with the same
// call key never overlap; with different keys they run at once; a call key
// equal to a key the RPC declares waits too; a bad key list is refused
// INVALID_ARGUMENT before anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>

#include "live_stack.h"

namespace dex {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const Channel kNever("never");

// What the handlers saw: how many ran at once, at most, and how many ran.
struct Overlap {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  int most = 0;
  int calls = 0;

  void reset() {
    std::lock_guard lock(mu);
    running = most = calls = 0;
  }
  // One handler: holds for `hold`, or until `meet` handlers have run at once
  // (at most 10 s).
  void run(milliseconds hold, int meet) {
    std::unique_lock lock(mu);
    ++calls;
    most = std::max(most, ++running);
    cv.notify_all();
    if (meet > 0) {
      cv.wait_for(lock, seconds(10), [&] { return most >= meet; });
    } else {
      cv.wait_for(lock, hold, [] { return false; });
    }
    --running;
  }
  int most_at_once() {
    std::lock_guard lock(mu);
    return most;
  }
  int handled() {
    std::lock_guard lock(mu);
    return calls;
  }
};

Overlap& overlap() {
  static Overlap o;
  return o;
}

RpcResult hold(const json& input) {
  overlap().run(milliseconds(input.value("holdMs", 0)), input.value("meet", 0));
  return json::object();
}

// Idle waits on "never": the run stays RUNNING. RPCs "touch" (no declared
// keys) and "audit" (declares "ledger") hold as their input says.
class Idle final : public WaitingStep {
 public:
  std::string type() const override { return "Idle"; }
  Wait wait_for(Context&) override { return Wait::any_of({kNever.for_one()}); }
  StepDecision execute(Context&) override { return StepDecision::graceful_complete(nullptr); }
};

class Accounts final : public Flow {
 public:
  std::string type() const override { return "Accounts"; }
  std::string start_step() const override { return "Idle"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Idle>()}; }
  std::vector<Channel> channels() const override { return {kNever}; }
  std::vector<Rpc> rpcs() const override {
    RpcOptions ledger;
    ledger.lock_keys = {"ledger"};
    return {Rpc("touch", [](Context&, const json& in) { return hold(in); }),
            Rpc(
                "audit", [](Context&, const json& in) { return hold(in); }, ledger)};
  }
};

class RpcCallLocksEndToEnd : public LiveStackTest {
 protected:
  std::vector<std::shared_ptr<Flow>> flows() const override {
    return {std::make_shared<Accounts>()};
  }
  void SetUp() override {
    overlap().reset();
    ASSERT_NO_FATAL_FAILURE(LiveStackTest::SetUp());
    ASSERT_TRUE(client_->start("Accounts", "a-1", json::object()).is_ok());
  }

  // Invokes `rpc` on a-1 with `input` and the call's `keys`, on its own thread.
  std::future<StatusOr<json>> call(const std::string& rpc, const json& input,
                                   std::vector<std::string> keys) {
    return std::async(std::launch::async, [this, rpc, input, keys] {
      InvokeRpcOptions o;
      o.lock_keys = keys;
      return client_->invoke_rpc("a-1", rpc, input, o);
    });
  }
};

TEST_F(RpcCallLocksEndToEnd, TwoCallsWithTheSameKeyDoNotOverlap) {
  const json in = {{"holdMs", 400}};
  auto a = call("touch", in, {"acct-1"});
  auto b = call("touch", in, {"acct-1"});
  auto c = call("touch", in, {"acct-1", "acct-2"});
  for (auto* f : {&a, &b, &c}) {
    auto r = f->get();
    ASSERT_TRUE(r.is_ok()) << r.status().message();
  }
  EXPECT_EQ(overlap().most_at_once(), 1) << "one handler at a time";
  EXPECT_EQ(overlap().handled(), 3);
}

TEST_F(RpcCallLocksEndToEnd, CallsWithDifferentKeysRunTogether) {
  // Each handler waits until the other runs too: they meet only if both run at once.
  const json in = {{"meet", 2}};
  auto a = call("touch", in, {"acct-1"});
  auto b = call("touch", in, {"acct-2"});
  for (auto* f : {&a, &b}) {
    auto r = f->get();
    ASSERT_TRUE(r.is_ok()) << r.status().message();
  }
  EXPECT_EQ(overlap().most_at_once(), 2);
}

TEST_F(RpcCallLocksEndToEnd, ACallKeyEqualToADeclaredKeyWaitsForThatRpc) {
  const json in = {{"holdMs", 400}};
  auto a = call("audit", in, {});
  auto b = call("touch", in, {"ledger"});
  for (auto* f : {&a, &b}) {
    auto r = f->get();
    ASSERT_TRUE(r.is_ok()) << r.status().message();
  }
  EXPECT_EQ(overlap().most_at_once(), 1);
  EXPECT_EQ(overlap().handled(), 2);
}

TEST_F(RpcCallLocksEndToEnd, ABadKeyListIsRefusedAndRunsNothing) {
  InvokeRpcOptions empty;
  empty.lock_keys = {"acct-1", ""};
  auto r = client_->invoke_rpc("a-1", "touch", json::object(), empty);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("lockKeys[1] is empty"), std::string::npos)
      << r.status().message();
  InvokeRpcOptions many;
  for (int i = 0; i < 16; ++i) many.lock_keys.push_back("k" + std::to_string(i));
  r = client_->invoke_rpc("a-1", "audit", json::object(), many);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'k15' is one key too many"), std::string::npos)
      << r.status().message();
  many.lock_keys.push_back("k16");
  r = client_->invoke_rpc("a-1", "touch", json::object(), many);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("lockKeys has 17 keys; at most 16"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(overlap().handled(), 0) << "no handler ran";
  // 15 keys of the call and the declared one: 16 in all.
  many.lock_keys.resize(15);
  many.lock_keys.push_back("ledger");
  r = client_->invoke_rpc("a-1", "audit", json::object(), many);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
}

}  // namespace
}  // namespace dex
