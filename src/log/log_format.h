// The log's object layout: slot keys, the batch codec and log end finding.
// docs/log.md ("Slot objects") describes the layout; the writer, reader and GC
// share these functions so that they can never disagree about a key or a frame.
//
//   nodes/<nodeId>/log/<slot as 20 zero-padded decimal digits>
//
// 20 digits hold every uint64, so lexical key order equals numeric slot order and
// a list of the prefix returns the log in order. Slots are 0-based: the first
// batch of a node's log (its first holder's EpochStart) is slot 0.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "dex/records.pb.h"
#include "objstore/object_store.h"

namespace dex {

inline constexpr size_t kSlotDigits = 20;
// The first slot of every log (docs/log.md, "Slot objects").
inline constexpr Slot kFirstSlot{0};

// "nodes/<nodeId>/log/".
std::string log_prefix(const NodeId& node_id);
// "nodes/<nodeId>/log/00000000000000000042".
std::string slot_key(const NodeId& node_id, Slot slot);
// The slot of a key under log_prefix(node_id): exactly 20 decimal digits after the
// prefix. Anything else (another node's key, junk, a short or signed number) is
// InvalidArgument naming the key.
StatusOr<Slot> parse_slot_key(const NodeId& node_id, std::string_view key);

// The framed bytes of `batch` (kLogBatchMagic). Requires a batch that
// serializes (protobuf never fails for these messages).
std::string encode_batch(const proto::LogBatch& batch);
// Unframes and parses. Corruption with a reason on a bad frame or bad protobuf.
// The key is only used in messages.
StatusOr<proto::LogBatch> decode_batch(std::string_view key, std::string_view bytes);

// "nodes/<nodeId>/log-start": the GC point (proto::LogStart), outside the log prefix.
std::string log_start_key(const NodeId& node_id);
// The framed bytes of a LogStart (kLogStartMagic), and back. Corruption with a
// reason on a bad frame or protobuf; the key is only used in messages.
std::string encode_log_start(const proto::LogStart& start);
StatusOr<proto::LogStart> decode_log_start(std::string_view key, std::string_view bytes);
// The GC point of the node: slot 0 when GC never ran. Corruption when the object
// is not a LogStart of this node.
StatusOr<Slot> read_log_start(ObjectStore& store, const NodeId& node_id,
                              const RequestOptions& options = {});

// The log's extent as one listing saw it: slots [first, end) exist (barring holes
// that appear after the listing, which the reader reports). An empty log has
// first == end: kFirstSlot, or the GC point if GC ran.
struct LogBounds {
  Slot first = kFirstSlot;
  Slot end = kFirstSlot;  // the first free slot: one past the highest existing slot
  bool empty() const { return first == end; }
};

// Lists the node's log prefix (paging with start_after) and returns its bounds.
// A key under the prefix that is not a slot key is Corruption naming the key: only
// dex writes there. Each request uses `options` (its timeout).
// `first` is the start of the contiguous run of slots that ends at `end`, at or
// above the GC point (read_log_start): a slot below the GC point, or below a
// hole, is a fenced writer's late retry that re-created a collected slot
// (docs/log.md, "GC safety"); nothing reads it, so it is not the log's start.
// `hint`: a slot the caller believes exists (say, one past what its local store
// applied); listing then starts just below it instead of at the log's start.
// A wrong hint costs a full listing, never a wrong answer for the hint: when the
// hint exists, `first` <= hint and [hint, end) is contiguous.
StatusOr<LogBounds> find_log_bounds(ObjectStore& store, const NodeId& node_id,
                                    const RequestOptions& options = {}, Slot hint = kFirstSlot);

}  // namespace dex
