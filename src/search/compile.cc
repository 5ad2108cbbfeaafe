#include <algorithm>
#include <cctype>
#include <set>

#include "common/rfc3339.h"
#include "flow/search_index.h"
#include "flow/search_keys.h"
#include "search/filter.h"

namespace dex::search {

namespace {

using flow::IndexType;

Status at(size_t pos, const std::string& what) {
  return Status::invalid_argument("query: at position " + std::to_string(pos + 1) + ": " + what);
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }
std::string type_name(IndexType t) { return std::string(flow::index_type_name(t)); }

// The index keys in use, for an unknown field's message (at most 20).
std::string known_keys(IndexReader& reader) {
  std::string out;
  size_t n = 0;
  const std::string prefix(flow::search_keys::kIndexKeyPrefix);
  reader.scan(prefix, prefix_end(prefix), false, [&](std::string_view key, std::string_view) {
    if (n++ == 20) {
      out += ", ...";
      return false;
    }
    out += (out.empty() ? "" : ", ") + std::string(key.substr(prefix.size()));
    return true;
  });
  return out.empty() ? "none" : out;
}

StatusOr<FieldRef> resolve(IndexReader& reader, const std::string& name, size_t pos) {
  if (const auto* f = flow::find_system_field(name))
    return FieldRef{name, f->type, true, f->indexed};
  if (auto bytes = reader.get(flow::search_keys::index_key(name))) {
    flow::IndexKeyEntry entry;
    if (entry.ParseFromString(*bytes)) return FieldRef{name, entry.type(), false, true};
  }
  std::string system;
  for (const auto& f : flow::system_fields())
    system += (system.empty() ? "" : ", ") + std::string(f.name);
  return at(pos, "unknown field " + quoted(name) + " (system fields: " + system +
                     "; index keys in use: " + known_keys(reader) + ")");
}

bool ordered(IndexType t) {
  return t == flow::INDEX_KEYWORD || t == flow::INDEX_INT || t == flow::INDEX_DOUBLE ||
         t == flow::INDEX_DATETIME;
}

std::string literal_kind(const Literal& l) {
  switch (l.kind) {
    case Literal::Kind::kString:
      return "a string";
    case Literal::Kind::kInt:
      return "an integer";
    case Literal::Kind::kDouble:
      return "a number";
    case Literal::Kind::kBool:
      return "a boolean";
  }
  return "a literal";
}

StatusOr<Typed> status_value(const Literal& l) {
  std::string upper = l.text;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (int s = flow::FLOW_RUNNING; s <= flow::FLOW_CONTINUED_AS_NEW; ++s)  // bounded: seven
    if (flow::search_status_name(static_cast<flow::FlowStatus>(s)) == upper)
      return Typed{upper, {}, 0, 0};
  return at(l.pos,
            quoted(l.text) +
                " is not a status (RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED, TIMED_OUT, "
                "CONTINUED_AS_NEW)");
}

// `l` as a value of `field`; `prefix`: a STARTS_WITH operand.
StatusOr<Typed> typed(const FieldRef& field, const Literal& l, bool prefix) {
  const auto mismatch = [&] {
    return at(l.pos, type_name(field.type) + " field " + quoted(field.key) +
                         " cannot be compared with " + literal_kind(l));
  };
  switch (field.type) {
    case flow::INDEX_KEYWORD:
    case flow::INDEX_KEYWORD_ARRAY:
      if (l.kind != Literal::Kind::kString) return mismatch();
      if (field.key == flow::kStatusField && !prefix) return status_value(l);
      return Typed{l.text, {}, 0, 0};
    case flow::INDEX_FULL_TEXT: {
      if (l.kind != Literal::Kind::kString) return mismatch();
      Typed t{l.text, flow::text_tokens(l.text), 0, 0};
      if (t.words.empty()) return at(l.pos, quoted(l.text) + " has no words to match");
      if (prefix && t.words.size() != 1)
        return at(l.pos, "STARTS_WITH on FULL_TEXT field " + quoted(field.key) + " takes one word");
      return t;
    }
    case flow::INDEX_INT:
      if (l.kind != Literal::Kind::kInt) return mismatch();
      return Typed{"", {}, l.int_value, 0};
    case flow::INDEX_DOUBLE:
      if (l.kind != Literal::Kind::kInt && l.kind != Literal::Kind::kDouble) return mismatch();
      return Typed{"", {}, 0, l.double_value};
    case flow::INDEX_BOOL:
      if (l.kind != Literal::Kind::kBool) return mismatch();
      return Typed{"", {}, l.bool_value ? 1 : 0, 0};
    case flow::INDEX_DATETIME: {
      if (l.kind == Literal::Kind::kInt) return Typed{"", {}, l.int_value, 0};
      if (l.kind != Literal::Kind::kString) return mismatch();
      auto ms = parse_datetime(l.text);
      if (!ms.is_ok()) return at(l.pos, ms.status().message());
      return Typed{"", {}, *ms, 0};
    }
    default:
      return mismatch();
  }
}

// Whether `e`'s operator applies to its field's type.
Status check_operator(const Expr& e, const FieldRef& f) {
  const bool range =
      (e.kind == Expr::Kind::kCompare && e.op != CompareOp::kEq && e.op != CompareOp::kNe) ||
      e.kind == Expr::Kind::kBetween;
  if (range && !ordered(f.type))
    return at(e.pos, type_name(f.type) + " field " + quoted(f.key) +
                         " has no order: use =, !=, IN" +
                         (f.type == flow::INDEX_BOOL ? "" : " or STARTS_WITH"));
  if (e.kind == Expr::Kind::kStartsWith && f.type != flow::INDEX_KEYWORD &&
      f.type != flow::INDEX_KEYWORD_ARRAY && f.type != flow::INDEX_FULL_TEXT)
    return at(e.pos, "STARTS_WITH needs a KEYWORD, KEYWORD_ARRAY or FULL_TEXT field; " +
                         quoted(f.key) + " is " + type_name(f.type));
  return Status::ok();
}

struct Compiler {
  IndexReader& reader;
  std::set<std::string> named;

