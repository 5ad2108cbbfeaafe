// The lease record codec: nodes/<nodeId>/lease holds one framed LeaseRecord
// (common/framing.h, magic kLeaseMagic). docs/lease.md §1 describes the fields.
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"

namespace dex {

// The decoded lease object. Plain value type; mirrors proto dex.proto.LeaseRecord.
struct LeaseRecordValue {
  NodeId node_id;
  Epoch epoch;
  ProcessId holder_process_id;
  Duration duration{0};
  uint64_t renewal_count = 0;
  bool released = false;
  std::string write_id;  // unique per write attempt (docs/lease.md §5, adoption)

  bool operator==(const LeaseRecordValue&) const = default;
};

// "nodes/<nodeId>/lease".
std::string lease_key(const NodeId& node_id);

// Framed protobuf bytes, ready to put.
std::string encode_lease_record(const LeaseRecordValue& record);
// Corruption with a reason when the bytes are not a framed LeaseRecord, or when
// the record is missing its node ID, holder or epoch.
StatusOr<LeaseRecordValue> decode_lease_record(std::string_view bytes);

// "process P (epoch N, renewal R)" for logs and errors.
std::string describe_holder(const LeaseRecordValue& record);

}  // namespace dex
