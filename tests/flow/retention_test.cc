// Run retention (docs/flow-rules.md, "Retention"): a run closed for good is
// deleted, with everything kept under it, by its RETENTION timer. Each test
// applies records to an in-memory state; check_state runs after every record
// (no key outlives its run, no timer stays indexed for a deleted one).
#include <gtest/gtest.h>

#include "flow_test_util.h"

namespace dex::flow {
namespace {

using namespace dex::flow::testing;

constexpr int64_t kKeep = 60'000;

// P (flow_test_util.h) waits on C: Work (Execute), Attribute "a", Channel "in".
FlowDeclaration child_declaration() {
  FlowDeclaration d;
  d.set_flow_type("C");
  d.set_start_step_type("Work");
  *d.add_steps() = step_decl("Work");
  auto* a = d.add_attributes();
  a->set_key("a");
  a->set_type(ATTRIBUTE_STRING);
  d.add_channels()->set_name("in");
  return d;
}

Condition sub_flow(const std::string& input = "x") {
  Condition c;
  c.mutable_sub_flow()->set_flow_type("C");
  c.mutable_sub_flow()->mutable_input()->set_data(input);
  return c;
}

class Retention : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(h.declare(parent_declaration()).kind, ApplyKind::kApplied);
    ASSERT_EQ(h.declare(child_declaration()).kind, ApplyKind::kApplied);
  }

  ApplyResult start(const std::string& flow, const std::string& run, const std::string& type,
                    int64_t retention_ms, StartOptions options = {}) {
    FlowRecord r = h.start_record(flow, run, type, "in", options);
    r.mutable_start_flow()->set_retention_ms(retention_ms);
    return h.apply(r);
  }

  // Every key of the state that names `flow_id` (run, Steps, history,
  // Attributes, queues, messages, RPCs, the Flow ID entry, timers).
  size_t keys_of(const std::string& flow_id) {
    size_t n = 0;
    for (const auto& [k, v] : h.kv.data())
      if (k.find(flow_id + std::string(1, keys::kSep)) != std::string::npos || k == "~i/" + flow_id)
        ++n;
    return n;
  }

  Harness h;
};

