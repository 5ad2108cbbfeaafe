// The Attribute Store sync's series (docs/metrics.md, "Attribute Store"), one
// set per store: lag in seconds and slots, the watermark, and totals of
// transactions, failures, rows and filtered fields. Internal to src/metrics.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <string>

#include "metrics/attribute_sync_sample.h"

namespace dex {

class AttributeSyncMetrics {
 public:
  explicit AttributeSyncMetrics(prometheus::Registry& registry);
  AttributeSyncMetrics(const AttributeSyncMetrics&) = delete;
  AttributeSyncMetrics& operator=(const AttributeSyncMetrics&) = delete;

  // The sample's totals count from the start of an active period: a smaller
  // total than the last one seen starts a new period (counted from 0).
  void sample(const AttributeSyncSample& s);

 private:
  struct Store {
    prometheus::Gauge *lag_seconds, *lag_slots, *watermark;
    prometheus::Counter *transactions, *failures, *rows, *misfits;
    AttributeSyncSample last;
  };
  Store& store(const std::string& name);  // REQUIRES: mu_ held

  prometheus::Family<prometheus::Gauge>& lag_seconds_;
  prometheus::Family<prometheus::Gauge>& lag_slots_;
  prometheus::Family<prometheus::Gauge>& watermark_;
  prometheus::Family<prometheus::Counter>& transactions_;
  prometheus::Family<prometheus::Counter>& failures_;
  prometheus::Family<prometheus::Counter>& rows_;
  prometheus::Family<prometheus::Counter>& misfits_;
  std::mutex mu_;
  std::map<std::string, Store> stores_;  // guarded by mu_; bounded by the configured stores
};

}  // namespace dex
