// An InvokeRpc's own lock keys (docs/flow-rules.md, "RPCs"): held besides the
// RPC declaration's from queueing until the RPC ends, at most 16 in all, each
// a name; a bad list is refused and changes nothing. check_state runs after
// every record (Harness::apply).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flow/limits.h"
#include "flow_test_util.h"

namespace dex::flow {
namespace {

using namespace dex::flow::testing;

// L: Start (Execute only) -> Locked (Execute holds "acct-1") / Next; RPCs
// "pay" (no declared keys) and "audit" (declares "ledger").
FlowDeclaration declaration() {
  FlowDeclaration d;
  d.set_flow_type("L");
  d.set_start_step_type("Start");
  *d.add_steps() = step_decl("Start");
  auto locked = step_decl("Locked");
  locked.mutable_options()->mutable_execute()->add_lock_keys("acct-1");
  *d.add_steps() = locked;
  *d.add_steps() = step_decl("Next");
  d.add_rpcs()->set_name("pay");
  auto* audit = d.add_rpcs();
  audit->set_name("audit");
  audit->add_lock_keys("ledger");
  return d;
}

class RpcCallLocks : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(h.declare(declaration()).kind, ApplyKind::kApplied);
    ASSERT_EQ(h.start("f", "r1", "L").kind, ApplyKind::kApplied);
  }

  ApplyResult invoke(const std::string& rpc_id, const std::string& name,
                     const std::vector<std::string>& keys, const std::string& request_id = "") {
    ++h.now;  // each call's deadline after the earlier calls'
    FlowRecord r = h.invoke_record("f", rpc_id, name);
    for (const auto& k : keys) r.mutable_invoke_rpc()->add_lock_keys(k);
    r.mutable_invoke_rpc()->set_request_id(request_id);
    return h.apply(r);
  }

  TaskState state(const std::string& rpc_id) { return h.rpc("f", rpc_id)->method().state(); }

  // Runs the RPC's queued attempt to completion.
  void complete(const std::string& rpc_id) {
    const std::string task = h.assign_rpc("f", rpc_id);
    ASSERT_EQ(h.apply(h.rpc_result_record("f", rpc_id, task)).kind, ApplyKind::kApplied);
    ASSERT_TRUE(h.rpc("f", rpc_id)->done());
  }

  // The keys of the holder's LOCKS_ACQUIRED events, in order.
  std::vector<std::vector<std::string>> acquired(const std::string& holder) {
    std::vector<std::vector<std::string>> out;
    for (const auto& e : h.history("f")) {
      if (e.kind() == LOCKS_ACQUIRED && e.step_execution_id() == holder)
        out.emplace_back(e.lock_keys().begin(), e.lock_keys().end());
    }
    return out;
  }

  Harness h;
};

