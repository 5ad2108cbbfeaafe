// Time travel (docs/flow-rules.md, "Time travel"): a new run of the Flow ID
// from a point of its latest run's history, with the state as it was there,
// the latest declaration, and both runs linked; refusals name what is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flow/run_journal.h"
#include "flow_test_util.h"

namespace dex::flow::testing {
namespace {

// S: Start -> Wait (WaitFor) -> Charge (no retries); Channel "approval";
// Attribute "stage".
FlowDeclaration shop(bool with_charge = true) {
  FlowDeclaration d;
  d.set_flow_type("S");
  d.set_start_step_type("Start");
  *d.add_steps() = step_decl("Start");
  *d.add_steps() = step_decl("Wait", true);
  if (with_charge) {
    auto charge = step_decl("Charge");
    charge.mutable_options()->mutable_execute()->mutable_retry()->set_maximum_attempts(1);
    *d.add_steps() = charge;
  }
  d.add_channels()->set_name("approval");
  auto* stage = d.add_attributes();
  stage->set_key("stage");
  stage->set_type(ATTRIBUTE_STRING);
  return d;
}

TimeTravelPoint point_of(TimeTravelKind kind, const std::string& what = "", int64_t at = 0) {
  TimeTravelPoint p;
  p.set_kind(kind);
  if (kind == TIME_TRAVEL_STEP_EXECUTION) p.set_step_execution_id(what);
  if (kind == TIME_TRAVEL_FIRST_OF_STEP_TYPE || kind == TIME_TRAVEL_LATEST_OF_STEP_TYPE)
    p.set_step_type(what);
  p.set_event_time_ms(at);
  return p;
}

class TimeTravel : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(h.declare(shop()).kind, ApplyKind::kApplied); }

  ApplyResult travel(const TimeTravelPoint& point, const std::string& from = "r1",
                     const std::string& to = "r2", const std::string& request_id = "") {
    FlowRecord r;
    auto* t = r.mutable_time_travel();
    t->set_flow_id("f");
    t->set_run_id(from);
    t->set_new_run_id(to);
    *t->mutable_point() = point;
    t->set_reason("fixed the charge bug");
    t->set_request_id(request_id);
    t->set_at_unix_ms(h.now);
    return h.apply(r);
  }

  // Start writes stage=paid and goes to Charge, which fails for good.
  void run_into_a_failed_charge() {
    ASSERT_EQ(h.start("f", "r1", "S").kind, ApplyKind::kApplied);
    const std::string task = h.assign("f", "Start-1");
    FlowRecord r = h.result_record("f", "Start-1", task);
    *r.mutable_method_result()->add_attribute_writes() = attr("stage", "paid");
    *r.mutable_method_result()->mutable_decision() = go_to({go("Charge", "card")});
    ASSERT_EQ(h.apply(r).kind, ApplyKind::kApplied);
    h.now += 1'000;
    ASSERT_EQ(h.fail("f", "Charge-1", "card declined: bug").kind, ApplyKind::kApplied);
    ASSERT_EQ(h.run("f")->status(), FLOW_FAILED);
  }

  std::vector<HistoryEvent> events(const std::string& run_id) {
    std::vector<HistoryEvent> out;
    for (auto& [k, v] : h.kv.scan(keys::events_prefix("f", run_id))) {
      HistoryEvent e;
      e.ParseFromString(v);
      out.push_back(e);
    }
    return out;
  }

  Harness h;
};

