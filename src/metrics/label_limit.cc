#include "metrics/label_limit.h"

#include "common/invariant.h"

namespace dex {

LabelLimit::LabelLimit(size_t distinct_max) : distinct_max_(distinct_max) {
  DEX_INVARIANT(distinct_max <= kDistinctMaxLimit, "the type label limit was validated");
}

std::string LabelLimit::label(std::string_view value) {
  if (value.empty()) return std::string();
  std::string key(value);
  std::lock_guard<std::mutex> lock(mu_);
  if (admitted_.contains(key)) return key;
  if (admitted_.size() < distinct_max_) {
    admitted_.insert(key);
    return key;
  }
  DEX_INVARIANT(admitted_.size() == distinct_max_, "admitted values stay within the limit");
  return std::string(kOther);
}

size_t LabelLimit::admitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return admitted_.size();
}

}  // namespace dex
