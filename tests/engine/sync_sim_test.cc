// The Attribute Store sync machine (src/engine/sync_machine.h) under seeded
// simulation: 1,200 schedules of a log that grows while the active process
// syncs it into a table that fails tries at random, loses the answers of
// commits that landed, and sees takeovers — the old process crashed, or left
// running as a stale one that still believes its lease. After each schedule
// the last process syncs without faults until idle. Checked throughout: the
// watermark never goes back, every commit starts where the last one ended,
// no process writes after a newer epoch took the watermark, no trim passes
// the watermark; at the end the table equals the log's synced writes applied
// in order (fields that do not fit left out), none skipped.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>

#include "common/random.h"
#include "engine/sync_machine.h"
#include "sync_tables.h"

namespace dex {
namespace {

using attrstore::CommitOutcome;
using attrstore::CommitResult;
using Row = std::map<std::string, std::string>;  // column -> value ("" for NULL)

attrstore::TableSchema schema() {
  return testing::table_of({testing::string_column("a", 4), testing::int_column("b", -100, 100)});
}

std::string show(const std::optional<flow::AttributeValue>& v) {
  if (!v) return "";
  return v->has_string_value() ? "s:" + v->string_value() : "i:" + std::to_string(v->int64_value());
}

// The table: rows, the watermark row, and what the checks need.
struct SimTable {
  std::map<std::string, Row> rows;
  attrstore::Watermark watermark;
  uint64_t highest_claim = 0;
  Random* random = nullptr;
  bool faults = true;
  std::string violation;

  StatusOr<CommitResult> claim(uint64_t epoch) {
    if (faults && random->chance(0.1)) return Status::transient("connection reset");
    if (watermark.epoch > epoch) return CommitResult{CommitOutcome::kFenced, watermark};
    watermark.epoch = epoch;
    highest_claim = std::max(highest_claim, epoch);
    return CommitResult{CommitOutcome::kCommitted, watermark};
  }
  StatusOr<CommitResult> commit(uint64_t epoch, uint64_t after, const SyncPlan& plan) {
    if (faults && random->chance(0.1)) return Status::transient("statement timeout");
    if (watermark.epoch > epoch) return CommitResult{CommitOutcome::kFenced, watermark};
    if (watermark.slot != after) return CommitResult{CommitOutcome::kMoved, watermark};
    if (plan.through_slot <= after) violation = "a commit that does not move forward";
    if (epoch < highest_claim)
      violation = fmt::format("epoch {} wrote after {} claimed", epoch, highest_claim);
    for (const auto& r : plan.rows) {
      if (r.delete_row) {
        rows.erase(r.flow_id);
        continue;
      }
      for (const auto& f : r.fields) rows[r.flow_id][f.column] = show(f.value);
    }
    watermark.epoch = epoch;
    watermark.slot = plan.through_slot;
    // The answer is lost after the commit landed.
    if (faults && random->chance(0.05)) return Status::transient("connection lost during COMMIT");
    return CommitResult{CommitOutcome::kCommitted, watermark};
  }
};

// One process: its machine, its epoch, whether it still believes its lease.
struct SimProcess {
  uint64_t epoch;
  std::unique_ptr<SyncMachine> machine;
  bool lease = true;
};

struct Schedule {
  explicit Schedule(uint64_t seed) : random(seed) { table.random = &random; }

  // The log: every entry of every slot, in order (seq keys).
  void make_log(bool delete_rows_in_log) {
    const uint64_t slots = 20 + random.uniform(80);
    uint64_t seq = 0;
    for (uint64_t slot = 1; slot <= slots; ++slot) {
      const uint64_t n = random.uniform(4);
      for (uint64_t i = 0; i < n; ++i) {
        flow::SyncEntry e;
        e.set_flow_id("f" + std::to_string(random.uniform(6)));
        e.set_slot(slot);
        e.set_at_unix_ms(static_cast<int64_t>(slot));
        if (delete_rows_in_log && random.chance(0.05)) {
          e.set_delete_row(true);
        } else {
          const uint64_t writes = 1 + random.uniform(2);
          for (uint64_t w = 0; w < writes; ++w) {
            auto* a = e.add_writes();
            const uint64_t which = random.uniform(10);
            if (which < 4) {
              a->set_key("a");
              // Sometimes longer than the column's 4 characters.
              a->mutable_value()->set_string_value(std::string(1 + random.uniform(5), 'x'));
            } else if (which < 8) {
              a->set_key("b");
              a->mutable_value()->set_int64_value(static_cast<int64_t>(random.uniform(250)) - 125);
            } else if (which < 9) {
              a->set_key("a");  // no value: NULL
            } else {
              a->set_key("c");  // no such column
              a->mutable_value()->set_int64_value(1);
            }
          }
        }
        log.push_back({fmt::format("~y/s\x1f{:020}", ++seq), e});
      }
    }
    last_slot = slots;
  }

  // The table the whole log gives: its writes in order, misfits left out.
  std::map<std::string, Row> expected(bool delete_rows) const {
    std::map<std::string, Row> out;
    const auto s = schema();
    for (const auto& p : log) {
      if (p.entry.delete_row()) {
        if (delete_rows) out.erase(p.entry.flow_id());
        continue;
      }
      for (const auto& w : p.entry.writes()) {
        std::optional<flow::AttributeValue> v;
        if (w.has_value()) v = w.value();
        const auto* c = s.find(w.key());
        if (c == nullptr || attrstore::misfit(*c, v)) continue;
        out[p.entry.flow_id()][w.key()] = show(v);
      }
    }
    // A row whose every field was left out was never written.
    return out;
  }

