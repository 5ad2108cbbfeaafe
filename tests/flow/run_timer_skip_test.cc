// SkipTimer of a run's own Timers (docs/flow-rules.md, "Waits"): the flow
// timeout fires now and the run's timeout policy applies; the start delay
// fires now and the start Step is created. check_state runs after every
// record (Harness::apply): no timer stays indexed.
#include <gtest/gtest.h>

#include "flow_test_util.h"

namespace dex::flow::testing {
namespace {

class RunTimerSkip : public ::testing::Test {
 protected:
  void SetUp() override {
    FlowDeclaration d;
    d.set_flow_type("T");
    d.set_start_step_type("A");
    *d.add_steps() = step_decl("A");
    ASSERT_EQ(h.declare(d).kind, ApplyKind::kApplied);
  }
  ApplyResult skip(RunTimer timer, const std::string& request_id = "",
                   const std::string& step = "") {
    FlowRecord r;
    auto* s = r.mutable_skip_timer();
    s->set_flow_id("f");
    s->set_run_timer(timer);
    s->set_step_execution_id(step);
    s->set_request_id(request_id);
    s->set_at_unix_ms(h.now);
    return h.apply(r);
  }
  Harness h;
};

TEST_F(RunTimerSkip, TheFlowTimeoutFiresNowUnderTheRunsPolicyAndARepeatChangesNothing) {
  StartOptions o;
  o.set_timeout_ms(3'600'000);
  ASSERT_EQ(h.start("f", "r1", "T", o).kind, ApplyKind::kApplied);
  h.now += 1'000;
  ASSERT_EQ(skip(RUN_TIMER_FLOW_TIMEOUT, "s1").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->status(), FLOW_TIMED_OUT);
  EXPECT_EQ(h.run("f")->close_ms(), h.now) << "it fired at the skip, not at its due time";
  EXPECT_FALSE(h.next_timer_at().has_value()) << "its timer left the index";
  bool skipped = false;
  for (const auto& e : h.history("f")) skipped |= e.kind() == TIMER_SKIPPED;
  EXPECT_TRUE(skipped);
  EXPECT_EQ(skip(RUN_TIMER_FLOW_TIMEOUT, "s1").kind, ApplyKind::kUnchanged);
}

TEST_F(RunTimerSkip, TheStartDelayFiresNowAndTheStartStepIsCreated) {
  StartOptions o;
  o.set_start_delay_ms(60'000);
  ASSERT_EQ(h.start("f", "r1", "T", o).kind, ApplyKind::kApplied);
  ASSERT_TRUE(h.run("f")->start_pending());
  ASSERT_EQ(skip(RUN_TIMER_START_DELAY).kind, ApplyKind::kApplied);
  EXPECT_FALSE(h.run("f")->start_pending());
  EXPECT_EQ(h.step("f", "A-1").phase(), PHASE_EXECUTE);
  const ApplyResult again = skip(RUN_TIMER_START_DELAY);
  EXPECT_EQ(again.code, RefusalCode::kFailedPrecondition) << again.message;
}

TEST_F(RunTimerSkip, RefusalsNameWhatIsWrong) {
  ASSERT_EQ(h.start("f", "r1", "T").kind, ApplyKind::kApplied);
  const ApplyResult none = skip(RUN_TIMER_FLOW_TIMEOUT);
  EXPECT_EQ(none.code, RefusalCode::kFailedPrecondition);
  EXPECT_EQ(none.message, "the run has no flow timeout");
  EXPECT_EQ(skip(RUN_TIMER_START_DELAY).code, RefusalCode::kFailedPrecondition);
  EXPECT_EQ(skip(RUN_TIMER_UNSPECIFIED).code, RefusalCode::kInvalidArgument);
  StartOptions o;
  o.set_timeout_ms(1'000);
  ASSERT_EQ(h.start("g", "r1", "T", o).kind, ApplyKind::kApplied);
  FlowRecord r;
  auto* s = r.mutable_skip_timer();
  s->set_flow_id("g");
  s->set_run_timer(RUN_TIMER_FLOW_TIMEOUT);
  s->set_step_execution_id("A-1");
  s->set_at_unix_ms(h.now);
  EXPECT_EQ(h.apply(r).code, RefusalCode::kInvalidArgument);
  EXPECT_EQ(h.run("g")->status(), FLOW_RUNNING);
}

}  // namespace
}  // namespace dex::flow::testing
