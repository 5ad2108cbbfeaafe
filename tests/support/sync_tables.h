// Small Attribute Store table schemas for the tests of the sync (the machine,
// its simulation and fuzz target, the engine's sync over a table in memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attrstore/attribute_table.h"

namespace dex::testing {

inline attrstore::Column string_column(std::string name, int64_t max_length) {
  attrstore::Column c;
  c.name = std::move(name);
  c.kind = attrstore::ColumnKind::kString;
  c.max_length = max_length;
  return c;
}

inline attrstore::Column int_column(std::string name, int64_t lo, int64_t hi) {
  attrstore::Column c;
  c.name = std::move(name);
  c.kind = attrstore::ColumnKind::kInt;
  c.int_min = lo;
  c.int_max = hi;
  return c;
}

// A table keyed by "id" (the Flow ID) with `columns`.
inline attrstore::TableSchema table_of(std::vector<attrstore::Column> columns) {
  attrstore::TableSchema s;
  s.key_column = "id";
  s.columns = std::move(columns);
  return s;
}

}  // namespace dex::testing
