// The hot standby's follower (docs/standby.md): it tails the log into its own
// local store, and its state (bootstrapping, following, behind, restarting,
// failed) and lag follow the spec's definitions. Timing with a ManualClock.
#include "standby/follower.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "../engine/engine_test_util.h"
#include "engine/local_store.h"
#include "engine/state_machine.h"
#include "log/log.h"
#include "objstore/faulty_store.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;
const NodeId kNode("n1");

// Writes batches of epoch 1 straight into the log (slot 0: EpochStart).
class LogFiller {
 public:
  LogFiller(ObjectStore& store, Clock& clock) {
    LogWriterOptions o;
    o.node_id = kNode;
    o.process_id = ProcessId("active");
    o.epoch = Epoch(1);
    o.jitter_seed = 1;
    writer_ = std::make_unique<LogWriter>(
        store, clock, o, [] { return true; }, [](const Status&) {});
    EXPECT_TRUE(writer_->open().is_ok());
  }
  void append(proto::LogRecord record) {
    auto f = writer_->append(std::move(record));
    auto slot = f.get();
    EXPECT_TRUE(slot.is_ok()) << slot.status().to_string();
  }
  void flows(int from, int to) {
    for (int i = from; i < to; ++i)
      append(flow_record(start_record("f" + std::to_string(i), "Order", 1000)));
  }
  LogWriter& writer() { return *writer_; }

 private:
  std::unique_ptr<LogWriter> writer_;
};

