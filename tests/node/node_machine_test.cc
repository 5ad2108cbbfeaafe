// NodeMachine, the process's role as a pure machine (docs/node.md), driven
// input by input on test time. Each test names the spec rule it checks
// (spec: Lease; Hot standby, Takeover; Step down the active process;
// issue 13: graceful shutdown drains).
#include <gtest/gtest.h>

#include "node/node_machine.h"
#include "node_test_util.h"

namespace dex {
namespace {

using K = NodeCommandKind;

const TimePoint kT0 = TimePoint(seconds(1000));

class NodeMachineTest : public ::testing::Test {
 protected:
  NodeMachineConfig config(bool hot = false) {
    NodeMachineConfig c;
    c.hot = hot;
    c.attempt_drain_timeout = seconds(30);
    c.step_down_hold_off = seconds(5);
    c.acquisition_budget = seconds(3);
    return c;
  }
  // Start, acquire epoch `epoch`, open: active at kT0.
  NodeMachine active(NodeMachineConfig c, Epoch epoch = Epoch(1)) {
    NodeMachine m(c, "p-self");
    auto a = m.start(kT0);
    EXPECT_TRUE(has(a, K::kAcquire)) << describe(a);
    a = m.acquired(kT0, epoch);
    EXPECT_EQ(kinds(a), std::vector<K>{K::kOpen});
    a = m.opened(kT0);
    EXPECT_TRUE(a.commands.empty()) << describe(a);
    EXPECT_EQ(m.phase(), NodePhase::kActive);
    return m;
  }
  // Step down and let the drain end with no attempt running: released at `at`.
  void step_down_and_release(NodeMachine& m, TimePoint at) {
    ASSERT_TRUE(m.can_step_down().is_ok());
    auto a = m.step_down(at);
    ASSERT_EQ(kinds(a), std::vector<K>{K::kBeginDrain});
    EXPECT_TRUE(m.describe_refused());
    a = m.attempts_running(at, 0);
    ASSERT_EQ(kinds(a), std::vector<K>{K::kRelease});
    EXPECT_TRUE(a.commands[0].stays_standby);
    a = m.released(at, true);
    EXPECT_TRUE(has(a, K::kCloseStore)) << describe(a);
    EXPECT_TRUE(has(a, K::kReadLease)) << describe(a);
    EXPECT_EQ(m.phase(), NodePhase::kClosingStore);
  }
};

TEST_F(NodeMachineTest, ShutdownDrainsRunningAttemptsThenReleasesAndExitsZero) {
  NodeMachine m = active(config());
  auto a = m.signal(kT0);
  EXPECT_EQ(kinds(a), std::vector<K>{K::kBeginDrain});
  EXPECT_EQ(m.phase(), NodePhase::kDraining);
  // The drain polls every 50 ms while attempts run; the lease is kept meanwhile.
  ASSERT_TRUE(a.wake_at.has_value());
  EXPECT_EQ(*a.wake_at, kT0 + kDrainPoll);
  a = m.attempts_running(kT0 + seconds(1), 2);
  EXPECT_TRUE(a.commands.empty()) << describe(a);
  a = m.attempts_running(kT0 + seconds(2), 0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::kRelease});
  EXPECT_FALSE(a.commands[0].stays_standby);
  a = m.released(kT0 + seconds(2), true);
  const NodeCommand* exit = find(a, K::kExit);
  ASSERT_NE(exit, nullptr);
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(m.phase(), NodePhase::kStopped);
  EXPECT_EQ(m.exit_code(), 0);
}

TEST_F(NodeMachineTest, ShutdownReleasesAtTheDrainTimeoutWithAttemptsStillRunning) {
  NodeMachineConfig c = config();
  c.attempt_drain_timeout = seconds(1);
  NodeMachine m = active(c);
  m.signal(kT0);
  auto a = m.attempts_running(kT0 + milliseconds(999), 3);
  EXPECT_TRUE(a.commands.empty());
  ASSERT_TRUE(a.wake_at.has_value());
  EXPECT_LE(*a.wake_at, kT0 + seconds(1));
  a = m.attempts_running(kT0 + seconds(1), 3);
  EXPECT_EQ(kinds(a), std::vector<K>{K::kRelease});
}

TEST_F(NodeMachineTest, ASecondSignalSkipsTheDrain) {
  NodeMachine m = active(config());
  m.signal(kT0);
  auto a = m.signal(kT0 + milliseconds(10));
  EXPECT_EQ(kinds(a), std::vector<K>{K::kRelease});
  a = m.released(kT0 + milliseconds(20), true);
  EXPECT_EQ(m.exit_code(), 0);
}

TEST_F(NodeMachineTest, AFailedReleaseExitsOne) {
  NodeMachine m = active(config());
  m.signal(kT0);
  m.attempts_running(kT0, 0);
  m.released(kT0, false);
  EXPECT_EQ(m.exit_code(), 1);
}

TEST_F(NodeMachineTest, ASignalWhileAcquiringInterruptsItAndExitsZero) {
  NodeMachine m(config(), "p-self");
  m.start(kT0);
  auto a = m.signal(kT0);
  EXPECT_EQ(kinds(a), std::vector<K>{K::kInterruptAcquire});
  a = m.acquire_failed(kT0, Status::stopped("interrupted"));
  EXPECT_EQ(m.exit_code(), 0);
}

TEST_F(NodeMachineTest, ASignalThatRacesASuccessfulAcquisitionReleasesTheLease) {
  NodeMachine m(config(), "p-self");
  m.start(kT0);
  m.signal(kT0);
  auto a = m.acquired(kT0, Epoch(4));
  EXPECT_EQ(kinds(a), std::vector<K>{K::kRelease});
  m.released(kT0, true);
  EXPECT_EQ(m.exit_code(), 0);
}

TEST_F(NodeMachineTest, ASignalWhileOpeningDrainsOnceOpen) {
  NodeMachine m(config(), "p-self");
  m.start(kT0);
  m.acquired(kT0, Epoch(1));
  EXPECT_TRUE(m.signal(kT0).commands.empty());
  auto a = m.opened(kT0);
  EXPECT_EQ(kinds(a), std::vector<K>{K::kBeginDrain});
}

TEST_F(NodeMachineTest, ColdStandbyThatCannotAcquireExitsOne) {
  NodeMachine m(config(/*hot=*/false), "p-self");
  auto a = m.start(kT0);
  EXPECT_EQ(kinds(a), std::vector<K>{K::kAcquire});
  m.acquire_failed(kT0, Status::permanent("access denied"));
  EXPECT_EQ(m.exit_code(), 1);
}

TEST_F(NodeMachineTest, HotStandbyKeepsFollowingAndRetriesAfterABackoffFromOneToThirtySeconds) {
  NodeMachine m(config(/*hot=*/true), "p-self");
  auto a = m.start(kT0);
  EXPECT_EQ(kinds(a), (std::vector<K>{K::kFollow, K::kAcquire}));
  TimePoint t = kT0;
  const Duration expected[] = {seconds(1),  seconds(2),  seconds(4), seconds(8),
                               seconds(16), seconds(30), seconds(30)};
  for (Duration d : expected) {
    a = m.acquire_failed(t, Status::transient("503"));
    EXPECT_EQ(m.phase(), NodePhase::kTakeoverBackoff);
    ASSERT_TRUE(a.wake_at.has_value());
    EXPECT_EQ(*a.wake_at - t, d);
    EXPECT_TRUE(m.on_wake(t + d - milliseconds(1)).commands.empty());
    t += d;
    a = m.on_wake(t);
    EXPECT_EQ(kinds(a), std::vector<K>{K::kAcquire});
  }
}

TEST_F(NodeMachineTest, AFailureAfterHoldingTheLeaseReleasesItAndExitsOne) {
  NodeMachine m(config(/*hot=*/true), "p-self");
  m.start(kT0);
  m.acquired(kT0, Epoch(2));
  auto a = m.open_failed(kT0, Status::corruption("local store"));
  EXPECT_EQ(kinds(a), (std::vector<K>{K::kReleaseAndFail, K::kExit}));
  EXPECT_EQ(m.exit_code(), 1);
}

TEST_F(NodeMachineTest, ALostLeaseStopsAtOnceWithoutReleaseAndExitsOne) {
  NodeMachine m = active(config());
  auto a = m.fatal(kT0, Status::fenced("lost to another holder"));
  EXPECT_EQ(kinds(a), (std::vector<K>{K::kStopAtOnce, K::kExit}));
  EXPECT_FALSE(has(a, K::kRelease));
  EXPECT_EQ(m.exit_code(), 1);
}

TEST_F(NodeMachineTest, StepDownIsRefusedUnlessActiveAndWhileOneIsInProgress) {
  NodeMachine m(config(), "p-self");
  m.start(kT0);
  EXPECT_TRUE(m.can_step_down().is_precondition_failed());  // a standby
  m.acquired(kT0, Epoch(1));
  EXPECT_TRUE(m.can_step_down().is_precondition_failed());  // opening
  m.opened(kT0);
  EXPECT_TRUE(m.can_step_down().is_ok());
  m.step_down(kT0);
  Status again = m.can_step_down();
  EXPECT_TRUE(again.is_precondition_failed());
  EXPECT_NE(again.message().find("already in progress"), std::string::npos) << again.message();
}

TEST_F(NodeMachineTest, StepDownDrainsForAtMostTheDrainTimeoutThenReleasesAndStaysAStandby) {
  NodeMachineConfig c = config(/*hot=*/true);
  c.attempt_drain_timeout = seconds(2);
  NodeMachine m = active(c, Epoch(7));
  m.step_down(kT0);
  EXPECT_TRUE(m.attempts_running(kT0 + seconds(1), 1).commands.empty());
  auto a = m.attempts_running(kT0 + seconds(2), 1);  // interrupted: NOT_COMPLETED on the successor
  ASSERT_EQ(kinds(a), std::vector<K>{K::kRelease});
  EXPECT_TRUE(a.commands[0].stays_standby);
  a = m.released(kT0 + seconds(2), true);
  // Hot: it follows the log again while it waits.
  EXPECT_TRUE(has(a, K::kFollow)) << describe(a);
  EXPECT_EQ(m.exit_code(), std::nullopt);
}

TEST_F(NodeMachineTest, StepDownAnswersTakenOverAsSoonAsAnotherProcessHoldsTheLease) {
  NodeMachine m = active(config(), Epoch(7));
  step_down_and_release(m, kT0);
  auto a = m.lease_seen(kT0 + milliseconds(100), {Epoch(7), "p-self", true});
  EXPECT_FALSE(has(a, K::kAnswerStepDown));
  ASSERT_TRUE(a.wake_at.has_value());
  a = m.on_wake(kT0 + milliseconds(350));
  EXPECT_EQ(kinds(a), std::vector<K>{K::kReadLease});
  a = m.lease_seen(kT0 + milliseconds(400), {Epoch(8), "p-other", false});
  const NodeCommand* answer = find(a, K::kAnswerStepDown);
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->step_down.outcome, StepDownOutcome::kTakenOverByAnotherProcess);
  EXPECT_EQ(answer->step_down.released_epoch, Epoch(7));
  EXPECT_EQ(answer->step_down.active_epoch, Epoch(8));
  EXPECT_EQ(answer->step_down.active_holder, "p-other");
  EXPECT_FALSE(m.describe_refused());
  // The store closes; after the hold-off the process competes again.
  a = m.store_closed(kT0 + seconds(1));
  EXPECT_EQ(m.phase(), NodePhase::kHoldOff);
  ASSERT_TRUE(a.wake_at.has_value());
  EXPECT_EQ(*a.wake_at, kT0 + seconds(5));
  a = m.on_wake(kT0 + seconds(5));
  EXPECT_EQ(kinds(a), std::vector<K>{K::kAcquire});
}

