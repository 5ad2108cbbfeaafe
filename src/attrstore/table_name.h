// A store's tableName, parsed and quoted. Names are taken exactly as written
// (case-sensitive, no folding); a part may be quoted to hold a dot: "..."
// with "" for a quote (PostgreSQL), `...` with `` (MySQL).
#pragma once

#include <string>
#include <string_view>

#include "attrstore/store_settings.h"
#include "common/status.h"

namespace dex::attrstore {

struct TableName {
  std::string schema;  // PostgreSQL schema / MySQL database; empty: the connection's
  std::string table;
  // "schema.table" or "table", unquoted, for messages.
  std::string display() const;
};

// "table", "schema.table" (PostgreSQL), "database.table" (MySQL). InvalidArgument
// naming the text and what is wrong (an empty part, three parts, an unclosed
// quote, a name longer than the database allows).
StatusOr<TableName> parse_table_name(std::string_view text, StoreType type);

// "na""me" (PostgreSQL), `na``me` (MySQL).
std::string quote_identifier(std::string_view name, StoreType type);
// The quoted, qualified name: "schema"."table"; just "table" without a schema.
std::string quoted_table(const TableName& name, StoreType type);

}  // namespace dex::attrstore
