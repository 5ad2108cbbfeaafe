#include "engine/sync_plan.h"

#include <algorithm>
#include <cmath>

#include "common/invariant.h"

namespace dex {

namespace {

// The fields of `entry` that fit their columns; the others go to `misfits`.
std::vector<attrstore::Field> fitting_fields(const flow::SyncEntry& entry,
                                             const attrstore::TableSchema& schema,
                                             std::vector<SyncMisfit>& misfits) {
  std::vector<attrstore::Field> fields;
  for (const auto& w : entry.writes()) {  // bounded by the record's Attribute writes
    std::optional<flow::AttributeValue> value;
    if (w.has_value()) value = w.value();
    const attrstore::Column* column = schema.find(w.key());
    std::optional<std::string> reason;
    if (column == nullptr) {
      reason = "the table has no column of that name";
    } else {
      reason = attrstore::misfit(*column, value);
    }
    if (reason) {
      misfits.push_back({entry.flow_id(), w.key(), std::move(*reason)});
      continue;
    }
    // A later write of the same column in one record replaces the earlier one.
    auto same = std::find_if(fields.begin(), fields.end(),
                             [&](const attrstore::Field& f) { return f.column == w.key(); });
    if (same != fields.end()) {
      same->value = std::move(value);
    } else {
      fields.push_back({w.key(), std::move(value)});
    }
  }
  return fields;
}

}  // namespace

SyncPlan plan_sync(const std::vector<PendingEntry>& entries, const attrstore::TableSchema& schema,
                   bool delete_rows, size_t max_rows) {
  SyncPlan plan;
  const attrstore::Column* key = schema.find(schema.key_column);
  for (size_t i = 0; i < entries.size(); ++i) {  // bounded by the entries read
    const flow::SyncEntry& e = entries[i].entry;
    DEX_INVARIANT(e.slot() >= plan.through_slot, "SyncEntries come in log order");
    // A new slot starts: stop if the rows are enough (whole slots only).
    if (e.slot() != plan.through_slot && plan.through_slot != 0 && plan.rows.size() >= max_rows)
      break;
    plan.through_slot = e.slot();
    plan.last_key = entries[i].key;
    ++plan.entries;
    // A Flow ID the key column cannot hold (too long, characters outside its
    // set) would fail the whole transaction again and again: its row is left
    // out, reported like a field.
    if (key != nullptr) {
      if (auto why = attrstore::key_misfit(*key, e.flow_id())) {
        if (!e.delete_row()) plan.misfits.push_back({e.flow_id(), schema.key_column, *why});
        continue;
      }
    }
    if (e.delete_row()) {
      if (delete_rows) plan.rows.push_back({e.flow_id(), {}, true});
      continue;
    }
    auto fields = fitting_fields(e, schema, plan.misfits);
    if (!fields.empty()) plan.rows.push_back({e.flow_id(), std::move(fields), false});
  }
  return plan;
}

Duration sync_backoff(const attrstore::SyncRetryPolicy& policy, uint32_t failures) {
  DEX_INVARIANT(failures >= 1, "a backoff follows a failure");
  const double coefficient = std::max(1.0, policy.backoff_coefficient);
  double ns = static_cast<double>(policy.initial_interval.count());
  // Bounded by 64 steps: past that the maximum has long been reached.
  for (uint32_t i = 1; i < failures && i < 64; ++i) {
    ns *= coefficient;
    if (ns >= static_cast<double>(policy.maximum_interval.count())) break;
  }
  return std::min(policy.maximum_interval, Duration(static_cast<int64_t>(ns)));
}

Duration jittered(Duration interval, double unit) {
  DEX_INVARIANT(unit >= 0.0 && unit < 1.0, "a unit draw");
  return Duration(static_cast<int64_t>(static_cast<double>(interval.count()) * (0.9 + 0.2 * unit)));
}

}  // namespace dex
