// LockTable (src/flow/lock_table.h): one run's lock keys, first come first
// served. The rules' use of it is in flow_rules_test.cc (FlowAttributes.Lock*).
#include "flow/lock_table.h"

#include <gtest/gtest.h>

namespace dex::flow {
namespace {

google::protobuf::RepeatedPtrField<std::string> keys(std::initializer_list<const char*> ks) {
  google::protobuf::RepeatedPtrField<std::string> out;
  for (const char* k : ks) *out.Add() = k;
  return out;
}

TEST(LockTable, AFreeKeyIsTakenAHeldOneIsWaitedForInOrderAndGrantedOnRelease) {
  flow::Run run;
  LockTable t(run);
  EXPECT_TRUE(t.take("A-1", EXECUTE, keys({})));
  EXPECT_TRUE(t.take("A-1", EXECUTE, keys({"acct", "fx"})));
  EXPECT_FALSE(t.take("B-1", EXECUTE, keys({"acct"})));
  EXPECT_FALSE(t.take("rpc:1", RPC, keys({"fx"})));
  // "other" is free, but a waiter that came first wants nothing of it: taken.
  EXPECT_TRUE(t.take("C-1", WAIT_FOR, keys({"other"})));
  EXPECT_TRUE(t.grant().empty()) << "both keys are still held";
  EXPECT_EQ(t.release("A-1", EXECUTE), (std::vector<std::string>{"acct", "fx"}));
  auto granted = t.grant();
  ASSERT_EQ(granted.size(), 2u);
  EXPECT_EQ(granted[0].holder(), "B-1");
  EXPECT_EQ(granted[1].holder(), "rpc:1");
  EXPECT_EQ(run.lock_waiters_size(), 0);
  EXPECT_EQ(run.locks_size(), 3) << "other, acct, fx";
}

TEST(LockTable, AWaiterBehindAnEarlierWaiterStaysEvenWhenItsKeysAreFree) {
  flow::Run run;
  LockTable t(run);
  ASSERT_TRUE(t.take("A-1", EXECUTE, keys({"a"})));
  ASSERT_FALSE(t.take("B-1", EXECUTE, keys({"a", "b"})));
  // "b" is free but B-1 wants it first: C-1 queues behind it.
  ASSERT_FALSE(t.take("C-1", EXECUTE, keys({"b"})));
  EXPECT_TRUE(t.grant().empty());
  t.drop_waiter("B-1", EXECUTE);  // B-1's attempt ended while it waited
  auto granted = t.grant();
  ASSERT_EQ(granted.size(), 1u);
  EXPECT_EQ(granted[0].holder(), "C-1");
  EXPECT_TRUE(t.release("nobody", EXECUTE).empty());
  EXPECT_EQ(t.release("A-1", WAIT_FOR), std::vector<std::string>{}) << "another method's keys";
}

}  // namespace
}  // namespace dex::flow