TEST_F(NodeMachineTest, StepDownOfASingleReplicaTakesTheLeaseBackAfterTheHoldOff) {
  NodeMachine m = active(config(), Epoch(7));
  step_down_and_release(m, kT0);
  m.lease_seen(kT0, {Epoch(7), "p-self", true});
  m.store_closed(kT0 + milliseconds(200));
  // Describe refuses during the hold-off.
  EXPECT_TRUE(m.describe_refused());
  EXPECT_FALSE(has(m.on_wake(kT0 + seconds(4)), K::kAcquire));
  auto a = m.on_wake(kT0 + seconds(5));
  EXPECT_TRUE(has(a, K::kAcquire)) << describe(a);
  a = m.acquired(kT0 + seconds(5) + milliseconds(10), Epoch(8));
  const NodeCommand* answer = find(a, K::kAnswerStepDown);
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->step_down.outcome, StepDownOutcome::kTakenBackByThisProcess);
  EXPECT_EQ(answer->step_down.active_epoch, Epoch(8));
  EXPECT_EQ(answer->step_down.active_holder, "p-self");
  EXPECT_TRUE(has(a, K::kOpen));
}

TEST_F(NodeMachineTest, StepDownIsUnknownAfterTheHoldOffAndOneAcquisitionAttempt) {
  NodeMachine m = active(config(), Epoch(7));
  step_down_and_release(m, kT0);
  m.lease_unreadable(kT0, Status::transient("503 SlowDown"));
  m.store_closed(kT0);
  m.on_wake(kT0 + seconds(5));  // acquiring; the acquisition hangs
  auto a = m.on_wake(kT0 + seconds(8));
  const NodeCommand* answer = find(a, K::kAnswerStepDown);
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->step_down.outcome, StepDownOutcome::kUnknown);
  EXPECT_NE(answer->step_down.detail.find("503 SlowDown"), std::string::npos)
      << answer->step_down.detail;
}