  StatusOr<Filter> leaf(const Expr& e) {
    auto field = resolve(reader, e.field, e.pos);
    if (!field.is_ok()) return field.status();
    if (auto s = check_operator(e, *field); !s.is_ok()) return s;
    if (!field->system) named.insert(field->key);
    Filter f{e.kind, {}, *field, e.op, e.negated, {}};
    for (const auto& l : e.values) {  // bounded by kInValuesMax
      auto v = typed(*field, l, e.kind == Expr::Kind::kStartsWith);
      if (!v.is_ok()) return v.status();
      f.values.push_back(*std::move(v));
    }
    return f;
  }

  StatusOr<Filter> expr(const Expr& e) {
    if (e.kind != Expr::Kind::kAnd && e.kind != Expr::Kind::kOr && e.kind != Expr::Kind::kNot)
      return leaf(e);
    Filter f;
    f.kind = e.kind;
    for (const auto& c : e.children) {  // bounded by kPredicatesMax; depth by kQueryDepthMax
      auto child = expr(c);
      if (!child.is_ok()) return child.status();
      f.children.push_back(*std::move(child));
    }
    return f;
  }
};

}  // namespace

std::string prefix_end(std::string_view prefix) {
  std::string out(prefix);
  while (!out.empty() && static_cast<unsigned char>(out.back()) == 0xff) out.pop_back();
  if (!out.empty()) out.back() = static_cast<char>(static_cast<unsigned char>(out.back()) + 1);
  return out;
}

StatusOr<CompiledQuery> compile(const Query& query, IndexReader& reader) {
  Compiler c{reader, {}};
  CompiledQuery out;
  if (query.where) {
    auto f = c.expr(*query.where);
    if (!f.is_ok()) return f.status();
    out.filter = *std::move(f);
  }
  if (query.order.field.empty()) {
    out.order =
        Order{FieldRef{std::string(flow::kStartTimeField), flow::INDEX_DATETIME, true, true}, true};
  } else {
    auto field = resolve(reader, query.order.field, query.order.pos);
    if (!field.is_ok()) return field.status();
    const auto* system = flow::find_system_field(field->key);
    const bool sortable =
        system ? system->sortable : (ordered(field->type) || field->type == flow::INDEX_BOOL);
    if (!sortable)
      return at(query.order.pos,
                "cannot ORDER BY " + type_name(field->type) + " field " + quoted(field->key));
    if (!field->system) c.named.insert(field->key);
    out.order = Order{*field, query.order.descending};
  }
  out.named.assign(c.named.begin(), c.named.end());
  return out;
}

}  // namespace dex::search
