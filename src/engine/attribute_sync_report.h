// What the Attribute Store sync of one store reports (admin describe, metrics;
// docs/attribute-store.md): plain values, never a DSN or an Attribute value.
#pragma once

#include <cstdint>
#include <string>

namespace dex {

struct AttributeSyncReport {
  std::string store;  // attributeStore.stores.<name>
  std::string type;   // postgres | mysql
  std::string table;  // as configured
  // claiming (taking the watermark), syncing, idle (caught up), retrying
  // (the last try failed; waiting), fenced (a newer epoch owns the
  // watermark: this process stopped syncing), stopped.
  std::string state = "claiming";
  uint64_t watermark_slot = 0;  // the last log slot the table holds
  uint64_t lag_slots = 0;       // the newest pending entry's slot minus the watermark
  double lag_seconds = 0;       // age of the oldest pending entry
  // Totals since this process became active.
  uint64_t transactions = 0;  // committed
  uint64_t failures = 0;      // tries that failed (each retried)
  uint64_t rows = 0;          // rows written or removed
  uint64_t misfits = 0;       // fields filtered: no such column, or a value that does not fit
  std::string last_error;     // the last failure (never a DSN or a value); empty after a success
};

}  // namespace dex