// Spec: "If a stuck task keeps that store open, the process waits up to about
// 64 seconds after the release. If no other process has taken over by then,
// the call returns INTERNAL. Either way, the process then exits 1 without
// taking the lease."
TEST_F(NodeMachineTest, AStuckStoreWithoutATakeoverAnswersInternalAndExitsOneWithoutTheLease) {
  NodeMachine m = active(config(), Epoch(7));
  step_down_and_release(m, kT0);
  TimePoint t = kT0;
  bool acquired = false;
  // The lease keeps showing the released epoch 7; the store never closes.
  // Bounded: one step per 250 ms for 64 s.
  while (!m.exit_code() && t < kT0 + seconds(70)) {
    auto a = m.on_wake(t);
    acquired |= has(a, K::kAcquire);
    if (has(a, K::kReadLease)) a = m.lease_seen(t, {Epoch(7), "p-self", true});
    acquired |= has(a, K::kAcquire);
    EXPECT_FALSE(has(a, K::kAnswerStepDown) && t < kT0 + seconds(64)) << "answered early";
    if (const NodeCommand* answer = find(a, K::kAnswerStepDown)) {
      EXPECT_EQ(answer->step_down.outcome, StepDownOutcome::kStuckStore);
    }
    t += milliseconds(250);
  }
  EXPECT_FALSE(acquired) << "a stuck store must not take the lease";
  EXPECT_EQ(m.exit_code(), 1);
  EXPECT_GE(t, kT0 + seconds(64));
  EXPECT_LE(t, kT0 + seconds(64) + milliseconds(500));
}

