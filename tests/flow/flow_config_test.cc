// FlowConfig (docs/flow-rules.md, "FlowConfig"): the declaration's config,
// a start's override field by field, and UpdateFlowConfig on a running run
// (recorded as FLOW_CONFIG_UPDATED): the default Step durability, the
// continue-as-new thresholds, the Attribute Store, ActiveStepTypes indexing.
// check_state (the search index included) runs after every record.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flow/declaration.h"
#include "flow_test_util.h"

namespace dex::flow::testing {
namespace {

// C: Start (Execute only, no durability set) -> Sync (Execute declared SYNC)
// or Wait (WaitFor); Attribute "n" (int, synced).
FlowDeclaration configured(FlowConfig config = {}) {
  FlowDeclaration d;
  d.set_flow_type("C");
  d.set_start_step_type("Start");
  *d.add_steps() = step_decl("Start");
  auto sync = step_decl("Sync");
  sync.mutable_options()->mutable_execute()->set_durability(SYNC);
  *d.add_steps() = sync;
  *d.add_steps() = step_decl("Wait", true);
  auto* n = d.add_attributes();
  n->set_key("n");
  n->set_type(ATTRIBUTE_INT64);
  n->set_sync(true);
  *d.mutable_config() = config;
  return d;
}

class FlowConfigRules : public ::testing::Test {
 protected:
  FlowRecord update_record(const FlowConfig& config, std::vector<std::string> clear = {},
                           const std::string& request_id = "", const std::string& run_id = "r1",
                           const std::string& flow_id = "f") {
    FlowRecord r;
    auto* u = r.mutable_update_flow_config();
    u->set_flow_id(flow_id);
    u->set_run_id(run_id);
    *u->mutable_config() = config;
    for (auto& f : clear) u->add_clear_fields(f);
    u->set_request_id(request_id);
    u->set_at_unix_ms(h.now);
    return r;
  }
  ApplyResult update(const FlowConfig& config, std::vector<std::string> clear = {},
                     const std::string& request_id = "", const std::string& run_id = "r1",
                     const std::string& flow_id = "f") {
    return h.apply(update_record(config, std::move(clear), request_id, run_id, flow_id));
  }
  Durability queued_durability(const std::string& exec, const std::string& run_id = "r1") {
    for (const auto& q : h.effects.queued)
      if (q.task.step_execution_id() == exec && q.task.run_id() == run_id) return q.durability;
    ADD_FAILURE() << exec << " was not queued by the last record";
    return DURABILITY_UNSPECIFIED;
  }
  std::vector<std::string> active_step_types(const std::string& run_id = "r1") {
    KvFlowTxn txn(h.kv);
    auto doc = txn.search_doc("f", run_id);
    EXPECT_TRUE(doc.has_value());
    if (!doc) return {};
    return {doc->active_step_types().begin(), doc->active_step_types().end()};
  }

