#include "attrstore/mysql_values.h"

namespace dex::attrstore {

MysqlConnection::Param mysql_param(const Column& column,
                                   const std::optional<flow::AttributeValue>& value) {
  using flow::AttributeValue;
  using T = MysqlConnection::Param::Type;
  MysqlConnection::Param p;
  if (!value) return p;
  switch (value->value_case()) {
    case AttributeValue::kStringValue:
      p.type = T::kString;
      p.text = value->string_value();
      break;
    case AttributeValue::kJsonValue:
      p.type = T::kString;
      p.text = value->json_value();
      break;
    case AttributeValue::kBytesValue:
      p.type = T::kBlob;  // the server takes a blob parameter as binary, not utf8mb4
      p.text = value->bytes_value();
      break;
    case AttributeValue::kInt64Value:
      p.type = T::kInt;
      p.integer = value->int64_value();
      break;
    case AttributeValue::kDoubleValue:
      p.type = T::kDouble;
      p.real = value->double_value();
      break;
    case AttributeValue::kBoolValue:  // tinyint(1) and bit(1) both take 0/1
      p.type = T::kTiny;
      p.integer = value->bool_value() ? 1 : 0;
      break;
    case AttributeValue::kDatetimeUnixMs:
      p.type = column.base_type == "timestamp" ? T::kTimestamp : T::kDatetime;
      p.integer = value->datetime_unix_ms();
      p.fraction_digits = column.kind == ColumnKind::kDatetime ? column.fraction_digits : 6;
      break;
    case AttributeValue::VALUE_NOT_SET:
      break;
  }
  return p;
}

}  // namespace dex::attrstore
