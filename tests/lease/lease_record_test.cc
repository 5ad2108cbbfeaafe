#include "lease/lease_record.h"

#include <gtest/gtest.h>

#include "common/framing.h"

namespace dex {
namespace {

LeaseRecordValue sample() {
  LeaseRecordValue r;
  r.node_id = NodeId("n1");
  r.epoch = Epoch(7);
  r.holder_process_id = ProcessId("host-1-abcd");
  r.duration = seconds(10);
  r.renewal_count = 3;
  r.released = true;
  r.write_id = "w1";
  return r;
}

TEST(LeaseRecord, KeyIsNodesNodeIdLease) { EXPECT_EQ(lease_key(NodeId("abc")), "nodes/abc/lease"); }

TEST(LeaseRecord, RoundTrips) {
  auto decoded = decode_lease_record(encode_lease_record(sample()));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded.value(), sample());
}

TEST(LeaseRecord, DistinctWriteIdsGiveDistinctBytes) {
  LeaseRecordValue a = sample(), b = sample();
  b.write_id = "w2";
  EXPECT_NE(encode_lease_record(a), encode_lease_record(b));
}

TEST(LeaseRecord, TruncatedIsCorruptionWithReason) {
  std::string bytes = encode_lease_record(sample());
  auto r = decode_lease_record(bytes.substr(0, 5));
  ASSERT_TRUE(r.status().is_corruption());
  EXPECT_NE(r.status().message().find("lease record"), std::string::npos);
  EXPECT_NE(r.status().message().find("too short"), std::string::npos);
}

TEST(LeaseRecord, BitFlipIsCorruption) {
  std::string bytes = encode_lease_record(sample());
  bytes.back() ^= 0x1;
  EXPECT_TRUE(decode_lease_record(bytes).status().is_corruption());
}

TEST(LeaseRecord, WrongMagicIsCorruption) {
  std::string bytes = frame(kLogBatchMagic, "x");
  auto r = decode_lease_record(bytes);
  ASSERT_TRUE(r.status().is_corruption());
  EXPECT_NE(r.status().message().find("magic"), std::string::npos);
}

TEST(LeaseRecord, GarbagePayloadIsCorruption) {
  EXPECT_TRUE(decode_lease_record(frame(kLeaseMagic, "\xff\xff\xff")).status().is_corruption());
}

TEST(LeaseRecord, MissingFieldsAreCorruption) {
  EXPECT_TRUE(decode_lease_record(frame(kLeaseMagic, "")).status().is_corruption());
}

}  // namespace
}  // namespace dex
