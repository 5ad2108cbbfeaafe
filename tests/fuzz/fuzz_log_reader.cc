// A whole log of untrusted objects (src/log/log_reader.h, log_format.h): the
// records of several batches, holes, stale epochs, batches that lie about their
// slot or node. The reader must deliver in slot order, never deliver a lower
// epoch after a higher one, never deliver a batch whose slot or node disagrees
// with its key, stop at the end, and answer Corruption (not crash) on the rest.
// find_log_bounds must end one past the highest slot with or without a hint.
//
// Input: mode byte | objects separated by "|SLOT|": the i-th piece is slot i
// (an empty piece is a missing slot). Mode bit 0: the pieces are whole objects;
// clear: LogBatch payloads that the target frames. Bits 1-3: the reader's start.
#include <set>

#include "common/framing.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "objstore/memory_store.h"

namespace dex::fuzz {

namespace {
constexpr std::string_view kSeparator = "|SLOT|";
constexpr size_t kSlotsMax = 16;
}  // namespace

int log_reader(const uint8_t* data, size_t size) {
  const ProtobufQuiet quiet;
  const NodeId node("n1");
  const BinaryInput in = split_input(data, size, /*with_key=*/false);
  const Slot start((in.mode >> 1) & 7);

  MemoryObjectStore store;
  std::set<uint64_t> present;
  std::string_view rest = in.body;
  for (uint64_t slot = 0; slot < kSlotsMax; ++slot) {
    const size_t sep = rest.find(kSeparator);
    const std::string_view piece = rest.substr(0, sep);
    if (!piece.empty()) {
      const std::string object = in.raw ? std::string(piece) : frame(kLogBatchMagic, piece);
      auto put = store.put(slot_key(node, Slot(slot)), object, PutCondition::create());
      FUZZ_CHECK(put.is_ok(), "{}", put.status().to_string());
      present.insert(slot);
    }
    if (sep == std::string_view::npos) break;
    rest.remove_prefix(sep + kSeparator.size());
  }

  // Bounds, with and without a hint: end is one past the highest slot, and first
  // is a slot that exists.
  for (uint64_t hint : {uint64_t{0}, start.value, uint64_t{1}, uint64_t{kSlotsMax + 3}}) {
    auto bounds = find_log_bounds(store, node, {}, Slot(hint));
    FUZZ_CHECK(bounds.is_ok(), "{}", bounds.status().to_string());
    if (present.empty()) {
      FUZZ_CHECK(bounds->empty(), "bounds [{}, {}) of an empty log", bounds->first.value,
                 bounds->end.value);
      continue;
    }
    FUZZ_CHECK(bounds->end.value == *present.rbegin() + 1 && present.contains(bounds->first.value),
               "hint {}: bounds [{}, {}) for slots {}..{}", hint, bounds->first.value,
               bounds->end.value, *present.begin(), *present.rbegin());
  }

  // The reader: bounded by the number of slots, whatever the objects say.
  LogReader reader(store, node, start);
  std::optional<Slot> last_slot;
  Epoch highest(0);
  size_t delivered = 0;
  for (size_t call = 0;; ++call) {
    FUZZ_CHECK(call <= kSlotsMax + 1, "the reader did not stop after {} calls", call);
    const Slot before = reader.next_slot();
    const uint64_t skipped_before = reader.skipped();
    auto entry = reader.next();
    if (!entry.is_ok()) {
      FUZZ_CHECK(entry.status().is_corruption(), "{}", entry.status().to_string());
      // The cursor stays at the bad slot; only fenced batches skipped on the
      // way there are behind it.
      FUZZ_CHECK(reader.next_slot().value - before.value == reader.skipped() - skipped_before,
                 "an error moved the cursor from {} to {} past {} skipped batches", before.value,
                 reader.next_slot().value, reader.skipped() - skipped_before);
      auto again = reader.next();
      FUZZ_CHECK(!again.is_ok() && again.status().code() == entry.status().code(),
                 "an error did not repeat: {} then {}", entry.status().to_string(),
                 again.status().to_string());
      break;
    }
    if (!entry.value().has_value()) {
      auto again = reader.next();
      FUZZ_CHECK(again.is_ok() && !again.value().has_value(), "the end of the log moved");
      break;
    }
    const LogEntry& e = *entry.value();
    FUZZ_CHECK(e.slot >= start && (!last_slot || e.slot > *last_slot), "slot {} out of order",
               e.slot.value);
    FUZZ_CHECK(present.contains(e.slot.value), "slot {} was never written", e.slot.value);
    FUZZ_CHECK(e.batch.slot() == e.slot.value && e.batch.node_id() == node.value,
               "batch says slot {} of '{}', its key slot {}", e.batch.slot(), e.batch.node_id(),
               e.slot.value);
    const Epoch epoch(e.batch.epoch());
    FUZZ_CHECK(epoch.value > 0 && epoch >= highest, "epoch {} delivered after {}", epoch.value,
               highest.value);
    FUZZ_CHECK(delivered == 0 || epoch == highest ||
                   (e.batch.records_size() > 0 && e.batch.records(0).has_epoch_start()),
               "epoch {} delivered without an EpochStart", epoch.value);
    highest = epoch;
    last_slot = e.slot;
    ++delivered;
    FUZZ_CHECK(reader.highest_epoch() == highest, "highest_epoch() disagrees");
  }
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(log_reader)
