// Attribute values as libpq parameters, in the form each column type reads:
// text for strings, numbers, booleans and JSON; binary for bytea and for
// timestamps (microseconds since 2000-01-01, so that no time zone or text
// format is involved).
#pragma once

#include <optional>

#include "attrstore/attribute_table.h"
#include "attrstore/pg_connection.h"

namespace dex::attrstore {

// `value` for `column` (NULL for nullopt). A value of a type the column does
// not take (the caller skipped misfit) still becomes a parameter; the server
// refuses it.
PgConnection::Param pg_param(const Column& column,
                             const std::optional<flow::AttributeValue>& value);

}  // namespace dex::attrstore
