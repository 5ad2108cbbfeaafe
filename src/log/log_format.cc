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

std::string log_start_key(const NodeId& node_id) {
  return fmt::format("nodes/{}/log-start", node_id.value);
}

std::string encode_log_start(const proto::LogStart& start) {
  std::string payload;
  bool serialized = start.SerializeToString(&payload);
  assert(serialized && "a LogStart always serializes");
  (void)serialized;
  return frame(kLogStartMagic, payload);
}

StatusOr<proto::LogStart> decode_log_start(std::string_view key, std::string_view bytes) {
  auto payload = unframe(kLogStartMagic, bytes);
  if (!payload.is_ok()) {
    return Status::corruption(fmt::format("log start '{}': {}", key, payload.status().message()));
  }
  proto::LogStart start;
  if (!start.ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
    return Status::corruption(
        fmt::format("log start '{}': payload of {} bytes is not a LogStart", key, payload->size()));
  }
  return start;
}

StatusOr<Slot> read_log_start(ObjectStore& store, const NodeId& node_id,
                              const RequestOptions& options) {
  const std::string key = log_start_key(node_id);
  auto got = store.get(key, options);
  if (got.status().is_not_found()) return kFirstSlot;
  if (!got.is_ok()) return got.status();
  auto start = decode_log_start(key, got->body);
  if (!start.is_ok()) return start.status();
  if (start->node_id() != node_id.value) {
    return Status::corruption(
        fmt::format("log start '{}' says it is of node '{}'", key, start->node_id()));
  }
  return Slot(start->first_slot());
}

StatusOr<LogBounds> find_log_bounds(ObjectStore& store, const NodeId& node_id,
                                    const RequestOptions& options, Slot hint) {
  std::string prefix = log_prefix(node_id);
  auto gc_point = read_log_start(store, node_id, options);
  if (!gc_point.is_ok()) return gc_point.status();
  const Slot floor = gc_point.value();
  // Listings start at the GC point: slots below it are never part of the log.
  const std::string from = floor > kFirstSlot ? slot_key(node_id, Slot(floor.value - 1)) : "";
  // Lists from `after` to the end; `run` becomes the first slot of the last
  // contiguous run seen (a hole restarts it) and `last` the highest slot.
  auto scan = [&](std::string after, std::optional<Slot>& run,
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
        // The store lists in ascending byte order, which is slot order.
        assert(!last || *last < slot.value());
        if (!last || slot.value() != last->next()) run = slot.value();
        last = slot.value();
      }
      if (!page->truncated || page->keys.empty()) return Status::ok();
      after = page->keys.back();
    }
  };
  LogBounds bounds{floor, floor};
  std::optional<Slot> run, last;
  if (hint > floor) {
    // Writers never skip a slot and GC deletes a prefix, so the log is one run:
    // its first key, then only the keys from the hint on. A reader that has
    // applied most of the log pays for the tail, not for the whole log.
    auto head = store.list(prefix, from, 1, options);
    if (!head.is_ok()) return head.status();
    if (head->keys.empty()) return bounds;
    auto head_slot = parse_slot_key(node_id, head->keys.front());
    if (!head_slot.is_ok()) {
      return Status::corruption(
          fmt::format("junk key in the log: {}", head_slot.status().message()));
    }
    if (head_slot.value() < hint) {
      if (Status s = scan(slot_key(node_id, Slot(hint.value - 1)), run, last); !s.is_ok()) {
        return s;
      }
      if (last) {
        // The tail's run reaching down to the hint joins the head's (a stray
        // slot below a hole is not told apart here: callers with a hint only
        // need [hint, end)); a tail that starts above the hint starts the log.
        bounds.first = *run == hint ? head_slot.value() : *run;
        bounds.end = last->next();
        return bounds;
      }
      // Nothing from the hint on: the log ends below it; list it all.
    }
  }
  if (Status s = scan(from, run, last); !s.is_ok()) return s;
  if (last) {
    bounds.first = *run;
    bounds.end = last->next();
  }
  return bounds;
}

}  // namespace dex
