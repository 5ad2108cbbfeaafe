#include "log/log_gc.h"

#include <gtest/gtest.h>

#include "log/log_reader.h"
#include "log_test_util.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using testing::put_batch;

const NodeId kNode("n1");

GcGuard guard_for(uint64_t log_end, uint64_t epoch_start, bool* lease) {
  GcGuard guard;
  guard.log_end = Slot(log_end);
  guard.epoch_start_slot = Slot(epoch_start);
  guard.lease_valid = [lease] { return *lease; };
  return guard;
}

void fill(MemoryObjectStore& store, uint64_t end) {
  for (uint64_t s = 0; s < end; ++s) put_batch(store, "n1", s, 1, s == 0);
}

TEST(LogGc, DeletesOnlySlotsBelowThePointLowestFirst) {
  MemoryObjectStore store;
  fill(store, 1500);
  bool lease = true;
  auto deleted = collect_garbage(store, kNode, Slot(400), guard_for(1500, 1499, &lease));
  ASSERT_TRUE(deleted.is_ok()) << deleted.status().to_string();
  EXPECT_EQ(deleted.value(), 400u);
  auto bounds = find_log_bounds(store, kNode);
  ASSERT_TRUE(bounds.is_ok());
  EXPECT_EQ(bounds->first, Slot(400));
  EXPECT_EQ(bounds->end, Slot(1500));
  // A reader starting at the GC point sees a complete log.
  LogReader reader(store, kNode, Slot(400));
  uint64_t n = 0;
  EXPECT_TRUE(reader
                  .read_to_end([&](const LogEntry&) {
                    ++n;
                    return Status::ok();
                  })
                  .is_ok());
  EXPECT_EQ(n, 1100u);
  // Collecting again is a no-op.
  auto again = collect_garbage(store, kNode, Slot(400), guard_for(1500, 1499, &lease));
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again.value(), 0u);
}

TEST(LogGc, RefusesWithinTheMarginOfTheLogEnd) {
  MemoryObjectStore store;
  fill(store, 1500);
  bool lease = true;
  // log end 1500: slots [500, 1500) must stay.
  auto refused = collect_garbage(store, kNode, Slot(501), guard_for(1500, 1499, &lease));
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("1000"), std::string::npos);
  auto short_log = collect_garbage(store, kNode, Slot(1), guard_for(999, 998, &lease));
  EXPECT_EQ(short_log.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(find_log_bounds(store, kNode)->first, Slot(0));  // nothing deleted
  auto ok = collect_garbage(store, kNode, Slot(500), guard_for(1500, 1499, &lease));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok.value(), 500u);
}

TEST(LogGc, RefusesASmallerMarginThanTheMinimum) {
  MemoryObjectStore store;
  fill(store, 10);
  bool lease = true;
  GcGuard guard = guard_for(10, 9, &lease);
  guard.keep_slots_min = 5;
  EXPECT_EQ(collect_garbage(store, kNode, Slot(2), guard).status().code(), Code::kInvalidArgument);
}

TEST(LogGc, NeverDeletesTheCurrentEpochStart) {
  MemoryObjectStore store;
  fill(store, 3000);
  bool lease = true;
  auto refused = collect_garbage(store, kNode, Slot(1201), guard_for(3000, 1200, &lease));
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("EpochStart"), std::string::npos);
  auto ok = collect_garbage(store, kNode, Slot(1200), guard_for(3000, 1200, &lease));
  ASSERT_TRUE(ok.is_ok());
  EXPECT_TRUE(store.get(slot_key(kNode, Slot(1200))).is_ok());
}

TEST(LogGc, ASettledEpochMayCollectItsEpochStartButNotTheMargin) {
  MemoryObjectStore store;
  fill(store, 3000);
  bool lease = true;
  GcGuard guard = guard_for(3000, 1200, &lease);
  guard.epoch_settled = true;
  auto ok = collect_garbage(store, kNode, Slot(1500), guard);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok.value(), 1500u);
  EXPECT_EQ(find_log_bounds(store, kNode)->first, Slot(1500));
  // The margin behind the log end still holds.
  EXPECT_EQ(collect_garbage(store, kNode, Slot(2001), guard).status().code(),
            Code::kInvalidArgument);
}

