// The Attribute Store sync machine and planner (src/engine/sync_machine.h,
// sync_plan.h), step by step with a hand-driven clock: what it asks for first,
// how it waits, what a plan carries, how it answers each outcome. The seeded
// schedules are in sync_sim_test.cc.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "engine/sync_machine.h"
#include "sync_tables.h"

namespace dex {
namespace {

using Kind = SyncAction::Kind;
using attrstore::CommitOutcome;
using attrstore::CommitResult;

attrstore::TableSchema schema() { return testing::table_of({testing::string_column("a", 3)}); }

PendingEntry entry(uint64_t seq, uint64_t slot, const std::string& flow, const std::string& value) {
  PendingEntry p;
  p.key = fmt::format("~y/s\x1f{:020}", seq);
  p.entry.set_flow_id(flow);
  p.entry.set_slot(slot);
  auto* w = p.entry.add_writes();
  w->set_key("a");
  w->mutable_value()->set_string_value(value);
  return p;
}

class SyncMachineTest : public ::testing::Test {
 protected:
  SyncMachineTest() { config_.batch_size = 2; }
  SyncMachine& machine() {
    if (!machine_) machine_ = std::make_unique<SyncMachine>(config_, AttributeSyncReport{}, now_);
    return *machine_;
  }
  SyncAction next() { return machine().next(now_, lease_); }
  // Claims at slot `at` and answers the first refresh.
  void claimed(uint64_t at = 0) {
    ASSERT_EQ(next().kind, Kind::kClaim);
    attrstore::Watermark w;
    w.epoch = 1;
    w.slot = at;
    machine().claimed(CommitResult{CommitOutcome::kCommitted, w}, now_);
    ASSERT_EQ(next().kind, Kind::kRefresh) << "a fresh describe before the first read";
    machine().refreshed(now_);
  }
  void read(std::vector<PendingEntry> entries, uint64_t oldest = 0) {
    PendingRead r;
    r.entries = std::move(entries);
    r.oldest_kept_slot = oldest;
    machine().read(r, schema(), now_, 0);
  }

