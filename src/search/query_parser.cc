// parse_query (query.h): a lexer and a recursive-descent parser, written by hand
// rather than generated so that every error names the byte position and what was
// expected there ("query: at position 7: expected a literal ..., found 'AND'"), and
// so that the build needs no parser generator. The grammar is LL(1): the parser
// looks at one token, which the lexer makes on demand, so the first problem in
// reading order is the one reported.
//
// Bounded on every input: the text is at most kQueryBytesMax bytes, the recursion
// is at most kQueryDepthMax levels of parentheses and NOTs, and every loop
// consumes a token or a byte.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "search/query.h"

namespace dex::search {
namespace {

constexpr size_t kFoundBytesMax = 40;  // of a token quoted in an error message

// Keywords are not fields (a field of that name is written `backquoted`).
// query_text.cc keeps the same list to decide what to backquote.
enum class Keyword {
  kNone,
  kAnd,
  kOr,
  kNot,
  kIn,
  kBetween,
  kStartsWith,
  kIs,
  kNull,
  kOrder,
  kBy,
  kAsc,
  kDesc,
  kTrue,
  kFalse,
};

struct KeywordName {
  std::string_view name;
  Keyword keyword;
};

constexpr KeywordName kKeywords[] = {
    {"AND", Keyword::kAnd},   {"OR", Keyword::kOr},           {"NOT", Keyword::kNot},
    {"IN", Keyword::kIn},     {"BETWEEN", Keyword::kBetween}, {"STARTS_WITH", Keyword::kStartsWith},
    {"IS", Keyword::kIs},     {"NULL", Keyword::kNull},       {"ORDER", Keyword::kOrder},
    {"BY", Keyword::kBy},     {"ASC", Keyword::kAsc},         {"DESC", Keyword::kDesc},
    {"TRUE", Keyword::kTrue}, {"FALSE", Keyword::kFalse},
};

bool equals_ignoring_case(std::string_view a, std::string_view upper) {
  if (a.size() != upper.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) != upper[i]) return false;
  }
  return true;
}

Keyword keyword_of(std::string_view word) {
  for (const auto& k : kKeywords) {
    if (equals_ignoring_case(word, k.name)) return k.keyword;
  }
  return Keyword::kNone;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_word_char(char c) { return is_word_start(c) || is_digit(c) || c == '.' || c == '-'; }

// Text of the query as an error message shows it: printable ASCII as is, other
// bytes as \xNN, cut after kFoundBytesMax bytes.
std::string printable(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size() && i < kFoundBytesMax; ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (raw.size() > kFoundBytesMax) out += "...";
  return out;
}

// The "found Y" of an error: a token already in quotes (a string, a backquoted
// field) as written, anything else in single quotes.
std::string quoted(std::string_view raw) {
  if (raw.empty()) return "the end of the query";
  const char first = raw.front();
  if (first == '\'' || first == '"' || first == '`') return printable(raw);
  return "'" + printable(raw) + "'";
}

Status error_at(size_t pos, std::string_view what) {
  return Status::invalid_argument(fmt::format("query: at position {}: {}", pos + 1, what));
}

Status expected_at(size_t pos, std::string_view expected, std::string_view found_raw) {
  return error_at(pos, fmt::format("expected {}, found {}", expected, quoted(found_raw)));
}

struct Token {
  enum class Kind {
    kEnd,
    kKeyword,  // `keyword`
    kField,    // an identifier or a backquoted name: `text`
    kLiteral,  // a string or a number: `literal`
    kOp,       // a comparison: `op`
    kLParen,
    kRParen,
    kComma,
    kOther,  // a byte that starts no token
    kError,  // a malformed token: `error` says why
  };
  Kind kind = Kind::kEnd;
  size_t pos = 0;
  std::string_view raw;  // as written in the query
  Keyword keyword = Keyword::kNone;
  std::string text;
  Literal literal;
  CompareOp op = CompareOp::kEq;
  Status error;
};

// Splits the query into tokens, one per call to next(). Each call consumes at
// least one byte or returns kEnd.
class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}
  Token next();

 private:
  Token make(Token::Kind kind, size_t start, size_t end);
  Token fail(size_t pos, std::string_view expected, size_t found_end);
  Token lex_word(size_t start);
  Token lex_backquoted(size_t start);
  Token lex_string(size_t start);
  bool lex_escape(size_t& i, std::string& out, Token& error);
  Token lex_number(size_t start);
  Token lex_number_value(size_t start, bool is_int);
  Token lex_symbol(size_t start);

  // The byte at i, or '\0' past the end: callers compare it with printable bytes
  // only, so a NUL in the query is never taken for the end.
  char at(size_t i) const { return i < text_.size() ? text_[i] : '\0'; }
  std::string_view from(size_t start, size_t end) const { return text_.substr(start, end - start); }

  std::string_view text_;
  size_t next_ = 0;  // the first byte not yet consumed
};