// Waits (real time, bounded) for `done`, advancing the manual clock one poll at a time.
bool until(ManualClock& clock, const std::function<bool()>& done,
           Duration step = milliseconds(250)) {
  for (int i = 0; i < 400; ++i) {
    if (done()) return true;
    clock.advance(step);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

class FollowerTest : public ::testing::Test {
 protected:
  FollowerOptions options() {
    FollowerOptions o;
    o.node_id = kNode;
    o.local_store_path = dir_.sub("standby");
    o.request = {};
    return o;
  }
  MemoryObjectStore memory_;
  ManualClock clock_;
  TempDir dir_;
};

TEST_F(FollowerTest, FollowsTheLogIntoItsOwnStoreAndMatchesAFullReplay) {
  LogFiller log(memory_, clock_);
  log.append(declare(order_declaration()));
  log.flows(0, 50);
  Follower f(memory_, clock_, options());
  EXPECT_EQ(f.status().state, FollowerState::kBootstrapping);
  f.start();
  ASSERT_TRUE(until(clock_, [&] { return f.status().state == FollowerState::kFollowing; }));
  EXPECT_TRUE(f.hot());
  ASSERT_TRUE(until(clock_, [&] { return f.status().applied == Slot(51); }));
  // Later batches are applied as they appear, one poll later.
  log.flows(50, 80);
  ASSERT_TRUE(until(clock_, [&] { return f.status().applied == Slot(81); }));
  EXPECT_EQ(f.status().state, FollowerState::kFollowing);
  EXPECT_LE(f.status().lag, milliseconds(500));
  f.stop();

  // The follower's store is what a full replay builds.
  auto live = StateMachine::open(dir_.sub("standby"));
  ASSERT_TRUE(live.is_ok()) << live.status().to_string();
  auto rebuilt = StateMachine::open(dir_.sub("rebuilt"));
  ASSERT_TRUE(rebuilt.is_ok());
  LogReader reader(memory_, kNode, kFirstSlot);
  ASSERT_TRUE(reader
                  .read_to_end([&](const LogEntry& e) {
                    auto out = rebuilt.value()->apply(e.slot, e.batch);
                    return out.is_ok() ? Status::ok() : out.status();
                  })
                  .is_ok());
  EXPECT_EQ(rebuilt.value()->dump().value(), live.value()->dump().value());
}

TEST_F(FollowerTest, AnOutageLongerThanTheLagThresholdMakesItBehindUntilItCatchesUp) {
  LogFiller log(memory_, clock_);
  log.flows(0, 5);
  FaultyObjectStore faulty(memory_, clock_, 7);
  FollowerOptions o = options();
  o.behind_lag_threshold = seconds(10);
  Follower f(faulty, clock_, o);
  f.start();
  ASSERT_TRUE(until(clock_, [&] { return f.status().state == FollowerState::kFollowing; }));
  faulty.set_outage(Status::transient("503 SlowDown"));
  // Transient errors: still following while the lag stays under the threshold.
  clock_.advance(seconds(9));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(f.status().state, FollowerState::kFollowing);
  EXPECT_GE(f.status().lag, seconds(9));
  ASSERT_TRUE(until(clock_, [&] { return f.status().state == FollowerState::kBehind; }));
  EXPECT_GT(f.status().lag, seconds(10));
  EXPECT_FALSE(f.hot());
  faulty.set_outage(std::nullopt);
  log.flows(5, 10);
  ASSERT_TRUE(until(clock_, [&] { return f.status().state == FollowerState::kFollowing; }));
  EXPECT_EQ(f.status().applied, Slot(10));
  EXPECT_EQ(f.status().restarts, 0u);
}

TEST_F(FollowerTest, CorruptionRestartsAfterABackoffAndAPermanentErrorFails) {
  LogFiller log(memory_, clock_);
  log.flows(0, 3);
  // A slot that is not a dex batch: the follower must restart, not apply it.
  ASSERT_TRUE(memory_.put(slot_key(kNode, Slot(4)), "junk", PutCondition::create()).is_ok());
  FaultyObjectStore faulty(memory_, clock_, 7);
  Follower f(faulty, clock_, options());
  f.start();
  ASSERT_TRUE(until(
      clock_, [&] { return f.status().state == FollowerState::kRestarting; }, milliseconds(10)));
  EXPECT_GE(f.status().restarts, 1u);
  EXPECT_NE(f.status().last_error.find("Corruption"), std::string::npos) << f.status().last_error;
  EXPECT_EQ(f.status().applied, Slot(3));  // everything before the junk was applied
  // Access denied does not heal by itself: failed (and it keeps retrying slowly).
  ASSERT_TRUE(memory_.remove(slot_key(kNode, Slot(4))).is_ok());
  faulty.set_outage(Status::permanent("403 AccessDenied"));
  ASSERT_TRUE(until(
      clock_, [&] { return f.status().state == FollowerState::kFailed; }, seconds(1)));
  faulty.set_outage(std::nullopt);
  ASSERT_TRUE(until(
      clock_, [&] { return f.status().state == FollowerState::kFollowing; }, seconds(1)));
  EXPECT_EQ(f.status().applied, Slot(3));
}

TEST(FollowerBackoff, RestartsBackOffFromOneToThirtySeconds) {
  FollowerOptions o;
  EXPECT_EQ(follower_restart_backoff(o, 1), seconds(1));
  EXPECT_EQ(follower_restart_backoff(o, 2), seconds(2));
  EXPECT_EQ(follower_restart_backoff(o, 5), seconds(16));
  EXPECT_EQ(follower_restart_backoff(o, 6), seconds(30));
  EXPECT_EQ(follower_restart_backoff(o, 100), seconds(30));
}

TEST_F(FollowerTest, StopClosesTheLocalStoreSoTheEngineCanOpenIt) {
  LogFiller log(memory_, clock_);
  log.flows(0, 3);
  Follower f(memory_, clock_, options());
  f.start();
  ASSERT_TRUE(until(clock_, [&] { return f.status().applied == Slot(3); }));
  auto locked = StateMachine::open(dir_.sub("standby"));
  EXPECT_FALSE(locked.is_ok());  // RocksDB's LOCK: the follower holds it
  f.stop();
  auto opened = StateMachine::open(dir_.sub("standby"));
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  EXPECT_EQ(opened.value()->last_applied().value(), Slot(3));
}

// Issue 13 (item 9): at a takeover the standby hands its open store to the
// engine instead of closing it and letting the engine open it again.
TEST_F(FollowerTest, StopAndHandOverKeepsTheLocalStoreOpenAtTheLastAppliedSlot) {
  LogFiller log(memory_, clock_);
  log.flows(0, 3);
  Follower f(memory_, clock_, options());
  f.start();
  ASSERT_TRUE(until(clock_, [&] { return f.status().applied == Slot(3); }));
  std::unique_ptr<StateMachine> handed = f.stop_and_hand_over();
  ASSERT_NE(handed, nullptr);
  EXPECT_EQ(handed->last_applied().value(), Slot(3));
  EXPECT_EQ(f.status().applied, Slot(3));
  // Still open (RocksDB's LOCK is held by the handed store), and usable.
  EXPECT_FALSE(StateMachine::open(dir_.sub("standby")).is_ok());
  auto local =
      open_local_store(memory_, kNode, dir_.sub("standby"), Slot(4), {}, std::move(handed));
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  EXPECT_NE(local->how.find("handed over"), std::string::npos) << local->how;
  EXPECT_EQ(local->sm->last_applied().value(), Slot(3));
  // A second hand-over has nothing to give.
  EXPECT_EQ(f.stop_and_hand_over(), nullptr);
}

TEST_F(FollowerTest, AStoreMovedAwayWhileFollowingIsNotHandedOver) {
  LogFiller log(memory_, clock_);
  log.flows(0, 3);
  Follower f(memory_, clock_, options());
  f.start();
  ASSERT_TRUE(until(clock_, [&] { return f.status().applied == Slot(3); }));
  std::filesystem::rename(dir_.sub("standby"), dir_.sub("standby.moved"));
  std::ofstream(dir_.sub("standby")) << "not a local store";
  // The engine must open the path as it finds it (and fail), not use the old files.
  EXPECT_EQ(f.stop_and_hand_over(), nullptr);
}

}  // namespace
}  // namespace dex