  SyncMachine::Config config_;
  TimePoint now_{seconds(100)};
  Duration lease_ = seconds(10);
  std::unique_ptr<SyncMachine> machine_;
};

TEST_F(SyncMachineTest, NothingBeginsWithoutALeaseThatOutlastsTheBudget) {
  lease_ = milliseconds(2500);  // not more than the budget
  SyncAction a = next();
  EXPECT_EQ(a.kind, Kind::kWait);
  EXPECT_EQ(a.until, now_ + config_.lease_wait);
  lease_ = milliseconds(2501);
  EXPECT_EQ(next().kind, Kind::kClaim);
}

TEST_F(SyncMachineTest, ClaimRefreshReadCommitThenReadOnFromTheCursor) {
  claimed(4);
  SyncAction a = next();
  ASSERT_EQ(a.kind, Kind::kRead);
  EXPECT_EQ(a.watermark, 4u);
  EXPECT_EQ(a.cursor, "");
  // Slot 5 holds two entries: a batch of 2 rows takes slot 5 whole, not slot 6.
  read({entry(1, 5, "f1", "x"), entry(2, 5, "f2", "y"), entry(3, 6, "f3", "z")});
  a = next();
  ASSERT_EQ(a.kind, Kind::kCommit);
  ASSERT_NE(a.plan, nullptr);
  EXPECT_EQ(a.plan->through_slot, 5u);
  EXPECT_EQ(a.plan->rows.size(), 2u);
  EXPECT_EQ(a.watermark, 4u) << "the transaction starts where the table is";
  attrstore::Watermark w{1, 5, "p"};
  machine().committed(CommitResult{CommitOutcome::kCommitted, w}, now_);
  EXPECT_EQ(machine().watermark(), 5u);
  EXPECT_EQ(machine().report().transactions, 1u);
  a = next();
  ASSERT_EQ(a.kind, Kind::kRead);
  EXPECT_EQ(a.cursor, entry(2, 5, "", "").key) << "the next read starts after the last entry";
}

TEST_F(SyncMachineTest, AnEmptyReadWaitsWakeablyThenReadsAgain) {
  claimed();
  ASSERT_EQ(next().kind, Kind::kRead);
  read({});
  EXPECT_EQ(machine().report().state, "idle");
  SyncAction a = next();
  EXPECT_EQ(a.kind, Kind::kWait);
  EXPECT_TRUE(a.wakeable);
  EXPECT_EQ(a.until, now_ + config_.idle_poll);
  EXPECT_EQ(next().kind, Kind::kRead) << "after the wait (or a wake) it looks again";
}

TEST_F(SyncMachineTest, AFailedCommitWaitsItsBackoffAndTriesTheSamePlanAgain) {
  claimed();
  ASSERT_EQ(next().kind, Kind::kRead);
  read({entry(1, 1, "f1", "x")});
  ASSERT_EQ(next().kind, Kind::kCommit);
  for (int failures = 1; failures <= 3; ++failures) {
    machine().committed(Status::transient("connection reset"), now_);
    SyncAction a = next();
    ASSERT_EQ(a.kind, Kind::kWait);
    EXPECT_EQ(a.until, now_ + milliseconds(100 << (failures - 1))) << "100, 200, 400 ms";
    EXPECT_FALSE(a.wakeable);
    now_ = a.until;
    a = next();
    ASSERT_EQ(a.kind, Kind::kCommit);
    EXPECT_EQ(a.plan->through_slot, 1u) << "the same writes: nothing is skipped";
  }
  EXPECT_EQ(machine().report().failures, 3u);
  EXPECT_EQ(machine().report().state, "retrying");
  EXPECT_NE(machine().report().last_error.find("connection reset"), std::string::npos);
  // The answer of the last try was lost but it landed: the table says so.
  machine().committed(CommitResult{CommitOutcome::kMoved, {1, 1, "p"}}, now_);
  EXPECT_EQ(machine().watermark(), 1u);
  EXPECT_EQ(next().kind, Kind::kRead);
}

TEST_F(SyncMachineTest, ANewerEpochStopsIt) {
  claimed();
  ASSERT_EQ(next().kind, Kind::kRead);
  read({entry(1, 1, "f1", "x")});
  ASSERT_EQ(next().kind, Kind::kCommit);
  machine().committed(CommitResult{CommitOutcome::kFenced, {2, 0, "other"}}, now_);
  EXPECT_EQ(next().kind, Kind::kStop);
  EXPECT_EQ(machine().report().state, "fenced");
}

TEST_F(SyncMachineTest, ATrimFollowsWhatTheTableHoldsAtMostEveryInterval) {
  claimed(3);
  ASSERT_EQ(next().kind, Kind::kRead);
  read({}, /*oldest=*/2);  // the local store still keeps slot 2, which the table has
  SyncAction a = next();
  ASSERT_EQ(a.kind, Kind::kTrim);
  EXPECT_EQ(a.watermark, 3u);
  machine().trimmed(now_);
  EXPECT_EQ(next().kind, Kind::kWait);  // idle
  read({}, 2);
  EXPECT_NE(next().kind, Kind::kTrim) << "not again within the interval";
  now_ += config_.trim_interval;
  read({}, 2);
  EXPECT_EQ(next().kind, Kind::kTrim);
  machine().trimmed(now_);
  read({}, 4);  // nothing kept at or below the watermark
  now_ += config_.trim_interval;
  EXPECT_NE(next().kind, Kind::kTrim);
}

TEST_F(SyncMachineTest, AMisfitIsLeftOutCountedAndNamedWithoutItsValue) {
  claimed();
  ASSERT_EQ(next().kind, Kind::kRead);
  read({entry(1, 1, "f1", "toolong"), entry(2, 1, "f2", "ok")});
  SyncAction a = next();
  ASSERT_EQ(a.kind, Kind::kCommit);
  ASSERT_EQ(a.plan->rows.size(), 1u) << "f1's only field was left out: no row";
  EXPECT_EQ(a.plan->rows[0].flow_id, "f2");
  EXPECT_EQ(machine().report().misfits, 1u);
  auto misfits = machine().take_misfits();
  ASSERT_EQ(misfits.size(), 1u);
  EXPECT_EQ(misfits[0].flow_id, "f1");
  EXPECT_EQ(misfits[0].attribute, "a");
  EXPECT_EQ(misfits[0].reason.find("toolong"), std::string::npos) << misfits[0].reason;
}

TEST(SyncPlan, ARowWhoseFlowIdTheKeyColumnCannotHoldIsLeftOut) {
  attrstore::TableSchema s = schema();
  attrstore::Column id = testing::string_column("id", 4);
  id.primary_key = true;
  id.nullable = false;
  s.columns.push_back(id);
  const SyncPlan plan =
      plan_sync({entry(1, 1, "far-too-long", "x"), entry(2, 1, "ok", "y")}, s, false, 10);
  ASSERT_EQ(plan.rows.size(), 1u);
  EXPECT_EQ(plan.rows[0].flow_id, "ok");
  ASSERT_EQ(plan.misfits.size(), 1u);
  EXPECT_EQ(plan.misfits[0].flow_id, "far-too-long");
  EXPECT_EQ(plan.misfits[0].attribute, "id");
  EXPECT_EQ(plan.through_slot, 1u) << "the watermark still moves past it";
}

TEST_F(SyncMachineTest, TheSchemaIsDescribedAgainOnItsJitteredInterval) {
  config_.schema_sync_interval = seconds(60);
  claimed();
  for (int i = 0; i < 3; ++i) {
    const TimePoint refreshed = now_;
    SyncAction a = next();
    if (a.kind == Kind::kWait) a = next();  // the idle wait of the last loop's read
    ASSERT_EQ(a.kind, Kind::kRead);
    read({});
    ASSERT_EQ(next().kind, Kind::kWait);
    now_ += seconds(53);
    EXPECT_NE(next().kind, Kind::kRefresh) << "not before 90 %";
    now_ = refreshed + seconds(67);  // past 110 %
    read({});
    ASSERT_EQ(next().kind, Kind::kRefresh);
    machine().refreshed(now_);
  }
}

}  // namespace
}  // namespace dex
