#include "log/log_format.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/framing.h"
#include "log_test_util.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using testing::put_batch;

const NodeId kNode("n1");

TEST(LogKeys, SlotKeyIsTwentyZeroPaddedDigitsUnderTheNodePrefix) {
  EXPECT_EQ(log_prefix(kNode), "nodes/n1/log/");
  EXPECT_EQ(slot_key(kNode, Slot(0)), "nodes/n1/log/00000000000000000000");
  EXPECT_EQ(slot_key(kNode, Slot(42)), "nodes/n1/log/00000000000000000042");
  EXPECT_EQ(slot_key(kNode, Slot(UINT64_MAX)), "nodes/n1/log/18446744073709551615");
  EXPECT_TRUE(validate_key(slot_key(kNode, Slot(7))).is_ok());
}

TEST(LogKeys, LexicalOrderIsNumericOrder) {
  std::vector<uint64_t> slots = {0, 1, 9, 10, 99, 100, 1'000'000, UINT64_MAX - 1, UINT64_MAX};
  std::vector<std::string> keys;
  for (uint64_t s : slots) keys.push_back(slot_key(kNode, Slot(s)));
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

TEST(LogKeys, ParseRoundTrips) {
  for (uint64_t s : {uint64_t{0}, uint64_t{1}, uint64_t{123456789}, UINT64_MAX}) {
    auto parsed = parse_slot_key(kNode, slot_key(kNode, Slot(s)));
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed.value(), Slot(s));
  }
}

TEST(LogKeys, ParseRejectsJunkKeys) {
  for (const char* key : {
           "nodes/n2/log/00000000000000000001",   // another node
           "nodes/n1/log/",                       // no digits
           "nodes/n1/log/1",                      // not padded
           "nodes/n1/log/000000000000000000001",  // 21 digits
           "nodes/n1/log/0000000000000000000x",   // not a digit
           "nodes/n1/log/-0000000000000000001",   // signed
           "nodes/n1/log/99999999999999999999",   // overflows uint64
           "nodes/n1/log/00000000000000000001/x",
           "nodes/n1/lease",
       }) {
    auto parsed = parse_slot_key(kNode, key);
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument) << key;
    EXPECT_NE(parsed.status().message().find(key), std::string::npos) << parsed.status().message();
  }
}

proto::LogBatch sample_batch() {
  proto::LogBatch batch;
  batch.set_node_id("n1");
  batch.set_epoch(3);
  batch.set_slot(17);
  batch.set_writer_process_id("host-1-abc");
  batch.set_write_id("00ff");
  batch.add_records()->mutable_epoch_start()->set_previous_end_slot(17);
  *batch.add_records() = testing::opaque_record("hello");
  return batch;
}

TEST(LogBatchCodec, RoundTrips) {
  proto::LogBatch batch = sample_batch();
  std::string bytes = encode_batch(batch);
  EXPECT_EQ(bytes.substr(0, 4), kLogBatchMagic);
  auto decoded = decode_batch("k", bytes);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->SerializeAsString(), batch.SerializeAsString());
  EXPECT_EQ(decoded->records(1).opaque(), "hello");
}

TEST(LogBatchCodec, CorruptionNamesTheKeyAndTheReason) {
  std::string bytes = encode_batch(sample_batch());
  struct Case {
    std::string name, bytes, reason;
  };
  std::string flipped = bytes;
  flipped[bytes.size() - 2] ^= 0x01;
  std::vector<Case> cases = {
      {"empty", "", "too short"},
      {"torn", bytes.substr(0, bytes.size() - 3), ""},
      {"bit flip", flipped, ""},
      {"lease magic", frame(kLeaseMagic, "x"), "magic"},
      {"not a LogBatch", frame(kLogBatchMagic, std::string("\xff\xff\xff", 3)), "not a LogBatch"},
  };
  for (const auto& c : cases) {
    auto decoded = decode_batch("nodes/n1/log/00000000000000000017", c.bytes);
    ASSERT_EQ(decoded.status().code(), Code::kCorruption) << c.name;
    EXPECT_NE(decoded.status().message().find("nodes/n1/log/00000000000000000017"),
              std::string::npos)
        << c.name;
    EXPECT_NE(decoded.status().message().find(c.reason), std::string::npos)
        << c.name << ": " << decoded.status().message();
  }
}

