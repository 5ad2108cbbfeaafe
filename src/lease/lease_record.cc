#include "lease/lease_record.h"

#include <fmt/format.h>

#include "common/framing.h"
#include "dex/records.pb.h"

namespace dex {
namespace {

// A record's duration_ms above this is Corruption: far above lease.duration's
// 1 h maximum, and far below what the clock arithmetic on it can hold (a huge
// value overflowed the conversion to Duration; found by tests/fuzz).
constexpr uint64_t kRecordDurationMsMax = 24ull * 3600 * 1000;

}  // namespace

std::string lease_key(const NodeId& node_id) {
  return fmt::format("nodes/{}/lease", node_id.value);
}

std::string encode_lease_record(const LeaseRecordValue& record) {
  assert(!record.node_id.empty());
  assert(record.epoch.value > 0);
  assert(!record.holder_process_id.empty());
  assert(!record.write_id.empty());
  proto::LeaseRecord pb;
  pb.set_node_id(record.node_id.value);
  pb.set_epoch(record.epoch.value);
  pb.set_holder_process_id(record.holder_process_id.value);
  pb.set_duration_ms(static_cast<uint64_t>(to_ms(record.duration)));
  pb.set_renewal_count(record.renewal_count);
  pb.set_released(record.released);
  pb.set_write_id(record.write_id);
  std::string payload;
  bool ok = pb.SerializeToString(&payload);
  assert(ok);
  (void)ok;
  return frame(kLeaseMagic, payload);
}

StatusOr<LeaseRecordValue> decode_lease_record(std::string_view bytes) {
  auto payload = unframe(kLeaseMagic, bytes);
  if (!payload.is_ok()) {
    return Status::corruption("lease record: " + payload.status().message());
  }
  proto::LeaseRecord pb;
  if (!pb.ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
    return Status::corruption(
        fmt::format("lease record: payload of {} bytes is not a LeaseRecord", payload->size()));
  }
  if (pb.node_id().empty()) return Status::corruption("lease record: no node_id");
  if (pb.epoch() == 0) return Status::corruption("lease record: epoch 0");
  if (pb.holder_process_id().empty())
    return Status::corruption("lease record: no holder_process_id");
  if (pb.duration_ms() > kRecordDurationMsMax) {
    return Status::corruption(fmt::format("lease record: duration_ms {} is over {}",
                                          pb.duration_ms(), kRecordDurationMsMax));
  }
  LeaseRecordValue record;
  record.node_id = NodeId(pb.node_id());
  record.epoch = Epoch(pb.epoch());
  record.holder_process_id = ProcessId(pb.holder_process_id());
  record.duration = milliseconds(static_cast<int64_t>(pb.duration_ms()));
  record.renewal_count = pb.renewal_count();
  record.released = pb.released();
  record.write_id = pb.write_id();
  return record;
}

std::string describe_holder(const LeaseRecordValue& record) {
  return fmt::format("process {} (epoch {}, renewal {}{})", record.holder_process_id.value,
                     record.epoch.value, record.renewal_count, record.released ? ", released" : "");
}

}  // namespace dex
