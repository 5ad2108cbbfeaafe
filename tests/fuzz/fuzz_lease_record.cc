// The lease object (src/lease/lease_record.h): whatever bytes nodes/<id>/lease
// holds, decode_lease_record answers a record or Corruption; a record it accepts
// has the fields the lease machine relies on, and one the encoder can write
// (it needs a write_id) round-trips unchanged.
//
// Input: mode byte | object (mode bit 0) or LeaseRecord payload.
#include "common/framing.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"
#include "lease/lease_record.h"

namespace dex::fuzz {

int lease_record(const uint8_t* data, size_t size) {
  const ProtobufQuiet quiet;
  const BinaryInput in = split_input(data, size, /*with_key=*/false);
  const std::string object = in.raw ? std::string(in.body) : frame(kLeaseMagic, in.body);

  auto record = decode_lease_record(object);
  if (!record.is_ok()) {
    FUZZ_CHECK(record.status().is_corruption(), "{}", record.status().to_string());
    return 0;
  }
  const LeaseRecordValue& r = record.value();
  FUZZ_CHECK(!r.node_id.empty() && r.epoch.value > 0 && !r.holder_process_id.empty(),
             "decoded a record without node, epoch or holder");
  FUZZ_CHECK(r.duration >= Duration(0), "decoded a negative duration");
  (void)describe_holder(r);
  (void)lease_key(r.node_id);
  if (r.write_id.empty()) return 0;  // readable, but not one this encoder writes
  const std::string encoded = encode_lease_record(r);
  auto again = decode_lease_record(encoded);
  FUZZ_CHECK(again.is_ok(), "a re-encoded record does not decode: {}",
             again.status().to_string());
  FUZZ_CHECK(again.value() == r, "the re-decoded record differs");
  FUZZ_CHECK(encode_lease_record(again.value()) == encoded, "decode/encode is not a fixed point");
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(lease_record)
