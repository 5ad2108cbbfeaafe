// A query checked against the fields that exist (the system fields and the
// index keys in use) and compiled: typed values, the field each predicate
// reads, the order. What the planner runs and the evaluator checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "dex/flow.pb.h"
#include "search/index_reader.h"
#include "search/query.h"

namespace dex::search {

struct FieldRef {
  std::string key;
  flow::IndexType type = flow::INDEX_TYPE_UNSPECIFIED;
  bool system = false;
  bool indexed = false;  // has entries
};

// A literal converted to its field's type.
struct Typed {
  std::string text;  // KEYWORD, KEYWORD_ARRAY items, FULL_TEXT (its folded words in `words`)
  std::vector<std::string> words;
  int64_t i = 0;  // INT, DATETIME (ms), BOOL (0/1)
  double d = 0;   // DOUBLE
};

struct Filter {
  Expr::Kind kind = Expr::Kind::kAnd;
  std::vector<Filter> children;
  FieldRef field;
  CompareOp op = CompareOp::kEq;
  bool negated = false;
  std::vector<Typed> values;
};

struct Order {
  FieldRef field;  // StartTime unless the query says otherwise
  bool descending = true;
};

struct CompiledQuery {
  std::optional<Filter> filter;  // nullopt: every run
  Order order;
  std::vector<std::string> named;  // index keys the query names, sorted, distinct
};

// Checks `query` against the fields `reader` knows: an unknown field, an
// operator the field's type does not have or a literal that does not fit is
// INVALID_ARGUMENT naming it and its position.
StatusOr<CompiledQuery> compile(const Query& query, IndexReader& reader);

}  // namespace dex::search