TEST_F(TimeTravel, TheLatestOfAStepTypeRunsItAgainWithTheStateBeforeItAndTheRunsLinked) {
  run_into_a_failed_charge();
  h.now += 60'000;
  const ApplyResult r = travel(point_of(TIME_TRAVEL_LATEST_OF_STEP_TYPE, "Charge"));
  ASSERT_EQ(r.kind, ApplyKind::kApplied) << r.message;
  EXPECT_EQ(r.run_id, "r2");

  auto old = h.run("f", "r1");
  EXPECT_EQ(old->status(), FLOW_FAILED) << "a closed run stays as it closed";
  EXPECT_EQ(old->traveled_to_run_id(), "r2");
  auto run = h.run("f", "r2");
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status(), FLOW_RUNNING);
  EXPECT_EQ(run->traveled_from_run_id(), "r1");
  EXPECT_EQ(run->start_ms(), h.now);
  EXPECT_EQ(run->input().data(), "in");
  KvFlowTxn txn(h.kv);
  EXPECT_EQ(txn.flow_id("f")->run_id(), "r2");
  EXPECT_EQ(txn.attribute("f", "r2", "stage", "")->string_value(), "paid");

  const StepExecution charge = h.step("f", "Charge-1", "r2");
  EXPECT_EQ(charge.phase(), PHASE_EXECUTE);
  EXPECT_EQ(charge.method().state(), TASK_QUEUED);
  EXPECT_EQ(charge.method().attempt(), 1u);
  EXPECT_EQ(charge.input().data(), "card");
  EXPECT_EQ(h.step("f", "Start-1", "r2").phase(), PHASE_DONE);
  ASSERT_EQ(h.effects.queued.size(), 1u);
  EXPECT_EQ(h.effects.queued[0].task.step_execution_id(), "Charge-1");

  const auto started = events("r2");
  ASSERT_FALSE(started.empty());
  EXPECT_EQ(started[0].kind(), FLOW_STARTED);
  EXPECT_EQ(started[0].traveled_from_run_id(), "r1");
  EXPECT_EQ(started[0].time_travel_point().step_type(), "Charge");
  EXPECT_EQ(started[0].reason(), "fixed the charge bug");
  EXPECT_EQ(events("r1").back().kind(), TIME_TRAVELED);
  EXPECT_EQ(events("r1").back().next_run_id(), "r2");

  // The fixed Charge completes the new run.
  ASSERT_EQ(h.execute("f", "Charge-1", graceful("charged"), "r2").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r2")->status(), FLOW_COMPLETED);
}

TEST_F(TimeTravel, TheBeginningStartsFromTheStartStepWithNoLaterWrites) {
  run_into_a_failed_charge();
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_BEGINNING)).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.step("f", "Start-1", "r2").phase(), PHASE_EXECUTE);
  KvFlowTxn txn(h.kv);
  EXPECT_FALSE(txn.step("f", "r2", "Charge-1").has_value());
  EXPECT_FALSE(txn.attribute("f", "r2", "stage", "").has_value());
}

TEST_F(TimeTravel, ARunningRunEndsTerminatedAndItsAttemptIsEnded) {
  ASSERT_EQ(h.start("f", "r1", "S").kind, ApplyKind::kApplied);
  h.assign("f", "Start-1");
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_BEGINNING)).kind, ApplyKind::kApplied);
  auto old = h.run("f", "r1");
  EXPECT_EQ(old->status(), FLOW_TERMINATED);
  EXPECT_NE(old->close_reason().find("time traveled to run 'r2'"), std::string::npos)
      << old->close_reason();
  ASSERT_EQ(h.effects.ended.size(), 1u) << "the Worker of the old attempt is told";
  EXPECT_EQ(h.step("f", "Start-1", "r2").method().state(), TASK_QUEUED);
}

