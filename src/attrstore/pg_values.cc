#include "attrstore/pg_values.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace dex::attrstore {
namespace {

// pg_type OIDs of the binary parameters.
constexpr uint32_t kByteaOid = 17;
constexpr uint32_t kTimestampOid = 1114;
constexpr uint32_t kTimestamptzOid = 1184;
// 2000-01-01 00:00:00 UTC, PostgreSQL's epoch, in Unix milliseconds.
constexpr int64_t kPostgresEpochUnixMs = 946684800000;
constexpr int kMicrosDigits = 6;

template <typename T>
std::string shortest(T v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

int64_t floor_to(int64_t v, int64_t step) {
  int64_t q = v / step;
  if (v % step != 0 && v < 0) --q;
  return q * step;
}

// Microseconds since 2000-01-01, cut to the column's fractional digits (the
// server would round, which can carry into the next second), big-endian.
std::string timestamp_binary(const Column& column, int64_t unix_ms) {
  int64_t us = (unix_ms - kPostgresEpochUnixMs) * 1000;
  int64_t step = 1;
  for (int d = column.fraction_digits; d < kMicrosDigits; ++d) step *= 10;
  us = floor_to(us, step);
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(static_cast<uint64_t>(us) >> (8 * (7 - i)) & 0xFF);
  }
  return out;
}

std::string double_text(const Column& column, double v) {
  // real: the float's own digits, so that the server's float4 input neither
  // overflows nor underflows on digits a float cannot hold.
  if (column.double_max > 0 && column.double_max < 1e39) return shortest(static_cast<float>(v));
  return shortest(v);
}

}  // namespace

PgConnection::Param pg_param(const Column& column,
                             const std::optional<flow::AttributeValue>& value) {
  using flow::AttributeValue;
  PgConnection::Param p;
  const bool tz = column.base_type == "timestamp with time zone";
  if (column.kind == ColumnKind::kDatetime) p.type_oid = tz ? kTimestamptzOid : kTimestampOid;
  if (column.kind == ColumnKind::kBytes) p.type_oid = kByteaOid;
  if (!value) return p;
  switch (value->value_case()) {
    case AttributeValue::kStringValue:
      p.value = value->string_value();
      break;
    case AttributeValue::kInt64Value:
      p.value = std::to_string(value->int64_value());
      break;
    case AttributeValue::kDoubleValue:
      p.value = double_text(column, value->double_value());
      break;
    case AttributeValue::kBoolValue:
      p.value = value->bool_value() ? "true" : "false";
      break;
    case AttributeValue::kJsonValue:
      p.value = value->json_value();
      break;
    case AttributeValue::kDatetimeUnixMs:
      p.value = timestamp_binary(column, value->datetime_unix_ms());
      p.binary = true;
      p.type_oid = tz ? kTimestamptzOid : kTimestampOid;
      break;
    case AttributeValue::kBytesValue:
      p.value = value->bytes_value();
      p.binary = true;
      p.type_oid = kByteaOid;
      break;
    case AttributeValue::VALUE_NOT_SET:
      break;
  }
  return p;
}

}  // namespace dex::attrstore
