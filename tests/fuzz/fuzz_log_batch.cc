// Log batch objects (src/log/log_format.h, common/framing.h): whatever bytes a
// slot key holds, decode_batch answers a batch or Corruption, and a batch it
// accepts re-encodes to bytes that decode to the same batch. The key line goes
// through parse_slot_key, which must accept exactly the keys slot_key makes.
// The same bytes also go through decode_log_start (the GC point object).
//
// Input: mode byte | key line '\n' | object (mode bit 0) or LogBatch payload.
#include "common/framing.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"
#include "log/log_format.h"

namespace dex::fuzz {

int log_batch(const uint8_t* data, size_t size) {
  const ProtobufQuiet quiet;
  const NodeId node("n1");
  const BinaryInput in = split_input(data, size, /*with_key=*/true);

  auto slot = parse_slot_key(node, in.key);
  if (slot.is_ok()) {
    FUZZ_CHECK(slot_key(node, slot.value()) == in.key, "key '{}' parsed as slot {}", in.key,
               slot->value);
  } else {
    FUZZ_CHECK(slot.status().code() == Code::kInvalidArgument, "{}", slot.status().to_string());
  }

  const std::string object = in.raw ? std::string(in.body) : frame(kLogBatchMagic, in.body);
  if (in.raw) {
    // The frame is canonical: a frame that checks out is what frame() makes.
    auto payload = unframe(kLogBatchMagic, object);
    if (payload.is_ok()) {
      FUZZ_CHECK(frame(kLogBatchMagic, payload.value()) == object, "frame not canonical");
    } else {
      FUZZ_CHECK(payload.status().is_corruption(), "{}", payload.status().to_string());
    }
  }

  // The GC point (nodes/<id>/log-start) is framed the same way with its own
  // magic: the same bytes must decode to a LogStart or to Corruption.
  const std::string start_object = in.raw ? std::string(in.body) : frame(kLogStartMagic, in.body);
  auto start = decode_log_start(log_start_key(node), start_object);
  if (start.is_ok()) {
    auto start_again = decode_log_start(log_start_key(node), encode_log_start(start.value()));
    FUZZ_CHECK(start_again.is_ok() && start_again->first_slot() == start->first_slot() &&
                   start_again->node_id() == start->node_id(),
               "a re-encoded LogStart differs");
  } else {
    FUZZ_CHECK(start.status().is_corruption(), "{}", start.status().to_string());
  }

  auto batch = decode_batch(in.key, object);
  if (!batch.is_ok()) {
    FUZZ_CHECK(batch.status().is_corruption(), "{}", batch.status().to_string());
    return 0;
  }
  const std::string encoded = encode_batch(batch.value());
  auto again = decode_batch(in.key, encoded);
  FUZZ_CHECK(again.is_ok(), "a re-encoded batch does not decode: {}", again.status().to_string());
  FUZZ_CHECK(encode_batch(again.value()) == encoded, "decode/encode is not a fixed point");
  FUZZ_CHECK(again->records_size() == batch->records_size() && again->epoch() == batch->epoch() &&
                 again->slot() == batch->slot() && again->node_id() == batch->node_id(),
             "the re-decoded batch differs");
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(log_batch)