Token Lexer::next() {
  while (next_ < text_.size() && is_space(text_[next_])) ++next_;
  const size_t start = next_;
  if (start >= text_.size()) return make(Token::Kind::kEnd, start, start);
  const char c = text_[start];
  if (is_word_start(c)) return lex_word(start);
  if (c == '`') return lex_backquoted(start);
  if (c == '\'' || c == '"') return lex_string(start);
  if (is_digit(c) || c == '-') return lex_number(start);
  return lex_symbol(start);
}

Token Lexer::make(Token::Kind kind, size_t start, size_t end) {
  next_ = end;
  Token t;
  t.kind = kind;
  t.pos = start;
  t.raw = from(start, end);
  return t;
}

// A malformed token at `pos`; the "found" part is the text from pos to found_end.
Token Lexer::fail(size_t pos, std::string_view expected, size_t found_end) {
  Token t = make(Token::Kind::kError, pos, text_.size());
  t.error = expected_at(pos, expected, from(pos, found_end));
  return t;
}

Token Lexer::lex_word(size_t start) {
  size_t end = start;
  while (end < text_.size() && is_word_char(text_[end])) ++end;
  const Keyword keyword = keyword_of(from(start, end));
  Token t =
      make(keyword == Keyword::kNone ? Token::Kind::kField : Token::Kind::kKeyword, start, end);
  t.keyword = keyword;
  t.text = std::string(t.raw);
  return t;
}

// `name`: any bytes but a backquote, which is written twice.
Token Lexer::lex_backquoted(size_t start) {
  std::string name;
  for (size_t i = start + 1; i < text_.size(); ++i) {
    if (text_[i] != '`') {
      name.push_back(text_[i]);
    } else if (at(i + 1) == '`') {
      name.push_back('`');
      ++i;
    } else if (name.empty()) {
      return fail(start, "a field name between the backquotes", i + 1);
    } else {
      Token t = make(Token::Kind::kField, start, i + 1);
      t.text = std::move(name);
      return t;
    }
  }
  return fail(text_.size(), fmt::format("the closing ` of the field at position {}", start + 1),
              text_.size());
}

// 'string' or "string": the other quote as is, the same quote written twice or
// escaped, and the escapes of lex_escape.
Token Lexer::lex_string(size_t start) {
  const char quote = text_[start];
  std::string value;
  for (size_t i = start + 1; i < text_.size(); ++i) {
    const char c = text_[i];
    if (c == '\\') {
      Token error;
      if (!lex_escape(i, value, error)) return error;
    } else if (c != quote) {
      value.push_back(c);
    } else if (at(i + 1) == quote) {
      value.push_back(quote);
      ++i;
    } else {
      Token t = make(Token::Kind::kLiteral, start, i + 1);
      t.literal.kind = Literal::Kind::kString;
      t.literal.text = std::move(value);
      t.literal.pos = start;
      return t;
    }
  }
  return fail(text_.size(),
              fmt::format("the closing {} of the string at position {}", quote, start + 1),
              text_.size());
}

// The backslash at i and the byte after it: appends what they stand for and
// leaves i on the second byte, or sets `error`.
bool Lexer::lex_escape(size_t& i, std::string& out, Token& error) {
  static constexpr std::string_view kWritten = "\\'\"nt";
  static constexpr std::string_view kMeant = "\\'\"\n\t";
  const size_t backslash = i;
  const size_t which = kWritten.find(at(backslash + 1));  // at() is '\0' past the end
  if (which == std::string_view::npos) {
    error =
        fail(backslash, R"(an escape (\\ \' \" \n or \t))", std::min(backslash + 2, text_.size()));
    return false;
  }
  out.push_back(kMeant[which]);
  i = backslash + 1;
  return true;
}

