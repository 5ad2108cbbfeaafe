// The SearchFlows query language (src/search/query.h) and the search behind
// it (src/search/search.h), fed arbitrary query text. The text comes from
// any API client, so whatever it holds, parse_query answers a tree or
// INVALID_ARGUMENT; it never crashes, throws or recurses without bound.
//  - A refusal names a position within the text ("query: at position N:",
//    1 <= N <= size + 1; only the byte limit names none).
//  - An accepted tree's positions lie within the text, and its canonical
//    text (to_text) reads back as the same tree and writes out the same text
//    again, unless the canonical spacing makes it longer than kQueryBytesMax
//    (query.h allows that).
//  - search_flows over a small state (four Order runs, one Attribute of every
//    index type, one run closed) answers the query or INVALID_ARGUMENT naming
//    a position; paged two rows at a time it gives the same rows, each once,
//    as one page does; and the canonical text selects the same rows in the
//    same order.
//
// Input: query text.
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../search/map_reader.h"
#include "flow/flow_rules.h"
#include "flow/kv_txn.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"
#include "search/index_reader.h"
#include "search/query.h"
#include "search/search.h"

namespace dex::fuzz {
namespace {

using namespace dex::flow;
using dex::search::Expr;
using dex::search::Literal;
using dex::search::Query;

// ----------------------------------------------------------- the tree checks

bool same_literal(const Literal& a, const Literal& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Literal::Kind::kString:
      return a.text == b.text;
    case Literal::Kind::kInt:
      return a.int_value == b.int_value;
    case Literal::Kind::kDouble:
      // -0.0 == 0.0, yet the two must not swap in a round trip.
      return a.double_value == b.double_value &&
             std::signbit(a.double_value) == std::signbit(b.double_value);
    case Literal::Kind::kBool:
      return a.bool_value == b.bool_value;
  }
  return false;
}

// Equal trees, positions aside (to_text moves every token).
bool same_expr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.field != b.field || a.negated != b.negated ||
      a.children.size() != b.children.size() || a.values.size() != b.values.size()) {
    return false;
  }
  if (a.kind == Expr::Kind::kCompare && a.op != b.op) return false;
  for (size_t i = 0; i < a.children.size(); ++i) {
    if (!same_expr(a.children[i], b.children[i])) return false;
  }
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (!same_literal(a.values[i], b.values[i])) return false;
  }
  return true;
}

bool same_query(const Query& a, const Query& b) {
  if (a.where.has_value() != b.where.has_value()) return false;
  if (a.where && !same_expr(*a.where, *b.where)) return false;
  return a.order.field == b.order.field && a.order.descending == b.order.descending;
}

// The shape query.h promises: AND and OR have two or more children and never
// a child of their own kind (chains are one node), NOT has one, a leaf has
// the values of its kind and a field; every position lies within the text.
void check_expr(const Expr& e, size_t size, size_t depth) {
  // Each level of parentheses or NOT holds at most an OR, an AND and a NOT.
  FUZZ_CHECK(depth <= 3 * (search::kQueryDepthMax + 1) + 1, "a tree {} levels deep", depth);
  FUZZ_CHECK(e.pos < size, "an expression at byte {} of {}", e.pos, size);
  switch (e.kind) {
    case Expr::Kind::kAnd:
    case Expr::Kind::kOr:
      FUZZ_CHECK(e.children.size() >= 2, "a chain of {} children", e.children.size());
      for (const Expr& c : e.children) {
        FUZZ_CHECK(c.kind != e.kind, "a chain inside a chain of the same kind");
        check_expr(c, size, depth + 1);
      }
      return;
    case Expr::Kind::kNot:
      FUZZ_CHECK(e.children.size() == 1, "NOT with {} children", e.children.size());
      check_expr(e.children.front(), size, depth + 1);
      return;
    case Expr::Kind::kCompare:
    case Expr::Kind::kStartsWith:
      FUZZ_CHECK(e.values.size() == 1, "{} values of a one-value predicate", e.values.size());
      break;
    case Expr::Kind::kBetween:
      FUZZ_CHECK(e.values.size() == 2, "BETWEEN with {} values", e.values.size());
      break;
    case Expr::Kind::kIn:
      FUZZ_CHECK(!e.values.empty() && e.values.size() <= search::kInValuesMax, "IN with {} values",
                 e.values.size());
      break;
    case Expr::Kind::kIsNull:
      FUZZ_CHECK(e.values.empty(), "IS NULL with {} values", e.values.size());
      break;
  }
  FUZZ_CHECK(e.children.empty(), "a predicate with children");
  FUZZ_CHECK(!e.field.empty(), "a predicate without a field");
  for (const Literal& l : e.values)
    FUZZ_CHECK(l.pos < size, "a literal at byte {} of {}", l.pos, size);
}

