// Attribute values as libmariadb parameters of the binary protocol: no text
// formats and no escaping; times as MYSQL_TIME in UTC (the session's time
// zone is +00:00), cut to the column's fractional digits.
#pragma once

#include <optional>

#include "attrstore/attribute_table.h"
#include "attrstore/mysql_connection.h"

namespace dex::attrstore {

// `value` for `column` (NULL for nullopt).
MysqlConnection::Param mysql_param(const Column& column,
                                   const std::optional<flow::AttributeValue>& value);

}  // namespace dex::attrstore
