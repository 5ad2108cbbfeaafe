#include "attrstore/column_types.h"

#include <cfloat>
#include <cstdint>
#include <limits>
#include <string_view>

namespace dex::attrstore {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Decimal digits an int64 always holds: numeric(p,0) with p above this holds
// every int64.
constexpr int kInt64SafeDigits = 18;
// libpq's varchar/bpchar typmod counts the 4-byte length header.
constexpr int32_t kVarHeader = 4;

// PostgreSQL timestamps: 4714-11-24 00:00:00 BC .. 294276-12-31 23:59:59.999 UTC.
constexpr int64_t kPostgresTimestampMinMs = -210866803200000;
constexpr int64_t kPostgresTimestampMaxMs = 9224318015999999;
// MySQL DATETIME: 1000-01-01 .. 9999-12-31 23:59:59.999; TIMESTAMP: 1970-01-01
// 00:00:01 .. 2038-01-19 03:14:07.999 UTC (MariaDB 10.11, 32-bit seconds).
constexpr int64_t kMysqlDatetimeMinMs = -30610224000000;
constexpr int64_t kMysqlDatetimeMaxMs = 253402300799999;
constexpr int64_t kMysqlTimestampMinMs = 1000;
constexpr int64_t kMysqlTimestampMaxMs = 2147483647999;

constexpr int kDefaultFractionDigits = 6;

int64_t pow10(int digits) {
  int64_t v = 1;
  for (int i = 0; i < digits; ++i) v *= 10;
  return v;
}

// numeric(p,0) / decimal(p,0): ±(10^p - 1), clipped to int64.
void set_decimal_int_range(Column& c, int precision, bool is_unsigned) {
  const int64_t max = precision > kInt64SafeDigits ? kInt64Max : pow10(precision) - 1;
  c.int_min = is_unsigned ? 0 : (precision > kInt64SafeDigits ? kInt64Min : -max);
  c.int_max = max;
}

void set_decimal(Column& c, int precision, int scale, bool is_unsigned) {
  c.is_decimal = true;
  c.decimal_precision = precision;
  c.decimal_scale = scale;
  c.is_unsigned = is_unsigned;
  if (precision > 0 && scale == 0) {
    c.kind = ColumnKind::kInt;
    set_decimal_int_range(c, precision, is_unsigned);
  } else {
    c.kind = ColumnKind::kDouble;
  }
}

void set_float(Column& c, bool single, bool non_finite_allowed) {
  c.kind = ColumnKind::kDouble;
  c.double_max = single ? FLT_MAX : DBL_MAX;
  c.non_finite_allowed = non_finite_allowed;
}

void set_int(Column& c, int64_t min, int64_t max) {
  c.kind = ColumnKind::kInt;
  c.int_min = min;
  c.int_max = max;
}

void set_charset(Column& c, std::string charset) {
  c.max_code_point = max_code_point_of(charset);
  c.charset = std::move(charset);
}

void classify_postgres_type(Column& c, const PostgresColumnFacts& f) {
  const std::string& t = f.type_name;
  if (t == "varchar" || t == "bpchar" || t == "text") {
    c.kind = ColumnKind::kString;
    if (t != "text" && f.typmod >= kVarHeader) c.max_length = f.typmod - kVarHeader;
  } else if (t == "int2") {
    set_int(c, INT16_MIN, INT16_MAX);
  } else if (t == "int4") {
    set_int(c, INT32_MIN, INT32_MAX);
  } else if (t == "int8") {
    set_int(c, kInt64Min, kInt64Max);
  } else if (t == "numeric") {
    if (f.typmod < kVarHeader) {
      set_decimal(c, 0, 0, false);
    } else {
      const int32_t packed = f.typmod - kVarHeader;
      const int precision = (packed >> 16) & 0xffff;
      const int scale = ((packed & 0x7ff) ^ 1024) - 1024;       // 11-bit signed (PostgreSQL 15)
      if (scale >= 0) set_decimal(c, precision, scale, false);  // a negative scale: kOther
    }
  } else if (t == "float4" || t == "float8") {
    set_float(c, t == "float4", /*non_finite_allowed=*/true);
  } else if (t == "bool") {
    c.kind = ColumnKind::kBool;
  } else if (t == "timestamptz" || t == "timestamp") {
    c.kind = ColumnKind::kDatetime;
    c.datetime_min_ms = kPostgresTimestampMinMs;
    c.datetime_max_ms = kPostgresTimestampMaxMs;
    c.fraction_digits = f.typmod >= 0 ? f.typmod : kDefaultFractionDigits;
  } else if (t == "json" || t == "jsonb") {
    c.kind = ColumnKind::kJson;
    c.nul_allowed = t == "json";  // jsonb refuses the \u0000 escape
  } else if (t == "bytea") {
    c.kind = ColumnKind::kBytes;
  }
}

bool has_word(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

int64_t text_blob_bytes(std::string_view data_type) {
  if (data_type == "tinytext" || data_type == "tinyblob") return 255;
  if (data_type == "text" || data_type == "blob") return 65535;
  if (data_type == "mediumtext" || data_type == "mediumblob") return 16777215;
  return 4294967295;  // longtext, longblob
}

void classify_mysql_int(Column& c, const MysqlColumnFacts& f, bool is_unsigned) {
  const std::string& t = f.data_type;
  if (t == "tinyint") {
    is_unsigned ? set_int(c, 0, UINT8_MAX) : set_int(c, INT8_MIN, INT8_MAX);
  } else if (t == "smallint") {
    is_unsigned ? set_int(c, 0, UINT16_MAX) : set_int(c, INT16_MIN, INT16_MAX);
  } else if (t == "mediumint") {
    is_unsigned ? set_int(c, 0, (1 << 24) - 1) : set_int(c, -(1 << 23), (1 << 23) - 1);
  } else if (t == "int") {
    is_unsigned ? set_int(c, 0, UINT32_MAX) : set_int(c, INT32_MIN, INT32_MAX);
  } else {  // bigint: unsigned above INT64_MAX is out of an int64's reach anyway
    set_int(c, is_unsigned ? 0 : kInt64Min, kInt64Max);
  }
}

void classify_mysql_type(Column& c, const MysqlColumnFacts& f) {
  const std::string& t = f.data_type;
  const bool is_unsigned = has_word(f.column_type, "unsigned");
  if (f.json_check || t == "json") {
    c.kind = ColumnKind::kJson;
    if (t != "json") c.max_bytes = text_blob_bytes(t);
  } else if (t == "char" || t == "varchar") {
    c.kind = ColumnKind::kString;
    c.max_length = f.char_max_length.value_or(0);
  } else if (t == "tinytext" || t == "text" || t == "mediumtext" || t == "longtext") {
    c.kind = ColumnKind::kString;
    c.max_bytes = text_blob_bytes(t);
  } else if (t == "tinyint" && f.column_type.starts_with("tinyint(1)")) {
    c.kind = ColumnKind::kBool;  // BOOLEAN is tinyint(1)
  } else if (t == "bit" && f.column_type == "bit(1)") {
    c.kind = ColumnKind::kBool;
  } else if (t == "tinyint" || t == "smallint" || t == "mediumint" || t == "int" || t == "bigint") {
    classify_mysql_int(c, f, is_unsigned);
  } else if (t == "decimal") {
    set_decimal(c, static_cast<int>(f.numeric_precision.value_or(10)),
                static_cast<int>(f.numeric_scale.value_or(0)), is_unsigned);
  } else if (t == "float" || t == "double") {
    set_float(c, t == "float", /*non_finite_allowed=*/false);
    c.is_unsigned = is_unsigned;
  } else if (t == "datetime" || t == "timestamp") {
    c.kind = ColumnKind::kDatetime;
    c.datetime_min_ms = t == "datetime" ? kMysqlDatetimeMinMs : kMysqlTimestampMinMs;
    c.datetime_max_ms = t == "datetime" ? kMysqlDatetimeMaxMs : kMysqlTimestampMaxMs;
    c.fraction_digits = static_cast<int>(f.datetime_precision.value_or(0));
  } else if (t == "binary" || t == "varbinary") {
    c.kind = ColumnKind::kBytes;
    c.max_length = f.char_max_length.value_or(0);
  } else if (t == "tinyblob" || t == "blob" || t == "mediumblob" || t == "longblob") {
    c.kind = ColumnKind::kBytes;
    c.max_length = text_blob_bytes(t);
  }
}

}  // namespace

char32_t max_code_point_of(const std::string& charset) {
  if (charset == "utf8mb3" || charset == "utf8" || charset == "ucs2") return 0xFFFF;
  if (charset == "latin1" || charset == "LATIN1") return 0xFF;
  if (charset == "ascii") return 0x7F;
  return 0x10FFFF;
}

Column classify_postgres_column(const PostgresColumnFacts& f) {
  Column c;
  c.name = f.name;
  c.sql_type = f.sql_type;
  c.base_type = f.base_type;
  c.nullable = !f.not_null;
  c.generated = f.generated;
  c.has_default = f.has_default || f.identity || f.generated;
  c.primary_key = f.primary_key;
  c.nul_allowed = false;  // PostgreSQL text cannot hold U+0000
  classify_postgres_type(c, f);
  if (c.kind == ColumnKind::kString || c.kind == ColumnKind::kJson) {
    // The server converts from the client's UTF8 to its encoding; SQL_ASCII
    // stores the bytes as sent.
    set_charset(c, f.server_encoding == "UTF8" ? "" : f.server_encoding);
  }
  return c;
}

Column classify_mysql_column(const MysqlColumnFacts& f) {
  Column c;
  c.name = f.name;
  c.sql_type = f.column_type;
  c.base_type = f.data_type;
  c.nullable = f.nullable;
  c.generated = has_word(f.extra, "GENERATED");
  c.has_default = f.has_default || c.generated || has_word(f.extra, "auto_increment");
  c.primary_key = f.primary_key;
  classify_mysql_type(c, f);
  if (c.kind == ColumnKind::kString || c.kind == ColumnKind::kJson) {
    set_charset(c, f.charset == "utf8" ? "utf8mb3" : f.charset);
    c.collation = f.collation;
  }
  return c;
}

}  // namespace dex::attrstore
