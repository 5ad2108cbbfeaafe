#include "search/evaluate.h"

#include <algorithm>

#include "common/invariant.h"
#include "flow/search_index.h"
#include "flow/search_keys.h"

namespace dex::search {

namespace {

using flow::SearchField;

SearchField keyword(std::string_view key, std::string_view text) {
  SearchField f;
  f.set_key(std::string(key));
  f.set_type(flow::INDEX_KEYWORD);
  f.set_text(std::string(text));
  return f;
}

SearchField time(std::string_view key, int64_t ms) {
  SearchField f;
  f.set_key(std::string(key));
  f.set_type(flow::INDEX_DATETIME);
  f.set_time_ms(ms);
  return f;
}

std::optional<SearchField> system_value(const flow::SearchDoc& d, const std::string& key) {
  if (key == flow::kFlowIdField) return keyword(key, d.flow_id());
  if (key == flow::kRunIdField) return keyword(key, d.run_id());
  if (key == flow::kFlowTypeField) return keyword(key, d.flow_type());
  if (key == flow::kStatusField) return keyword(key, flow::search_status_name(d.status()));
  if (key == flow::kStartTimeField) return time(key, d.start_ms());
  if (key == flow::kCloseTimeField) {
    if (d.close_ms() == 0) return std::nullopt;
    return time(key, d.close_ms());
  }
  if (key == flow::kDurationField) {
    if (d.close_ms() == 0) return std::nullopt;
    SearchField f;
    f.set_key(key);
    f.set_type(flow::INDEX_INT);
    f.set_int_value(d.close_ms() - d.start_ms());
    return f;
  }
  if (key == flow::kParentField) {
    if (d.parent_flow_id().empty()) return std::nullopt;
    return keyword(key, d.parent_flow_id());
  }
  if (key == flow::kActiveStepsField) {
    if (d.active_step_types().empty()) return std::nullopt;
    SearchField f;
    f.set_key(key);
    f.set_type(flow::INDEX_KEYWORD_ARRAY);
    *f.mutable_items() = d.active_step_types();
    return f;
  }
  return std::nullopt;
}

// -1, 0, 1: the scalar `f` against `v`.
int compare(const SearchField& f, const Typed& v) {
  const auto sign = [](auto a, auto b) { return a < b ? -1 : (b < a ? 1 : 0); };
  switch (f.type()) {
    case flow::INDEX_KEYWORD:
      return f.text().compare(v.text) < 0 ? -1 : (f.text() == v.text ? 0 : 1);
    case flow::INDEX_INT:
      return sign(f.int_value(), v.i);
    case flow::INDEX_DOUBLE:
      return sign(f.double_value(), v.d);
    case flow::INDEX_BOOL:
      return sign(f.bool_value() ? int64_t{1} : int64_t{0}, v.i);
    case flow::INDEX_DATETIME:
      return sign(f.time_ms(), v.i);
    default:
      DEX_INVARIANT(false, "a scalar index type");
      return 0;
  }
}

bool is_list(const SearchField& f) {
  return f.type() == flow::INDEX_KEYWORD_ARRAY || f.type() == flow::INDEX_FULL_TEXT;
}

// = on a list: an array holds the item, a text holds every word.
bool contains(const SearchField& f, const Typed& v) {
  const auto has = [&](const std::string& s) {
    return std::find(f.items().begin(), f.items().end(), s) != f.items().end();
  };
  if (f.type() == flow::INDEX_FULL_TEXT) return std::all_of(v.words.begin(), v.words.end(), has);
  return has(v.text);
}

bool equals(const SearchField& f, const Typed& v) {
  return is_list(f) ? contains(f, v) : compare(f, v) == 0;
}

bool starts_with(const SearchField& f, const Typed& v) {
  const std::string& prefix = f.type() == flow::INDEX_FULL_TEXT ? v.words.front() : v.text;
  const auto starts = [&](const std::string& s) {
    return s.compare(0, prefix.size(), prefix) == 0;
  };
  if (is_list(f)) return std::any_of(f.items().begin(), f.items().end(), starts);
  return starts(f.text());
}

bool compare_op(const SearchField& f, CompareOp op, const Typed& v) {
  if (op == CompareOp::kEq) return equals(f, v);
  if (op == CompareOp::kNe) return !equals(f, v);
  const int c = compare(f, v);
  switch (op) {
    case CompareOp::kLt:
      return c < 0;
    case CompareOp::kLe:
      return c <= 0;
    case CompareOp::kGt:
      return c > 0;
    case CompareOp::kGe:
      return c >= 0;
    default:
      return false;
  }
}

bool leaf(const Filter& f, const flow::SearchDoc& doc) {
  const auto value = field_value(doc, f.field);
  if (f.kind == Expr::Kind::kIsNull) return value.has_value() == f.negated;
  if (!value) return false;
  switch (f.kind) {
    case Expr::Kind::kCompare:
      return compare_op(*value, f.op, f.values[0]);
    case Expr::Kind::kIn: {
      const bool any = std::any_of(f.values.begin(), f.values.end(),
                                   [&](const Typed& v) { return equals(*value, v); });
      return any != f.negated;
    }
    case Expr::Kind::kBetween: {
      const bool in = compare(*value, f.values[0]) >= 0 && compare(*value, f.values[1]) <= 0;
      return in != f.negated;
    }
    case Expr::Kind::kStartsWith:
      return starts_with(*value, f.values[0]);
    default:
      DEX_INVARIANT(false, "a leaf filter");
      return false;
  }
}

std::string encoded(const SearchField& f) {
  switch (f.type()) {
    case flow::INDEX_KEYWORD:
      return flow::search_keys::keyword(f.text());
    case flow::INDEX_INT:
      return flow::search_keys::integer(f.int_value());
    case flow::INDEX_DOUBLE:
      return flow::search_keys::real(f.double_value());
    case flow::INDEX_BOOL:
      return flow::search_keys::boolean(f.bool_value());
    case flow::INDEX_DATETIME:
      return flow::search_keys::time(f.time_ms());
    default:
      return "";
  }
}

}  // namespace

std::optional<SearchField> field_value(const flow::SearchDoc& doc, const FieldRef& field) {
  if (field.system) return system_value(doc, field.key);
  for (const auto& f : doc.fields())  // bounded by kIndexedAttributesMax
    if (f.key() == field.key) {
      if (f.type() != field.type) return std::nullopt;  // written under an older declaration
      return f;
    }
  return std::nullopt;
}

bool matches(const Filter& f, const flow::SearchDoc& doc) {
  switch (f.kind) {
    case Expr::Kind::kAnd:  // bounded by kPredicatesMax; depth by kQueryDepthMax
      return std::all_of(f.children.begin(), f.children.end(),
                         [&](const Filter& c) { return matches(c, doc); });
    case Expr::Kind::kOr:
      return std::any_of(f.children.begin(), f.children.end(),
                         [&](const Filter& c) { return matches(c, doc); });
    case Expr::Kind::kNot:
      return !matches(f.children[0], doc);
    default:
      return leaf(f, doc);
  }
}

std::string sort_key(const Order& order, const flow::SearchDoc& doc) {
  std::string out;
  const auto value = field_value(doc, order.field);
  if (value) {
    out.push_back('\x01');
    out += encoded(*value);
  } else {
    out.push_back('\x00');
  }
  out += flow::search_keys::sortable64(doc.start_ms());
  out += doc.flow_id();
  out.push_back('\x1f');
  out += doc.run_id();
  return out;
}

}  // namespace dex::search
