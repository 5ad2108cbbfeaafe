#include "log/log_reader.h"

#include <gtest/gtest.h>

#include "common/framing.h"
#include "log_test_util.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using testing::put_batch;

const NodeId kNode("n1");

std::vector<uint64_t> delivered_slots(LogReader& reader, Status* end_status = nullptr) {
  std::vector<uint64_t> slots;
  Status status = reader.read_to_end([&](const LogEntry& entry) {
    slots.push_back(entry.slot.value);
    return Status::ok();
  });
  if (end_status) *end_status = status;
  return slots;
}

TEST(LogReader, DeliversInSlotOrderFromTheStartSlot) {
  MemoryObjectStore store;
  put_batch(store, "n1", 0, 1, true);
  put_batch(store, "n1", 1, 1, false, {"a"});
  put_batch(store, "n1", 2, 1, false, {"b"});
  LogReader reader(store, kNode, Slot(1));
  Status status;
  EXPECT_EQ(delivered_slots(reader, &status), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  EXPECT_EQ(reader.next_slot(), Slot(3));
}

TEST(LogReader, SkipsABatchWhoseEpochIsLowerThanOneAlreadySeen) {
  MemoryObjectStore store;
  put_batch(store, "n1", 0, 1, true);
  put_batch(store, "n1", 1, 1, false, {"a"});
  put_batch(store, "n1", 2, 2, true);               // epoch 2 starts
  put_batch(store, "n1", 3, 1, false, {"zombie"});  // a fenced writer's batch
  put_batch(store, "n1", 4, 2, false, {"b"});
  LogReader reader(store, kNode, Slot(0));
  Status status;
  EXPECT_EQ(delivered_slots(reader, &status), (std::vector<uint64_t>{0, 1, 2, 4}));
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  EXPECT_EQ(reader.skipped(), 1u);
  EXPECT_EQ(reader.highest_epoch(), Epoch(2));
}

TEST(LogReader, ReportsAHoleInsteadOfSkippingIt) {
  MemoryObjectStore store;
  put_batch(store, "n1", 0, 1, true);
  put_batch(store, "n1", 1, 1, false);
  put_batch(store, "n1", 3, 1, false);
  LogReader reader(store, kNode, Slot(0));
  Status status;
  EXPECT_EQ(delivered_slots(reader, &status), (std::vector<uint64_t>{0, 1}));
  ASSERT_EQ(status.code(), Code::kCorruption);
  EXPECT_NE(status.message().find("hole"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(slot_key(kNode, Slot(2))), std::string::npos);
  EXPECT_NE(status.message().find(slot_key(kNode, Slot(3))), std::string::npos);
  EXPECT_EQ(reader.next_slot(), Slot(2));  // errors do not move the cursor
}

TEST(LogReader, ReportsCorruptionWithTheSlotKeyAndKeepsTheCursor) {
  MemoryObjectStore store;
  put_batch(store, "n1", 0, 1, true);
  ASSERT_TRUE(
      store.put(slot_key(kNode, Slot(1)), frame(kLeaseMagic, "x"), PutCondition::create()).is_ok());
  LogReader reader(store, kNode, Slot(0));
  Status status;
  EXPECT_EQ(delivered_slots(reader, &status), (std::vector<uint64_t>{0}));
  ASSERT_EQ(status.code(), Code::kCorruption);
  EXPECT_NE(status.message().find(slot_key(kNode, Slot(1))), std::string::npos);
  EXPECT_NE(status.message().find("magic"), std::string::npos) << status.message();
  EXPECT_EQ(reader.next_slot(), Slot(1));
  EXPECT_EQ(reader.next().status().code(), Code::kCorruption);  // again, same place
}

TEST(LogReader, BatchThatNamesAnotherSlotIsCorruption) {
  MemoryObjectStore store;
  put_batch(store, "n1", 5, 1, true);
  auto moved = store.get(slot_key(kNode, Slot(5)));
  ASSERT_TRUE(moved.is_ok());
  ASSERT_TRUE(store.put(slot_key(kNode, Slot(6)), moved->body, PutCondition::create()).is_ok());
  LogReader reader(store, kNode, Slot(6));
  auto read = reader.read(Slot(6));
  ASSERT_EQ(read.status().code(), Code::kCorruption);
  EXPECT_NE(read.status().message().find("says it is slot 5"), std::string::npos);
}

TEST(LogReader, NewEpochWithoutAnEpochStartIsCorruption) {
  MemoryObjectStore store;
  put_batch(store, "n1", 0, 1, true);
  put_batch(store, "n1", 1, 2, false, {"no epoch start"});
  LogReader reader(store, kNode, Slot(0));
  Status status;
  EXPECT_EQ(delivered_slots(reader, &status), (std::vector<uint64_t>{0}));
  EXPECT_EQ(status.code(), Code::kCorruption);
  EXPECT_NE(status.message().find("EpochStart"), std::string::npos);
}

TEST(LogReader, ReadOfAnUnwrittenSlotIsNotYetWritten) {
  MemoryObjectStore store;
  LogReader reader(store, kNode, Slot(0));
  auto read = reader.read(Slot(0));
  ASSERT_TRUE(read.is_ok());
  EXPECT_FALSE(read.value().has_value());
}

TEST(LogReader, TailsTheLogAsItGrows) {
  MemoryObjectStore store;
  LogReader reader(store, kNode, Slot(0));
  auto first = reader.next();
  ASSERT_TRUE(first.is_ok());
  EXPECT_FALSE(first.value().has_value());  // nothing yet
  put_batch(store, "n1", 0, 1, true);
  put_batch(store, "n1", 1, 1, false, {"x"});
  auto a = reader.next();
  ASSERT_TRUE(a.is_ok() && a.value().has_value());
  EXPECT_EQ(a.value()->slot, Slot(0));
  auto b = reader.next();
  ASSERT_TRUE(b.is_ok() && b.value().has_value());
  EXPECT_EQ(b.value()->batch.records(0).opaque(), "x");
  auto end = reader.next();
  ASSERT_TRUE(end.is_ok());
  EXPECT_FALSE(end.value().has_value());
  put_batch(store, "n1", 2, 1, false, {"y"});
  auto c = reader.next();
  ASSERT_TRUE(c.is_ok() && c.value().has_value());
  EXPECT_EQ(c.value()->slot, Slot(2));
}

}  // namespace
}  // namespace dex
