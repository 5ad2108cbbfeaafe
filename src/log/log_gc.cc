#include "log/log_gc.h"

#include <fmt/format.h>

namespace dex {

StatusOr<uint64_t> collect_garbage(ObjectStore& store, const NodeId& node_id, Slot below_slot,
                                   const GcGuard& guard) {
  if (!guard.lease_valid) return Status::invalid_argument("log GC needs the holder's lease");
  if (guard.keep_slots_min < kGcKeepSlotsMin) {
    return Status::invalid_argument(fmt::format("log GC must keep at least {} slots, not {}",
                                                kGcKeepSlotsMin, guard.keep_slots_min));
  }
  if (below_slot > guard.epoch_start_slot && !guard.epoch_settled) {
    return Status::invalid_argument(
        fmt::format("log GC below slot {} would delete the current epoch's EpochStart at slot {}",
                    below_slot.value, guard.epoch_start_slot.value));
  }
  if (guard.log_end.value < guard.keep_slots_min ||
      below_slot.value > guard.log_end.value - guard.keep_slots_min) {
    return Status::invalid_argument(fmt::format(
        "log GC below slot {} refused: it must stay at least {} slots behind the log end {}",
        below_slot.value, guard.keep_slots_min, guard.log_end.value));
  }
  // Only the holder collects (docs/log.md, "GC safety").
  if (!guard.lease_valid()) {
    return Status::stopped("log GC refused: the lease is not valid");
  }
  // Record the GC point first: once a slot below it is gone, a fenced writer's
  // late retry may re-create it, and readers must know to ignore that slot.
  auto gc_point = read_log_start(store, node_id, guard.request);
  if (!gc_point.is_ok()) return gc_point.status();
  if (below_slot > gc_point.value()) {
    proto::LogStart start;
    start.set_node_id(node_id.value);
    start.set_first_slot(below_slot.value);
    if (!guard.lease_valid()) {
      return Status::stopped("log GC refused: the lease is not valid");
    }
    auto put = store.put(log_start_key(node_id), encode_log_start(start), PutCondition::overwrite(),
                         guard.request);
    if (!put.is_ok()) return put.status();
  }
  const std::string prefix = log_prefix(node_id);
  uint64_t deleted = 0;
  std::string after;
  // Bounded: every page advances `after`, and we stop at the first key >= below_slot.
  while (true) {
    auto page = store.list(prefix, after, kListKeysMax, guard.request);
    if (!page.is_ok()) return page.status();
    for (const auto& key : page->keys) {
      auto slot = parse_slot_key(node_id, key);
      if (!slot.is_ok()) {
        return Status::corruption(fmt::format("junk key in the log: {}", slot.status().message()));
      }
      if (slot.value() >= below_slot) return deleted;
      if (!guard.lease_valid()) {
        return Status::stopped(
            fmt::format("log GC stopped after {} slots: the lease is not valid", deleted));
      }
      Status removed = store.remove(key, guard.request);
      if (!removed.is_ok()) return removed;
      ++deleted;
    }
    if (!page->truncated || page->keys.empty()) return deleted;
    after = page->keys.back();
  }
}

StatusOr<uint64_t> collect_garbage(ObjectStore& store, const LogWriter& holder, Slot below_slot) {
  if (!holder.is_open()) return Status::invalid_argument("log GC needs an open LogWriter");
  GcGuard guard;
  guard.log_end = holder.next_slot();
  guard.epoch_start_slot = holder.epoch_start_slot();
  guard.lease_valid = [&holder] { return holder.lease_valid(); };
  return collect_garbage(store, holder.node_id(), below_slot, guard);
}

}  // namespace dex