TEST_F(TimeTravel, AWaitAfterSomeMessagesWereTakenComesBackWithTheRestQueuedAndItsTimerLeft) {
  ASSERT_EQ(h.start("f", "r1", "S").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("f", "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.publish("f", "approval", {"a", "b", "c"}).kind, ApplyKind::kApplied);
  // Wait-1 takes "a"; Wait-2 waits for three messages AND a Timer of 10 s.
  ASSERT_EQ(h.wait_for("f", "Wait-1", wait_of(ANY_OF, {channel("approval", FOR_ONE)})).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.execute("f", "Wait-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.wait_for("f", "Wait-2",
                       wait_of(ALL_OF, {channel("approval", FOR_N, 3), timer_after(10'000)}))
                .kind,
            ApplyKind::kApplied);
  const int64_t waited_at = h.now;
  ASSERT_EQ(h.step("f", "Wait-2").phase(), PHASE_WAITING);
  h.now += 4'000;
  ASSERT_EQ(h.set_attributes("f", {attr("stage", "later")}).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.publish("f", "approval", {"x"}).kind, ApplyKind::kApplied);
  h.now += 100'000;
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);  // met in the old run
  ASSERT_EQ(h.step("f", "Wait-2").phase(), PHASE_EXECUTE);
  // Back to 1 s after Wait-2 began to wait.
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_EVENT_TIME, "", waited_at + 1'000)).kind,
            ApplyKind::kApplied);

  const StepExecution wait = h.step("f", "Wait-2", "r2");
  EXPECT_EQ(wait.phase(), PHASE_WAITING);
  ASSERT_EQ(wait.conditions_size(), 2);
  EXPECT_FALSE(wait.conditions(0).fired());
  EXPECT_FALSE(wait.conditions(1).fired());
  EXPECT_EQ(wait.conditions(1).timer_at_ms(), h.now + 9'000)
      << "the time it had left at the point asked, 1 s into its 10 s";
  EXPECT_EQ(h.step("f", "Wait-1", "r2").phase(), PHASE_DONE);
  KvFlowTxn txn(h.kv);
  EXPECT_FALSE(txn.attribute("f", "r2", "stage", "").has_value()) << "written after the point";
  auto queues = txn.queues("f", "r2");
  ASSERT_EQ(queues.size(), 1u);
  EXPECT_EQ(queues[0].second.next_seq() - queues[0].second.first_seq(), 2u) << "b and c";
  // The new run goes on: a third message, then its Timer, meet the wait.
  ASSERT_EQ(h.publish("f", "approval", {"d"}).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.next_timer_at(), h.now + 9'000);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  const StepExecution met = h.step("f", "Wait-2", "r2");
  EXPECT_EQ(met.phase(), PHASE_EXECUTE);
  ASSERT_EQ(met.conditions(0).messages_size(), 3);
  EXPECT_EQ(met.conditions(0).messages(0).data(), "b");
  EXPECT_EQ(met.conditions(0).messages(2).data(), "d");
}

TEST_F(TimeTravel, ARepeatWithItsRequestIdAnswersTheRunItMade) {
  run_into_a_failed_charge();
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_BEGINNING), "r1", "r2", "req-1").kind, ApplyKind::kApplied);
  const ApplyResult again = travel(point_of(TIME_TRAVEL_BEGINNING), "r1", "r3", "req-1");
  EXPECT_EQ(again.kind, ApplyKind::kUnchanged);
  EXPECT_EQ(again.run_id, "r2");
  EXPECT_FALSE(h.run("f", "r3").has_value());
}

TEST_F(TimeTravel, RefusalsNameWhatIsWrongAndChangeNothing) {
  run_into_a_failed_charge();
  const auto before = h.kv.data();
  auto refused = [&](const TimeTravelPoint& p, RefusalCode code, const std::string& words,
                     const std::string& from = "r1") {
    const ApplyResult r = travel(p, from);
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << words;
    EXPECT_EQ(r.code, code) << r.message;
    EXPECT_NE(r.message.find(words), std::string::npos) << r.message;
    EXPECT_EQ(h.kv.data(), before) << "a refusal writes nothing";
  };
  refused(point_of(TIME_TRAVEL_STEP_EXECUTION, "Charge-9"), RefusalCode::kNotFound,
          "no Step execution 'Charge-9'");
  refused(point_of(TIME_TRAVEL_FIRST_OF_STEP_TYPE, "Wait"), RefusalCode::kNotFound,
          "no execution of Step type 'Wait'");
  refused(point_of(TIME_TRAVEL_EVENT_TIME, "", 5), RefusalCode::kInvalidArgument,
          "is before run 'r1'");
  refused(point_of(TIME_TRAVEL_KIND_UNSPECIFIED), RefusalCode::kInvalidArgument,
          "the point's kind");
  refused(point_of(TIME_TRAVEL_BEGINNING), RefusalCode::kNotFound, "has no run 'r0'", "r0");
  refused(point_of(TIME_TRAVEL_BEGINNING), RefusalCode::kInvalidArgument, "exact runId", "");

  // Only from the latest run.
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_BEGINNING)).kind, ApplyKind::kApplied);
  const ApplyResult older = travel(point_of(TIME_TRAVEL_BEGINNING), "r1", "r3");
  EXPECT_EQ(older.code, RefusalCode::kFailedPrecondition);
  EXPECT_NE(older.message.find("'r2' is"), std::string::npos) << older.message;
}

TEST_F(TimeTravel, AStepTypeTheLatestDeclarationDropsIsRefusedNamingIt) {
  run_into_a_failed_charge();
  ASSERT_EQ(h.declare(shop(/*with_charge=*/false)).kind, ApplyKind::kApplied);
  const ApplyResult r = travel(point_of(TIME_TRAVEL_LATEST_OF_STEP_TYPE, "Charge"));
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_EQ(r.code, RefusalCode::kFailedPrecondition);
  EXPECT_NE(r.message.find("no Step type 'Charge'"), std::string::npos) << r.message;
  // The beginning has no Charge: it runs with the new declaration.
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_BEGINNING)).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f", "r2")->declaration_version(), 2u);
}

