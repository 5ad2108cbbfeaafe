// The hot standby's follower (docs/standby.md): it tails the log into its own
// local store, and its state (bootstrapping, following, behind, restarting,
// failed) and lag follow the spec's definitions. Timing with a ManualClock.
#include "standby/follower.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
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
  // Writes three flows into `log` (slots 1 to 3), starts `f` and waits until it
  // applied them.
  bool follow_three_flows(LogFiller& log, Follower& f) {
    log.flows(0, 3);
    f.start();
    return until(clock_, [&] { return f.status().applied == Slot(3); });
  }
  // Expects `sm` to hold what a full replay of the log builds.
  void expect_a_full_replay(StateMachine& sm) {
    auto rebuilt = StateMachine::open(dir_.sub("rebuilt"));
    ASSERT_TRUE(rebuilt.is_ok());
    LogReader reader(memory_, kNode, kFirstSlot);
    ASSERT_TRUE(reader
                    .read_to_end([&](const LogEntry& e) {
                      auto out = rebuilt.value()->apply(e.slot, e.batch);
                      return out.is_ok() ? Status::ok() : out.status();
                    })
                    .is_ok());
    EXPECT_EQ(rebuilt.value()->dump().value(), sm.dump().value());
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
  expect_a_full_replay(*live.value());
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
  Follower f(memory_, clock_, options());
  ASSERT_TRUE(follow_three_flows(log, f));
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
  Follower f(memory_, clock_, options());
  ASSERT_TRUE(follow_three_flows(log, f));
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
  Follower f(memory_, clock_, options());
  ASSERT_TRUE(follow_three_flows(log, f));
  std::filesystem::rename(dir_.sub("standby"), dir_.sub("standby.moved"));
  std::ofstream(dir_.sub("standby")) << "not a local store";
  // The engine must open the path as it finds it (and fail), not use the old files.
  EXPECT_EQ(f.stop_and_hand_over(), nullptr);
}

// Counts the requests a follower makes, by kind.
class CountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& o = {}) override {
    ++gets;
    return inner_.get(key, o);
  }
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax, const RequestOptions& o = {}) override {
    ++lists;
    return inner_.list(prefix, start_after, max_keys, o);
  }
  std::string describe() const override { return "counting"; }
  std::atomic<int> gets{0}, lists{0};
};

// Issue 30: a hot standby at rest reads the next slot with one GET every
// other poll, and never LISTs (the lease's own reads come on top).
TEST_F(FollowerTest, AtRestItReadsTheNextSlotWithOneGetEveryOtherPollAndNoList) {
  LogFiller log(memory_, clock_);
  CountingStore counting(memory_);
  Follower f(counting, clock_, options());
  ASSERT_TRUE(follow_three_flows(log, f));
  ASSERT_TRUE(until(clock_, [&] { return f.status().state == FollowerState::kFollowing; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  counting.gets = 0;
  counting.lists = 0;
  for (int i = 0; i < 40; ++i) {  // 10 s of polls
    clock_.advance(milliseconds(250));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(counting.lists, 0);
  EXPECT_GE(counting.gets, 5);
  EXPECT_LE(counting.gets, 21);
  EXPECT_TRUE(f.hot());
  // New batches are still found, and read ahead in parallel runs.
  log.flows(3, 200);
  ASSERT_TRUE(until(clock_, [&] { return f.status().applied == Slot(200); }));
  EXPECT_EQ(counting.lists, 0);
}

// Without a LIST, a log collected under the follower (a hole) is found by the
// GC point, which GC writes before it deletes anything.
TEST_F(FollowerTest, ALogCollectedUnderItIsFoundByTheGcPoint) {
  LogFiller log(memory_, clock_);
  Follower f(memory_, clock_, options());
  ASSERT_TRUE(follow_three_flows(log, f));
  proto::LogStart start;
  start.set_node_id(kNode.value);
  start.set_first_slot(10);
  ASSERT_TRUE(memory_.put(log_start_key(kNode), encode_log_start(start), PutCondition::overwrite())
                  .is_ok());
  ASSERT_TRUE(until(clock_, [&] { return f.status().restarts >= 1; }));
  EXPECT_NE(f.status().last_error.find("hole in the log"), std::string::npos)
      << f.status().last_error;
  EXPECT_FALSE(f.hot());
}

// Issue 30: a cold takeover brings its store up to the log's end (or to a
// given slot) before the engine opens it; the result is a full replay's.
TEST_F(FollowerTest, CatchUpAppliesTheLogUpToTheGivenSlotAsAFullReplayWould) {
  LogFiller log(memory_, clock_);
  log.append(declare(order_declaration()));
  log.flows(0, 600);  // slots 0 (EpochStart) .. 601
  auto part = catch_up_local_store(memory_, kNode, dir_.sub("cold"), Slot(300));
  ASSERT_TRUE(part.is_ok()) << part.status().to_string();
  EXPECT_EQ(part->applied, Slot(299));
  EXPECT_EQ(part->slots_applied, 300u);
  part->sm.reset();
  auto all = catch_up_local_store(memory_, kNode, dir_.sub("cold"),
                                  Slot(std::numeric_limits<uint64_t>::max()));
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  EXPECT_EQ(all->applied, Slot(601));
  EXPECT_EQ(all->slots_applied, 302u);
  expect_a_full_replay(*all->sm);
}

}  // namespace
}  // namespace dex
