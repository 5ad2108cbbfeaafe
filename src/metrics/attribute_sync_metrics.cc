#include "metrics/attribute_sync_metrics.h"

namespace dex {

namespace {
template <typename T>
prometheus::Family<T>& family(prometheus::Registry& r, const char* name, const char* help) {
  if constexpr (std::is_same_v<T, prometheus::Gauge>) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(r);
  } else {
    return prometheus::BuildCounter().Name(name).Help(help).Register(r);
  }
}
// Adds what `now` counted since `before` (a new active period starts from 0).
void add(prometheus::Counter* c, uint64_t before, uint64_t now) {
  c->Increment(static_cast<double>(now >= before ? now - before : now));
}
}  // namespace

AttributeSyncMetrics::AttributeSyncMetrics(prometheus::Registry& r)
    : lag_seconds_(family<prometheus::Gauge>(
          r, "dexzd_attribute_sync_lag_seconds",
          "Age of the oldest Attribute write the store's table does not hold yet (0: caught up)")),
      lag_slots_(family<prometheus::Gauge>(
          r, "dexzd_attribute_sync_lag_slots",
          "Log slots between the store's watermark and its newest pending write")),
      watermark_(family<prometheus::Gauge>(
          r, "dexzd_attribute_sync_watermark_slot",
          "The last log slot the store's table holds (its watermark row)")),
      transactions_(family<prometheus::Counter>(
          r, "dexzd_attribute_sync_transactions_total",
          "Sync transactions committed (each moves the watermark forward)")),
      failures_(family<prometheus::Counter>(
          r, "dexzd_attribute_sync_failures_total",
          "Sync tries that failed and are retried (nothing is skipped)")),
      rows_(family<prometheus::Counter>(r, "dexzd_attribute_sync_rows_total",
                                        "Rows upserted or removed by sync transactions")),
      misfits_(family<prometheus::Counter>(
          r, "dexzd_attribute_sync_filtered_fields_total",
          "Attribute writes left out: no such column, or a value that does not fit it")) {}

AttributeSyncMetrics::Store& AttributeSyncMetrics::store(const std::string& name) {
  auto it = stores_.find(name);
  if (it != stores_.end()) return it->second;
  const prometheus::Labels labels{{"store", name}};
  Store s{&lag_seconds_.Add(labels), &lag_slots_.Add(labels),
          &watermark_.Add(labels),   &transactions_.Add(labels),
          &failures_.Add(labels),    &rows_.Add(labels),
          &misfits_.Add(labels),     {}};
  return stores_.emplace(name, s).first->second;
}

void AttributeSyncMetrics::sample(const AttributeSyncSample& s) {
  std::lock_guard<std::mutex> lock(mu_);
  Store& st = store(s.store);
  st.lag_seconds->Set(s.lag_seconds);
  st.lag_slots->Set(static_cast<double>(s.lag_slots));
  st.watermark->Set(static_cast<double>(s.watermark_slot));
  add(st.transactions, st.last.transactions, s.transactions);
  add(st.failures, st.last.failures, s.failures);
  add(st.rows, st.last.rows, s.rows);
  add(st.misfits, st.last.misfits, s.misfits);
  st.last = s;
}

}  // namespace dex