// A refused query names where: "query: at position N: ..." with N counting
// bytes from 1, at most one past the end; only the byte limit names none.
void check_refusal(const Status& s, size_t size) {
  FUZZ_CHECK(s.code() == Code::kInvalidArgument, "{}", s.to_string());
  const std::string& m = s.message();
  if (size > search::kQueryBytesMax && m.rfind("query: ", 0) == 0 &&
      m.find("more than the limit") != std::string::npos) {
    return;
  }
  constexpr std::string_view kPrefix = "query: at position ";
  FUZZ_CHECK(m.rfind(kPrefix, 0) == 0, "a refusal that names no position: {}", m);
  size_t n = 0, i = kPrefix.size();
  bool beyond = false;  // stops accumulating before n could overflow
  for (; i < m.size() && m[i] >= '0' && m[i] <= '9'; ++i) {
    beyond = beyond || n > size + 1;
    if (!beyond) n = n * 10 + static_cast<size_t>(m[i] - '0');
  }
  FUZZ_CHECK(i > kPrefix.size() && i < m.size() && m[i] == ':', "a malformed position: {}", m);
  FUZZ_CHECK(!beyond && n >= 1 && n <= size + 1, "a position past a {}-byte query: {}", size, m);
}

// ---------------------------------------------------------------- the search

using search::testing::MapReader;

constexpr int kRuns = 4;

void declare_attribute(FlowDeclaration& d, const std::string& key, AttributeType type,
                       IndexType index, const std::string& index_key) {
  auto* a = d.add_attributes();
  a->set_key(key);
  a->set_type(type);
  a->mutable_index()->set_type(index);
  a->mutable_index()->set_index_key(index_key);
}

Attribute attribute(const std::string& key, AttributeValue value) {
  Attribute a;
  a.set_key(key);
  *a.mutable_value() = std::move(value);
  return a;
}

AttributeValue string_value(const std::string& s) {
  AttributeValue v;
  v.set_string_value(s);
  return v;
}

