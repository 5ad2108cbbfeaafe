// Where one Attribute Store's sync stands, as the metrics take it
// (Metrics::attribute_sync; docs/attribute-store.md): plain values.
#pragma once

#include <cstdint>
#include <string>

namespace dex {

struct AttributeSyncSample {
  std::string store;
  double lag_seconds = 0;
  uint64_t lag_slots = 0, watermark_slot = 0;
  // Totals from the start of this process's active period.
  uint64_t transactions = 0, failures = 0, rows = 0, misfits = 0;
};

}  // namespace dex
