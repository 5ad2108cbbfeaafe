// The SearchFlows query language as a syntax tree (docs/search.md, "Query
// language"), and its parser. Pure: no store, clock or thread.
//
//   query     := [ expr ] [ ORDER BY field [ ASC | DESC ] ]
//   expr      := and { OR and }
//   and       := unary { AND unary }
//   unary     := NOT unary | '(' expr ')' | predicate
//   predicate := field ( op literal
//                      | [ NOT ] IN '(' literal { ',' literal } ')'
//                      | [ NOT ] BETWEEN literal AND literal
//                      | STARTS_WITH literal
//                      | IS [ NOT ] NULL )
//   op        := '=' | '!=' | '<>' | '<' | '<=' | '>' | '>='
//   field     := identifier | `backquoted`
//   literal   := 'string' | "string" | number | TRUE | FALSE
//
// Keywords are case-insensitive. The parser knows nothing of fields and types:
// whether a field exists and a literal fits it is the planner's check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dex::search {

// Limits of one query (each refused with INVALID_ARGUMENT naming it).
inline constexpr size_t kQueryBytesMax = 16 * 1024;
inline constexpr size_t kQueryDepthMax = 32;   // nested parentheses and NOTs
inline constexpr size_t kInValuesMax = 1000;   // literals in one IN (...)
inline constexpr size_t kPredicatesMax = 256;  // predicates in one query

struct Literal {
  enum class Kind { kString, kInt, kDouble, kBool };
  Kind kind = Kind::kString;
  std::string text;  // kString: the value, unescaped
  int64_t int_value = 0;
  double double_value = 0;  // kDouble; kInt holds its value here too
  bool bool_value = false;
  size_t pos = 0;  // byte offset of the literal in the query
};

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe };
std::string_view compare_op_text(CompareOp op);  // "=", "!=", ...

struct Expr {
  enum class Kind {
    kAnd,         // children: two or more
    kOr,          // children: two or more
    kNot,         // children: one
    kCompare,     // field op values[0]
    kIn,          // field [NOT] IN (values...)
    kBetween,     // field [NOT] BETWEEN values[0] AND values[1]
    kStartsWith,  // field STARTS_WITH values[0]
    kIsNull,      // field IS [NOT] NULL
  };
  Kind kind = Kind::kAnd;
  size_t pos = 0;  // byte offset where the expression starts
  std::vector<Expr> children;
  std::string field;  // the leaf kinds: the field as written (unquoted)
  CompareOp op = CompareOp::kEq;
  bool negated = false;  // NOT IN, NOT BETWEEN, IS NOT NULL
  std::vector<Literal> values;
};

struct OrderBy {
  std::string field;  // empty: not given (StartTime DESC)
  bool descending = false;
  size_t pos = 0;
};

struct Query {
  std::optional<Expr> where;  // nullopt: every run
  OrderBy order;
};

// Parses `text`. Errors are INVALID_ARGUMENT: "query: at position N: expected
// X, found Y" (N counts bytes from 1), or a limit above.
StatusOr<Query> parse_query(std::string_view text);

// The query written back in canonical form (keywords upper case, strings in
// single quotes, fields back-quoted where needed, parentheses only where
// precedence needs them, so never deeper than the query it came from): parsing
// it gives the same tree, positions aside, unless the canonical spacing makes
// it longer than kQueryBytesMax. For tests and the fuzz target.
std::string to_text(const Query& query);

// `value` as a string literal the parser reads back as `value`: single quotes,
// with \ ' newline and tab escaped (for clients that write queries).
std::string string_literal(std::string_view value);

}  // namespace dex::search
