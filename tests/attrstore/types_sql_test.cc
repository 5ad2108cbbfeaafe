// The type contract against real tables (docs/attribute-store-types.md):
// every type fits the columns it should, lands with the right value (read
// back through a plain session), and every misfit is named; a value the
// database refuses fails the transaction as Permanent without its value.
#include <cmath>
#include <limits>

#include "sql_fixture.h"

namespace dex::attrstore::testing {
namespace {

constexpr int64_t kT = 1700000000123;  // 2023-11-14 22:13:20.123 UTC

struct Fit {
  std::string column;
  std::optional<flow::AttributeValue> value;
  std::string read;      // the expression read back
  std::string expected;  // its text
};

struct Misfit {
  std::string column;
  std::optional<flow::AttributeValue> value;
  std::string reason;  // a part of misfit()'s answer
};

flow::AttributeValue blob_ref() {
  flow::AttributeValue v;
  v.mutable_blob();
  return v;
}

const char* kPostgresTypes =
    "id varchar(64) PRIMARY KEY, s16 varchar(16), ch char(4), txt text, i2 smallint, i4 integer, "
    "i8 bigint, "
    "n5 numeric(5,0), n82 numeric(8,2), num numeric, r real, d double precision, b boolean, "
    "tz timestamptz, ts timestamp(3), ts0 timestamp(0), j json, jb jsonb, by bytea, "
    "nn integer NOT NULL DEFAULT 7, gen integer GENERATED ALWAYS AS (i4 + 1) STORED, dd date";

std::vector<Fit> postgres_fits() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"s16", str("héllo wörld 1234"), "s16", "héllo wörld 1234"},
      {"s16", std::nullopt, "COALESCE(s16, 'null!')", "null!"},
      {"ch", str("ab"), "ch", "ab  "},
      {"txt", str("emoji 😀 and \"quotes\" and 'apostrophes'"), "txt",
       "emoji 😀 and \"quotes\" and 'apostrophes'"},
      {"i2", i64(32767), "i2", "32767"},
      {"i2", i64(-32768), "i2", "-32768"},
      {"i4", i64(-2147483648LL), "i4", "-2147483648"},
      {"i8", i64(std::numeric_limits<int64_t>::min()), "i8", "-9223372036854775808"},
      {"n5", i64(-99999), "n5", "-99999"},
      {"n5", dbl(12.4), "n5", "12"},
      {"n82", dbl(123456.78), "n82", "123456.78"},
      {"num", i64(123456789012345678), "num", "123456789012345678"},
      {"num", dbl(1.5), "num", "1.5"},
      {"r", dbl(0.1), "r", "0.1"},
      {"r", dbl(1e-50), "r", "0"},
      {"d", dbl(0.1), "d", "0.1"},
      {"d", dbl(std::nan("")), "d", "NaN"},
      {"d", dbl(-inf), "d", "-Infinity"},
      {"b", boolean(true), "b", "t"},
      {"tz", datetime(kT), "tz", "2023-11-14 22:13:20.123+00"},
      {"tz", datetime(-210866803200000), "tz", "4714-11-24 00:00:00+00 BC"},
      {"tz", datetime(9224318015999999), "tz", "294276-12-31 23:59:59.999+00"},
      {"ts", datetime(kT), "ts", "2023-11-14 22:13:20.123"},
      {"ts0", datetime(1700000000999), "ts0", "2023-11-14 22:13:20"},  // cut, not rounded
      {"j", json("{\"a\": [1, 2]}"), "j", "{\"a\": [1, 2]}"},
      {"j", json("\"\\u0000\""), "j", "\"\\u0000\""},
      {"jb", json("{\"b\":1,\"a\":[1,2]}"), "jb", "{\"a\": [1, 2], \"b\": 1}"},
      {"by", bytes(std::string("\x00\x01\xff", 3)), "encode(by, 'hex')", "0001ff"},
  };
}

std::vector<Misfit> postgres_misfits() {
  return {
      {"s16", str("seventeen chars!!"), "longer than the column's 16 characters"},
      {"s16", str(std::string("nul\0", 4)), "a NUL character"},
      {"s16", i64(1), "an integer into a character column"},
      {"i2", i64(32768), "outside the column's range -32768..32767"},
      {"i4", i64(2147483648LL), "outside the column's range"},
      {"i4", str("12"), "a string into an integer column"},
      {"i4", dbl(1), "a double into an integer column"},
      {"n5", i64(100000), "outside the column's range -99999..99999"},
      {"n82", dbl(1e6), "outside the range of numeric(8,2)"},
      {"n82", dbl(999999.995), "outside the range of numeric(8,2)"},
      {"n82", i64(5), "an integer into a numeric column"},
      {"num", dbl(std::nan("")), "NaN or infinity"},
      {"r", dbl(1e39), "outside the range of real"},
      {"b", i64(1), "an integer into a boolean column"},
      {"tz", datetime(-210866803200001), "outside the range of timestamp with time zone"},
      {"tz", datetime(9224318016000000), "outside the range"},
      {"j", json("{bad"), "not valid JSON"},
      {"jb", json("\"\\u0000\""), "\\u0000"},
      {"by", str("x"), "a string into a binary column"},
      {"nn", std::nullopt, "NULL into a NOT NULL column"},
      {"id", str("x"), "the primary key column"},
      {"gen", i64(1), "a generated column"},
      {"dd", datetime(kT), "a datetime into a column of type date"},
      {"txt", blob_ref(), "an unresolved large value"},
  };
}