TEST_F(NodeMachineTest, AStuckStoreWithATakeoverAnswersTakenOverAndStillExitsOne) {
  NodeMachine m = active(config(), Epoch(7));
  step_down_and_release(m, kT0);
  auto a = m.lease_seen(kT0 + seconds(2), {Epoch(8), "p-other", false});
  const NodeCommand* answer = find(a, K::kAnswerStepDown);
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->step_down.outcome, StepDownOutcome::kTakenOverByAnotherProcess);
  ASSERT_TRUE(a.wake_at.has_value());
  EXPECT_EQ(*a.wake_at, kT0 + seconds(64));
  EXPECT_FALSE(m.exit_code().has_value());
  a = m.on_wake(kT0 + seconds(64));
  EXPECT_FALSE(has(a, K::kAcquire));
  EXPECT_EQ(m.exit_code(), 1);
}

TEST_F(NodeMachineTest, AStoreThatClosesLateCompetesAtOnceIfTheHoldOffPassed) {
  NodeMachine m = active(config(), Epoch(7));
  step_down_and_release(m, kT0);
  m.lease_seen(kT0, {Epoch(7), "p-self", true});
  // Still closing past the hold-off: no acquisition, and no early unknown answer.
  auto a = m.on_wake(kT0 + seconds(9));
  EXPECT_FALSE(has(a, K::kAcquire));
  EXPECT_FALSE(has(a, K::kAnswerStepDown));
  a = m.store_closed(kT0 + seconds(10));
  EXPECT_TRUE(has(a, K::kAcquire)) << describe(a);
}

TEST_F(NodeMachineTest, AShutdownDuringAStepDownsDrainExitsAfterTheReleaseAndAnswersTheCall) {
  NodeMachine m = active(config(), Epoch(7));
  m.step_down(kT0);
  m.signal(kT0 + milliseconds(5));
  auto a = m.attempts_running(kT0 + milliseconds(50), 0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::kRelease});
  EXPECT_FALSE(a.commands[0].stays_standby);
  a = m.released(kT0 + milliseconds(60), true);
  const NodeCommand* answer = find(a, K::kAnswerStepDown);
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->step_down.outcome, StepDownOutcome::kAbandoned);
  EXPECT_EQ(m.exit_code(), 0);
}

TEST_F(NodeMachineTest, ALostLeaseDuringAStepDownAnswersTheCallAndExitsOne) {
  NodeMachine m = active(config(), Epoch(7));
  m.step_down(kT0);
  auto a = m.fatal(kT0, Status::fenced("lost"));
  EXPECT_TRUE(has(a, K::kAnswerStepDown));
  EXPECT_TRUE(has(a, K::kStopAtOnce));
  EXPECT_EQ(m.exit_code(), 1);
}

}  // namespace
}  // namespace dex