// [-] digits [. digits] [e|E [+|-] digits], not followed by a word byte.
Token Lexer::lex_number(size_t start) {
  size_t i = start;
  auto digits = [&](std::string_view where, Token& error) {
    if (!is_digit(at(i))) {
      error = fail(i, fmt::format("a digit {}", where), std::min(i + 1, text_.size()));
      return false;
    }
    while (is_digit(at(i))) ++i;
    return true;
  };
  Token error;
  if (text_[i] == '-') ++i;
  if (!digits("after '-'", error)) return error;
  bool is_int = true;
  if (at(i) == '.') {
    ++i;
    is_int = false;
    if (!digits("after '.'", error)) return error;
  }
  if (at(i) == 'e' || at(i) == 'E') {
    ++i;
    is_int = false;
    if (at(i) == '+' || at(i) == '-') ++i;
    if (!digits("in the exponent", error)) return error;
  }
  if (i < text_.size() && is_word_char(text_[i])) {
    size_t end = i;
    while (end < text_.size() && is_word_char(text_[end])) ++end;
    return fail(start, "a number", end);
  }
  next_ = i;
  return lex_number_value(start, is_int);
}

// The value of the number text_[start, next_): an int64 when written without a
// fraction or an exponent, a double otherwise.
Token Lexer::lex_number_value(size_t start, bool is_int) {
  Token t = make(Token::Kind::kLiteral, start, next_);
  Literal& lit = t.literal;
  lit.pos = start;
  const char* first = t.raw.data();
  const char* last = first + t.raw.size();
  if (is_int) {
    lit.kind = Literal::Kind::kInt;
    const auto r = std::from_chars(first, last, lit.int_value);
    if (r.ec != std::errc() || r.ptr != last) {
      t.kind = Token::Kind::kError;
      t.error = error_at(start, fmt::format("the number {} does not fit a 64-bit integer "
                                            "(write {}.0 for a floating-point number)",
                                            printable(t.raw), printable(t.raw)));
      return t;
    }
    lit.double_value = static_cast<double>(lit.int_value);
    return t;
  }
  lit.kind = Literal::Kind::kDouble;
  const auto r = std::from_chars(first, last, lit.double_value);
  if (r.ec != std::errc() || r.ptr != last) {
    t.kind = Token::Kind::kError;
    t.error = error_at(
        start, fmt::format("the number {} is out of the range of a double", printable(t.raw)));
  }
  return t;
}

Token Lexer::lex_symbol(size_t start) {
  auto op = [&](CompareOp o, size_t len) {
    Token t = make(Token::Kind::kOp, start, start + len);
    t.op = o;
    return t;
  };
  const char c = text_[start];
  const char d = at(start + 1);
  switch (c) {
    case '(':
      return make(Token::Kind::kLParen, start, start + 1);
    case ')':
      return make(Token::Kind::kRParen, start, start + 1);
    case ',':
      return make(Token::Kind::kComma, start, start + 1);
    case '=':
      return op(CompareOp::kEq, 1);
    case '!':
      if (d == '=') return op(CompareOp::kNe, 2);
      break;
    case '<':
      if (d == '>') return op(CompareOp::kNe, 2);
      if (d == '=') return op(CompareOp::kLe, 2);
      return op(CompareOp::kLt, 1);
    case '>':
      if (d == '=') return op(CompareOp::kGe, 2);
      return op(CompareOp::kGt, 1);
    default:
      break;
  }
  return make(Token::Kind::kOther, start, start + 1);
}

constexpr std::string_view kExpectedUnary = "a field, NOT or '('";
constexpr std::string_view kExpectedPredicate =
    "a comparison (= != <> < <= > >=), IN, NOT IN, BETWEEN, NOT BETWEEN, STARTS_WITH or IS";
constexpr std::string_view kExpectedLiteral = "a literal (a string, a number, TRUE or FALSE)";

// The grammar of query.h, one function per rule. Each returns false after
// recording the first error in error_; callers return false at once.
class Parser {
 public:
  explicit Parser(std::string_view text) : lexer_(text) { advance(); }
  StatusOr<Query> run();

 private:
  bool parse_or(size_t depth, Expr& out);
  bool parse_and(size_t depth, Expr& out);
  bool parse_unary(size_t depth, Expr& out);
  bool parse_nested(size_t depth, Expr& out);
  bool parse_predicate(Expr& out);
  bool parse_in(Expr& out);
  bool parse_between(Expr& out);
  bool parse_is_null(Expr& out);
  bool parse_literal(Expr& out);
  bool parse_order_by(OrderBy& out);