const char* kMysqlTypes =
    "id varchar(64) COLLATE utf8mb4_bin PRIMARY KEY, s16 varchar(16), ch char(4), tt tinytext, txt "
    "text, "
    "lat varchar(10) CHARACTER SET latin1, u3 varchar(10) CHARACTER SET utf8mb3, ti tinyint, tu "
    "tinyint unsigned, "
    "si smallint, mi mediumint unsigned, i4 int, iu int unsigned, i8 bigint, bu bigint unsigned, "
    "d5 decimal(5,0), "
    "d82 decimal(8,2), f float, d double, du double unsigned, b boolean, bt bit(1), dt "
    "datetime(3), dt0 datetime, "
    "ts timestamp(3) NULL, j json, vb varbinary(4), bl blob, bn binary(4), nn int NOT NULL DEFAULT "
    "7, "
    "gen int AS (i4 + 1) VIRTUAL, dd date";

std::vector<Fit> mysql_fits() {
  std::string emoji63;
  for (int i = 0; i < 63; ++i) emoji63 += "😀";  // 252 bytes: tinytext holds 255
  return {
      {"s16", str("héllo wörld 1234"), "s16", "héllo wörld 1234"},
      {"s16", std::nullopt, "COALESCE(s16, 'null!')", "null!"},
      {"ch", str("ab"), "ch", "ab"},
      {"tt", str(emoji63), "tt", emoji63},
      {"txt", str(std::string("nul\0 and 'quotes'", 17)), "HEX(txt)",
       "6E756C0020616E64202771756F74657327"},
      {"lat", str("café"), "lat", "café"},
      {"u3", str("héllo"), "u3", "héllo"},
      {"ti", i64(-128), "ti", "-128"},
      {"tu", i64(255), "tu", "255"},
      {"si", i64(-32768), "si", "-32768"},
      {"mi", i64(16777215), "mi", "16777215"},
      {"i4", i64(2147483647), "i4", "2147483647"},
      {"iu", i64(4294967295LL), "iu", "4294967295"},
      {"i8", i64(std::numeric_limits<int64_t>::min()), "i8", "-9223372036854775808"},
      {"bu", i64(std::numeric_limits<int64_t>::max()), "bu", "9223372036854775807"},
      {"d5", i64(99999), "d5", "99999"},
      {"d82", dbl(123456.78), "d82", "123456.78"},
      {"d82", dbl(2.5), "d82", "2.50"},
      {"f", dbl(1.5), "f", "1.5"},
      {"d", dbl(0.1), "d", "0.1"},
      {"du", dbl(2.5), "du", "2.5"},
      {"b", boolean(true), "b", "1"},
      {"bt", boolean(true), "bt + 0", "1"},
      {"bt", boolean(false), "bt + 0", "0"},
      {"dt", datetime(kT), "dt", "2023-11-14 22:13:20.123"},
      {"dt", datetime(-30610224000000), "dt", "1000-01-01 00:00:00.000"},
      {"dt", datetime(253402300799999), "dt", "9999-12-31 23:59:59.999"},
      {"dt0", datetime(1700000000999), "dt0", "2023-11-14 22:13:20"},  // cut, not rounded
      {"ts", datetime(2147483647999), "ts", "2038-01-19 03:14:07.999"},
      {"ts", datetime(1000), "ts", "1970-01-01 00:00:01.000"},
      {"j", json("{\"a\": [1, 2]}"), "j", "{\"a\": [1, 2]}"},
      {"vb", bytes(std::string("\x00\x01\xfe\xff", 4)), "HEX(vb)", "0001FEFF"},
      {"bl", bytes(std::string("\x00\xff", 2)), "HEX(bl)", "00FF"},
      {"bn", bytes("\xab\xcd"), "HEX(bn)", "ABCD0000"},
  };
}

