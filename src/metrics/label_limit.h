// The cardinality limit on a type label (docs/metrics.md, "Flows, Steps and
// RPCs by type"): the first `distinct_max` distinct values of one label
// (flow_type, step_type or rpc_name) are reported as themselves; every later
// value is reported as "other". Types come from Workers' declarations and
// clients' calls, so without a limit one careless client could create series
// without end in every scraper.
//
// Which values get their own series depends on the order they were first
// seen in this process, and never changes while it runs: a series, once
// created, keeps counting. "" (no type, e.g. the timeout handler's Step type)
// is passed through and does not use up a place. A type literally named
// "other" takes a place like any other and shares its series with the
// overflow.
//
// Thread-safe: one mutex, held for a hash lookup.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace dex {

class LabelLimit {
 public:
  static constexpr std::string_view kOther = "other";
  // The largest limit the setting accepts (metrics.typeLabelsMax).
  static constexpr size_t kDistinctMaxLimit = 10'000;

  // `distinct_max` in 0..kDistinctMaxLimit; 0 reports every value as "other".
  explicit LabelLimit(size_t distinct_max);
  LabelLimit(const LabelLimit&) = delete;
  LabelLimit& operator=(const LabelLimit&) = delete;

  // The label value to report for `value`.
  std::string label(std::string_view value);
  // Distinct values admitted so far (at most distinct_max()).
  size_t admitted() const;
  size_t distinct_max() const { return distinct_max_; }

 private:
  const size_t distinct_max_;  // constant after construction
  mutable std::mutex mu_;
  // Guarded by mu_; bounded by distinct_max_.
  std::unordered_set<std::string> admitted_;
};

}  // namespace dex