TEST_F(RpcCallLocks, TwoCallsWithTheSameKeyRunOneAtATime) {
  ASSERT_EQ(invoke("rpc:a", "pay", {"acct-1"}).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:a"), TASK_QUEUED);
  ASSERT_EQ(invoke("rpc:b", "pay", {"acct-1"}).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:b"), TASK_LOCKED) << "acct-1 is held by rpc:a";
  EXPECT_TRUE(h.effects.queued.empty());
  // Running does not let the second one in either.
  const std::string task = h.assign_rpc("f", "rpc:a");
  EXPECT_EQ(state("rpc:b"), TASK_LOCKED);
  ASSERT_EQ(h.apply(h.rpc_result_record("f", "rpc:a", task)).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:b"), TASK_QUEUED) << "queued in the apply that ended rpc:a";
  bool queued = false;
  for (const auto& q : h.effects.queued) queued |= q.task.step_execution_id() == "rpc:b";
  EXPECT_TRUE(queued);
  EXPECT_EQ(acquired("rpc:b"), (std::vector<std::vector<std::string>>{{"acct-1"}}));
  complete("rpc:b");
  EXPECT_EQ(h.run("f")->locks_size(), 0);
}

TEST_F(RpcCallLocks, CallsWithDifferentKeysRunTogether) {
  ASSERT_EQ(invoke("rpc:a", "pay", {"acct-1"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(invoke("rpc:b", "pay", {"acct-2"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(invoke("rpc:c", "pay", {}).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:a"), TASK_QUEUED);
  EXPECT_EQ(state("rpc:b"), TASK_QUEUED);
  EXPECT_EQ(state("rpc:c"), TASK_QUEUED) << "no keys: as before";
  h.assign_rpc("f", "rpc:a");
  h.assign_rpc("f", "rpc:b");
  EXPECT_EQ(state("rpc:a"), TASK_RUNNING);
  EXPECT_EQ(state("rpc:b"), TASK_RUNNING) << "both run at once";
  EXPECT_EQ(h.run("f")->locks_size(), 2);
}

TEST_F(RpcCallLocks, TheCallsKeysJoinTheDeclarationsWithoutRepeats) {
  ASSERT_EQ(invoke("rpc:a", "audit", {"acct-1", "ledger", "acct-1"}).kind, ApplyKind::kApplied);
  EXPECT_EQ(acquired("rpc:a"), (std::vector<std::vector<std::string>>{{"ledger", "acct-1"}}))
      << "the declaration's first, each once";
  // A call naming only the declared key of another RPC waits for it too.
  ASSERT_EQ(invoke("rpc:b", "pay", {"ledger"}).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:b"), TASK_LOCKED);
  ASSERT_EQ(invoke("rpc:c", "audit", {}).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:c"), TASK_LOCKED) << "ledger is declared";
  complete("rpc:a");
  EXPECT_EQ(state("rpc:b"), TASK_QUEUED);
  EXPECT_EQ(state("rpc:c"), TASK_LOCKED) << "behind rpc:b, the earlier waiter";
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // rpc:b's deadline
  EXPECT_EQ(h.rpc("f", "rpc:b")->outcome(), ATTEMPT_TIMED_OUT);
  EXPECT_EQ(state("rpc:c"), TASK_QUEUED) << "rpc:b's timeout released ledger";
  std::vector<std::string> released;
  for (const auto& e : h.history("f")) {
    if (e.kind() == LOCKS_RELEASED && e.step_execution_id() == "rpc:a")
      released.assign(e.lock_keys().begin(), e.lock_keys().end());
  }
  EXPECT_EQ(released, (std::vector<std::string>{"ledger", "acct-1"}));
}

TEST_F(RpcCallLocks, ACallKeyThatAStepHoldsWaitsForTheStep) {
  ASSERT_EQ(h.execute("f", "Start-1", go_to({go("Locked")})).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.step("f", "Locked-1").method().state(), TASK_QUEUED);
  ASSERT_EQ(invoke("rpc:a", "pay", {"acct-1"}).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:a"), TASK_LOCKED) << "Locked-1's Execute holds acct-1";
  ASSERT_EQ(invoke("rpc:b", "pay", {"acct-2"}).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:b"), TASK_QUEUED);
  ASSERT_EQ(h.execute("f", "Locked-1", go_to({go("Locked")})).kind, ApplyKind::kApplied);
  EXPECT_EQ(state("rpc:a"), TASK_QUEUED) << "the Step ended: the RPC, the first waiter, goes";
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_LOCKED) << "behind the RPC";
  complete("rpc:a");
  EXPECT_EQ(h.step("f", "Locked-2").method().state(), TASK_QUEUED);
}

TEST_F(RpcCallLocks, ABadKeyListIsRefusedAndChangesNothing) {
  ASSERT_EQ(invoke("rpc:held", "pay", {"acct-1"}).kind, ApplyKind::kApplied);
  const auto before = h.kv.scan("");
  const auto refused = [&](const std::string& name, const std::vector<std::string>& keys,
                           const std::string& message) {
    const ApplyResult r = invoke("rpc:bad", name, keys);
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << message;
    EXPECT_EQ(r.code, RefusalCode::kInvalidArgument) << message;
    EXPECT_EQ(r.message, message);
    EXPECT_TRUE(h.effects.queued.empty());
    EXPECT_EQ(h.kv.scan(""), before) << "nothing changed: " << message;
  };
  refused("pay", {"acct-2", ""}, "lockKeys[1] is empty");
  refused("pay", {std::string(kNameBytesMax + 1, 'k')}, "lockKeys[0] is longer than 255 bytes");
  refused("pay", {"a\nb"}, "lockKeys[0] contains a control character");
  std::vector<std::string> seventeen;
  for (size_t i = 0; i <= kLockKeysMax; ++i) seventeen.push_back("k" + std::to_string(i));
  refused("pay", seventeen, "lockKeys has 17 keys; at most 16 (lockKeys[16] on)");
  // 16 of the call's own and the declared one: 17 in all.
  std::vector<std::string> sixteen(seventeen.begin(), seventeen.end() - 1);
  refused("audit", sixteen,
          "lockKeys[15] 'k15' is one key too many: RPC 'audit' holds at most 16 lock keys, its "
          "declaration's and the call's together");
  // The declared key among the call's counts once: 16 in all is fine.
  sixteen.back() = "ledger";
  ASSERT_EQ(invoke("rpc:ok", "audit", sixteen).kind, ApplyKind::kApplied);
  ASSERT_EQ(acquired("rpc:ok").size(), 1u);
  EXPECT_EQ(acquired("rpc:ok")[0].size(), kLockKeysMax);
  EXPECT_EQ(acquired("rpc:ok")[0].front(), "ledger");
}

TEST_F(RpcCallLocks, ARepeatByRequestIdAnswersAsBeforeWhateverItsKeys) {
  ASSERT_EQ(invoke("req:x", "pay", {"acct-1"}, "x").kind, ApplyKind::kApplied);
  ASSERT_EQ(invoke("rpc:b", "pay", {"acct-1"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(state("rpc:b"), TASK_LOCKED);
  const auto before = h.kv.scan("");
  // While it is open: unchanged, even with other keys or a bad list.
  for (const std::vector<std::string>& keys :
       {std::vector<std::string>{"acct-1"}, {"acct-9"}, {""}}) {
    const ApplyResult r = invoke("req:x", "pay", keys, "x");
    EXPECT_EQ(r.kind, ApplyKind::kUnchanged);
    EXPECT_EQ(r.message, "the RPC is running");
  }
  EXPECT_EQ(h.kv.scan(""), before);
  complete("req:x");
  EXPECT_EQ(state("rpc:b"), TASK_QUEUED);
  const ApplyResult again = invoke("req:x", "pay", {"acct-1"}, "x");
  EXPECT_EQ(again.kind, ApplyKind::kUnchanged);
  EXPECT_EQ(again.message, "the RPC completed");
  EXPECT_EQ(state("rpc:b"), TASK_QUEUED) << "the repeat took no key";
  // One that ended otherwise runs anew, behind its keys again.
  ASSERT_EQ(invoke("req:y", "pay", {"acct-1"}, "y").kind, ApplyKind::kApplied);
  ASSERT_EQ(state("req:y"), TASK_LOCKED);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // rpc:b's deadline
  ASSERT_EQ(state("req:y"), TASK_QUEUED);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // req:y's deadline
  ASSERT_EQ(h.rpc("f", "req:y")->outcome(), ATTEMPT_TIMED_OUT);
  ASSERT_EQ(invoke("rpc:c", "pay", {"acct-1"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(state("rpc:c"), TASK_QUEUED);
  ASSERT_EQ(invoke("req:y", "pay", {"acct-1"}, "y").kind, ApplyKind::kApplied);
  EXPECT_EQ(state("req:y"), TASK_LOCKED) << "the new run waits for rpc:c's acct-1";
  EXPECT_EQ(acquired("req:y").size(), 1u);
}

TEST_F(RpcCallLocks, RecoveryAndTheRunsCloseReleaseTheCallsKeys) {
  ASSERT_EQ(invoke("rpc:a", "pay", {"acct-1"}).kind, ApplyKind::kApplied);
  h.assign_rpc("f", "rpc:a");
  ASSERT_EQ(invoke("rpc:b", "pay", {"acct-1", "acct-2"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(state("rpc:b"), TASK_LOCKED);
  {
    KvFlowTxn txn(h.kv);
    Effects fx;
    recover_attempts(txn, h.now, fx);
    EXPECT_EQ(fx.rpcs_done.size(), 2u);
  }
  ASSERT_TRUE(check_state(h.kv).is_ok()) << check_state(h.kv).message();
  EXPECT_EQ(h.run("f")->locks_size(), 0);
  EXPECT_EQ(h.run("f")->lock_waiters_size(), 0);
  ASSERT_EQ(invoke("rpc:c", "pay", {"acct-2"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(invoke("rpc:d", "pay", {"acct-2"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(state("rpc:d"), TASK_LOCKED);
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  stop.mutable_stop_flow()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->locks_size(), 0);
  EXPECT_EQ(h.run("f")->lock_waiters_size(), 0);
}

}  // namespace
}  // namespace dex::flow
