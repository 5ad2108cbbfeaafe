// misfit(): which Attribute values a column takes (docs/attribute-store-types.md).
// The sync loop filters every field through it, so that the database refuses
// no value: a refused statement would fail the whole batch.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "attrstore/attribute_table.h"

namespace dex::attrstore {
namespace {

using flow::AttributeValue;

std::string column_noun(const Column& c) {
  switch (c.kind) {
    case ColumnKind::kString:
      return "a character column";
    case ColumnKind::kInt:
      return "an integer column";
    case ColumnKind::kDouble:
      return c.is_decimal ? "a numeric column" : "a floating-point column";
    case ColumnKind::kBool:
      return "a boolean column";
    case ColumnKind::kDatetime:
      return "a timestamp column";
    case ColumnKind::kJson:
      return "a JSON column";
    case ColumnKind::kBytes:
      return "a binary column";
    case ColumnKind::kOther:
      break;
  }
  return "a column of type " + c.sql_type;
}

std::string into(std::string_view value_noun, const Column& c) {
  return std::string(value_noun) + " into " + column_noun(c);
}

// Code points of valid UTF-8 (nullopt: not UTF-8), and the largest one.
struct Utf8Scan {
  int64_t code_points = 0;
  char32_t max = 0;
  bool has_nul = false;
};
std::optional<Utf8Scan> scan_utf8(std::string_view s) {
  Utf8Scan scan;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80           ? 1
                    : (b >> 5) == 0x6  ? 2
                    : (b >> 4) == 0xE  ? 3
                    : (b >> 3) == 0x1E ? 4
                                       : 0;
    if (len == 0 || i + len > s.size()) return std::nullopt;
    char32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto cont = static_cast<unsigned char>(s[i + k]);
      if ((cont & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (cont & 0x3F);
    }
    static constexpr char32_t kMinOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinOfLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return std::nullopt;  // overlong, beyond Unicode, or a surrogate
    }
    scan.has_nul |= cp == 0;
    scan.max = std::max(scan.max, cp);
    ++scan.code_points;
    i += len;
  }
  return scan;
}

// The characters of `text` against the column's character set and limits.
std::optional<std::string> text_misfit(const Column& c, std::string_view text) {
  const auto scan = scan_utf8(text);
  if (!scan) return "not valid UTF-8";
  if (scan->has_nul && !c.nul_allowed) return "a NUL character, which the column cannot hold";
  if (scan->max > c.max_code_point) {
    return "a character outside the column's character set (" + c.charset + ")";
  }
  if (c.max_length > 0 && scan->code_points > c.max_length) {
    return "longer than the column's " + std::to_string(c.max_length) + " characters";
  }
  // Bytes in the column's encoding: one per character in single-byte sets.
  const int64_t bytes =
      c.max_code_point <= 0xFF ? scan->code_points : static_cast<int64_t>(text.size());
  if (c.max_bytes > 0 && bytes > c.max_bytes) {
    return "longer than the column's " + std::to_string(c.max_bytes) + " bytes";
  }
  return std::nullopt;
}

std::optional<std::string> int_misfit(const Column& c, int64_t v) {
  if (c.kind == ColumnKind::kInt) {
    if (v < c.int_min || v > c.int_max) {
      return "outside the column's range " + std::to_string(c.int_min) + ".." +
             std::to_string(c.int_max);
    }
    return std::nullopt;
  }
  if (c.is_decimal && c.decimal_precision == 0) return std::nullopt;  // numeric: any integer
  return into("an integer", c);
}

std::optional<std::string> decimal_misfit(const Column& c, double v) {
  if (c.decimal_precision == 0) return std::nullopt;  // unconstrained numeric
  // After rounding to the scale, fewer than precision - scale digits before the point.
  const double scaled = std::round(std::fabs(v) * std::pow(10.0, c.decimal_scale));
  if (scaled >= std::pow(10.0, c.decimal_precision)) {
    return "outside the range of " + c.sql_type;
  }
  return std::nullopt;
}

std::optional<std::string> double_misfit(const Column& c, double v) {
  if (c.kind != ColumnKind::kDouble && !c.is_decimal) return into("a double", c);
  if (!std::isfinite(v)) {
    if (c.is_decimal || !c.non_finite_allowed)
      return "NaN or infinity, which the column cannot hold";
    return std::nullopt;
  }
  if (c.is_unsigned && v < 0) return "a negative number into an unsigned column";
  if (c.is_decimal) return decimal_misfit(c, v);
  if (c.double_max > 0 && std::fabs(v) > c.double_max) return "outside the range of " + c.sql_type;
  return std::nullopt;
}

std::optional<std::string> datetime_misfit(const Column& c, int64_t unix_ms) {
  if (c.kind != ColumnKind::kDatetime) return into("a datetime", c);
  if (unix_ms < c.datetime_min_ms || unix_ms > c.datetime_max_ms) {
    return "outside the range of " + c.sql_type;
  }
  return std::nullopt;
}

std::optional<std::string> json_misfit(const Column& c, const std::string& text) {
  if (c.kind != ColumnKind::kJson) return into("a JSON value", c);
  if (!nlohmann::json::accept(text)) return "not valid JSON";
  if (!c.nul_allowed && text.find("\\u0000") != std::string::npos) {
    return "a \\u0000 escape, which the column cannot hold";
  }
  return text_misfit(c, text);
}

std::optional<std::string> value_misfit(const Column& c, const AttributeValue& v) {
  switch (v.value_case()) {
    case AttributeValue::kStringValue:
      if (c.kind != ColumnKind::kString) return into("a string", c);
      return text_misfit(c, v.string_value());
    case AttributeValue::kInt64Value:
      return int_misfit(c, v.int64_value());
    case AttributeValue::kDoubleValue:
      return double_misfit(c, v.double_value());
    case AttributeValue::kBoolValue:
      if (c.kind != ColumnKind::kBool) return into("a boolean", c);
      return std::nullopt;
    case AttributeValue::kDatetimeUnixMs:
      return datetime_misfit(c, v.datetime_unix_ms());
    case AttributeValue::kJsonValue:
      return json_misfit(c, v.json_value());
    case AttributeValue::kBytesValue:
      if (c.kind != ColumnKind::kBytes) return into("bytes", c);
      if (c.max_length > 0 && static_cast<int64_t>(v.bytes_value().size()) > c.max_length) {
        return "longer than the column's " + std::to_string(c.max_length) + " bytes";
      }
      return std::nullopt;
    case AttributeValue::VALUE_NOT_SET:
      break;
  }
  return "a value without a type";
}

}  // namespace

std::optional<std::string> key_misfit(const Column& key_column, std::string_view flow_id) {
  if (key_column.kind != ColumnKind::kString) return into("a string", key_column);
  return text_misfit(key_column, flow_id);
}

std::optional<std::string> misfit(const Column& column,
                                  const std::optional<AttributeValue>& value) {
  if (column.primary_key) return "the primary key column";
  if (column.generated) return "a generated column";
  if (!value) {
    if (!column.nullable) return "NULL into a NOT NULL column";
    return std::nullopt;
  }
  if (value->has_blob()) return "an unresolved large value";
  return value_misfit(column, *value);
}

}  // namespace dex::attrstore
