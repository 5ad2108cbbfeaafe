// An IndexReader over a std::map: the flow rules' state as a MemoryKv holds
// it, read as the engine reads its RocksDB snapshot. For the search tests and
// the search_query fuzz target (no gtest here).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "search/index_reader.h"

namespace dex::search::testing {

class MapReader final : public IndexReader {
 public:
  explicit MapReader(const std::map<std::string, std::string, std::less<>>& data) : data_(data) {}

  std::optional<std::string> get(std::string_view key) override {
    auto it = data_.find(key);
    if (it == data_.end()) return std::nullopt;
    return it->second;
  }

  void scan(std::string_view from, std::string_view to, bool reverse, const Visit& visit) override {
    // As RocksKv: to <= from is an empty range (BETWEEN 5 AND -1 asks for one).
    if (!to.empty() && to <= from) return;
    auto lo = data_.lower_bound(from);
    auto hi = to.empty() ? data_.end() : data_.lower_bound(to);
    if (!reverse) {
      for (auto it = lo; it != hi; ++it)  // bounded by the range
        if (!visit(it->first, it->second)) return;
      return;
    }
    for (auto it = hi; it != lo;) {  // bounded by the range
      --it;
      if (!visit(it->first, it->second)) return;
    }
  }

 private:
  const std::map<std::string, std::string, std::less<>>& data_;
};

}  // namespace dex::search::testing
