// The Attribute Store sync machine (src/engine/sync_machine.h) driven by
// arbitrary bytes. The first bytes lay out a log of up to 16 slots (0 to 3
// SyncEntries each, values that may not fit the column); then each byte
// answers the action the machine asked for: how far time moves, whether the
// lease leaves room, and the outcome of a claim, a read or a commit (done,
// refused, lost after it landed, fenced by a newer epoch, the watermark moved
// by someone else). A takeover starts a new machine of a higher epoch. After
// every step:
//  - the machine did not trip an invariant (DEX_INVARIANT aborts);
//  - a commit asks for slots above the watermark it was told, whole slots,
//    only fields that fit; a trim never passes what the table holds;
//  - nothing begins while the lease leaves no room for a transaction;
//  - the table's watermark never goes back.
// When the bytes run out, a last machine syncs without faults until the
// table holds every slot that has an entry.
#include <memory>
#include <string>
#include <vector>

#include "engine/sync_machine.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"
#include "sync_tables.h"

namespace dex::fuzz {
namespace {

using attrstore::CommitOutcome;
using attrstore::CommitResult;

constexpr size_t kSlotsMax = 16;
constexpr size_t kStepsMax = 2'000;

struct Bytes {
  const uint8_t* data;
  size_t size, at = 0;
  bool done() const { return at >= size; }
  uint8_t next() { return done() ? 0 : data[at++]; }
};

attrstore::TableSchema schema() { return testing::table_of({testing::string_column("a", 2)}); }

struct Table {
  attrstore::Watermark watermark;
};

struct Harness {
  std::vector<PendingEntry> log;
  Table table;
  std::string trimmed;  // the last entry key the log dropped
  TimePoint now{seconds(1'000)};
  SyncMachine::Config config;
  uint64_t epoch = 1;
  std::unique_ptr<SyncMachine> machine;

  void start_machine() {
    SyncMachine::Config c = config;
    c.seed = epoch;
    machine = std::make_unique<SyncMachine>(c, AttributeSyncReport{}, now);
  }

  PendingRead read(const std::string& cursor, uint64_t watermark) const {
    PendingRead out;
    for (const auto& p : log) {  // bounded by kSlotsMax * 3 entries
      if (p.key <= trimmed) continue;
      if (out.oldest_kept_slot == 0) out.oldest_kept_slot = p.entry.slot();
      if (p.key <= cursor) continue;
      if (p.entry.slot() <= watermark) {
        if (out.entries.empty()) out.skipped_to = p.key;
        continue;
      }
      if (out.entries.size() >= config.batch_size &&
          p.entry.slot() != out.entries.back().entry.slot())
        break;
      out.entries.push_back(p);
    }
    return out;
  }

  // One action of the machine with its outcome chosen by `b` (faults: any).
  void step(uint8_t b, bool faults) {
    const Duration lease = faults && (b & 0x80) != 0 ? milliseconds(b & 0x3f) : seconds(10);
    const SyncAction a = machine->next(now, lease);
    const uint8_t outcome = faults ? (b >> 3) & 0x7 : 0;
    if (a.kind == SyncAction::Kind::kClaim || a.kind == SyncAction::Kind::kCommit)
      FUZZ_CHECK(lease > config.budget, "began with {} ms of lease", to_ms(lease));
    switch (a.kind) {
      case SyncAction::Kind::kStop:
      case SyncAction::Kind::kWait:
        now = std::max(now + milliseconds(1), a.until);
        return;
      case SyncAction::Kind::kRefresh:
        machine->refreshed(now);
        return;
      case SyncAction::Kind::kClaim:
        if (outcome == 1) return machine->claimed(Status::transient("reset"), now);
        if (table.watermark.epoch > epoch)
          return machine->claimed(CommitResult{CommitOutcome::kFenced, table.watermark}, now);
        table.watermark.epoch = epoch;
        return machine->claimed(CommitResult{CommitOutcome::kCommitted, table.watermark}, now);
      case SyncAction::Kind::kRead:
        if (outcome == 1) return machine->read(Status::transient("rocksdb busy"), schema(), now, 0);
        return machine->read(read(a.cursor, a.watermark), schema(), now, 0);
      case SyncAction::Kind::kCommit: {
        FUZZ_CHECK(a.plan != nullptr && a.plan->through_slot > a.watermark, "a commit moves up");
        for (const auto& row : a.plan->rows) {
          for (const auto& f : row.fields) {
            FUZZ_CHECK(!attrstore::misfit(*schema().find(f.column), f.value), "a misfit field");
          }
        }
        if (outcome == 1) return machine->committed(Status::transient("timeout"), now);
        if (table.watermark.epoch > epoch)
          return machine->committed(CommitResult{CommitOutcome::kFenced, table.watermark}, now);
        if (table.watermark.slot != a.watermark)
          return machine->committed(CommitResult{CommitOutcome::kMoved, table.watermark}, now);
        const uint64_t before = table.watermark.slot;
        table.watermark = {epoch, a.plan->through_slot, "p"};
        FUZZ_CHECK(table.watermark.slot > before, "the watermark went back");
        if (outcome == 2) return machine->committed(Status::transient("lost answer"), now);
        return machine->committed(CommitResult{CommitOutcome::kCommitted, table.watermark}, now);
      }
      case SyncAction::Kind::kTrim:
        FUZZ_CHECK(a.watermark <= table.watermark.slot, "a trim past the table ({} > {})",
                   a.watermark, table.watermark.slot);
        for (const auto& p : log) {
          if (p.entry.slot() <= a.watermark && p.key > trimmed) trimmed = p.key;
        }
        return machine->trimmed(now);
    }
  }
};

}  // namespace

int sync_machine(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  Harness h;
  h.config.batch_size = 1 + in.next() % 4;
  h.config.delete_rows = (in.next() & 1) != 0;
  const size_t slots = 1 + in.next() % kSlotsMax;
  uint64_t seq = 0;
  for (size_t slot = 1; slot <= slots; ++slot) {  // bounded by kSlotsMax
    const uint8_t b = in.next();
    for (int i = 0; i < b % 4; ++i) {
      PendingEntry p;
      p.key = fmt::format("~y/s\x1f{:020}", ++seq);
      p.entry.set_flow_id(fmt::format("f{}", (b >> 2) % 4));
      p.entry.set_slot(slot);
      if ((b & 0x40) != 0 && i == 0) {
        p.entry.set_delete_row(true);
      } else {
        auto* w = p.entry.add_writes();
        w->set_key((b & 0x80) != 0 && i == 1 ? "nope" : "a");
        w->mutable_value()->set_string_value(std::string(1 + (b >> 4) % 3, 'v'));
      }
      h.log.push_back(std::move(p));
    }
  }
  h.start_machine();
  for (size_t i = 0; i < kStepsMax && !in.done(); ++i) {  // bounded by kStepsMax
    const uint8_t b = in.next();
    if (b == 0xff) {  // a takeover: the old machine is gone, a newer epoch starts
      ++h.epoch;
      h.start_machine();
      continue;
    }
    h.step(b, true);
  }
  // The quiet end: a fresh epoch catches up.
  ++h.epoch;
  h.start_machine();
  const uint64_t last = h.log.empty() ? 0 : h.log.back().entry.slot();
  for (size_t i = 0; i < 10'000 && h.table.watermark.slot < last; ++i) h.step(0, false);
  FUZZ_CHECK(h.table.watermark.slot >= last, "the sync stopped at slot {} of {}",
             h.table.watermark.slot, last);
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(sync_machine)
