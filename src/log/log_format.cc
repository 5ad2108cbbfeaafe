#include "log/log_format.h"

#include <fmt/format.h>

#include "common/framing.h"

namespace dex {

std::string log_prefix(const NodeId& node_id) {
  return fmt::format("nodes/{}/log/", node_id.value);
}

std::string slot_key(const NodeId& node_id, Slot slot) {
  return fmt::format("nodes/{}/log/{:020d}", node_id.value, slot.value);
}

StatusOr<Slot> parse_slot_key(const NodeId& node_id, std::string_view key) {
  std::string prefix = log_prefix(node_id);
  if (key.substr(0, prefix.size()) != prefix) {
    return Status::invalid_argument(
        fmt::format("'{}' is not a log key of node '{}'", key, node_id.value));
  }
  std::string_view digits = key.substr(prefix.size());
  if (digits.size() != kSlotDigits) {
    return Status::invalid_argument(fmt::format(
        "'{}' is not a log slot key: expected {} digits after '{}'", key, kSlotDigits, prefix));
  }
  uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      return Status::invalid_argument(
          fmt::format("'{}' is not a log slot key: '{}' is not a digit", key, c));
    }
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) {
      return Status::invalid_argument(fmt::format("'{}' is not a log slot key: overflows", key));
    }
    value = value * 10 + digit;
  }
  return Slot(value);
}

std::string encode_batch(const proto::LogBatch& batch) {
  std::string payload;
  bool serialized = batch.SerializeToString(&payload);
  assert(serialized && "a LogBatch always serializes");
  (void)serialized;
  return frame(kLogBatchMagic, payload);
}

StatusOr<proto::LogBatch> decode_batch(std::string_view key, std::string_view bytes) {
  auto payload = unframe(kLogBatchMagic, bytes);
  if (!payload.is_ok()) {
    return Status::corruption(fmt::format("log batch '{}': {}", key, payload.status().message()));
  }
  proto::LogBatch batch;
  if (!batch.ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
    return Status::corruption(
        fmt::format("log batch '{}': payload of {} bytes is not a LogBatch", key, payload->size()));
  }
  return batch;
}

StatusOr<LogBounds> find_log_bounds(ObjectStore& store, const NodeId& node_id,
                                    const RequestOptions& options, Slot hint) {
  std::string prefix = log_prefix(node_id);
  // Lists from `after` to the end; returns the first and last slots seen.
  auto scan = [&](std::string after, std::optional<Slot>& first,
                  std::optional<Slot>& last) -> Status {
    // Bounded: every page advances `after`; the slot count is bounded by GC.
    while (true) {
      auto page = store.list(prefix, after, kListKeysMax, options);
      if (!page.is_ok()) return page.status();
      for (const auto& key : page->keys) {
        auto slot = parse_slot_key(node_id, key);
        if (!slot.is_ok()) {
          return Status::corruption(
              fmt::format("junk key in the log: {}", slot.status().message()));
        }
        if (!first) first = slot.value();
        // The store lists in ascending byte order, which is slot order.
        assert(!last || *last < slot.value());
        last = slot.value();
      }
      if (!page->truncated || page->keys.empty()) return Status::ok();
      after = page->keys.back();
    }
  };
  LogBounds bounds;
  std::optional<Slot> first, last;
  if (hint > kFirstSlot) {
    // The log is contiguous (writers never skip a slot; GC deletes a prefix):
    // its first key, then only the keys from the hint on. A reader that has
    // applied most of the log pays for the tail, not for the whole log.
    auto head = store.list(prefix, "", 1, options);
    if (!head.is_ok()) return head.status();
    if (head->keys.empty()) return bounds;
    auto head_slot = parse_slot_key(node_id, head->keys.front());
    if (!head_slot.is_ok()) {
      return Status::corruption(
          fmt::format("junk key in the log: {}", head_slot.status().message()));
    }
    if (head_slot.value() < hint) {
      std::optional<Slot> tail_first;
      if (Status s = scan(slot_key(node_id, Slot(hint.value - 1)), tail_first, last); !s.is_ok()) {
        return s;
      }
      if (last) {
        bounds.first = head_slot.value();
        bounds.end = last->next();
        return bounds;
      }
      // Nothing from the hint on: the log ends below it; list it all.
    }
  }
  if (Status s = scan("", first, last); !s.is_ok()) return s;
  if (first) {
    bounds.first = *first;
    bounds.end = last->next();
  }
  return bounds;
}

}  // namespace dex