TEST_F(TimeTravel, AnAttributeWhoseTypeTheLatestDeclarationChangedIsRefusedNamingIt) {
  run_into_a_failed_charge();  // stage = "paid", a string
  FlowDeclaration changed = shop();
  changed.mutable_attributes(0)->set_type(ATTRIBUTE_INT64);
  ASSERT_EQ(h.declare(changed).kind, ApplyKind::kApplied);
  const ApplyResult r = travel(point_of(TIME_TRAVEL_LATEST_OF_STEP_TYPE, "Charge"));
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_EQ(r.code, RefusalCode::kFailedPrecondition);
  EXPECT_NE(r.message.find("'stage'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("changed its type"), std::string::npos) << r.message;
  // Before the write, nothing is in the way.
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_BEGINNING)).kind, ApplyKind::kApplied);
}

TEST_F(TimeTravel, AnExecutionATraveledRunTookOverStartedInTheOldRunsHistory) {
  run_into_a_failed_charge();
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_LATEST_OF_STEP_TYPE, "Charge")).kind, ApplyKind::kApplied);
  // Start-1 ran in r1 only: r2 began with it done.
  const ApplyResult r = travel(point_of(TIME_TRAVEL_STEP_EXECUTION, "Start-1"), "r2", "r3");
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_EQ(r.code, RefusalCode::kFailedPrecondition);
  EXPECT_NE(r.message.find("from run 'r1'"), std::string::npos) << r.message;
  // Charge-1 restarted when r2 began: its point is r2's start.
  ASSERT_EQ(travel(point_of(TIME_TRAVEL_STEP_EXECUTION, "Charge-1"), "r2", "r3").kind,
            ApplyKind::kApplied);
}

// The start's record may carry a later time than the start itself (its
// batch's): a point at the start time a user reads is the run's start, not a
// refusal. CI saw this race in the TypeScript suite.
TEST_F(TimeTravel, APointAtTheRunsStartTimeIsItsStartWhenTheRecordIsLater) {
  FlowRecord start = h.start_record("f", "r1", "S");
  const int64_t started = h.now;
  start.set_at_unix_ms(started + 1);
  ASSERT_EQ(h.apply(start).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.run("f")->start_ms(), started);
  h.now = started + 1'000;
  ASSERT_EQ(h.set_attributes("f", {attr("stage", "later")}).kind, ApplyKind::kApplied);
  const ApplyResult before = travel(point_of(TIME_TRAVEL_EVENT_TIME, "", started - 1));
  EXPECT_EQ(before.kind, ApplyKind::kRejected);
  EXPECT_NE(before.message.find("before run 'r1'"), std::string::npos) << before.message;
  const ApplyResult r = travel(point_of(TIME_TRAVEL_EVENT_TIME, "", started));
  ASSERT_EQ(r.kind, ApplyKind::kApplied) << r.message;
  EXPECT_EQ(h.step("f", "Start-1", "r2").phase(), PHASE_EXECUTE);
  KvFlowTxn txn(h.kv);
  EXPECT_FALSE(txn.attribute("f", "r2", "stage", "").has_value()) << "the later write is not in";
}

// Whatever times records hold, the time left never overflows (limits.h);
// the UBSan build would stop here. Found by the fuzzer's seeds.
TEST_F(TimeTravel, ExtremeTimesNeverOverflow) {
  StartOptions options;
  options.set_timeout_ms(1'000);
  options.set_start_delay_ms(1'000);
  FlowRecord start = h.start_record("f", "r1", "S", "in", options);
  start.mutable_start_flow()->set_at_unix_ms(INT64_MIN + 10);
  ASSERT_EQ(h.apply(start).kind, ApplyKind::kApplied);
  h.now = INT64_MAX - 10;
  ASSERT_EQ(h.set_attributes("f", {attr("stage", "x")}).kind, ApplyKind::kApplied);
  h.now = 5'000;
  const ApplyResult r = travel(point_of(TIME_TRAVEL_EVENT_TIME, "", INT64_MAX));
  ASSERT_EQ(r.kind, ApplyKind::kApplied) << r.message;
  const auto run = h.run("f", "r2");
  EXPECT_GE(run->options().timeout_ms(), 1);
  EXPECT_GE(run->options().start_delay_ms(), 0);
}

TEST_F(TimeTravel, ARunWithoutAJournalIsRefused) {
  run_into_a_failed_charge();
  for (auto& [k, v] : h.kv.scan(keys::journal_prefix("f", "r1"))) h.kv.del(k);
  FlowRecord r;
  auto* t = r.mutable_time_travel();
  t->set_flow_id("f");
  t->set_run_id("r1");
  t->set_new_run_id("r2");
  *t->mutable_point() = point_of(TIME_TRAVEL_BEGINNING);
  t->set_at_unix_ms(h.now);
  Effects effects;
  KvFlowTxn txn(h.kv);
  const ApplyResult result = apply_record(txn, r, effects);
  EXPECT_EQ(result.code, RefusalCode::kFailedPrecondition);
  EXPECT_NE(result.message.find("no journal"), std::string::npos) << result.message;
}

}  // namespace
}  // namespace dex::flow::testing