  // What the local store keeps (after trims), up to the applied head.
  PendingRead read(const std::string& cursor, uint64_t watermark, size_t want) const {
    PendingRead out;
    for (const auto& p : log) {
      if (p.entry.slot() > head) break;
      if (p.key <= trimmed_key) continue;
      if (out.oldest_kept_slot == 0) out.oldest_kept_slot = p.entry.slot();
      if (p.key <= cursor) continue;
      if (p.entry.slot() <= watermark) {
        if (out.entries.empty()) out.skipped_to = p.key;
        continue;
      }
      if (out.entries.size() >= want && p.entry.slot() != out.entries.back().entry.slot()) break;
      out.entries.push_back(p);
    }
    return out;
  }

  void trim(uint64_t through) {
    if (through > table.watermark.slot) violation = "a trim past the table's watermark";
    for (const auto& p : log) {
      if (p.entry.slot() <= through && p.key > trimmed_key) trimmed_key = p.key;
    }
  }

  SimProcess start_process(uint64_t epoch, const SyncMachine::Config& base) {
    SyncMachine::Config c = base;
    c.seed = epoch;
    return {epoch, std::make_unique<SyncMachine>(c, AttributeSyncReport{}, now), true};
  }

  // One action of `p`; `active`: its trims reach the log.
  void step(SimProcess& p, bool active, const SyncMachine::Config& c) {
    const auto s = schema();
    SyncAction a = p.machine->next(now, p.lease ? seconds(10) : Duration(0));
    switch (a.kind) {
      case SyncAction::Kind::kStop:
      case SyncAction::Kind::kWait:
        return;
      case SyncAction::Kind::kClaim:
        p.machine->claimed(table.claim(p.epoch), now);
        return;
      case SyncAction::Kind::kRefresh:
        p.machine->refreshed(now);
        return;
      case SyncAction::Kind::kRead:
        p.machine->read(read(a.cursor, a.watermark, c.batch_size), s, now, 0);
        return;
      case SyncAction::Kind::kCommit: {
        const uint64_t before = table.watermark.slot;
        p.machine->committed(table.commit(p.epoch, a.watermark, *a.plan), now);
        if (table.watermark.slot < before) violation = "the watermark went back";
        return;
      }
      case SyncAction::Kind::kTrim:
        if (active) trim(a.watermark);
        p.machine->trimmed(now);
        return;
    }
  }

  Random random;
  SimTable table;
  std::vector<PendingEntry> log;
  uint64_t last_slot = 0;
  uint64_t head = 0;  // the last slot applied by the replicas
  std::string trimmed_key;
  TimePoint now{seconds(1000)};
  std::string violation;
};

void run_schedule(uint64_t seed) {
  Schedule s(seed);
  SyncMachine::Config c;
  c.batch_size = 1 + s.random.uniform(5);
  c.delete_rows = s.random.chance(0.5);
  c.retry.initial_interval = milliseconds(10);
  c.retry.maximum_interval = milliseconds(200);
  c.schema_sync_interval = milliseconds(700);
  s.make_log(true);
  uint64_t epoch = 1;
  SimProcess active = s.start_process(epoch, c);
  std::optional<SimProcess> stale;
  // Bounded: 3,000 steps of faults, then the quiet end.
  for (int i = 0; i < 3'000; ++i) {
    s.now += milliseconds(s.random.uniform(120));
    if (s.head < s.last_slot && s.random.chance(0.3)) s.head += 1 + s.random.uniform(3);
    s.head = std::min(s.head, s.last_slot);
    if (s.random.chance(0.01)) {
      // A takeover: the old process crashed, or keeps running believing its
      // lease (frozen, then resumed) until it is fenced.
      if (s.random.chance(0.5)) {
        stale = std::move(active);
      } else {
        stale.reset();
      }
      active = s.start_process(++epoch, c);
    }
    if (stale && s.random.chance(0.3)) s.step(*stale, false, c);
    s.step(active, true, c);
    ASSERT_TRUE(s.table.violation.empty()) << "seed " << seed << ": " << s.table.violation;
    ASSERT_TRUE(s.violation.empty()) << "seed " << seed << ": " << s.violation;
  }
  // The quiet end: the whole log applied, no faults, the active process syncs until idle.
  s.head = s.last_slot;
  s.table.faults = false;
  stale.reset();
  // The last slots may hold no entry: the watermark stops at the last one that does.
  uint64_t last_with_entries = 0;
  for (const auto& p : s.log) last_with_entries = p.entry.slot();
  for (int i = 0; i < 20'000 && s.table.watermark.slot < last_with_entries; ++i) {
    s.now += milliseconds(50);
    s.step(active, true, c);
  }
  ASSERT_TRUE(s.violation.empty()) << "seed " << seed << ": " << s.violation;
  EXPECT_GE(s.table.watermark.slot, last_with_entries) << "seed " << seed;
  EXPECT_EQ(s.table.rows, s.expected(c.delete_rows)) << "seed " << seed;
}

TEST(SyncSim, TheTableNeverSkipsAWriteAndItsWatermarkNeverGoesBack) {
  for (uint64_t seed = 1; seed <= 1'200; ++seed) {
    run_schedule(seed);
    if (::testing::Test::HasFatalFailure() || ::testing::Test::HasNonfatalFailure()) break;
  }
}

}  // namespace
}  // namespace dex
