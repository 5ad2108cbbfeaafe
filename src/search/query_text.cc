// to_text and compare_op_text (query.h): a syntax tree written back as a query
// that parse_query reads as the same tree. Canonical: keywords upper case, one
// space between tokens, strings in single quotes, numbers in their shortest
// exact form, parentheses only where precedence needs them.
#include <array>
#include <cassert>
#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

#include "search/query.h"

namespace dex::search {
namespace {

// The keywords of query_parser.cc: a field with one of these names, in any
// case, must be backquoted or it would read as the keyword.
constexpr std::array<std::string_view, 14> kKeywords = {
    "AND",  "OR",    "NOT", "IN",  "BETWEEN", "STARTS_WITH", "IS",
    "NULL", "ORDER", "BY",  "ASC", "DESC",    "TRUE",        "FALSE",
};

bool is_word_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_word_char(char c) {
  return is_word_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

bool is_keyword(std::string_view word) {
  for (std::string_view keyword : kKeywords) {
    if (word.size() != keyword.size()) continue;
    bool same = true;
    for (size_t i = 0; i < word.size() && same; ++i) {
      const char upper =
          (word[i] >= 'a' && word[i] <= 'z') ? static_cast<char>(word[i] - 32) : word[i];
      same = upper == keyword[i];
    }
    if (same) return true;
  }
  return false;
}

// An identifier the lexer reads back as this field: [A-Za-z_][A-Za-z0-9_.-]*,
// not a keyword.
bool is_plain_field(std::string_view field) {
  if (field.empty() || !is_word_start(field.front())) return false;
  for (char c : field) {
    if (!is_word_char(c)) return false;
  }
  return !is_keyword(field);
}

void write_field(std::string& out, std::string_view field) {
  if (is_plain_field(field)) {
    out += field;
    return;
  }
  out.push_back('`');
  for (char c : field) {
    out.push_back(c);
    if (c == '`') out.push_back('`');
  }
  out.push_back('`');
}

void write_string(std::string& out, std::string_view value) {
  out.push_back('\'');
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out.push_back(c);
        break;
    }
  }
  out.push_back('\'');
}

// The shortest text that reads back as exactly `value`, with a '.' or an
// exponent so that it reads back as a double and not an integer.
void write_double(std::string& out, double value) {
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  assert(r.ec == std::errc());
  const std::string_view text(buf.data(), static_cast<size_t>(r.ptr - buf.data()));
  out += text;
  if (text.find_first_of(".eEn") == std::string_view::npos) out += ".0";
}

void write_literal(std::string& out, const Literal& lit) {
  switch (lit.kind) {
    case Literal::Kind::kString:
      write_string(out, lit.text);
      break;
    case Literal::Kind::kInt:
      out += std::to_string(lit.int_value);
      break;
    case Literal::Kind::kDouble:
      write_double(out, lit.double_value);
      break;
    case Literal::Kind::kBool:
      out += lit.bool_value ? "TRUE" : "FALSE";
      break;
  }
}

void write_expr(std::string& out, const Expr& expr);

// An operand of AND, OR or NOT, in parentheses when it would otherwise bind
// differently. Only where needed: redundant ones would count against
// kQueryDepthMax, so a query at the limit would not read back.
void write_operand(std::string& out, const Expr& operand, Expr::Kind parent) {
  const bool compound = operand.kind == Expr::Kind::kAnd || operand.kind == Expr::Kind::kOr;
  const bool needed = compound && !(parent == Expr::Kind::kOr && operand.kind == Expr::Kind::kAnd);
  if (needed) out.push_back('(');
  write_expr(out, operand);
  if (needed) out.push_back(')');
}

void write_chain(std::string& out, const Expr& expr, std::string_view separator) {
  assert(expr.children.size() >= 2);
  for (size_t i = 0; i < expr.children.size(); ++i) {
    if (i > 0) out += separator;
    write_operand(out, expr.children[i], expr.kind);
  }
}

void write_in(std::string& out, const Expr& expr) {
  assert(!expr.values.empty());
  out += expr.negated ? " NOT IN (" : " IN (";
  for (size_t i = 0; i < expr.values.size(); ++i) {
    if (i > 0) out += ", ";
    write_literal(out, expr.values[i]);
  }
  out.push_back(')');
}

void write_predicate(std::string& out, const Expr& expr) {
  write_field(out, expr.field);
  switch (expr.kind) {
    case Expr::Kind::kCompare:
      assert(expr.values.size() == 1);
      out.push_back(' ');
      out += compare_op_text(expr.op);
      out.push_back(' ');
      write_literal(out, expr.values[0]);
      break;
    case Expr::Kind::kIn:
      write_in(out, expr);
      break;
    case Expr::Kind::kBetween:
      assert(expr.values.size() == 2);
      out += expr.negated ? " NOT BETWEEN " : " BETWEEN ";
      write_literal(out, expr.values[0]);
      out += " AND ";
      write_literal(out, expr.values[1]);
      break;
    case Expr::Kind::kStartsWith:
      assert(expr.values.size() == 1);
      out += " STARTS_WITH ";
      write_literal(out, expr.values[0]);
      break;
    case Expr::Kind::kIsNull:
      out += expr.negated ? " IS NOT NULL" : " IS NULL";
      break;
    default:
      assert(false && "not a predicate");
      break;
  }
}

void write_expr(std::string& out, const Expr& expr) {
  switch (expr.kind) {
    case Expr::Kind::kAnd:
      write_chain(out, expr, " AND ");
      break;
    case Expr::Kind::kOr:
      write_chain(out, expr, " OR ");
      break;
    case Expr::Kind::kNot:
      assert(expr.children.size() == 1);
      out += "NOT ";
      write_operand(out, expr.children.front(), expr.kind);
      break;
    default:
      write_predicate(out, expr);
      break;
  }
}

}  // namespace

std::string_view compare_op_text(CompareOp op) {
  switch (op) {
    case CompareOp::kEq:
      return "=";
    case CompareOp::kNe:
      return "!=";
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
    case CompareOp::kGt:
      return ">";
    case CompareOp::kGe:
      return ">=";
  }
  return "?";
}

std::string to_text(const Query& query) {
  std::string out;
  if (query.where) write_expr(out, *query.where);
  if (!query.order.field.empty()) {
    if (!out.empty()) out.push_back(' ');
    out += "ORDER BY ";
    write_field(out, query.order.field);
    out += query.order.descending ? " DESC" : " ASC";
  }
  return out;
}

std::string string_literal(std::string_view value) {
  std::string out;
  write_string(out, value);
  return out;
}

}  // namespace dex::search