  void advance() { tok_ = lexer_.next(); }
  bool is(Token::Kind kind) const { return tok_.kind == kind; }
  bool is(Keyword keyword) const {
    return tok_.kind == Token::Kind::kKeyword && tok_.keyword == keyword;
  }
  // Consumes the keyword if it is the current token.
  bool take(Keyword keyword) {
    if (!is(keyword)) return false;
    advance();
    return true;
  }
  bool fail(Status status) {
    if (error_.is_ok()) error_ = std::move(status);
    return false;
  }
  // The current token is not what the grammar allows here: "expected ..., found
  // <token>", or the lexer's reason when the token is malformed.
  bool fail_expected(std::string_view expected) {
    if (is(Token::Kind::kError)) return fail(tok_.error);
    return fail(expected_at(tok_.pos, expected, tok_.raw));
  }
  // A node of `kind` over `children`, its AND or OR children spliced in: AND and
  // OR are associative, so the tree has one node per chain.
  static Expr chain(Expr::Kind kind, std::vector<Expr> children);

  Lexer lexer_;
  Token tok_;
  Status error_;
  size_t predicates_ = 0;
};

StatusOr<Query> Parser::run() {
  Query query;
  if (!is(Token::Kind::kEnd) && !is(Keyword::kOrder)) {
    Expr where;
    if (!parse_or(0, where)) return error_;
    query.where = std::move(where);
  }
  if (is(Keyword::kOrder)) {
    if (!parse_order_by(query.order)) return error_;
  } else if (!is(Token::Kind::kEnd)) {
    fail_expected("AND, OR, ORDER BY or the end of the query");
    return error_;
  }
  return query;
}

Expr Parser::chain(Expr::Kind kind, std::vector<Expr> children) {
  Expr out;
  out.kind = kind;
  out.pos = children.front().pos;
  for (Expr& child : children) {
    if (child.kind == kind) {
      for (Expr& grandchild : child.children) out.children.push_back(std::move(grandchild));
    } else {
      out.children.push_back(std::move(child));
    }
  }
  return out;
}

// expr := and { OR and }
bool Parser::parse_or(size_t depth, Expr& out) {
  std::vector<Expr> terms(1);
  if (!parse_and(depth, terms.back())) return false;
  while (take(Keyword::kOr)) {
    if (!parse_and(depth, terms.emplace_back())) return false;
  }
  out = terms.size() == 1 ? std::move(terms.front()) : chain(Expr::Kind::kOr, std::move(terms));
  return true;
}

// and := unary { AND unary }
bool Parser::parse_and(size_t depth, Expr& out) {
  std::vector<Expr> factors(1);
  if (!parse_unary(depth, factors.back())) return false;
  while (take(Keyword::kAnd)) {
    if (!parse_unary(depth, factors.emplace_back())) return false;
  }
  out = factors.size() == 1 ? std::move(factors.front())
                            : chain(Expr::Kind::kAnd, std::move(factors));
  return true;
}

// unary := NOT unary | '(' expr ')' | predicate
bool Parser::parse_unary(size_t depth, Expr& out) {
  if (is(Keyword::kNot) || is(Token::Kind::kLParen)) return parse_nested(depth, out);
  if (is(Token::Kind::kField)) return parse_predicate(out);
  return fail_expected(kExpectedUnary);
}

// NOT unary | '(' expr ')': one level deeper, refused past kQueryDepthMax
// before recursing, so that no input recurses without bound.
bool Parser::parse_nested(size_t depth, Expr& out) {
  if (depth + 1 > kQueryDepthMax) {
    return fail(error_at(tok_.pos, fmt::format("more than {} nested parentheses and NOTs "
                                               "(the query depth limit)",
                                               kQueryDepthMax)));
  }
  const size_t pos = tok_.pos;
  if (take(Keyword::kNot)) {
    out.kind = Expr::Kind::kNot;
    out.pos = pos;
    out.children.resize(1);
    return parse_unary(depth + 1, out.children.front());
  }
  advance();  // '('
  if (!parse_or(depth + 1, out)) return false;
  if (!is(Token::Kind::kRParen)) return fail_expected("AND, OR or ')'");
  advance();
  return true;
}