TEST(LogBounds, EmptyLogStartsAtSlotZero) {
  MemoryObjectStore store;
  auto bounds = find_log_bounds(store, kNode);
  ASSERT_TRUE(bounds.is_ok());
  EXPECT_TRUE(bounds->empty());
  EXPECT_EQ(bounds->end, kFirstSlot);
  EXPECT_EQ(kFirstSlot, Slot(0));
}

TEST(LogBounds, EndIsOnePastTheHighestSlotAndIgnoresOtherNodes) {
  MemoryObjectStore store;
  for (uint64_t s = 0; s < 5; ++s) put_batch(store, "n1", s, 1, s == 0);
  put_batch(store, "n10", 0, 1, true);
  put_batch(store, "n10", 99, 1, false);
  ASSERT_TRUE(store.put("nodes/n1/lease", "x", PutCondition::create()).is_ok());
  auto bounds = find_log_bounds(store, kNode);
  ASSERT_TRUE(bounds.is_ok()) << bounds.status().to_string();
  EXPECT_EQ(bounds->first, Slot(0));
  EXPECT_EQ(bounds->end, Slot(5));
}

TEST(LogBounds, PagesThroughLongLogsAndSeesACollectedPrefix) {
  MemoryObjectStore store;
  for (uint64_t s = 300; s < 2600; ++s) put_batch(store, "n1", s, 1, s == 300);
  auto bounds = find_log_bounds(store, kNode);
  ASSERT_TRUE(bounds.is_ok()) << bounds.status().to_string();
  EXPECT_EQ(bounds->first, Slot(300));
  EXPECT_EQ(bounds->end, Slot(2600));
  EXPECT_GE(store.counts().lists, 3u);  // 2300 keys in pages of kListKeysMax
}

// A takeover by a hot standby lists only the log's tail (its applied slot is
// the hint); any hint gives the same answer as a full listing.
TEST(LogBounds, AHintListsOnlyTheTailAndNeverChangesTheAnswer) {
  MemoryObjectStore store;
  for (uint64_t s = 300; s < 5600; ++s) put_batch(store, "n1", s, 1, s == 300);
  for (uint64_t hint : {0, 1, 299, 300, 301, 4000, 5599, 5600, 5601, 90000}) {
    auto bounds = find_log_bounds(store, kNode, {}, Slot(hint));
    ASSERT_TRUE(bounds.is_ok()) << hint;
    EXPECT_EQ(bounds->first, Slot(300)) << hint;
    EXPECT_EQ(bounds->end, Slot(5600)) << hint;
  }
  const uint64_t before = store.counts().lists;
  ASSERT_TRUE(find_log_bounds(store, kNode, {}, Slot(5590)).is_ok());
  EXPECT_EQ(store.counts().lists - before, 2u);  // the first key, then one page of the tail
  const uint64_t full_before = store.counts().lists;
  ASSERT_TRUE(find_log_bounds(store, kNode).is_ok());
  EXPECT_GE(store.counts().lists - full_before, 6u);
  MemoryObjectStore empty;
  EXPECT_TRUE(find_log_bounds(empty, kNode, {}, Slot(7))->empty());
}

TEST(LogBounds, JunkKeyUnderTheLogPrefixIsCorruption) {
  MemoryObjectStore store;
  put_batch(store, "n1", 0, 1, true);
  ASSERT_TRUE(store.put("nodes/n1/log/junk", "x", PutCondition::create()).is_ok());
  auto bounds = find_log_bounds(store, kNode);
  EXPECT_EQ(bounds.status().code(), Code::kCorruption);
  EXPECT_NE(bounds.status().message().find("nodes/n1/log/junk"), std::string::npos);
}

