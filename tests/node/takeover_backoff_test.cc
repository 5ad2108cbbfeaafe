// Spec (Hot standby, Takeover): a takeover that fails before the lease is held
// is tried again "after a backoff from 1 to 30 seconds".
#include <gtest/gtest.h>

#include "node/node_machine.h"

namespace dex {
namespace {

TEST(TakeoverBackoff, GrowsFromOneSecondToThirtySeconds) {
  EXPECT_EQ(takeover_retry_backoff(1), seconds(1));
  EXPECT_EQ(takeover_retry_backoff(2), seconds(2));
  EXPECT_EQ(takeover_retry_backoff(3), seconds(4));
  EXPECT_EQ(takeover_retry_backoff(5), seconds(16));
  EXPECT_EQ(takeover_retry_backoff(6), seconds(30));
  EXPECT_EQ(takeover_retry_backoff(1000), seconds(30));
}

}  // namespace
}  // namespace dex
