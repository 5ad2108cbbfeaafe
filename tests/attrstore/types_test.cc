// The type contract without a server: columns classified from the facts each
// database's describe gathers, and misfit()'s answers; the target-table and
// watermark-table checks.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "attrstore/column_types.h"
#include "attrstore/table_check.h"
#include "values.h"

namespace dex::attrstore {
namespace {

using testing::boolean;
using testing::bytes;
using testing::datetime;
using testing::dbl;
using testing::i64;
using testing::json;
using testing::str;

Column pg(std::string type_name, int32_t typmod = -1, std::string sql_type = "") {
  PostgresColumnFacts f;
  f.name = "c";
  f.type_name = std::move(type_name);
  f.typmod = typmod;
  f.sql_type = sql_type.empty() ? f.type_name : sql_type;
  f.base_type = f.sql_type;
  return classify_postgres_column(f);
}

Column my(std::string data_type, std::string column_type = "",
          std::optional<int64_t> len = std::nullopt,
          std::optional<int64_t> precision = std::nullopt,
          std::optional<int64_t> scale = std::nullopt) {
  MysqlColumnFacts f;
  f.name = "c";
  f.data_type = std::move(data_type);
  f.column_type = column_type.empty() ? f.data_type : column_type;
  f.char_max_length = len;
  f.numeric_precision = precision;
  f.numeric_scale = scale;
  f.charset = "utf8mb4";
  return classify_mysql_column(f);
}

bool fits(const Column& c, const flow::AttributeValue& v) { return !misfit(c, v).has_value(); }
std::string why(const Column& c, const std::optional<flow::AttributeValue>& v) {
  return misfit(c, v).value_or("fits");
}

// numeric(p,s)'s typmod: ((p << 16) | s) + 4.
int32_t numeric_typmod(int p, int s) { return ((p << 16) | s) + 4; }

TEST(TypeContract, StringsFitCharacterColumnsByCodePoints) {
  const Column v16 = pg("varchar", 16 + 4, "character varying(16)");
  EXPECT_EQ(v16.kind, ColumnKind::kString);
  EXPECT_EQ(v16.max_length, 16);
  EXPECT_TRUE(fits(v16, str("ünïcödé 16 chars")));  // 16 characters, 21 bytes
  EXPECT_EQ(why(v16, str("seventeen chars!!")), "longer than the column's 16 characters");
  EXPECT_EQ(why(v16, str(std::string("a\0b", 3))), "a NUL character, which the column cannot hold");
  EXPECT_EQ(why(v16, str("\xff")), "not valid UTF-8");
  EXPECT_EQ(why(v16, str("\xc0\x80")), "not valid UTF-8");  // overlong NUL
  EXPECT_TRUE(fits(pg("text"), str(std::string(100000, 'x'))));
  EXPECT_EQ(pg("bpchar", 4 + 4, "character(4)").max_length, 4);
  // MySQL: characters for varchar, bytes for the text types, and the character set.
  EXPECT_TRUE(fits(my("varchar", "varchar(2)", 2), str("😀😀")));
  EXPECT_TRUE(fits(my("varchar", "varchar(2)", 2), str(std::string("\0\0", 2))));
  EXPECT_EQ(my("tinytext").max_bytes, 255);
  EXPECT_EQ(why(my("tinytext"), str(std::string(256, 'x'))), "longer than the column's 255 bytes");
  MysqlColumnFacts latin;
  latin.name = "c";
  latin.data_type = "varchar";
  latin.column_type = "varchar(8)";
  latin.char_max_length = 8;
  latin.charset = "latin1";
  EXPECT_TRUE(fits(classify_mysql_column(latin), str("café")));
  EXPECT_EQ(why(classify_mysql_column(latin), str("€")),
            "a character outside the column's character set (latin1)");
  latin.charset = "utf8";  // MySQL's name of utf8mb3
  EXPECT_EQ(why(classify_mysql_column(latin), str("😀")),
            "a character outside the column's character set (utf8mb3)");
  EXPECT_TRUE(fits(classify_mysql_column(latin), str("日本")));
}

TEST(TypeContract, IntegersFitTheRangeOfTheirColumn) {
  EXPECT_EQ(why(pg("int2"), i64(32768)), "outside the column's range -32768..32767");
  EXPECT_TRUE(fits(pg("int4"), i64(-2147483648LL)));
  EXPECT_TRUE(fits(pg("int8"), i64(std::numeric_limits<int64_t>::min())));
  const Column n5 = pg("numeric", numeric_typmod(5, 0), "numeric(5,0)");
  EXPECT_EQ(n5.kind, ColumnKind::kInt);
  EXPECT_TRUE(fits(n5, i64(-99999)));
  EXPECT_EQ(why(n5, i64(100000)), "outside the column's range -99999..99999");
  EXPECT_TRUE(fits(pg("numeric", numeric_typmod(30, 0)), i64(std::numeric_limits<int64_t>::max())));
  EXPECT_TRUE(fits(pg("numeric"), i64(5)));  // unconstrained numeric holds any integer
  EXPECT_EQ(why(pg("numeric", numeric_typmod(8, 2), "numeric(8,2)"), i64(5)),
            "an integer into a numeric column");
  EXPECT_EQ(why(pg("int4"), str("1")), "a string into an integer column");
  EXPECT_EQ(why(pg("int4"), dbl(1)), "a double into an integer column");
  EXPECT_EQ(why(my("tinyint", "tinyint(4)"), i64(128)), "outside the column's range -128..127");
  EXPECT_EQ(why(my("tinyint", "tinyint(3) unsigned"), i64(-1)),
            "outside the column's range 0..255");
  EXPECT_TRUE(fits(my("mediumint", "mediumint(8) unsigned"), i64(16777215)));
  EXPECT_EQ(why(my("mediumint", "mediumint(9)"), i64(8388608)),
            "outside the column's range -8388608..8388607");
  EXPECT_TRUE(fits(my("int", "int(10) unsigned"), i64(4294967295LL)));
  EXPECT_TRUE(fits(my("bigint", "bigint(20) unsigned"), i64(std::numeric_limits<int64_t>::max())));
  EXPECT_EQ(why(my("bigint", "bigint(20) unsigned"), i64(-1)),
            "outside the column's range 0..9223372036854775807");
  EXPECT_EQ(why(my("decimal", "decimal(3,0)", {}, 3, 0), i64(1000)),
            "outside the column's range -999..999");
  EXPECT_EQ(why(my("decimal", "decimal(3,0) unsigned", {}, 3, 0), i64(-1)),
            "outside the column's range 0..999");
}

TEST(TypeContract, DoublesFitFloatingAndNumericColumns) {
  EXPECT_TRUE(fits(pg("float8"), dbl(std::nan(""))));
  EXPECT_TRUE(fits(pg("float8"), dbl(-INFINITY)));
  EXPECT_TRUE(fits(pg("float4"), dbl(FLT_MAX)));
  EXPECT_EQ(why(pg("float4", -1, "real"), dbl(1e39)), "outside the range of real");
  EXPECT_EQ(why(pg("numeric"), dbl(INFINITY)), "NaN or infinity, which the column cannot hold");
  const Column n82 = pg("numeric", numeric_typmod(8, 2), "numeric(8,2)");
  EXPECT_TRUE(fits(n82, dbl(999999.99)));
  EXPECT_TRUE(fits(n82, dbl(-999999.994)));  // rounds to -999999.99
  EXPECT_EQ(why(n82, dbl(999999.995)),
            "outside the range of numeric(8,2)");  // rounds to 1000000.00
  EXPECT_TRUE(fits(pg("numeric", numeric_typmod(5, 0)), dbl(12.4)));
  EXPECT_EQ(why(my("double"), dbl(std::nan(""))), "NaN or infinity, which the column cannot hold");
  EXPECT_EQ(why(my("double", "double unsigned"), dbl(-0.5)),
            "a negative number into an unsigned column");
  EXPECT_EQ(why(my("float", "float"), dbl(-1e39)), "outside the range of float");
  EXPECT_EQ(why(my("int"), dbl(1)), "a double into an integer column");
  // A column of another type names its type.
  EXPECT_EQ(why(pg("date", -1, "date"), dbl(1)), "a double into a column of type date");
}

TEST(TypeContract, BooleansFitBooleanTinyint1AndBit1) {
  EXPECT_TRUE(fits(pg("bool"), boolean(true)));
  EXPECT_EQ(my("tinyint", "tinyint(1)").kind, ColumnKind::kBool);
  EXPECT_EQ(my("bit", "bit(1)").kind, ColumnKind::kBool);
  EXPECT_EQ(my("bit", "bit(8)").kind, ColumnKind::kOther);
  EXPECT_EQ(my("tinyint", "tinyint(4)").kind, ColumnKind::kInt);
  EXPECT_EQ(why(my("tinyint", "tinyint(1)"), i64(1)), "an integer into a boolean column");
  EXPECT_EQ(why(my("tinyint", "tinyint(4)"), boolean(true)), "a boolean into an integer column");
  EXPECT_EQ(why(pg("int4"), boolean(true)), "a boolean into an integer column");
}

TEST(TypeContract, DatetimesFitTheirColumnsRange) {
  const Column tz = pg("timestamptz", -1, "timestamp with time zone");
  EXPECT_EQ(tz.fraction_digits, 6);
  EXPECT_TRUE(fits(tz, datetime(-210866803200000)));
  EXPECT_EQ(why(tz, datetime(-210866803200001)), "outside the range of timestamp with time zone");
  EXPECT_TRUE(fits(tz, datetime(9224318015999999)));
  EXPECT_FALSE(fits(tz, datetime(std::numeric_limits<int64_t>::max())));
  EXPECT_EQ(pg("timestamp", 3).fraction_digits, 3);
  MysqlColumnFacts ts;
  ts.name = "c";
  ts.data_type = "timestamp";
  ts.column_type = "timestamp(3)";
  ts.datetime_precision = 3;
  const Column mts = classify_mysql_column(ts);
  EXPECT_EQ(mts.fraction_digits, 3);
  EXPECT_EQ(why(mts, datetime(999)), "outside the range of timestamp(3)");
  EXPECT_TRUE(fits(mts, datetime(1000)));  // 1970-01-01 00:00:01
  EXPECT_TRUE(fits(mts, datetime(2147483647999)));
  EXPECT_FALSE(fits(mts, datetime(2147483648000)));
  EXPECT_TRUE(fits(my("datetime"), datetime(-30610224000000)));  // 1000-01-01
  EXPECT_FALSE(fits(my("datetime"), datetime(-30610224000001)));
  EXPECT_TRUE(fits(my("datetime"), datetime(253402300799999)));  // 9999-12-31 23:59:59.999
  EXPECT_FALSE(fits(my("datetime"), datetime(253402300800000)));
  EXPECT_EQ(why(pg("text"), datetime(0)), "a datetime into a character column");
}

TEST(TypeContract, JsonMustParseAndFitItsColumn) {
  EXPECT_TRUE(fits(pg("json"), json("{\"a\":[1,2,{\"b\":null}]}")));
  EXPECT_TRUE(fits(pg("json"), json("\"\\u0000\"")));
  EXPECT_EQ(why(pg("jsonb"), json("\"\\u0000\"")),
            "a \\u0000 escape, which the column cannot hold");
  EXPECT_EQ(why(pg("jsonb"), json("{bad")), "not valid JSON");
  EXPECT_EQ(why(pg("jsonb"), json("")), "not valid JSON");
  EXPECT_TRUE(fits(my("json"), json("[1]")));
  MysqlColumnFacts mariadb_json;  // MariaDB: longtext with CHECK (json_valid(c))
  mariadb_json.name = "c";
  mariadb_json.data_type = "longtext";
  mariadb_json.column_type = "longtext";
  mariadb_json.charset = "utf8mb4";
  mariadb_json.json_check = true;
  EXPECT_EQ(classify_mysql_column(mariadb_json).kind, ColumnKind::kJson);
  mariadb_json.json_check = false;
  EXPECT_EQ(classify_mysql_column(mariadb_json).kind, ColumnKind::kString);
  EXPECT_EQ(why(pg("text"), json("{}")), "a JSON value into a character column");
}

TEST(TypeContract, BytesFitBinaryColumnsByLength) {
  EXPECT_TRUE(fits(pg("bytea"), bytes(std::string(1 << 20, '\0'))));
  EXPECT_TRUE(fits(my("varbinary", "varbinary(4)", 4), bytes("1234")));
  EXPECT_EQ(why(my("varbinary", "varbinary(4)", 4), bytes("12345")),
            "longer than the column's 4 bytes");
  EXPECT_EQ(why(my("binary", "binary(2)", 2), bytes("123")), "longer than the column's 2 bytes");
  EXPECT_EQ(why(my("tinyblob"), bytes(std::string(256, 'x'))),
            "longer than the column's 255 bytes");
  EXPECT_EQ(why(pg("text"), bytes("x")), "bytes into a character column");
}

TEST(TypeContract, NullKeyGeneratedAndUnresolvedValues) {
  Column c = pg("int4");
  EXPECT_TRUE(fits(c, i64(1)));
  EXPECT_EQ(misfit(c, std::nullopt), std::nullopt);
  c.nullable = false;
  EXPECT_EQ(why(c, std::nullopt), "NULL into a NOT NULL column");
  c.primary_key = true;
  EXPECT_EQ(why(c, i64(1)), "the primary key column");
  Column g = pg("int4");
  g.generated = true;
  EXPECT_EQ(why(g, i64(1)), "a generated column");
  flow::AttributeValue blob;
  blob.mutable_blob();
  EXPECT_EQ(why(pg("text"), blob), "an unresolved large value");
  EXPECT_EQ(why(pg("text"), flow::AttributeValue()), "a value without a type");
}

TEST(TypeContract, KeyMisfitChecksAFlowIdAgainstTheKeyColumn) {
  Column key = pg("varchar", 8 + 4, "character varying(8)");
  key.primary_key = true;
  EXPECT_EQ(key_misfit(key, "order-17"), std::nullopt);
  EXPECT_EQ(key_misfit(key, "order-1234"), "longer than the column's 8 characters");
  EXPECT_EQ(key_misfit(pg("int4"), "1"), "a string into an integer column");
}

TEST(TypeContract, NoReasonHoldsTheValue) {
  const std::string secret = "zz-secret-zz";
  for (const Column& c :
       {pg("int4"), pg("varchar", 4 + 4), pg("jsonb"), my("tinyint", "tinyint(1)")}) {
    for (const auto& v : {str(secret), json(secret), bytes(secret)}) {
      EXPECT_EQ(why(c, v).find(secret), std::string::npos);
    }
  }
}

DescribedTable described(std::vector<Column> columns) {
  return DescribedTable{"public", "orders", std::move(columns), ""};
}

Column col(std::string name, ColumnKind kind, bool pk = false, bool nullable = true,
           bool has_default = false) {
  Column c;
  c.name = std::move(name);
  c.kind = kind;
  c.sql_type = kind == ColumnKind::kString ? "text" : "integer";
  c.primary_key = pk;
  c.nullable = nullable;
  c.has_default = has_default;
  return c;
}

TEST(TableCheck, TheTargetNeedsOneCharacterKeyAndDefaults) {
  auto ok = check_target_table(
      described({col("id", ColumnKind::kString, true, false), col("v", ColumnKind::kInt)}));
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(ok->key_column, "id");
  auto two = check_target_table(described({col("id", ColumnKind::kString, true, false),
                                           col("region", ColumnKind::kString, true, false)}));
  EXPECT_EQ(two.status().message(),
            "table public.orders has 2 primary-key columns (id, region); it needs exactly one "
            "character column "
            "(the Flow ID)");
  auto int_key = check_target_table(described({col("id", ColumnKind::kInt, true, false)}));
  EXPECT_NE(int_key.status().message().find("primary key id of type integer"), std::string::npos);
  auto no_default = check_target_table(described(
      {col("id", ColumnKind::kString, true, false), col("a", ColumnKind::kInt, false, false, true),
       col("b", ColumnKind::kInt, false, false, false)}));
  EXPECT_NE(no_default.status().message().find("NOT NULL columns without a default (b)"),
            std::string::npos);
  Column ci = col("id", ColumnKind::kString, true, false);
  ci.collation = "utf8mb4_general_ci";
  EXPECT_FALSE(check_target_table(described({ci})).is_ok());
  ci.collation = "utf8mb4_bin";
  EXPECT_TRUE(check_target_table(described({ci})).is_ok());
}

TEST(TableCheck, TheWatermarkTableNeedsDexColumns) {
  auto big = [](std::string n, bool pk = false) {
    Column c = col(std::move(n), ColumnKind::kInt, pk, false);
    c.int_max = std::numeric_limits<int64_t>::max();
    return c;
  };
  std::vector<Column> good = {col("node_id", ColumnKind::kString, true, false),
                              col("store", ColumnKind::kString, true, false),
                              big("epoch"),
                              big("last_slot"),
                              col("process", ColumnKind::kString),
                              col("updated_at", ColumnKind::kDatetime)};
  EXPECT_TRUE(check_watermark_table(described(good)).is_ok());
  std::vector<Column> small_epoch = good;
  small_epoch[2].int_max = INT32_MAX;
  EXPECT_NE(check_watermark_table(described(small_epoch)).message().find("no column epoch bigint"),
            std::string::npos);
  std::vector<Column> one_key = good;
  one_key[1].primary_key = false;
  EXPECT_NE(check_watermark_table(described(one_key)).message().find("it needs (node_id, store)"),
            std::string::npos);
}

TEST(WatermarkTable, TheDdlNamesEveryColumnAndTheKey) {
  for (StoreType type : {StoreType::kPostgres, StoreType::kMysql}) {
    const std::string ddl = watermark_table_ddl(type, "reporting");
    for (const char* part :
         {"CREATE TABLE IF NOT EXISTS", "dex_attribute_sync_watermark", "node_id varchar(128)",
          "store varchar(128)", "epoch bigint", "last_slot bigint", "process varchar(256)",
          "updated_at", "PRIMARY KEY (node_id, store)"}) {
      EXPECT_NE(ddl.find(part), std::string::npos) << part << " in " << ddl;
    }
  }
  EXPECT_NE(watermark_table_ddl(StoreType::kPostgres, "rep")
                .find("\"rep\".\"dex_attribute_sync_watermark\""),
            std::string::npos);
  EXPECT_NE(
      watermark_table_ddl(StoreType::kMysql, "rep").find("`rep`.`dex_attribute_sync_watermark`"),
      std::string::npos);
  EXPECT_NE(watermark_table_ddl(StoreType::kMysql).find("ENGINE=InnoDB"), std::string::npos);
}

TEST(StoreSettings, TypeNamesRoundTrip) {
  for (StoreType t : {StoreType::kPostgres, StoreType::kMysql})
    EXPECT_EQ(parse_store_type(store_type_name(t)), t);
  EXPECT_EQ(store_type_name(StoreType::kMysql), "mysql");
  EXPECT_EQ(parse_store_type("mariadb"), std::nullopt);
  AttributeStoreSettings defaults;
  EXPECT_EQ(defaults.sync_batch_size, 100u);
  EXPECT_TRUE(defaults.create_watermark_table);
}

}  // namespace
}  // namespace dex::attrstore