  Harness h;
};

FlowConfig durability(Durability d) {
  FlowConfig c;
  c.set_default_durability(d);
  return c;
}

TEST_F(FlowConfigRules, TheDefaultDurabilityAppliesToStepsThatSetNoneAndAStartMayOverrideIt) {
  ASSERT_EQ(h.declare(configured(durability(ASYNC))).kind, ApplyKind::kApplied);
  // Stored without a durability for the Step that sets none (resolved per run).
  KvFlowTxn txn(h.kv);
  const auto stored = txn.declaration("C", 0)->declaration();
  EXPECT_EQ(stored.steps(0).options().execute().durability(), DURABILITY_UNSPECIFIED);
  EXPECT_EQ(stored.steps(0).options().execute().attempt_timeout_ms(), kAttemptTimeoutDefaultMs);
  EXPECT_EQ(stored.steps(1).options().execute().durability(), SYNC);

  ASSERT_EQ(h.start("f", "r1", "C").kind, ApplyKind::kApplied);
  EXPECT_EQ(queued_durability("Start-1"), ASYNC);
  EXPECT_EQ(h.step("f", "Start-1").options().execute().durability(), ASYNC);
  // A Step's own durability wins over the config's default.
  ASSERT_EQ(h.execute("f", "Start-1", go_to({go("Sync")})).kind, ApplyKind::kApplied);
  EXPECT_EQ(queued_durability("Sync-1"), SYNC);

  // A start's config overrides the declaration's, field by field.
  StartOptions o;
  o.mutable_config()->set_default_durability(SYNC);
  ASSERT_EQ(h.start("g", "r1", "C", o).kind, ApplyKind::kApplied);
  EXPECT_EQ(queued_durability("Start-1"), SYNC);
  // Without any config: SYNC, as before FlowConfig.
  ASSERT_EQ(h.declare(configured()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("k", "r1", "C").kind, ApplyKind::kApplied);
  EXPECT_EQ(queued_durability("Start-1"), SYNC);
  EXPECT_EQ(config_with_defaults(h.run("k")->config()).default_durability(), SYNC);
  EXPECT_TRUE(config_with_defaults(h.run("k")->config()).index_active_step_types());
}

TEST_F(FlowConfigRules, TheConfigNamesTheAttributeStoreAsTheOldFieldsDoAndAStartWins) {
  FlowConfig store;
  store.set_attribute_store("crm");
  ASSERT_EQ(h.declare(configured(store)).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("a", "r1", "C").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("a")->attribute_store(), "crm");
  EXPECT_EQ(h.run("a")->config().attribute_store(), "crm");
  StartOptions old_field;
  old_field.set_attribute_store("billing");
  ASSERT_EQ(h.start("b", "r1", "C", old_field).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("b")->attribute_store(), "billing");
  EXPECT_EQ(h.run("b")->config().attribute_store(), "billing");
  StartOptions new_field;
  new_field.mutable_config()->set_attribute_store("audit");
  ASSERT_EQ(h.start("c", "r1", "C", new_field).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("c")->attribute_store(), "audit");

  // Both fields at one level must agree.
  StartOptions both = new_field;
  both.set_attribute_store("audit");
  EXPECT_EQ(h.start("d", "r1", "C", both).kind, ApplyKind::kApplied);
  both.set_attribute_store("billing");
  auto r = h.start("e", "r1", "C", both);
  EXPECT_EQ(r.code, RefusalCode::kInvalidArgument);
  EXPECT_NE(r.message.find("config.attributeStore 'audit' disagrees with attributeStore 'billing'"),
            std::string::npos)
      << r.message;
  FlowDeclaration d = configured(store);
  d.set_attribute_store("other");
  r = h.declare(d);
  EXPECT_EQ(r.code, RefusalCode::kInvalidArgument);
  EXPECT_NE(r.message.find("Flow type 'C' config.attributeStore 'crm' disagrees"),
            std::string::npos)
      << r.message;
  FlowDeclaration bad = configured(durability(static_cast<Durability>(7)));
  EXPECT_EQ(h.declare(bad).code, RefusalCode::kInvalidArgument);
}

TEST_F(FlowConfigRules,
       AnUpdateChangesTheSetFieldsRecordsBothConfigsAndClearsBackToTheDeclaration) {
  FlowConfig declared;
  declared.set_continue_as_new_after_events(500);
  declared.set_default_durability(ASYNC);
  ASSERT_EQ(h.declare(configured(declared)).kind, ApplyKind::kApplied);
  StartOptions o;
  o.mutable_config()->set_continue_as_new_after_bytes(1'000'000);
  ASSERT_EQ(h.start("f", "r1", "C", o).kind, ApplyKind::kApplied);

  FlowConfig change;
  change.set_default_durability(SYNC);
  change.set_continue_as_new_after_events(900);
  ASSERT_EQ(update(change).kind, ApplyKind::kApplied);
  auto run = h.run("f");
  EXPECT_EQ(run->config().default_durability(), SYNC);
  EXPECT_EQ(run->config().continue_as_new_after_events(), 900u);
  EXPECT_EQ(run->config().continue_as_new_after_bytes(), 1'000'000u) << "unset fields stay";
  const auto events = h.history("f");
  ASSERT_FALSE(events.empty());
  const HistoryEvent& e = events.back();
  EXPECT_EQ(e.kind(), FLOW_CONFIG_UPDATED);
  EXPECT_EQ(e.old_config().default_durability(), ASYNC);
  EXPECT_EQ(e.old_config().continue_as_new_after_events(), 500u);
  EXPECT_EQ(e.new_config().default_durability(), SYNC);
  EXPECT_EQ(e.new_config().continue_as_new_after_events(), 900u);
  EXPECT_EQ(e.new_config().continue_as_new_after_bytes(), 1'000'000u);

  // The new default applies to the executions created after the update.
  ASSERT_EQ(h.execute("f", "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  EXPECT_EQ(queued_durability("Wait-1"), SYNC);

  // Cleared fields go back to the declaration's value (none declared: unset).
  ASSERT_EQ(update({}, {"default_durability", "continue_as_new_after_bytes"}).kind,
            ApplyKind::kApplied);
  run = h.run("f");
  EXPECT_EQ(run->config().default_durability(), ASYNC);
  EXPECT_EQ(run->config().continue_as_new_after_bytes(), 0u);
  EXPECT_EQ(run->config().continue_as_new_after_events(), 900u);
  // Nothing to change: unchanged, no event.
  const size_t before = h.history("f").size();
  EXPECT_EQ(update(durability(ASYNC)).kind, ApplyKind::kUnchanged);
  EXPECT_EQ(h.history("f").size(), before);
}

TEST_F(FlowConfigRules, ARepeatedRequestIdChangesNothingEvenAfterALaterUpdate) {
  ASSERT_EQ(h.declare(configured()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("f", "r1", "C").kind, ApplyKind::kApplied);
  ASSERT_EQ(update(durability(ASYNC), {}, "u-1").kind, ApplyKind::kApplied);
  ASSERT_EQ(update(durability(SYNC), {}, "u-2").kind, ApplyKind::kApplied);
  const size_t events = h.history("f").size();
  auto r = update(durability(ASYNC), {}, "u-1");
  EXPECT_EQ(r.kind, ApplyKind::kUnchanged);
  EXPECT_EQ(r.run_id, "r1");
  EXPECT_EQ(h.run("f")->config().default_durability(), SYNC) << "the repeat did not undo u-2";
  EXPECT_EQ(h.history("f").size(), events);
  // One ID given to another kind of call is another request.
  EXPECT_EQ(h.set_attributes("f", {attr_int("n", 3)}, "r1", "u-1").kind, ApplyKind::kApplied);
}

TEST_F(FlowConfigRules, RefusalsNameWhatIsWrongAndChangeNothing) {
  ASSERT_EQ(h.declare(configured()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("f", "r1", "C").kind, ApplyKind::kApplied);
  auto expect = [&](const ApplyResult& r, RefusalCode code, const std::string& text) {
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << text;
    EXPECT_EQ(r.code, code) << r.message;
    EXPECT_NE(r.message.find(text), std::string::npos) << r.message;
  };
  const size_t events = h.history("f").size();
  expect(update(durability(ASYNC), {}, "", ""), RefusalCode::kInvalidArgument, "exact runId");
  expect(update(durability(ASYNC), {}, "", "r9"), RefusalCode::kNotFound, "has no run 'r9'");
  expect(update(durability(ASYNC), {}, "", "r1", "nope"), RefusalCode::kNotFound,
         "Flow 'nope' has no run");
  expect(update({}), RefusalCode::kInvalidArgument, "sets no field and clears none");
  expect(update({}, {"retries"}), RefusalCode::kInvalidArgument,
         "'retries' is not a FlowConfig field (continue_as_new_after_events");
  expect(update({}, {"attribute_store", "attribute_store"}), RefusalCode::kInvalidArgument,
         "names 'attribute_store' twice");
  expect(update(durability(ASYNC), {"default_durability"}), RefusalCode::kInvalidArgument,
         "both set and cleared");
  expect(update(durability(static_cast<Durability>(9))), RefusalCode::kInvalidArgument,
         "config.defaultDurability is not SYNC or ASYNC");
  // A running run's Attribute Store cannot change: say why.
  FlowConfig store;
  store.set_attribute_store("crm");
  expect(update(store), RefusalCode::kFailedPrecondition,
         "the Attribute Store of a running run cannot change (from none to 'crm')");
  EXPECT_EQ(h.history("f").size(), events);
  EXPECT_EQ(h.run("f")->config().default_durability(), DURABILITY_UNSPECIFIED);

  // A closed run's config does not change.
  ASSERT_EQ(h.execute("f", "Start-1", graceful("done")).kind, ApplyKind::kApplied);
  expect(update(durability(ASYNC)), RefusalCode::kFailedPrecondition,
         "run 'r1' of Flow 'f' is COMPLETED: only a running run's FlowConfig changes");
}

TEST_F(FlowConfigRules, TheSameAttributeStoreIsNoChangeAndClearingToAnotherIsRefused) {
  FlowConfig store;
  store.set_attribute_store("crm");
  ASSERT_EQ(h.declare(configured(store)).kind, ApplyKind::kApplied);
  StartOptions o;
  o.set_attribute_store("billing");
  ASSERT_EQ(h.start("f", "r1", "C", o).kind, ApplyKind::kApplied);
  FlowConfig same;
  same.set_attribute_store("billing");
  EXPECT_EQ(update(same).kind, ApplyKind::kUnchanged);
  auto r = update({}, {"attribute_store"});
  EXPECT_EQ(r.code, RefusalCode::kFailedPrecondition);
  EXPECT_NE(r.message.find("from 'billing' to 'crm'"), std::string::npos) << r.message;
  EXPECT_EQ(h.run("f")->attribute_store(), "billing");
}

TEST_F(FlowConfigRules, ALoweredThresholdTheHistoryPassedContinuesTheRunAtOnce) {
  ASSERT_EQ(h.declare(configured()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("f", "r1", "C").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("f", "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  ASSERT_GE(h.history("f").size(), 2u);
  // No attempt runs (Wait-1 is queued): the run continues in the same apply.
  FlowConfig lower;
  lower.set_continue_as_new_after_events(2);
  auto r = update(lower);
  ASSERT_EQ(r.kind, ApplyKind::kApplied) << r.message;
  EXPECT_EQ(r.run_id, "r1.c1");
  auto old = h.run("f");
  EXPECT_EQ(old->status(), FLOW_CONTINUED_AS_NEW);
  std::vector<HistoryKind> kinds;
  for (const auto& e : h.history("f")) kinds.push_back(e.kind());
  ASSERT_GE(kinds.size(), 3u);
  EXPECT_EQ(kinds[kinds.size() - 3], FLOW_CONFIG_UPDATED);
  EXPECT_EQ(kinds[kinds.size() - 2], CONTINUE_AS_NEW_REQUESTED);
  EXPECT_EQ(kinds.back(), FLOW_CLOSED);
  // The new run keeps the updated config and the carried execution.
  auto next = h.run("f", "r1.c1");
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->config().continue_as_new_after_events(), 2u);
  EXPECT_EQ(h.step("f", "Wait-1", "r1.c1").method().state(), TASK_QUEUED);
}

TEST_F(FlowConfigRules, ALoweredThresholdWaitsForTheRunningAttempt) {
  ASSERT_EQ(h.declare(configured()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("f", "r1", "C").kind, ApplyKind::kApplied);
  const std::string task = h.assign("f", "Start-1");
  FlowConfig lower;
  lower.set_continue_as_new_after_events(1);
  auto r = update(lower);
  ASSERT_EQ(r.kind, ApplyKind::kApplied);
  EXPECT_EQ(r.run_id, "r1") << "an attempt runs: the continue-as-new is pending";
  EXPECT_FALSE(h.run("f")->continue_as_new_pending().empty());
  EXPECT_NE(h.run("f")->continue_as_new_pending().find("continue_as_new_after_events 1"),
            std::string::npos);
  FlowRecord done = h.result_record("f", "Start-1", task);
  *done.mutable_method_result()->mutable_decision() = go_to({go("Wait")});
  ASSERT_EQ(h.apply(done).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_CONTINUED_AS_NEW);
  EXPECT_EQ(h.run("f")->next_run_id(), "r1.c1");
}

TEST_F(FlowConfigRules, ActiveStepTypesAreIndexedOnlyWhenTheConfigSaysSo) {
  FlowConfig off;
  off.set_index_active_step_types(false);
  ASSERT_EQ(h.declare(configured(off)).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("f", "r1", "C").kind, ApplyKind::kApplied);
  EXPECT_TRUE(active_step_types().empty());
  EXPECT_FALSE(config_with_defaults(h.run("f")->config()).index_active_step_types());
  // Turned on at runtime: the run's entries follow in the update's own apply.
  FlowConfig on;
  on.set_index_active_step_types(true);
  ASSERT_EQ(update(on).kind, ApplyKind::kApplied);
  EXPECT_EQ(active_step_types(), std::vector<std::string>{"Start"});
  ASSERT_EQ(h.execute("f", "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  EXPECT_EQ(active_step_types(), std::vector<std::string>{"Wait"});
  // Cleared back to the declaration's (off): gone again.
  ASSERT_EQ(update({}, {"index_active_step_types"}).kind, ApplyKind::kApplied);
  EXPECT_TRUE(active_step_types().empty());
  // A start may turn it on for its run.
  StartOptions o;
  o.mutable_config()->set_index_active_step_types(true);
  ASSERT_EQ(h.start("g", "r1", "C", o).kind, ApplyKind::kApplied);
  KvFlowTxn txn(h.kv);
  EXPECT_EQ(txn.search_doc("g", "r1")->active_step_types_size(), 1);
}

TEST_F(FlowConfigRules, TheTimeoutHandlerTakesTheDefaultDurabilityUnlessItSetsOne) {
  FlowDeclaration d = configured(durability(ASYNC));
  d.set_has_timeout_handler(true);
  ASSERT_EQ(h.declare(d).kind, ApplyKind::kApplied);
  KvFlowTxn txn(h.kv);
  const auto stored = txn.declaration("C", 0)->declaration();
  EXPECT_EQ(stored.on_timeout().options().durability(), DURABILITY_UNSPECIFIED);
  EXPECT_EQ(timeout_handler_options(stored, ASYNC).durability(), ASYNC);
  EXPECT_EQ(timeout_handler_options(stored).durability(), SYNC);
  d.mutable_on_timeout()->mutable_options()->set_durability(SYNC);
  EXPECT_EQ(timeout_handler_options(with_defaults(d), ASYNC).durability(), SYNC);
}

}  // namespace
}  // namespace dex::flow::testing
