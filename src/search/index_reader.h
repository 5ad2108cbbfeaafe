// What SearchFlows reads: an ordered, read-only view of one applied state of
// the local store (the engine gives one RocksDB snapshot; tests a map). The
// search never writes.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace dex::search {

class IndexReader {
 public:
  virtual ~IndexReader() = default;
  virtual std::optional<std::string> get(std::string_view key) = 0;
  // Visits the keys k with from <= k < to in order (reverse: from the last),
  // with their values, until `visit` returns false; `to` empty: no upper
  // bound. A range with to <= from (a BETWEEN whose bounds are reversed) is
  // empty: none is visited.
  using Visit = std::function<bool(std::string_view key, std::string_view value)>;
  virtual void scan(std::string_view from, std::string_view to, bool reverse,
                    const Visit& visit) = 0;
};

// The first key after every key that starts with `prefix` (for scan's `to`).
std::string prefix_end(std::string_view prefix);

}  // namespace dex::search
