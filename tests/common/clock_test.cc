#include "common/clock.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/random.h"

namespace dex {
namespace {

TEST(ManualClock, MovesOnlyWhenAdvanced) {
  ManualClock clock;
  TimePoint t0 = clock.now();
  EXPECT_EQ(clock.now(), t0);
  clock.advance(seconds(3));
  EXPECT_EQ(clock.now() - t0, seconds(3));
}

TEST(ManualClock, SleeperWakesWhenAnotherThreadAdvances) {
  ManualClock clock;
  TimePoint target = clock.now() + seconds(10);
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    clock.sleep_until(target);
    woke = true;
  });
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(woke.load());
  clock.advance(seconds(10));
  sleeper.join();
  EXPECT_TRUE(woke.load());
}

TEST(Random, SameSeedSameSequence) {
  Random a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
}

TEST(Random, BetweenStaysInRange) {
  Random r(1);
  for (int i = 0; i < 1000; ++i) {
    Duration d = r.between(milliseconds(5), milliseconds(7));
    EXPECT_GE(d, milliseconds(5));
    EXPECT_LE(d, milliseconds(7));
  }
}

TEST(RandomIds, AreUnique) {
  EXPECT_NE(random_hex_id(), random_hex_id());
  EXPECT_EQ(random_hex_id().size(), 32u);
  EXPECT_NE(make_process_id(), make_process_id());
}

}  // namespace
}  // namespace dex