TEST(LogGc, RunsOnlyUnderAValidLease) {
  MemoryObjectStore store;
  fill(store, 1500);
  bool lease = false;
  auto refused = collect_garbage(store, kNode, Slot(100), guard_for(1500, 1499, &lease));
  EXPECT_EQ(refused.status().code(), Code::kStopped);
  EXPECT_EQ(find_log_bounds(store, kNode)->first, Slot(0));
  GcGuard no_lease = guard_for(1500, 1499, &lease);
  no_lease.lease_valid = nullptr;
  EXPECT_EQ(collect_garbage(store, kNode, Slot(100), no_lease).status().code(),
            Code::kInvalidArgument);
}

TEST(LogGc, HolderOverloadUsesTheWritersEndAndEpochStart) {
  MemoryObjectStore store;
  fill(store, 1500);
  std::atomic<bool> lease{true};
  LogWriter writer(
      store, SystemClock::instance(), testing::writer_options("n1", 2, "p2"),
      [&] { return lease.load(); }, [](const Status&) {});
  // Wrong usage: before open.
  EXPECT_EQ(collect_garbage(store, writer, Slot(1)).status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(writer.open().is_ok());
  EXPECT_EQ(writer.epoch_start_slot(), Slot(1500));
  EXPECT_EQ(writer.next_slot(), Slot(1501));
  EXPECT_EQ(collect_garbage(store, writer, Slot(502)).status().code(), Code::kInvalidArgument);
  auto ok = collect_garbage(store, writer, Slot(501));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok.value(), 501u);
  lease = false;
  EXPECT_EQ(collect_garbage(store, writer, Slot(501)).status().code(), Code::kStopped);
  (void)writer.close();
}

// The model check found it (docs/model.md): a fenced writer's retry lands after
// GC and re-creates a collected slot. The recorded GC point keeps it out of the
// log's bounds, so a local store that is behind still looks behind.
TEST(LogGc, RecordsItsPointSoARecreatedSlotIsNotTheLogsStart) {
  MemoryObjectStore store;
  fill(store, 1500);
  bool lease = true;
  ASSERT_TRUE(collect_garbage(store, kNode, Slot(400), guard_for(1500, 1499, &lease)).is_ok());
  EXPECT_EQ(read_log_start(store, kNode).value(), Slot(400));
  put_batch(store, "n1", 399, 1, false);  // right below the GC point: no hole
  put_batch(store, "n1", 10, 1, false);
  for (uint64_t hint : {0, 11, 400, 1400}) {
    auto bounds = find_log_bounds(store, kNode, {}, Slot(hint));
    ASSERT_TRUE(bounds.is_ok()) << bounds.status().to_string();
    EXPECT_EQ(bounds->first, Slot(400)) << hint;
  }
  // A lower point never moves it back; later runs delete the strays.
  auto lower = collect_garbage(store, kNode, Slot(300), guard_for(1500, 1499, &lease));
  ASSERT_TRUE(lower.is_ok());
  EXPECT_EQ(lower.value(), 1u);  // slot 10
  EXPECT_EQ(read_log_start(store, kNode).value(), Slot(400));
  auto again = collect_garbage(store, kNode, Slot(400), guard_for(1500, 1499, &lease));
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again.value(), 1u);  // slot 399
  // Without the lease nothing is recorded.
  lease = false;
  EXPECT_EQ(collect_garbage(store, kNode, Slot(450), guard_for(1500, 1499, &lease)).status().code(),
            Code::kStopped);
  EXPECT_EQ(read_log_start(store, kNode).value(), Slot(400));
}

}  // namespace
}  // namespace dex