namespace dex::flow::testing {
namespace {

// P (flow_test_util.h) waits for a SubFlow of C (one Step, Work); the point is
// while the child runs.
class TimeTravelSubFlow : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(h.declare(parent_declaration()).kind, ApplyKind::kApplied);
    FlowDeclaration c;
    c.set_flow_type("C");
    c.set_start_step_type("Work");
    *c.add_steps() = step_decl("Work");
    ASSERT_EQ(h.declare(c).kind, ApplyKind::kApplied);
    ASSERT_EQ(h.start("p", "r1", "P").kind, ApplyKind::kApplied);
    ASSERT_EQ(h.execute("p", "Start-1", go_to({go("Wait")})).kind, ApplyKind::kApplied);
    Condition child;
    child.mutable_sub_flow()->set_flow_type("C");
    child.mutable_sub_flow()->mutable_input()->set_data("x");
    h.now += 1'000;
    ASSERT_EQ(h.wait_for("p", "Wait-1", wait_of(ALL_OF, {child})).kind, ApplyKind::kApplied);
    point_ms = h.now;
    child_id = h.step("p", "Wait-1").conditions(0).child_flow_id();
    KvFlowTxn txn(h.kv);
    child_run = txn.flow_id(child_id)->run_id();
    h.now += 1'000;
  }

  ApplyResult travel_to_the_wait() {
    FlowRecord r;
    auto* t = r.mutable_time_travel();
    t->set_flow_id("p");
    t->set_run_id("r1");
    t->set_new_run_id("r2");
    t->mutable_point()->set_kind(TIME_TRAVEL_EVENT_TIME);
    t->mutable_point()->set_event_time_ms(point_ms);
    t->set_at_unix_ms(h.now);
    return h.apply(r);
  }

  Harness h;
  int64_t point_ms = 0;
  std::string child_id, child_run;
};

TEST_F(TimeTravelSubFlow, AChildStillRunningReportsToTheNewRun) {
  ASSERT_EQ(travel_to_the_wait().kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("p", "r1")->status(), FLOW_TERMINATED);
  EXPECT_EQ(h.step("p", "Wait-1", "r2").phase(), PHASE_WAITING);
  EXPECT_EQ(h.run(child_id, child_run)->parents(0).run_id(), "r2");
  ASSERT_EQ(h.execute(child_id, "Work-1", graceful("made"), child_run).kind, ApplyKind::kApplied);
  const StepExecution w = h.step("p", "Wait-1", "r2");
  EXPECT_EQ(w.phase(), PHASE_EXECUTE);
  EXPECT_EQ(w.conditions(0).sub_flow().status(), FLOW_COMPLETED);
}

TEST_F(TimeTravelSubFlow, AChildThatClosedAfterThePointMeetsTheWaitAtOnce) {
  ASSERT_EQ(h.execute(child_id, "Work-1", graceful("made"), child_run).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.step("p", "Wait-1").phase(), PHASE_EXECUTE) << "the old run's wait was met";
  ASSERT_EQ(travel_to_the_wait().kind, ApplyKind::kApplied);
  // The point is before the child closed; the child ran once, and the new
  // run's wait sees its end now.
  const StepExecution w = h.step("p", "Wait-1", "r2");
  EXPECT_EQ(w.phase(), PHASE_EXECUTE);
  EXPECT_EQ(w.conditions(0).sub_flow().status(), FLOW_COMPLETED);
  bool closed_event = false;
  for (const auto& e : h.history("p", "r2")) closed_event |= e.kind() == SUB_FLOW_CLOSED;
  EXPECT_TRUE(closed_event);
}

}  // namespace
}  // namespace dex::flow::testing
