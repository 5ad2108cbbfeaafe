#include "log/log_reader.h"

#include <fmt/format.h>

namespace dex {

LogReader::LogReader(ObjectStore& store, NodeId node_id, Slot start)
    : store_(store), node_id_(std::move(node_id)), next_slot_(start) {
  assert(!node_id_.empty());
}

StatusOr<std::optional<proto::LogBatch>> LogReader::read(Slot slot, const RequestOptions& options) {
  const std::string key = slot_key(node_id_, slot);
  auto got = store_.get(key, options);
  if (got.status().is_not_found()) return std::optional<proto::LogBatch>();
  if (!got.is_ok()) return got.status();
  auto batch = decode_batch(key, got->body);
  if (!batch.is_ok()) return batch.status();
  if (batch->slot() != slot.value || batch->node_id() != node_id_.value) {
    return Status::corruption(fmt::format("log batch '{}' says it is slot {} of node '{}'", key,
                                          batch->slot(), batch->node_id()));
  }
  if (batch->epoch() == 0) {
    return Status::corruption(fmt::format("log batch '{}' has epoch 0", key));
  }
  return std::optional<proto::LogBatch>(std::move(batch).value());
}

StatusOr<std::optional<LogEntry>> LogReader::next(const RequestOptions& options) {
  // Bounded by the length of the log: every iteration advances the cursor or returns.
  while (true) {
    auto batch = read(next_slot_, options);
    if (!batch.is_ok()) return batch.status();
    if (!batch.value().has_value()) {
      // The end of the log, or a hole? Look for any later slot.
      const std::string key = slot_key(node_id_, next_slot_);
      auto later = store_.list(log_prefix(node_id_), key, 1, options);
      if (!later.is_ok()) return later.status();
      if (later->keys.empty()) return std::optional<LogEntry>();
      // A writer may have filled this slot and the next since our read; a hole is
      // only a slot that is still missing after a later one was seen.
      auto again = read(next_slot_, options);
      if (!again.is_ok()) return again.status();
      if (!again.value().has_value()) {
        return Status::corruption(fmt::format(
            "hole in the log: '{}' is missing but '{}' exists (collected below the reader's "
            "start, or lost)",
            key, later->keys.front()));
      }
      batch = std::move(again);
    }
    proto::LogBatch& found = *batch.value();
    const Slot slot = next_slot_;
    if (Epoch(found.epoch()) < highest_epoch_) {
      // A fenced writer's batch after a newer EpochStart (docs/log.md, "Readers").
      ++skipped_;
      next_slot_ = slot.next();
      continue;
    }
    if (delivered_ > 0 && Epoch(found.epoch()) > highest_epoch_ &&
        !(found.records_size() > 0 && found.records(0).has_epoch_start())) {
      return Status::corruption(fmt::format(
          "log batch '{}' of epoch {} follows epoch {} but does not start with an EpochStart",
          slot_key(node_id_, slot), found.epoch(), highest_epoch_.value));
    }
    highest_epoch_ = std::max(highest_epoch_, Epoch(found.epoch()));
    ++delivered_;
    next_slot_ = slot.next();
    return std::optional<LogEntry>(LogEntry{slot, std::move(found)});
  }
}

Status LogReader::read_to_end(const std::function<Status(const LogEntry&)>& visit,
                              const RequestOptions& options) {
  while (true) {
    auto entry = next(options);
    if (!entry.is_ok()) return entry.status();
    if (!entry.value().has_value()) return Status::ok();
    Status status = visit(*entry.value());
    if (!status.is_ok()) return status;
  }
}

}  // namespace dex