TEST_F(Retention, AClosedRunIsDeletedWithAllItKeptWhenItsRetentionPasses) {
  StartOptions o;
  *o.add_initial_attributes() = attr("a", "v");
  ASSERT_EQ(start("c", "r1", "C", kKeep, o).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.publish("c", "in", {"m1", "m2"}).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("c")->retention_ms(), kKeep);
  EXPECT_EQ(h.run("c")->expire_at_ms(), 0) << "a running run never expires";
  EXPECT_FALSE(h.next_timer_at().has_value());

  const int64_t closed = h.now += 5;
  ASSERT_EQ(h.execute("c", "Work-1", graceful("out")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("c")->expire_at_ms(), closed + kKeep);
  EXPECT_EQ(h.next_timer_at(), closed + kKeep);
  EXPECT_EQ(h.effects.timers_set, std::vector<int64_t>{closed + kKeep});
  EXPECT_GT(keys_of("c"), 5u) << "run, Step, history, Attribute, queue, messages";

  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_FALSE(h.run("c").has_value());
  EXPECT_TRUE(h.history("c").empty());
  EXPECT_EQ(keys_of("c"), 0u) << "nothing of the run is left, nor its Flow ID";
  EXPECT_EQ(h.effects.runs_deleted, (std::vector<RunKey>{{"c", "r1"}}));
  // The Flow ID is free: the same request starts a new run.
  ASSERT_EQ(start("c", "r2", "C", kKeep).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("c", "r2")->status(), FLOW_RUNNING);
}

TEST_F(Retention, ARunWithoutRetentionIsKeptForever) {
  ASSERT_EQ(start("c", "r1", "C", 0).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", graceful("out")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("c")->expire_at_ms(), 0);
  EXPECT_FALSE(h.next_timer_at().has_value());
}

TEST_F(Retention, EveryEndStartsIt) {
  ASSERT_EQ(start("f", "r1", "C", kKeep).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("f", "Work-1", force_fail("no")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_FAILED);
  EXPECT_EQ(h.run("f")->expire_at_ms(), h.now + kKeep);
  ASSERT_EQ(start("s", "r1", "C", kKeep).kind, ApplyKind::kApplied);
  FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("s");
  stop.mutable_stop_flow()->set_mode(STOP_TERMINATE);
  stop.mutable_stop_flow()->set_at_unix_ms(h.now);
  ASSERT_EQ(h.apply(stop).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("s")->status(), FLOW_TERMINATED);
  EXPECT_EQ(h.run("s")->expire_at_ms(), h.now + kKeep);
}

TEST_F(Retention, AStaleOrRepeatedRetentionTimerChangesNothing) {
  ASSERT_EQ(start("c", "r1", "C", kKeep).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", graceful("out")).kind, ApplyKind::kApplied);
  const int64_t at = h.run("c")->expire_at_ms();
  FlowRecord r;
  auto* t = r.mutable_timer_fired();
  t->mutable_key()->set_flow_id("c");
  t->mutable_key()->set_run_id("r1");
  t->mutable_key()->set_kind(RETENTION);
  t->set_fire_at_ms(at - 1);  // not its time
  t->set_at_unix_ms(at);
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kStale);
  EXPECT_TRUE(h.run("c").has_value());
  t->set_fire_at_ms(at);
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kStale) << "the run is gone";
  t->mutable_key()->set_run_id("nope");
  EXPECT_EQ(h.apply(r).kind, ApplyKind::kStale);
}

TEST_F(Retention, AFlowRetryChainGoesTogetherWhenItsLastRunExpires) {
  ASSERT_EQ(start("c", "r1", "C", kKeep, retrying(2)).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", force_fail("once")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("c")->expire_at_ms(), 0) << "a retry follows: not closed for good";
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // the retry starts
  EXPECT_EQ(h.run("c", "r1.2")->retention_ms(), kKeep) << "a retry keeps the retention";
  ASSERT_EQ(h.execute("c", "Work-1", graceful("ok"), "r1.2").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("c", "r1.2")->expire_at_ms(), h.now + kKeep);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_FALSE(h.run("c", "r1").has_value());
  EXPECT_FALSE(h.run("c", "r1.2").has_value());
  EXPECT_EQ(h.effects.runs_deleted, (std::vector<RunKey>{{"c", "r1.2"}, {"c", "r1"}}));
  EXPECT_EQ(keys_of("c"), 0u);
}

TEST_F(Retention, AnAbandonedRetryStartsTheRetentionOfTheRunThatWaitedForIt) {
  ASSERT_EQ(start("c", "r1", "C", kKeep, retrying(3)).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", force_fail("boom")).kind, ApplyKind::kApplied);
  ASSERT_EQ(start("c", "r2", "C", 1'000).kind, ApplyKind::kApplied);  // takes the Flow ID
  ASSERT_EQ(h.execute("c", "Work-1", graceful("ok"), "r2").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // r1's retry: abandoned
  EXPECT_EQ(h.run("c", "r1")->expire_at_ms(), h.now + kKeep);
  // r2 goes first; the Flow ID entry with it. Then r1.
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_FALSE(h.run("c", "r2").has_value());
  EXPECT_TRUE(h.run("c", "r1").has_value());
  KvFlowTxn txn(h.kv);
  EXPECT_FALSE(txn.flow_id("c").has_value());
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_EQ(keys_of("c"), 0u);
}

TEST_F(Retention, ARetryWhoseFlowIdWasDeletedMeanwhileIsAbandoned) {
  StartOptions slow = retrying(3);
  slow.mutable_retry_policy()->set_initial_interval_ms(kKeep * 10);
  ASSERT_EQ(start("c", "r1", "C", kKeep, slow).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", force_fail("boom")).kind, ApplyKind::kApplied);
  ASSERT_EQ(start("c", "r2", "C", 1'000).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", graceful("ok"), "r2").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // r2 and the entry go
  KvFlowTxn txn(h.kv);
  EXPECT_FALSE(txn.flow_id("c").has_value());
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // r1's retry: nobody to start it
  EXPECT_FALSE(h.run("c", "r1.2").has_value());
  EXPECT_GT(h.run("c", "r1")->expire_at_ms(), 0);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_EQ(keys_of("c"), 0u);
}

TEST_F(Retention, ANewerRunKeepsTheFlowIdWhenAnOlderOneIsDeleted) {
  ASSERT_EQ(start("c", "r1", "C", kKeep).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("c", "Work-1", graceful("one")).kind, ApplyKind::kApplied);
  ASSERT_EQ(start("c", "r2", "C", kKeep).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_FALSE(h.run("c", "r1").has_value());
  KvFlowTxn txn(h.kv);
  ASSERT_TRUE(txn.flow_id("c").has_value());
  EXPECT_EQ(txn.flow_id("c")->run_id(), "r2");
  EXPECT_EQ(h.run("c", "r2")->status(), FLOW_RUNNING);
}

TEST_F(Retention, AMetChildIsDeletedWhileItsParentWaitsOnWithItsResult) {
  ASSERT_EQ(start("p", "r1", "P", kKeep).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("p", "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.wait_for("p", "Wait-1", wait_of(ALL_OF, {sub_flow("x"), sub_flow("y")})).kind,
            ApplyKind::kApplied);
  EXPECT_EQ(h.run("p/Wait-1/0")->retention_ms(), kKeep) << "a child inherits the retention";
  ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", graceful("out0")).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // child 0 expires
  EXPECT_FALSE(h.run("p/Wait-1/0").has_value());
  auto wait = h.step("p", "Wait-1");
  EXPECT_EQ(wait.phase(), PHASE_WAITING);
  EXPECT_EQ(wait.conditions(0).sub_flow().outputs(0).output().data(), "out0")
      << "the parent keeps the result it was told";
  ASSERT_EQ(h.execute("p/Wait-1/1", "Work-1", graceful("out1")).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("p", "Wait-1").phase(), PHASE_EXECUTE);
}

TEST_F(Retention, AParentIsDeletedWhileItsAnyOfLoserRunsOn) {
  ASSERT_EQ(start("p", "r1", "P", kKeep).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("p", "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.wait_for("p", "Wait-1", wait_of(ANY_OF, {sub_flow("x"), timer_after(10)})).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // the Timer wins
  ASSERT_EQ(h.execute("p", "Wait-1", graceful("done")).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // the parent expires
  EXPECT_FALSE(h.run("p").has_value());
  EXPECT_EQ(h.run("p/Wait-1/0")->status(), FLOW_RUNNING);
  // The child ends later: nobody to tell, nothing breaks; it expires in turn.
  ASSERT_EQ(h.execute("p/Wait-1/0", "Work-1", graceful("late")).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  EXPECT_EQ(keys_of("p/Wait-1/0"), 0u);
}

}  // namespace
}  // namespace dex::flow