// predicate := field ( op literal | [NOT] IN ... | [NOT] BETWEEN ... |
//                      STARTS_WITH literal | IS [NOT] NULL )
bool Parser::parse_predicate(Expr& out) {
  out.pos = tok_.pos;
  out.field = std::move(tok_.text);
  if (++predicates_ > kPredicatesMax) {
    return fail(
        error_at(out.pos, fmt::format("more than {} predicates in one query", kPredicatesMax)));
  }
  advance();
  if (is(Token::Kind::kOp)) {
    out.kind = Expr::Kind::kCompare;
    out.op = tok_.op;
    advance();
    return parse_literal(out);
  }
  if (take(Keyword::kNot)) {
    out.negated = true;
    if (!is(Keyword::kIn) && !is(Keyword::kBetween)) return fail_expected("IN or BETWEEN");
  }
  if (take(Keyword::kIn)) return parse_in(out);
  if (take(Keyword::kBetween)) return parse_between(out);
  if (take(Keyword::kStartsWith)) {
    out.kind = Expr::Kind::kStartsWith;
    return parse_literal(out);
  }
  if (take(Keyword::kIs)) return parse_is_null(out);
  return fail_expected(kExpectedPredicate);
}

// After IN: '(' literal { ',' literal } ')', at most kInValuesMax literals.
bool Parser::parse_in(Expr& out) {
  out.kind = Expr::Kind::kIn;
  if (!is(Token::Kind::kLParen)) return fail_expected("'('");
  advance();
  while (true) {
    if (out.values.size() == kInValuesMax) {
      return fail(
          error_at(tok_.pos, fmt::format("more than {} values in one IN list", kInValuesMax)));
    }
    if (!parse_literal(out)) return false;
    if (is(Token::Kind::kRParen)) break;
    if (!is(Token::Kind::kComma)) return fail_expected("',' or ')'");
    advance();
  }
  advance();  // ')'
  return true;
}

// After BETWEEN: literal AND literal.
bool Parser::parse_between(Expr& out) {
  out.kind = Expr::Kind::kBetween;
  if (!parse_literal(out)) return false;
  if (!take(Keyword::kAnd)) return fail_expected("AND");
  return parse_literal(out);
}

// After IS: [NOT] NULL.
bool Parser::parse_is_null(Expr& out) {
  out.kind = Expr::Kind::kIsNull;
  if (take(Keyword::kNot)) {
    out.negated = true;
    if (!take(Keyword::kNull)) return fail_expected("NULL");
    return true;
  }
  if (!take(Keyword::kNull)) return fail_expected("NULL or NOT NULL");
  return true;
}

// literal := 'string' | "string" | number | TRUE | FALSE, appended to out.values.
bool Parser::parse_literal(Expr& out) {
  if (is(Token::Kind::kLiteral)) {
    out.values.push_back(std::move(tok_.literal));
  } else if (is(Keyword::kTrue) || is(Keyword::kFalse)) {
    Literal& lit = out.values.emplace_back();
    lit.kind = Literal::Kind::kBool;
    lit.bool_value = is(Keyword::kTrue);
    lit.pos = tok_.pos;
  } else {
    return fail_expected(kExpectedLiteral);
  }
  advance();
  return true;
}

// ORDER BY field [ ASC | DESC ], the end of the query.
bool Parser::parse_order_by(OrderBy& out) {
  advance();  // ORDER
  if (!take(Keyword::kBy)) return fail_expected("BY");
  if (!is(Token::Kind::kField)) return fail_expected("a field");
  out.pos = tok_.pos;
  out.field = std::move(tok_.text);
  advance();
  if (take(Keyword::kDesc)) {
    out.descending = true;
  } else if (!take(Keyword::kAsc)) {
    if (!is(Token::Kind::kEnd)) return fail_expected("ASC, DESC or the end of the query");
    return true;
  }
  if (!is(Token::Kind::kEnd)) return fail_expected("the end of the query");
  return true;
}

}  // namespace

StatusOr<Query> parse_query(std::string_view text) {
  if (text.size() > kQueryBytesMax) {
    return Status::invalid_argument(fmt::format("query: {} bytes, more than the limit of {} bytes",
                                                text.size(), kQueryBytesMax));
  }
  return Parser(text).run();
}

}  // namespace dex::search