// A fenced writer's late retry can re-create a slot that GC already deleted
// (docs/log.md, "GC safety"). Below a hole it is not the log's start, with or
// without a hint, and without any GC point recorded.
TEST(LogBounds, AStraySlotBelowAHoleIsNotTheLogsStart) {
  MemoryObjectStore store;
  put_batch(store, "n1", 7, 1, false);  // the stray
  for (uint64_t s = 300; s < 2600; ++s) put_batch(store, "n1", s, 2, s == 300);
  for (uint64_t hint : {0, 8, 9, 299, 2600, 3000}) {
    auto bounds = find_log_bounds(store, kNode, {}, Slot(hint));
    ASSERT_TRUE(bounds.is_ok()) << bounds.status().to_string();
    EXPECT_EQ(bounds->first, Slot(300)) << hint;
    EXPECT_EQ(bounds->end, Slot(2600)) << hint;
  }
  // A hint inside the log lists only the tail: [hint, end) is the log's, and
  // `first` is at most the hint (the head below it is not examined).
  for (uint64_t hint : {300, 2000}) {
    auto bounds = find_log_bounds(store, kNode, {}, Slot(hint));
    ASSERT_TRUE(bounds.is_ok());
    EXPECT_LE(bounds->first, Slot(hint)) << hint;
    EXPECT_EQ(bounds->end, Slot(2600)) << hint;
  }
  // A hint on the stray itself: the log from the hint has a hole, so the
  // caller (a local store at slot 7) is behind the log's start.
  auto on_stray = find_log_bounds(store, kNode, {}, Slot(7));
  ASSERT_TRUE(on_stray.is_ok());
  EXPECT_GT(on_stray->first, Slot(7));
}

// A stray right below the GC point leaves no hole: only the recorded GC point
// tells it apart.
TEST(LogBounds, TheGcPointHidesAStraySlotRightBelowIt) {
  MemoryObjectStore store;
  for (uint64_t s = 299; s < 1500; ++s) put_batch(store, "n1", s, s == 299 ? 1 : 2, s == 300);
  proto::LogStart start;
  start.set_node_id("n1");
  start.set_first_slot(300);
  ASSERT_TRUE(
      store.put(log_start_key(kNode), encode_log_start(start), PutCondition::create()).is_ok());
  for (uint64_t hint : {0, 299, 300, 301, 1499}) {
    auto bounds = find_log_bounds(store, kNode, {}, Slot(hint));
    ASSERT_TRUE(bounds.is_ok()) << bounds.status().to_string();
    EXPECT_EQ(bounds->first, Slot(300)) << hint;
    EXPECT_EQ(bounds->end, Slot(1500)) << hint;
  }
  auto read = read_log_start(store, kNode);
  ASSERT_TRUE(read.is_ok());
  EXPECT_EQ(read.value(), Slot(300));
}

TEST(LogBounds, ALogWithNothingAboveItsGcPointIsEmptyThere) {
  MemoryObjectStore store;
  put_batch(store, "n1", 3, 1, true);  // a stray below the GC point
  proto::LogStart start;
  start.set_node_id("n1");
  start.set_first_slot(5000);
  ASSERT_TRUE(
      store.put(log_start_key(kNode), encode_log_start(start), PutCondition::create()).is_ok());
  auto bounds = find_log_bounds(store, kNode);
  ASSERT_TRUE(bounds.is_ok());
  EXPECT_TRUE(bounds->empty());
  // A writer opening this log writes its EpochStart at the GC point, never below.
  EXPECT_EQ(bounds->end, Slot(5000));
}

TEST(LogBounds, ACorruptOrForeignGcPointIsCorruptionNamingTheKey) {
  MemoryObjectStore store;
  put_batch(store, "n1", 0, 1, true);
  ASSERT_TRUE(store.put(log_start_key(kNode), "junk", PutCondition::create()).is_ok());
  auto bounds = find_log_bounds(store, kNode);
  EXPECT_EQ(bounds.status().code(), Code::kCorruption);
  EXPECT_NE(bounds.status().message().find("nodes/n1/log-start"), std::string::npos)
      << bounds.status().message();
  proto::LogStart other;
  other.set_node_id("n2");
  other.set_first_slot(1);
  ASSERT_TRUE(
      store.put(log_start_key(kNode), encode_log_start(other), PutCondition::overwrite()).is_ok());
  EXPECT_EQ(find_log_bounds(store, kNode).status().code(), Code::kCorruption);
}

}  // namespace
}  // namespace dex
