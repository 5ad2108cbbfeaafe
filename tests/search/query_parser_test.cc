// The SearchFlows query parser and its canonical text (src/search/query.h):
// the grammar, precedence, literals, fields, positions, every error message,
// every limit, and the round trip parse(to_text(parse(q))) == parse(q) over
// seeded random queries and mutations of them.
#include <gtest/gtest.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "search/query.h"

namespace dex::search {
namespace {

using Kind = Expr::Kind;
using LitKind = Literal::Kind;

Query parse_ok(std::string_view text) {
  auto q = parse_query(text);
  EXPECT_TRUE(q.is_ok()) << "'" << text << "': " << q.status().to_string();
  return q.is_ok() ? std::move(q).value() : Query{};
}

// The message of a refused query ("" and a test failure when it parses).
std::string parse_error(std::string_view text) {
  auto q = parse_query(text);
  if (q.is_ok()) {
    ADD_FAILURE() << "'" << text << "' parsed as '" << to_text(q.value()) << "'";
    return "";
  }
  EXPECT_EQ(q.status().code(), Code::kInvalidArgument) << q.status().to_string();
  return q.status().message();
}

Expr where_of(std::string_view text) {
  Query q = parse_ok(text);
  EXPECT_TRUE(q.where.has_value()) << text;
  return q.where.value_or(Expr{});
}

bool same_literal(const Literal& a, const Literal& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case LitKind::kString:
      return a.text == b.text;
    case LitKind::kInt:
      return a.int_value == b.int_value && a.double_value == b.double_value;
    case LitKind::kDouble:
      return a.double_value == b.double_value &&
             std::signbit(a.double_value) == std::signbit(b.double_value);
    case LitKind::kBool:
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
  if (a.kind == Kind::kCompare && a.op != b.op) return false;
  for (size_t i = 0; i < a.children.size(); ++i) {
    if (!same_expr(a.children[i], b.children[i])) return false;
  }
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (!same_literal(a.values[i], b.values[i])) return false;
  }
  return true;
}

testing::AssertionResult same_query(const Query& a, const Query& b) {
  const bool same_where =
      a.where.has_value() == b.where.has_value() && (!a.where || same_expr(*a.where, *b.where));
  if (same_where && a.order.field == b.order.field && a.order.descending == b.order.descending) {
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure()
         << "'" << to_text(a) << "' differs from '" << to_text(b) << "'";
}

Expr leaf(Kind kind, std::string field) {
  Expr e;
  e.kind = kind;
  e.field = std::move(field);
  return e;
}

// ---------------------------------------------------------------------------
// The grammar

TEST(QueryParser, EmptyOrWhitespaceQueryMatchesEveryRunInTheDefaultOrder) {
  for (std::string_view text : {"", " ", " \t\n\r\f\v "}) {
    Query q = parse_ok(text);
    EXPECT_FALSE(q.where.has_value()) << "'" << text << "'";
    EXPECT_TRUE(q.order.field.empty());
    EXPECT_FALSE(q.order.descending);
  }
}

TEST(QueryParser, EveryComparisonOperator) {
  const std::pair<std::string_view, CompareOp> cases[] = {
      {"=", CompareOp::kEq},  {"!=", CompareOp::kNe}, {"<>", CompareOp::kNe}, {"<", CompareOp::kLt},
      {"<=", CompareOp::kLe}, {">", CompareOp::kGt},  {">=", CompareOp::kGe},
  };
  for (const auto& [text, op] : cases) {
    for (const std::string& query :
         {"x " + std::string(text) + " 7", "x" + std::string(text) + "7"}) {
      Expr e = where_of(query);
      EXPECT_EQ(e.kind, Kind::kCompare) << query;
      EXPECT_EQ(e.field, "x");
      EXPECT_EQ(e.op, op) << query;
      ASSERT_EQ(e.values.size(), 1u);
      EXPECT_EQ(e.values[0].int_value, 7);
    }
  }
  EXPECT_EQ(where_of("x<-1").values.at(0).int_value, -1);
  EXPECT_EQ(where_of("x<>-1").op, CompareOp::kNe);
}

TEST(QueryParser, InAndNotIn) {
  Expr in = where_of("status IN ('RUNNING', 'WAITING', 3)");
  EXPECT_EQ(in.kind, Kind::kIn);
  EXPECT_EQ(in.field, "status");
  EXPECT_FALSE(in.negated);
  ASSERT_EQ(in.values.size(), 3u);
  EXPECT_EQ(in.values[0].text, "RUNNING");
  EXPECT_EQ(in.values[1].text, "WAITING");
  EXPECT_EQ(in.values[2].kind, LitKind::kInt);

  Expr not_in = where_of("status not in('DONE')");
  EXPECT_EQ(not_in.kind, Kind::kIn);
  EXPECT_TRUE(not_in.negated);
  ASSERT_EQ(not_in.values.size(), 1u);
  EXPECT_EQ(not_in.values[0].text, "DONE");
}

TEST(QueryParser, BetweenAndNotBetween) {
  Expr b = where_of("retries BETWEEN 1 AND 5 AND ok = TRUE");
  ASSERT_EQ(b.kind, Kind::kAnd) << "the AND of BETWEEN is its own, the next one joins";
  ASSERT_EQ(b.children.size(), 2u);
  const Expr& between = b.children[0];
  EXPECT_EQ(between.kind, Kind::kBetween);
  EXPECT_FALSE(between.negated);
  ASSERT_EQ(between.values.size(), 2u);
  EXPECT_EQ(between.values[0].int_value, 1);
  EXPECT_EQ(between.values[1].int_value, 5);
  EXPECT_EQ(b.children[1].kind, Kind::kCompare);

  Expr nb = where_of("t NOT BETWEEN 'a' AND 'm'");
  EXPECT_EQ(nb.kind, Kind::kBetween);
  EXPECT_TRUE(nb.negated);
  EXPECT_EQ(nb.values.at(1).text, "m");
}

TEST(QueryParser, StartsWith) {
  Expr e = where_of("FlowType STARTS_WITH 'Order'");
  EXPECT_EQ(e.kind, Kind::kStartsWith);
  EXPECT_EQ(e.field, "FlowType");
  ASSERT_EQ(e.values.size(), 1u);
  EXPECT_EQ(e.values[0].text, "Order");
}

TEST(QueryParser, IsNullAndIsNotNull) {
  Expr is_null = where_of("CloseTime IS NULL");
  EXPECT_EQ(is_null.kind, Kind::kIsNull);
  EXPECT_FALSE(is_null.negated);
  EXPECT_TRUE(is_null.values.empty());
  Expr not_null = where_of("CloseTime is not null");
  EXPECT_EQ(not_null.kind, Kind::kIsNull);
  EXPECT_TRUE(not_null.negated);
}

TEST(QueryParser, NotBindsTighterThanAndWhichBindsTighterThanOr) {
  // a OR (b AND (NOT c))
  Expr e = where_of("a = 1 OR b = 2 AND NOT c = 3");
  ASSERT_EQ(e.kind, Kind::kOr);
  ASSERT_EQ(e.children.size(), 2u);
  EXPECT_EQ(e.children[0].field, "a");
  const Expr& conj = e.children[1];
  ASSERT_EQ(conj.kind, Kind::kAnd);
  ASSERT_EQ(conj.children.size(), 2u);
  EXPECT_EQ(conj.children[0].field, "b");
  ASSERT_EQ(conj.children[1].kind, Kind::kNot);
  EXPECT_EQ(conj.children[1].children.at(0).field, "c");

  // (NOT a) AND b
  Expr n = where_of("NOT a = 1 AND b = 2");
  ASSERT_EQ(n.kind, Kind::kAnd);
  EXPECT_EQ(n.children.at(0).kind, Kind::kNot);
  EXPECT_EQ(n.children.at(1).kind, Kind::kCompare);
}

TEST(QueryParser, ParenthesesOverridePrecedence) {
  Expr e = where_of("(a = 1 OR b = 2) AND NOT (c = 3 OR d = 4)");
  ASSERT_EQ(e.kind, Kind::kAnd);
  ASSERT_EQ(e.children.size(), 2u);
  EXPECT_EQ(e.children[0].kind, Kind::kOr);
  ASSERT_EQ(e.children[1].kind, Kind::kNot);
  EXPECT_EQ(e.children[1].children.at(0).kind, Kind::kOr);
  // Redundant parentheses leave no trace.
  EXPECT_TRUE(same_query(parse_ok("((((a = 1))))"), parse_ok("a = 1")));
}

TEST(QueryParser, AndAndOrChainsAreOneNodeEach) {
  Expr e = where_of("a = 1 AND b = 2 AND c = 3 AND d = 4");
  ASSERT_EQ(e.kind, Kind::kAnd);
  EXPECT_EQ(e.children.size(), 4u);
  // Parentheses do not change associativity: one node still.
  Expr p = where_of("(a = 1 OR (b = 2 OR c = 3)) OR d = 4");
  ASSERT_EQ(p.kind, Kind::kOr);
  ASSERT_EQ(p.children.size(), 4u);
  for (const Expr& child : p.children) EXPECT_EQ(child.kind, Kind::kCompare);
  // Alternating kinds stay nested, each with two or more children.
  Expr m = where_of("a = 1 AND (b = 2 OR c = 3 AND d = 4)");
  ASSERT_EQ(m.kind, Kind::kAnd);
  ASSERT_EQ(m.children.size(), 2u);
  ASSERT_EQ(m.children[1].kind, Kind::kOr);
  ASSERT_EQ(m.children[1].children.size(), 2u);
  EXPECT_EQ(m.children[1].children[1].kind, Kind::kAnd);
  EXPECT_EQ(m.children[1].children[1].children.size(), 2u);
  // NOT is kept as written: NOT NOT is two nodes.
  Expr nn = where_of("NOT NOT a = 1");
  ASSERT_EQ(nn.kind, Kind::kNot);
  EXPECT_EQ(nn.children.at(0).kind, Kind::kNot);
}

TEST(QueryParser, OrderByAscDesc) {
  Query q = parse_ok("a = 1 ORDER BY StartTime DESC");
  ASSERT_TRUE(q.where.has_value());
  EXPECT_EQ(q.order.field, "StartTime");
  EXPECT_TRUE(q.order.descending);
  EXPECT_EQ(q.order.pos, 15u);

  Query asc = parse_ok("a = 1 order by `Close Time` asc");
  EXPECT_EQ(asc.order.field, "Close Time");
  EXPECT_FALSE(asc.order.descending);

  Query plain = parse_ok("a = 1 ORDER BY x");
  EXPECT_EQ(plain.order.field, "x");
  EXPECT_FALSE(plain.order.descending);
}

TEST(QueryParser, OrderByAloneOrdersEveryRun) {
  Query q = parse_ok("ORDER BY CloseTime DESC");
  EXPECT_FALSE(q.where.has_value());
  EXPECT_EQ(q.order.field, "CloseTime");
  EXPECT_TRUE(q.order.descending);
  EXPECT_EQ(q.order.pos, 9u);
  EXPECT_EQ(parse_ok("  order by x").order.field, "x");
}

TEST(QueryParser, LiteralsAreTyped) {
  auto value = [](std::string_view text) {
    return where_of("x = " + std::string(text)).values.at(0);
  };
  Literal i = value("42");
  EXPECT_EQ(i.kind, LitKind::kInt);
  EXPECT_EQ(i.int_value, 42);
  EXPECT_EQ(i.double_value, 42.0) << "an integer carries its double value too";
  EXPECT_EQ(value("-17").int_value, -17);
  EXPECT_EQ(value("007").int_value, 7);
  EXPECT_EQ(value("9223372036854775807").int_value, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(value("-9223372036854775808").int_value, std::numeric_limits<int64_t>::min());
  Literal zero = value("-0");
  EXPECT_EQ(zero.kind, LitKind::kInt);
  EXPECT_EQ(zero.int_value, 0);

  const std::pair<std::string_view, double> doubles[] = {
      {"2.5", 2.5},
      {"-0.125", -0.125},
      {"1e3", 1000.0},
      {"1E-2", 0.01},
      {"6.02e+23", 6.02e23},
      {"1.0", 1.0},
      {"9223372036854775808.0", 9223372036854775808.0},
  };
  for (const auto& [text, expected] : doubles) {
    Literal d = value(text);
    EXPECT_EQ(d.kind, LitKind::kDouble) << text;
    EXPECT_EQ(d.double_value, expected) << text;
  }
  EXPECT_TRUE(std::signbit(value("-0.0").double_value));

  Literal t = value("TRUE");
  EXPECT_EQ(t.kind, LitKind::kBool);
  EXPECT_TRUE(t.bool_value);
  Literal f = value("false");
  EXPECT_EQ(f.kind, LitKind::kBool);
  EXPECT_FALSE(f.bool_value);

  Literal s = value("'12'");
  EXPECT_EQ(s.kind, LitKind::kString);
  EXPECT_EQ(s.text, "12");
  EXPECT_EQ(value("''").text, "");
}

TEST(QueryParser, StringEscapes) {
  auto text_of = [](std::string_view query) { return where_of(query).values.at(0).text; };
  EXPECT_EQ(text_of(R"(x = 'a\\b')"), "a\\b");
  EXPECT_EQ(text_of(R"(x = 'it\'s')"), "it's");
  EXPECT_EQ(text_of(R"(x = 'it''s')"), "it's");
  EXPECT_EQ(text_of(R"(x = 'say "hi"')"), "say \"hi\"");
  EXPECT_EQ(text_of(R"(x = "say \"hi\"")"), "say \"hi\"");
  EXPECT_EQ(text_of(R"(x = "say ""hi""")"), "say \"hi\"");
  EXPECT_EQ(text_of(R"(x = "it's")"), "it's");
  EXPECT_EQ(text_of(R"(x = 'line\nnext\tcell')"), "line\nnext\tcell");
  EXPECT_EQ(text_of("x = 'raw\nnewline'"), "raw\nnewline");
  EXPECT_EQ(text_of("x = 'caf\xc3\xa9'"), "caf\xc3\xa9");
  EXPECT_EQ(text_of(std::string_view("x = 'nul\0byte'", 14)), std::string("nul\0byte", 8));
  EXPECT_EQ(text_of("x = '`AND` OR'"), "`AND` OR");
}

TEST(QueryParser, BackquotedFields) {
  EXPECT_EQ(where_of("`Customer Name` = 'ann'").field, "Customer Name");
  EXPECT_EQ(where_of("`order` = 1").field, "order") << "a keyword as a field";
  EXPECT_EQ(where_of("`a``b` = 1").field, "a`b") << "a doubled backquote is one";
  EXPECT_EQ(where_of("```` = 1").field, "`");
  EXPECT_EQ(where_of("`caf\xc3\xa9 = 'x'` IS NULL").field, "caf\xc3\xa9 = 'x'");
  EXPECT_EQ(parse_ok("ORDER BY `by`").order.field, "by");
}

TEST(QueryParser, IdentifiersTakeLettersDigitsUnderscoresDotsAndDashes) {
  EXPECT_EQ(where_of("attr.customer-id_2 = 1").field, "attr.customer-id_2");
  EXPECT_EQ(where_of("_x = 1").field, "_x");
  EXPECT_EQ(where_of("x.y.z IS NULL").field, "x.y.z");
}

TEST(QueryParser, KeywordsAreCaseInsensitive) {
  const Query upper = parse_ok(
      "NOT a IN (1) AND b NOT BETWEEN 1 AND 2 OR c STARTS_WITH 'x' AND d IS NOT NULL AND "
      "e = TRUE AND f = FALSE ORDER BY g DESC");
  const Query lower = parse_ok(
      "not a in (1) and b not between 1 and 2 or c starts_with 'x' and d is not null and "
      "e = true and f = false order by g desc");
  const Query mixed = parse_ok(
      "nOt a In (1) AnD b NoT bEtWeEn 1 aNd 2 Or c StArTs_WiTh 'x' aND d iS nOT nULL And "
      "e = True AND f = fALSE OrDeR bY g DeSc");
  EXPECT_TRUE(same_query(upper, lower));
  EXPECT_TRUE(same_query(upper, mixed));
  EXPECT_TRUE(same_query(parse_ok("x = 1 ORDER BY y Asc"), parse_ok("x = 1 ORDER BY y")));
}

TEST(QueryParser, KeywordsAreNotFields) {
  for (std::string_view keyword : {"and", "Or", "not", "IN", "between", "starts_with", "is", "null",
                                   "by", "asc", "Desc", "true", "FALSE"}) {
    EXPECT_FALSE(parse_query(std::string(keyword) + " = 1").is_ok()) << keyword;
    EXPECT_TRUE(parse_query("`" + std::string(keyword) + "` = 1").is_ok()) << keyword;
  }
  // Only whole words are keywords.
  EXPECT_EQ(where_of("order_id = 1").field, "order_id");
  EXPECT_EQ(where_of("Notes = 1").field, "Notes");
  EXPECT_EQ(where_of("is.null = 1").field, "is.null");
}

TEST(QueryParser, PositionsAreByteOffsetsWhereEachPartStarts) {
  //                     0         1         2
  //                     0123456789012345678901234567
  Query q = parse_ok("a = 1 AND NOT (b IN (2, 'x'))");
  ASSERT_TRUE(q.where.has_value());
  const Expr& conj = *q.where;
  EXPECT_EQ(conj.pos, 0u);
  const Expr& a = conj.children.at(0);
  EXPECT_EQ(a.pos, 0u);
  EXPECT_EQ(a.values.at(0).pos, 4u);
  const Expr& neg = conj.children.at(1);
  EXPECT_EQ(neg.kind, Kind::kNot);
  EXPECT_EQ(neg.pos, 10u);
  const Expr& in = neg.children.at(0);
  EXPECT_EQ(in.pos, 15u);
  EXPECT_EQ(in.values.at(0).pos, 21u);
  EXPECT_EQ(in.values.at(1).pos, 24u);
  // Bytes, not characters: é is two.
  Query u = parse_ok("`caf\xc3\xa9` = TRUE");
  EXPECT_EQ(u.where->values.at(0).pos, 10u);
  EXPECT_EQ(where_of("  x IS NULL").pos, 2u);
}

// ---------------------------------------------------------------------------
// Errors: "query: at position N: expected X, found Y", N counting bytes from 1.

struct ErrorCase {
  std::string_view query;
  std::string_view message;
};

constexpr std::string_view kLiteral = "a literal (a string, a number, TRUE or FALSE)";
constexpr std::string_view kPredicate =
    "a comparison (= != <> < <= > >=), IN, NOT IN, BETWEEN, NOT BETWEEN, STARTS_WITH or IS";

TEST(QueryParserErrors, NameThePositionWhatWasExpectedAndWhatWasFound) {
  const ErrorCase cases[] = {
      {"status = 'a' AND",
       "at position 17: expected a field, NOT or '(', found the end of the query"},
      {"= 1", "at position 1: expected a field, NOT or '(', found '='"},
      {"NOT", "at position 4: expected a field, NOT or '(', found the end of the query"},
      {"TRUE", "at position 1: expected a field, NOT or '(', found 'TRUE'"},
      {"x NOT = 1", "at position 7: expected IN or BETWEEN, found '='"},
      {"x NOT STARTS_WITH 'a'", "at position 7: expected IN or BETWEEN, found 'STARTS_WITH'"},
      {"x IN 1", "at position 6: expected '(', found '1'"},
      {"x IN (1 2)", "at position 9: expected ',' or ')', found '2'"},
      {"x BETWEEN 1 OR 2", "at position 13: expected AND, found 'OR'"},
      {"x IS 1", "at position 6: expected NULL or NOT NULL, found '1'"},
      {"x IS NOT TRUE", "at position 10: expected NULL, found 'TRUE'"},
      {"(x = 1", "at position 7: expected AND, OR or ')', found the end of the query"},
      {"(x = 1 y", "at position 8: expected AND, OR or ')', found 'y'"},
      {"x = 1)", "at position 6: expected AND, OR, ORDER BY or the end of the query, found ')'"},
      {"x = 1 y = 2",
       "at position 7: expected AND, OR, ORDER BY or the end of the query, found 'y'"},
      {"ORDER x", "at position 7: expected BY, found 'x'"},
      {"order = 1", "at position 7: expected BY, found '='"},
      {"ORDER BY", "at position 9: expected a field, found the end of the query"},
      {"ORDER BY 'x'", "at position 10: expected a field, found 'x'"},
      {"ORDER BY x y", "at position 12: expected ASC, DESC or the end of the query, found 'y'"},
      {"x = 1 ORDER BY y AND z = 2",
       "at position 18: expected ASC, DESC or the end of the query, found 'AND'"},
      {"ORDER BY x DESC y", "at position 17: expected the end of the query, found 'y'"},
      {"ORDER BY x ASC,", "at position 15: expected the end of the query, found ','"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_error(c.query), "query: " + std::string(c.message)) << c.query;
  }
  const std::string lit(kLiteral);
  const std::string pred(kPredicate);
  EXPECT_EQ(parse_error("status ="),
            "query: at position 9: expected " + lit + ", found the end of the query");
  EXPECT_EQ(parse_error("x IN (1,"),
            "query: at position 9: expected " + lit + ", found the end of the query");
  EXPECT_EQ(parse_error("x IN ()"), "query: at position 7: expected " + lit + ", found ')'");
  EXPECT_EQ(parse_error("x = y"), "query: at position 5: expected " + lit + ", found 'y'");
  EXPECT_EQ(parse_error("x STARTS_WITH"),
            "query: at position 14: expected " + lit + ", found the end of the query");
  EXPECT_EQ(parse_error("x # 1"), "query: at position 3: expected " + pred + ", found '#'");
  EXPECT_EQ(parse_error("x ! 1"), "query: at position 3: expected " + pred + ", found '!'");
  EXPECT_EQ(parse_error("status 'a'"), "query: at position 8: expected " + pred + ", found 'a'");
  EXPECT_EQ(parse_error("x \"a\""), "query: at position 3: expected " + pred + ", found \"a\"");
}

TEST(QueryParserErrors, PositionsCountBytes) {
  // ` ü ` = ' ä ' AND #: ü and ä are two bytes each, so # is byte 17.
  EXPECT_EQ(parse_error("`\xc3\xbc` = '\xc3\xa4' AND #"),
            "query: at position 17: expected a field, NOT or '(', found '#'");
}

TEST(QueryParserErrors, FoundTextIsPrintableAndShort) {
  EXPECT_EQ(parse_error("x = \x01"),
            "query: at position 5: expected " + std::string(kLiteral) + ", found '\\x01'");
  EXPECT_EQ(parse_error("x = \xc3\xa9"),
            "query: at position 5: expected " + std::string(kLiteral) + ", found '\\xc3'");
  const std::string long_word(60, 'w');
  EXPECT_EQ(parse_error("x = " + long_word), "query: at position 5: expected " +
                                                 std::string(kLiteral) + ", found '" +
                                                 std::string(40, 'w') + "...'");
}

TEST(QueryParserErrors, MalformedTokens) {
  const ErrorCase cases[] = {
      {"x = 'abc",
       "at position 9: expected the closing ' of the string at position 5, found the end of the "
       "query"},
      {"x = \"abc",
       "at position 9: expected the closing \" of the string at position 5, found the end of the "
       "query"},
      {"x = 'it''",
       "at position 10: expected the closing ' of the string at position 5, found "
       "the end of the query"},
      {"`abc = 1",
       "at position 9: expected the closing ` of the field at position 1, found the end of the "
       "query"},
      {"`` = 1", "at position 1: expected a field name between the backquotes, found ``"},
      {R"(x = 'a\qb')", R"(at position 7: expected an escape (\\ \' \" \n or \t), found '\q')"},
      {R"(x = 'a\)", R"(at position 7: expected an escape (\\ \' \" \n or \t), found '\')"},
      {"x = -", "at position 6: expected a digit after '-', found the end of the query"},
      {"x = - 1", "at position 6: expected a digit after '-', found ' '"},
      {"x = -.5", "at position 6: expected a digit after '-', found '.'"},
      {"x = 1.", "at position 7: expected a digit after '.', found the end of the query"},
      {"x = 1.e5", "at position 7: expected a digit after '.', found 'e'"},
      {"x = 1e+", "at position 8: expected a digit in the exponent, found the end of the query"},
      {"x = 1e AND", "at position 7: expected a digit in the exponent, found ' '"},
      {"x = 12abc", "at position 5: expected a number, found '12abc'"},
      {"x = 1.5.3", "at position 5: expected a number, found '1.5.3'"},
      {"x = 1-2", "at position 5: expected a number, found '1-2'"},
      {"x = 9223372036854775808",
       "at position 5: the number 9223372036854775808 does not fit a 64-bit integer (write "
       "9223372036854775808.0 for a floating-point number)"},
      {"x IN (1, -9223372036854775809)",
       "at position 10: the number -9223372036854775809 does not fit a 64-bit integer (write "
       "-9223372036854775809.0 for a floating-point number)"},
      {"x = 1e999", "at position 5: the number 1e999 is out of the range of a double"},
      {"x = -1e999", "at position 5: the number -1e999 is out of the range of a double"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_error(c.query), "query: " + std::string(c.message)) << c.query;
  }
}

TEST(QueryParserErrors, TheFirstProblemInReadingOrderIsReported) {
  // The unterminated string comes after the parse error, so it is never read.
  EXPECT_EQ(parse_error("x = = 'abc"),
            "query: at position 5: expected " + std::string(kLiteral) + ", found '='");
}

// ---------------------------------------------------------------------------
// Limits

std::string repeat(std::string_view piece, size_t n, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += separator;
    out += piece;
  }
  return out;
}

TEST(QueryLimits, QueryBytes) {
  std::string at_limit = "a = 1";
  at_limit.resize(kQueryBytesMax, ' ');
  EXPECT_TRUE(parse_query(at_limit).is_ok());
  std::string over = at_limit + " ";
  EXPECT_EQ(parse_error(over), "query: 16385 bytes, more than the limit of 16384 bytes");
  // The length is checked before anything is read.
  EXPECT_EQ(parse_error(std::string(kQueryBytesMax + 1, '#')),
            "query: 16385 bytes, more than the limit of 16384 bytes");
}

TEST(QueryLimits, NestingDepth) {
  const size_t max = kQueryDepthMax;
  EXPECT_TRUE(parse_query(std::string(max, '(') + "a = 1" + std::string(max, ')')).is_ok());
  EXPECT_EQ(parse_error(std::string(max + 1, '(') + "a = 1" + std::string(max + 1, ')')),
            "query: at position 33: more than 32 nested parentheses and NOTs (the query depth "
            "limit)");
  EXPECT_TRUE(parse_query(repeat("NOT", max, " ") + " a = 1").is_ok());
  EXPECT_EQ(parse_error(repeat("NOT", max + 1, " ") + " a = 1"),
            "query: at position 129: more than 32 nested parentheses and NOTs (the query depth "
            "limit)");
  // Parentheses and NOTs count together; siblings do not add up.
  EXPECT_TRUE(
      parse_query(repeat("NOT (", max / 2, "") + "a = 1" + std::string(max / 2, ')')).is_ok());
  EXPECT_FALSE(
      parse_query(repeat("NOT (", max / 2, "") + "NOT a = 1" + std::string(max / 2, ')')).is_ok());
  const std::string deep = std::string(max, '(') + "a = 1" + std::string(max, ')');
  EXPECT_TRUE(parse_query(repeat(deep, 50, " AND ")).is_ok());
  // An unclosed flood stops at the limit instead of recursing further.
  EXPECT_FALSE(parse_query(std::string(kQueryBytesMax, '(')).is_ok());
  EXPECT_FALSE(parse_query(repeat("NOT", kQueryBytesMax / 4, " ")).is_ok());
}

TEST(QueryLimits, ValuesInOneInList) {
  const std::string at_limit = "x IN (" + repeat("1", kInValuesMax, ",") + ")";
  Query q = parse_ok(at_limit);
  ASSERT_TRUE(q.where.has_value());
  EXPECT_EQ(q.where->values.size(), kInValuesMax);
  // The 1001st value starts at byte 6 + 2 * 1000 (0-based).
  EXPECT_EQ(parse_error("x IN (" + repeat("1", kInValuesMax + 1, ",") + ")"),
            "query: at position 2007: more than 1000 values in one IN list");
}

TEST(QueryLimits, PredicatesInOneQuery) {
  EXPECT_TRUE(parse_query(repeat("a=1", kPredicatesMax, " OR ")).is_ok());
  // The 257th predicate starts at byte 256 * 7 (0-based).
  EXPECT_EQ(parse_error(repeat("a=1", kPredicatesMax + 1, " OR ")),
            "query: at position 1793: more than 256 predicates in one query");
  // Every kind of predicate counts, nested or not.
  EXPECT_FALSE(parse_query("NOT (" + repeat("a IS NULL", kPredicatesMax / 2, " AND ") + ") OR (" +
                           repeat("b IN (1, 2)", kPredicatesMax / 2 + 1, " OR ") + ")")
                   .is_ok());
}

// ---------------------------------------------------------------------------
// to_text

TEST(QueryText, WritesTheCanonicalForm) {
  const ErrorCase cases[] = {
      {"", ""},
      {"   ", ""},
      {"a=1 and (b=2 or c=3)", "a = 1 AND (b = 2 OR c = 3)"},
      {"a=1 or b=2 and c=3", "a = 1 OR b = 2 AND c = 3"},
      {"(a=1 or b=2) or (c=3)", "a = 1 OR b = 2 OR c = 3"},
      {"not (a=1 or b=2)", "NOT (a = 1 OR b = 2)"},
      {"not (a=1 and b=2)", "NOT (a = 1 AND b = 2)"},
      {"not not a is null", "NOT NOT a IS NULL"},
      {"not (not (a is not null))", "NOT NOT a IS NOT NULL"},
      {"x <> 'it''s'", R"(x != 'it\'s')"},
      {R"(x = "say \"hi\"\n\ttab\\")", R"(x = 'say "hi"\n\ttab\\')"},
      {"x in (1,2.5,-3e2,true,1e21,0.1, 100.0)", "x IN (1, 2.5, -300.0, TRUE, 1e+21, 0.1, 100.0)"},
      {"x not in ('a')", "x NOT IN ('a')"},
      {"x between -1 and 2.5e-8", "x BETWEEN -1 AND 2.5e-08"},
      {"x not between 'a' and 'b'", "x NOT BETWEEN 'a' AND 'b'"},
      {"x starts_with \"Ord\"", "x STARTS_WITH 'Ord'"},
      {"`order` = 1 order by `select me` desc", "`order` = 1 ORDER BY `select me` DESC"},
      {"order by x", "ORDER BY x ASC"},
      {"`a``b` = false", "`a``b` = FALSE"},
      {"`plain` = 1", "plain = 1"},
      {"`1x` = 1", "`1x` = 1"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(to_text(parse_ok(c.query)), c.message) << c.query;
  }
}

TEST(QueryText, CompareOpText) {
  EXPECT_EQ(compare_op_text(CompareOp::kEq), "=");
  EXPECT_EQ(compare_op_text(CompareOp::kNe), "!=");
  EXPECT_EQ(compare_op_text(CompareOp::kLt), "<");
  EXPECT_EQ(compare_op_text(CompareOp::kLe), "<=");
  EXPECT_EQ(compare_op_text(CompareOp::kGt), ">");
  EXPECT_EQ(compare_op_text(CompareOp::kGe), ">=");
}

TEST(QueryText, AStringLiteralReadsBackAsItsValue) {
  for (std::string_view value : {"", "plain", "it's", "back\\slash", "two\nlines\ttab", "\"q\"",
                                 "caf\xc3\xa9", "--", "a' OR FlowId != '"}) {
    const std::string text = "FlowId = " + string_literal(value);
    Query q = parse_ok(text);
    ASSERT_TRUE(q.where.has_value()) << text;
    ASSERT_EQ(q.where->kind, Kind::kCompare) << text;
    EXPECT_EQ(q.where->values.at(0).text, value) << text;
  }
}

TEST(QueryText, BackquotesEveryFieldThatWouldNotReadBack) {
  for (std::string_view field : {"ORDER", "and", "Starts_With", "null", "with space", "1st", "-x",
                                 ".x", "a`b", "`", "caf\xc3\xa9", "a=b", "x'y", "tab\there"}) {
    Query q;
    q.where = leaf(Kind::kIsNull, std::string(field));
    q.order.field = std::string(field);
    const std::string text = to_text(q);
    EXPECT_EQ(text.front(), '`') << text;
    EXPECT_TRUE(same_query(parse_ok(text), q)) << text;
  }
}

TEST(QueryText, WritesHandBuiltTreesThatReadBack) {
  Query q;
  Expr conj;
  conj.kind = Kind::kAnd;
  Expr cmp = leaf(Kind::kCompare, "n");
  cmp.op = CompareOp::kGe;
  Literal d;
  d.kind = LitKind::kDouble;
  d.double_value = 3.0;
  cmp.values.push_back(d);
  conj.children.push_back(cmp);
  Expr sw = leaf(Kind::kStartsWith, "s");
  Literal s;
  s.text = std::string("\0'\\\n", 4);
  sw.values.push_back(s);
  conj.children.push_back(sw);
  q.where = conj;
  EXPECT_EQ(to_text(q), std::string("n >= 3.0 AND s STARTS_WITH '") + '\0' + "\\'\\\\\\n'");
  EXPECT_TRUE(same_query(parse_ok(to_text(q)), q));
}

// ---------------------------------------------------------------------------
// The round trip over random queries

// A random query text with the tree it must parse to. Surface choices vary
// (keyword case, spacing, quotes, escapes, number forms, backquotes, redundant
// parentheses) while the tree is fixed, so the parser is checked against the
// generator's own view of the grammar, and to_text against the parser.
class QueryGen {
 public:
  explicit QueryGen(uint64_t seed) : rng_(seed) {}

  // One query: text and expected tree.
  std::pair<std::string, Query> query() {
    predicates_ = 0;
    std::pair<std::string, Query> out;
    if (pick(8) != 0) {
      Piece p = expr(0);
      out.first = p.text;
      out.second.where = std::move(p.tree);
    }
    if (pick(3) == 0) {
      const std::string f = field_name();
      out.first += sep() + word("ORDER") + gap() + word("BY") + gap() + field_text(f);
      out.second.order.field = f;
      const int dir = pick(3);
      if (dir > 0) out.first += gap() + word(dir == 1 ? "ASC" : "DESC");
      out.second.order.descending = dir == 2;
    }
    out.first = pad() + out.first + pad();
    return out;
  }

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

 private:
  // Binding strength of a written piece: OR 0, AND 1, a unary or predicate 2.
  struct Piece {
    std::string text;
    Expr tree;
    int binds = 2;
  };

  Piece expr(int depth) {
    const int choice = (depth >= 4 || predicates_ > 40) ? 3 : pick(6);
    Piece p;
    if (choice == 0 || choice == 1) {
      p = chain(depth, choice == 0 ? Kind::kAnd : Kind::kOr);
    } else if (choice == 2) {
      Piece inner = operand(expr(depth + 1), 2);
      p.text = word("NOT") + (inner.text.front() == '(' ? pad() : gap()) + inner.text;
      p.tree.kind = Kind::kNot;
      p.tree.children.push_back(std::move(inner.tree));
    } else {
      p = predicate();
    }
    if (pick(10) == 0) p = parenthesized(std::move(p));
    return p;
  }

  Piece chain(int depth, Kind kind) {
    Piece p;
    p.tree.kind = kind;
    p.binds = kind == Kind::kOr ? 0 : 1;
    const int n = 2 + pick(3);
    for (int i = 0; i < n; ++i) {
      Piece child = operand(expr(depth + 1), p.binds + 1);
      if (i > 0) p.text += gap() + word(kind == Kind::kAnd ? "AND" : "OR") + gap();
      p.text += child.text;
      // AND and OR are one node per chain: a child of the same kind joins it.
      if (child.tree.kind == kind) {
        for (Expr& e : child.tree.children) p.tree.children.push_back(std::move(e));
      } else {
        p.tree.children.push_back(std::move(child.tree));
      }
    }
    return p;
  }

  // A piece used where at least `binds` is needed: parenthesized if weaker.
  Piece operand(Piece p, int binds) {
    return p.binds < binds ? parenthesized(std::move(p)) : std::move(p);
  }

  Piece parenthesized(Piece p) {
    p.text = "(" + pad() + p.text + pad() + ")";
    p.binds = 2;
    return p;
  }

  Piece predicate() {
    ++predicates_;
    Piece p;
    const std::string f = field_name();
    p.tree.field = f;
    p.text = field_text(f);
    switch (pick(5)) {
      case 0:
        compare(p);
        break;
      case 1:
        in_list(p);
        break;
      case 2:
        p.tree.kind = Kind::kBetween;
        p.tree.negated = pick(2) == 0;
        p.text += gap() + (p.tree.negated ? word("NOT") + gap() : "") + word("BETWEEN") + gap();
        p.text += literal(p.tree);  // the bounds in order: one statement each
        p.text += gap() + word("AND") + gap();
        p.text += literal(p.tree);
        break;
      case 3:
        p.tree.kind = Kind::kStartsWith;
        p.text += gap() + word("STARTS_WITH") + gap() + literal(p.tree);
        break;
      default:
        p.tree.kind = Kind::kIsNull;
        p.tree.negated = pick(2) == 0;
        p.text +=
            gap() + word("IS") + gap() + (p.tree.negated ? word("NOT") + gap() : "") + word("NULL");
        break;
    }
    return p;
  }

  void compare(Piece& p) {
    static const std::pair<std::string_view, CompareOp> ops[] = {
        {"=", CompareOp::kEq},  {"!=", CompareOp::kNe}, {"<>", CompareOp::kNe},
        {"<", CompareOp::kLt},  {"<=", CompareOp::kLe}, {">", CompareOp::kGt},
        {">=", CompareOp::kGe},
    };
    const auto& [text, op] = ops[pick(7)];
    p.tree.kind = Kind::kCompare;
    p.tree.op = op;
    p.text += pad() + std::string(text) + pad() + literal(p.tree);
  }

  void in_list(Piece& p) {
    p.tree.kind = Kind::kIn;
    p.tree.negated = pick(2) == 0;
    p.text += gap() + (p.tree.negated ? word("NOT") + gap() : "") + word("IN") + pad() + "(";
    const int n = 1 + pick(4);
    for (int i = 0; i < n; ++i) p.text += (i > 0 ? pad() + "," : "") + pad() + literal(p.tree);
    p.text += pad() + ")";
  }

  // Appends a random literal to tree.values and returns how it is written.
  std::string literal(Expr& tree) {
    Literal& lit = tree.values.emplace_back();
    switch (pick(4)) {
      case 0:
        return string_literal(lit);
      case 1:
        return int_literal(lit);
      case 2:
        return double_literal(lit);
      default:
        lit.kind = LitKind::kBool;
        lit.bool_value = pick(2) == 0;
        return word(lit.bool_value ? "TRUE" : "FALSE");
    }
  }

  std::string string_literal(Literal& lit) {
    static const std::string_view pieces[] = {"a", "Z",   " ", "'", "\"",       "\\", "\n", "\t",
                                              "`", "AND", "(", ")", "\xc3\xa9", "%",  "0"};
    lit.kind = LitKind::kString;
    const int n = pick(6);
    for (int i = 0; i < n; ++i) lit.text += pieces[pick(15)];
    const char quote = pick(2) == 0 ? '\'' : '"';
    std::string out(1, quote);
    for (char c : lit.text) {
      if (c == quote) {
        out += pick(2) == 0 ? std::string(2, quote) : std::string("\\") + quote;
      } else if (c == '\\') {
        out += "\\\\";
      } else if ((c == '\n' || c == '\t') && pick(2) == 0) {
        out += c == '\n' ? "\\n" : "\\t";
      } else if ((c == '\'' || c == '"') && pick(3) == 0) {
        out += std::string("\\") + c;
      } else {
        out.push_back(c);
      }
    }
    return out + quote;
  }

  std::string int_literal(Literal& lit) {
    static const int64_t edges[] = {
        0, 1, -1, 42, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    lit.kind = LitKind::kInt;
    lit.int_value = pick(3) == 0 ? edges[pick(6)] : static_cast<int64_t>(rng_()) >> pick(63);
    lit.double_value = static_cast<double>(lit.int_value);
    return (pick(8) == 0 && lit.int_value >= 0 ? "00" : "") + std::to_string(lit.int_value);
  }

  std::string double_literal(Literal& lit) {
    static const double edges[] = {0.0, -0.0, 0.5, -2.25, 1e300, 5e-324, 1e21, 123456.789};
    lit.kind = LitKind::kDouble;
    if (pick(3) == 0) {
      lit.double_value = edges[pick(8)];
    } else {
      const double mantissa = static_cast<double>(rng_() >> 11) / 9007199254740992.0;
      lit.double_value = std::ldexp(pick(2) == 0 ? mantissa : -mantissa, pick(200) - 100);
    }
    char buf[64];
    const auto r = pick(2) == 0 ? std::to_chars(buf, buf + sizeof buf, lit.double_value)
                                : std::to_chars(buf, buf + sizeof buf, lit.double_value,
                                                std::chars_format::scientific);
    std::string text(buf, r.ptr);
    if (text.find_first_of(".e") == std::string::npos) text += pick(2) == 0 ? ".0" : "e0";
    if (pick(2) == 0) {
      for (char& c : text) c = c == 'e' ? 'E' : c;
    }
    return text;
  }

  std::string field_name() {
    static const std::string_view names[] = {
        "Status", "FlowType", "attr.customer-id", "_x9",  "order",    "Not", "with space",
        "a`b",    "1st",      "caf\xc3\xa9",      "by_x", "StartTime"};
    return std::string(names[pick(12)]);
  }

  std::string field_text(const std::string& name) {
    const bool plain = name == "Status" || name == "FlowType" || name == "attr.customer-id" ||
                       name == "_x9" || name == "by_x" || name == "StartTime";
    if (plain && pick(4) != 0) return name;
    std::string out = "`";
    for (char c : name) out += c == '`' ? std::string("``") : std::string(1, c);
    return out + "`";
  }

  // A keyword in random case.
  std::string word(std::string_view upper) {
    std::string out(upper);
    const int style = pick(3);
    for (char& c : out) {
      if (style == 1 || (style == 2 && pick(2) == 0)) c = static_cast<char>(std::tolower(c));
    }
    return out;
  }

  std::string gap() {  // one or more blanks: between words
    static const std::string_view blanks[] = {" ", " ", "  ", "\t", "\n", " \r\n "};
    return std::string(blanks[pick(6)]);
  }
  std::string pad() { return pick(2) == 0 ? "" : gap(); }  // around symbols
  std::string sep() { return gap(); }

  std::mt19937_64 rng_;
  int predicates_ = 0;
};

TEST(QueryRoundTrip, RandomQueriesParseAsGeneratedAndReadBackFromTheirText) {
  QueryGen gen(20261203);
  for (int i = 0; i < 4000; ++i) {
    const auto [text, expected] = gen.query();
    SCOPED_TRACE("query " + std::to_string(i) + ": " + text);
    auto parsed = parse_query(text);
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
    ASSERT_TRUE(same_query(parsed.value(), expected));
    const std::string canonical = to_text(parsed.value());
    auto again = parse_query(canonical);
    ASSERT_TRUE(again.is_ok()) << canonical << ": " << again.status().to_string();
    ASSERT_TRUE(same_query(again.value(), parsed.value())) << canonical;
    EXPECT_EQ(to_text(again.value()), canonical);
  }
}

// Damaged queries: parse answers a value or INVALID_ARGUMENT naming a
// position or a limit, never a crash; what parses reads back from to_text.
TEST(QueryRoundTrip, MutatedQueriesAreRefusedOrReadBack) {
  QueryGen gen(7);
  static const std::string_view inserts[] = {"(", ")", "'",     "\"",   "`",     "\\",   ",",
                                             "-", ".", "e",     "NOT ", " AND ", " OR ", "=",
                                             "<", "!", " IN (", "9",    " "};
  size_t parsed = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = gen.query().first;
    const int mutations = 1 + gen.pick(4);
    for (int m = 0; m < mutations && !text.empty(); ++m) {
      const size_t at = static_cast<size_t>(gen.pick(static_cast<int>(text.size())));
      switch (gen.pick(4)) {
        case 0:
          text.erase(at, 1 + static_cast<size_t>(gen.pick(3)));
          break;
        case 1:
          text.insert(at, std::string(inserts[gen.pick(19)]));
          break;
        case 2:
          text[at] = static_cast<char>(gen.pick(256));
          break;
        default:
          text.insert(at, text.substr(at, static_cast<size_t>(gen.pick(12))));
          break;
      }
    }
    SCOPED_TRACE("mutated query " + std::to_string(i) + ": " + text);
    auto q = parse_query(text);
    if (!q.is_ok()) {
      EXPECT_EQ(q.status().code(), Code::kInvalidArgument);
      EXPECT_EQ(q.status().message().rfind("query: ", 0), 0u) << q.status().message();
      continue;
    }
    ++parsed;
    const std::string canonical = to_text(q.value());
    auto again = parse_query(canonical);
    ASSERT_TRUE(again.is_ok()) << canonical << ": " << again.status().to_string();
    ASSERT_TRUE(same_query(again.value(), q.value())) << canonical;
  }
  EXPECT_GT(parsed, 100u) << "the mutations should leave some queries valid";
}

TEST(QueryRoundTrip, QueriesAtTheLimitsReadBack) {
  // 32 levels alternating OR and AND: to_text writes no more parentheses than
  // the query had, or it could not read back at the depth limit.
  std::string deep = "z = 0";
  for (size_t i = 0; i < kQueryDepthMax; ++i) {
    deep = (i % 2 == 0 ? "a = 1 OR b = 2 AND (" : "c = 3 AND (d = 4 OR ") + deep + ")";
  }
  Query q = parse_ok(deep);
  Query again = parse_ok(to_text(q));
  EXPECT_TRUE(same_query(again, q));

  const std::string nots = repeat("NOT", kQueryDepthMax - 1, " ") + " (a = 1 OR b = 2)";
  EXPECT_TRUE(same_query(parse_ok(to_text(parse_ok(nots))), parse_ok(nots)));
  const std::string many = repeat("a IN (" + repeat("1", kInValuesMax / 4, ",") + ")", 4, " AND ");
  EXPECT_TRUE(same_query(parse_ok(to_text(parse_ok(many))), parse_ok(many)));
}

}  // namespace
}  // namespace dex::search
