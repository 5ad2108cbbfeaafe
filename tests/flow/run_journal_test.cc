// The run journal (docs/flow-rules.md, "Run journal"): folding a run's deltas
// to any record gives the run exactly as it was after that record; a refused
// record adds nothing; later deltas leave out the start's input and options.
// (Every Harness apply also checks that the whole journal folds to the run.)
#include <gtest/gtest.h>

#include <vector>

#include "flow/run_journal.h"
#include "flow_test_util.h"

namespace dex::flow::testing {
namespace {

// J: Start -> Wait (WaitFor on Channel "approval") -> Done; Attribute writes
// by a client; Channel messages published and consumed.
FlowDeclaration journal_declaration() {
  FlowDeclaration d;
  d.set_flow_type("J");
  d.set_start_step_type("Start");
  *d.add_steps() = step_decl("Start");
  *d.add_steps() = step_decl("Wait", true);
  *d.add_steps() = step_decl("Done");
  d.add_channels()->set_name("approval");
  auto* stage = d.add_attributes();
  stage->set_key("stage");
  stage->set_type(ATTRIBUTE_STRING);
  return d;
}

// Applies records to run f/r1, keeping the run's state after each record that
// changed it: snapshots[k] is the state after the journal's (k+1)th delta.
struct Recorder {
  Harness h;
  std::vector<StateKeys> snapshots;
  size_t journaled = 0;

  size_t journal_size() { return KvFlowTxn(h.kv).run_journal("f", "r1").size(); }
  void note() {
    const size_t now = journal_size();
    if (now == journaled) return;
    ASSERT_EQ(now, journaled + 1) << "one delta per record that changed the run";
    journaled = now;
    snapshots.push_back(run_state(h.kv, RunKey{"f", "r1"}));
  }
  // A Worker takes the execution's attempt, then its result decides: two records.
  ApplyResult finish(const std::string&, const FlowRecord& result_with_outcome) {
    const ApplyResult r = h.apply(result_with_outcome);
    note();
    return r;
  }
  FlowRecord taken(const std::string& exec) {
    const std::string task = h.assign("f", exec);
    note();
    return h.result_record("f", exec, task);
  }
};

TEST(RunJournal, FoldingToAnyRecordGivesTheRunAsItWasAfterIt) {
  Recorder rec;
  Harness& h = rec.h;
  ASSERT_EQ(h.declare(journal_declaration()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("f", "r1", "J").kind, ApplyKind::kApplied);
  rec.note();
  ASSERT_EQ(h.set_attributes("f", {attr("stage", "new")}).kind, ApplyKind::kApplied);
  rec.note();
  ASSERT_EQ(h.publish("f", "approval", {"a", "b", "c"}).kind, ApplyKind::kApplied);
  rec.note();
  FlowRecord go_wait = rec.taken("Start-1");
  *go_wait.mutable_method_result()->mutable_decision() = go_to({go("Wait")});
  ASSERT_EQ(rec.finish("Start-1", go_wait).kind, ApplyKind::kApplied);
  // The wait takes two of the three messages: one stays queued.
  FlowRecord wait = rec.taken("Wait-1");
  *wait.mutable_method_result()->mutable_wait() = wait_of(ANY_OF, {channel("approval", FOR_N, 2)});
  ASSERT_EQ(rec.finish("Wait-1", wait).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr_delete("stage")}).kind, ApplyKind::kApplied);
  rec.note();
  FlowRecord go_done = rec.taken("Wait-1");
  *go_done.mutable_method_result()->mutable_decision() = go_to({go("Done")});
  ASSERT_EQ(rec.finish("Wait-1", go_done).kind, ApplyKind::kApplied);
  FlowRecord done = rec.taken("Done-1");
  *done.mutable_method_result()->mutable_decision() = graceful("ok");
  ASSERT_EQ(rec.finish("Done-1", done).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_COMPLETED);

  const auto deltas = KvFlowTxn(h.kv).run_journal("f", "r1");
  ASSERT_EQ(deltas.size(), rec.snapshots.size());
  ASSERT_GE(deltas.size(), 10u);
  for (size_t k = 1; k <= deltas.size(); ++k)
    EXPECT_EQ(folded_state(deltas, k), rec.snapshots[k - 1]) << "after delta " << k;

  // The image itself: the wait, met at once, took two of the three messages.
  EXPECT_EQ(fold_journal(deltas, 6).messages.size(), 3u);
  const RunImage waited = fold_journal(deltas, 7);
  EXPECT_EQ(waited.messages.size(), 1u);
  EXPECT_EQ(waited.steps.at("Wait-1").phase(), PHASE_EXECUTE);
  EXPECT_EQ(waited.attributes.at({"stage", ""}).string_value(), "new");
  EXPECT_EQ(fold_journal(deltas, 8).attributes.count({"stage", ""}), 0u);
  const RunImage executed = fold_journal(deltas, 10);
  EXPECT_EQ(executed.steps.at("Wait-1").phase(), PHASE_DONE);
  EXPECT_EQ(executed.steps.at("Done-1").phase(), PHASE_EXECUTE);
}

TEST(RunJournal, ALaterDeltaLeavesOutTheStartsInputAndOptionsAndTheFoldRestoresThem) {
  Harness h;
  ASSERT_EQ(h.declare(journal_declaration()).kind, ApplyKind::kApplied);
  StartOptions options;
  options.set_timeout_ms(60'000);
  ASSERT_EQ(h.apply(h.start_record("f", "r1", "J", std::string(4'000, 'x'), options)).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr("stage", "new")}).kind, ApplyKind::kApplied);
  const auto deltas = KvFlowTxn(h.kv).run_journal("f", "r1");
  ASSERT_EQ(deltas.size(), 2u);
  EXPECT_EQ(deltas[0].run().input().data().size(), 4'000u);
  EXPECT_EQ(deltas[0].at_ms(), h.now);
  ASSERT_TRUE(deltas[1].has_run());
  EXPECT_FALSE(deltas[1].run().has_input());
  EXPECT_FALSE(deltas[1].run().has_options());
  const RunImage image = fold_journal(deltas, 2);
  EXPECT_EQ(image.run.input().data().size(), 4'000u);
  EXPECT_EQ(image.run.options().timeout_ms(), 60'000);
}

TEST(RunJournal, ARefusedRecordAddsNoDelta) {
  Harness h;
  ASSERT_EQ(h.declare(journal_declaration()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("f", "r1", "J").kind, ApplyKind::kApplied);
  const size_t before = KvFlowTxn(h.kv).run_journal("f", "r1").size();
  EXPECT_EQ(h.publish("f", "no-such-channel", {"a"}).kind, ApplyKind::kRejected);
  EXPECT_EQ(h.set_attributes("f", {attr("undeclared", "x")}).kind, ApplyKind::kRejected);
  EXPECT_EQ(KvFlowTxn(h.kv).run_journal("f", "r1").size(), before);
}

}  // namespace
}  // namespace dex::flow::testing