// Order (docs/search.md's examples): an Attribute of every index type, four
// runs with different values (one with none), the last one stopped.
std::vector<FlowRecord> state_records() {
  std::vector<FlowRecord> out;
  FlowDeclaration* d = out.emplace_back().mutable_declare_flows()->add_declarations();
  out.back().mutable_declare_flows()->set_at_unix_ms(1'000);
  d->set_flow_type("Order");
  d->set_start_step_type("Start");
  d->add_steps()->set_step_type("Start");
  declare_attribute(*d, "cust", ATTRIBUTE_STRING, INDEX_KEYWORD, "Customer");
  declare_attribute(*d, "note", ATTRIBUTE_STRING, INDEX_FULL_TEXT, "");
  declare_attribute(*d, "tags", ATTRIBUTE_JSON, INDEX_KEYWORD_ARRAY, "Tags");
  declare_attribute(*d, "qty", ATTRIBUTE_INT64, INDEX_INT, "");
  declare_attribute(*d, "price", ATTRIBUTE_DOUBLE, INDEX_DOUBLE, "Price");
  declare_attribute(*d, "vip", ATTRIBUTE_BOOL, INDEX_BOOL, "");
  declare_attribute(*d, "due", ATTRIBUTE_DATETIME, INDEX_DATETIME, "Due");

  for (int i = 0; i < kRuns; ++i) {
    auto* s = out.emplace_back().mutable_start_flow();
    s->set_flow_id("order-" + std::to_string(i));
    s->set_run_id("run-" + std::to_string(i));
    s->set_flow_type("Order");
    s->set_at_unix_ms(2'000 + 1'000 * i);
    auto* attrs = s->mutable_options()->mutable_initial_attributes();
    if (i == 2) continue;  // a run without Attributes: every field IS NULL
    *attrs->Add() = attribute("cust", string_value(i == 1 ? "beta" : "acme"));
    AttributeValue qty, price, vip, due, tags;
    qty.set_int64_value(i == 1 ? -1 : 3 + i);
    price.set_double_value(i == 1 ? 0.0 : 9.5 * i);
    vip.set_bool_value(i == 0);
    due.set_datetime_unix_ms(1'700'000'000'000 + 3'600'000 * i);
    tags.set_json_value(i == 1 ? R"(["b"])" : R"(["a", "b"])");
    *attrs->Add() = attribute("qty", qty);
    *attrs->Add() = attribute("price", price);
    *attrs->Add() = attribute("vip", vip);
    *attrs->Add() = attribute("due", due);
    *attrs->Add() = attribute("tags", tags);
    if (i != 1) *attrs->Add() = attribute("note", string_value("Rush order to Berlin, gate 7"));
  }
  auto* stop = out.emplace_back().mutable_stop_flow();
  stop->set_flow_id("order-3");
  stop->set_mode(STOP_TERMINATE);
  stop->set_reason("fuzz");
  stop->set_at_unix_ms(9'000);
  return out;
}

const MemoryKv& state() {
  static const MemoryKv* kv = [] {
    auto* out = new MemoryKv;
    for (const FlowRecord& r : state_records()) {
      Effects fx;
      KvFlowTxn txn(*out);
      const ApplyResult result = apply_record(txn, r, fx);
      FUZZ_CHECK(result.kind == ApplyKind::kApplied, "the search state's record: {}",
                 result.message);
    }
    return out;
  }();
  return *kv;
}

using Row = std::pair<std::string, std::string>;  // flow ID, run ID

// The rows `query` selects, every page of `page_size` in turn; nullopt with
// the refusal checked when the search refuses it.
std::optional<std::vector<Row>> search_all(std::string_view query, int32_t page_size) {
  MapReader reader(state().data());
  SearchFlowsRequest request;
  request.set_query(std::string(query));
  request.set_page_size(page_size);
  std::vector<Row> rows;
  for (int page = 0;; ++page) {
    FUZZ_CHECK(page <= kRuns, "more than {} pages of {} rows from {} runs", page, page_size, kRuns);
    auto r = search::search_flows(reader, request);
    if (!r.is_ok()) {
      FUZZ_CHECK(page == 0, "page {} refused: {}", page, r.status().to_string());
      check_refusal(r.status(), query.size());
      return std::nullopt;
    }
    FUZZ_CHECK(r->rows_size() <= page_size, "{} rows in a page of {}", r->rows_size(), page_size);
    for (const auto& row : r->rows()) rows.emplace_back(row.flow_id(), row.run_id());
    if (r->next_page_token().empty()) break;
    FUZZ_CHECK(r->rows_size() == page_size, "a short page ({} rows) with a next page",
               r->rows_size());
    request.set_page_token(r->next_page_token());
  }
  FUZZ_CHECK(std::set<Row>(rows.begin(), rows.end()).size() == rows.size(), "a row given twice");
  FUZZ_CHECK(rows.size() <= kRuns, "{} rows from {} runs", rows.size(), kRuns);
  return rows;
}

// The rows of `query` two at a time, checked against one page.
std::optional<std::vector<Row>> search(std::string_view query) {
  auto paged = search_all(query, 2);
  auto whole = search_all(query, search::kPageSizeMax);
  FUZZ_CHECK(paged.has_value() == whole.has_value(), "pages of 2 {} the query, a page of {} not",
             paged ? "answer" : "refuse", search::kPageSizeMax);
  if (paged) FUZZ_CHECK(*paged == *whole, "pages of two differ from one page");
  return paged;
}

// The state holds what state_records() wrote, indexed, or every check above
// would pass without searching anything.
void check_state_once() {
  static const bool checked = [] {
    const auto every = search_all("", 2);
    FUZZ_CHECK(every && every->size() == kRuns, "the state does not hold its {} runs", kRuns);
    const std::vector<Row> acme = {{"order-0", "run-0"}, {"order-3", "run-3"}};
    FUZZ_CHECK(search_all("Customer = 'acme' AND note = 'berlin' ORDER BY qty", 2) == acme,
               "the Attributes of the runs are not indexed");
    const std::vector<Row> stopped = {{"order-3", "run-3"}};
    FUZZ_CHECK(search_all("Status = 'TERMINATED'", 2) == stopped, "order-3 was not stopped");
    return true;
  }();
  (void)checked;
}

}  // namespace

int search_query(const uint8_t* data, size_t size) {
  ProtobufQuiet quiet;
  check_state_once();
  const std::string_view text = as_view(data, size);
  auto parsed = search::parse_query(text);
  if (!parsed.is_ok()) {
    check_refusal(parsed.status(), size);
    MapReader reader(state().data());
    SearchFlowsRequest request;
    request.set_query(std::string(text));
    auto r = search::search_flows(reader, request);
    FUZZ_CHECK(!r.is_ok() && r.status().message() == parsed.status().message(),
               "search_flows did not refuse as parse_query did");
    return 0;
  }
  const Query& q = parsed.value();
  if (q.where) check_expr(*q.where, size, 1);
  if (!q.order.field.empty()) {
    FUZZ_CHECK(q.order.pos < size, "ORDER BY at byte {} of {}", q.order.pos, size);
  }

  const std::string canonical = search::to_text(q);
  const bool fits = canonical.size() <= search::kQueryBytesMax;
  if (fits) {
    auto again = search::parse_query(canonical);
    FUZZ_CHECK(again.is_ok(), "the canonical text '{}' is refused: {}", canonical,
               again.status().to_string());
    FUZZ_CHECK(same_query(again.value(), q), "'{}' reads back as another tree", canonical);
    const std::string twice = search::to_text(again.value());
    FUZZ_CHECK(twice == canonical, "'{}' is written back as '{}'", canonical, twice);
  }

  const auto rows = search(text);
  if (fits) {
    const auto canonical_rows = search(canonical);
    FUZZ_CHECK(rows.has_value() == canonical_rows.has_value(),
               "the canonical text '{}' is {} where the query is not", canonical,
               rows ? "refused" : "answered");
    if (rows) FUZZ_CHECK(*rows == *canonical_rows, "'{}' selects other rows", canonical);
  }
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(search_query)