std::vector<Misfit> mysql_misfits() {
  std::string emoji64;
  for (int i = 0; i < 64; ++i) emoji64 += "😀";  // 64 characters, 256 bytes
  return {
      {"s16", str("seventeen chars!!"), "longer than the column's 16 characters"},
      {"tt", str(emoji64), "longer than the column's 255 bytes"},
      {"lat", str("€uro"), "outside the column's character set (latin1)"},
      {"u3", str("😀"), "outside the column's character set (utf8mb3)"},
      {"ti", i64(128), "outside the column's range -128..127"},
      {"tu", i64(-1), "outside the column's range 0..255"},
      {"si", i64(32768), "outside the column's range -32768..32767"},
      {"mi", i64(16777216), "outside the column's range 0..16777215"},
      {"iu", i64(-1), "outside the column's range 0..4294967295"},
      {"iu", i64(4294967296LL), "outside the column's range"},
      {"bu", i64(-1), "outside the column's range 0.."},
      {"d5", i64(100000), "outside the column's range -99999..99999"},
      {"d82", dbl(1e6), "outside the range of decimal(8,2)"},
      {"f", dbl(1e39), "outside the range of float"},
      {"d", dbl(std::nan("")), "NaN or infinity"},
      {"du", dbl(-1), "a negative number into an unsigned column"},
      {"b", i64(1), "an integer into a boolean column"},
      {"bt", i64(1), "an integer into a boolean column"},
      {"ti", boolean(true), "a boolean into an integer column"},
      {"dt", datetime(-30610224000001), "outside the range of datetime(3)"},
      {"ts", datetime(999), "outside the range of timestamp(3)"},
      {"ts", datetime(2147483648000), "outside the range of timestamp(3)"},
      {"j", json("{bad"), "not valid JSON"},
      {"vb", bytes("12345"), "longer than the column's 4 bytes"},
      {"bn", bytes("12345"), "longer than the column's 4 bytes"},
      {"nn", std::nullopt, "NULL into a NOT NULL column"},
      {"id", str("x"), "the primary key column"},
      {"gen", i64(1), "a generated column"},
      {"dd", datetime(kT), "a datetime into a column of type date"},
  };
}

using TypesTest = SqlTest;

TEST_P(TypesTest, EveryFittingValueLandsWithItsValue) {
  create(pg() ? kPostgresTypes : kMysqlTypes);
  auto t = open_table();
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->claim(1, "p", seconds(5)).is_ok());
  const std::vector<Fit> fits = pg() ? postgres_fits() : mysql_fits();
  uint64_t slot = 0;
  for (size_t i = 0; i < fits.size(); ++i) {
    const Fit& f = fits[i];
    const Column* column = t->schema().find(f.column);
    ASSERT_NE(column, nullptr) << f.column;
    EXPECT_EQ(misfit(*column, f.value), std::nullopt) << "case " << i << " into " << f.column;
    const std::string id = "fit" + std::to_string(i);
    auto done = t->commit(1, "p", slot, slot + 1, {upsert(id, {{f.column, f.value}})}, seconds(5));
    ASSERT_TRUE(done.is_ok()) << "case " << i << " into " << f.column << ": "
                              << done.status().to_string();
    ASSERT_EQ(done->outcome, CommitOutcome::kCommitted);
    ++slot;
    EXPECT_EQ(cell(id, f.read), f.expected) << "case " << i << " into " << f.column;
  }
}

TEST_P(TypesTest, EveryMisfitIsNamed) {
  create(pg() ? kPostgresTypes : kMysqlTypes);
  auto t = open_table();
  ASSERT_NE(t, nullptr);
  for (const Misfit& m : pg() ? postgres_misfits() : mysql_misfits()) {
    const Column* column = t->schema().find(m.column);
    ASSERT_NE(column, nullptr) << m.column;
    const auto why = misfit(*column, m.value);
    ASSERT_TRUE(why.has_value()) << "no misfit into " << m.column << " (" << column->sql_type
                                 << ")";
    EXPECT_NE(why->find(m.reason), std::string::npos) << m.column << ": " << *why;
  }
}

// The database agrees with the contract where it matters: a value misfit()
// refuses is refused by the server too (so misfit is not merely cautious),
// and the refusal rolls the whole transaction back, without the value in the
// message.
TEST_P(TypesTest, ARefusedValueFailsTheTransactionPermanentlyWithoutItsValue) {
  create(pg() ? kPostgresTypes : kMysqlTypes);
  auto t = open_table();
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->claim(1, "p", seconds(5)).is_ok());
  const std::string secret = "s3cret-value-77";
  const std::vector<std::vector<Field>> refused = {
      {{"i4", str(secret)}},
      {{pg() ? "i2" : "si", i64(40000)}},
      {{"s16", str("seventeen chars!!")}},
      {{"nn", std::nullopt}},
  };
  for (const auto& fields : refused) {
    auto done = t->commit(1, "p", 0, 1, {upsert("ok", {{"i8", i64(1)}}), upsert("bad", fields)},
                          seconds(5));
    ASSERT_FALSE(done.is_ok()) << fields[0].column;
    EXPECT_EQ(done.status().code(), Code::kPermanent) << done.status().to_string();
    EXPECT_EQ(done.status().message().find(secret), std::string::npos) << done.status().message();
    EXPECT_EQ(done.status().message().find("40000"), std::string::npos) << done.status().message();
    EXPECT_EQ(row_count(), 0);
    EXPECT_EQ(watermark_text(), "1/0/p");
  }
}

DEX_SQL_TEST_SUITE(TypesTest);

}  // namespace
}  // namespace dex::attrstore::testing
