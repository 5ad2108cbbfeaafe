// Channel condition matching (docs/flow-rules.md, "Waits"): when each match
// kind is met and how many messages it takes.
#include <gtest/gtest.h>

#include "flow/wait_eval.h"
#include "flow_test_util.h"

namespace dex::flow {
namespace {

using namespace dex::flow::testing;

// What a one-condition AnyOf takes with `queued` messages (-1: not met).
int64_t takes(const Condition& c, uint64_t queued) {
  Wait w = wait_of(ANY_OF, {c});
  WaitMatch m = match_wait(w, {ConditionState()}, [&](const ChannelCondition&) { return queued; });
  return m.met ? static_cast<int64_t>(m.take[0]) : -1;
}

TEST(WaitMatch, EveryChannelMatchKind) {
  EXPECT_EQ(takes(channel("c", FOR_ONE), 0), -1);
  EXPECT_EQ(takes(channel("c", FOR_ONE), 5), 1);
  EXPECT_EQ(takes(channel("c", FOR_N, 3), 2), -1);
  EXPECT_EQ(takes(channel("c", FOR_N, 3), 5), 3);
  EXPECT_EQ(takes(channel("c", AT_LEAST, 2), 1), -1);
  EXPECT_EQ(takes(channel("c", AT_LEAST, 2), 7), 7);
  EXPECT_EQ(takes(channel("c", AT_MOST, 0, 3), 0), 0) << "an empty queue meets AtMost";
  EXPECT_EQ(takes(channel("c", AT_MOST, 0, 3), 9), 3);
  EXPECT_EQ(takes(channel("c", AT_LEAST_AT_MOST, 2, 4), 1), -1);
  EXPECT_EQ(takes(channel("c", AT_LEAST_AT_MOST, 2, 4), 3), 3);
  EXPECT_EQ(takes(channel("c", AT_LEAST_AT_MOST, 2, 4), 9), 4);
}

TEST(WaitMatch, ConditionsOnOneQueueShareItInOrder) {
  Wait w = wait_of(ALL_OF, {channel("c", FOR_N, 2), channel("c", FOR_ONE)});
  auto queued = [](uint64_t n) { return [n](const ChannelCondition&) { return n; }; };
  std::vector<ConditionState> states(2);
  EXPECT_FALSE(match_wait(w, states, queued(2)).met) << "three are needed in all";
  WaitMatch m = match_wait(w, states, queued(3));
  ASSERT_TRUE(m.met);
  EXPECT_EQ(m.take, (std::vector<uint64_t>{2, 1}));
}

TEST(WaitMatch, TheFirstMetConditionOfAnAnyOfWins) {
  Wait w = wait_of(ANY_OF, {timer_after(5), channel("c", FOR_ONE)});
  std::vector<ConditionState> states(2);
  states[0].set_fired(true);
  WaitMatch m = match_wait(w, states, [](const ChannelCondition&) { return 1; });
  ASSERT_TRUE(m.met);
  EXPECT_EQ(m.satisfied, (std::vector<uint32_t>{0}));
  EXPECT_EQ(m.take[1], 0u) << "the Channel condition takes nothing";
}

}  // namespace
}  // namespace dex::flow
