// How a column the database describes becomes a Column (its kind and limits),
// per database. Pure: the describe queries of postgres_table.cc and
// mysql_table.cc gather the facts; the type contract's tests feed them directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attrstore/attribute_table.h"

namespace dex::attrstore {

// pg_attribute/pg_type facts of one column (domains resolved to their base type).
struct PostgresColumnFacts {
  std::string name;
  std::string sql_type;   // format_type(atttypid, atttypmod): "character varying(64)"
  std::string base_type;  // format_type of the base type without modifier: "character varying"
  std::string type_name;  // pg_type.typname of the base type: "varchar", "int4", "timestamptz"
  int32_t typmod = -1;    // of the base type (-1: none)
  bool not_null = false, has_default = false, primary_key = false;
  bool generated = false;  // GENERATED ALWAYS AS (...) STORED or GENERATED ALWAYS AS IDENTITY
  bool identity = false;   // any identity column (it has a default)
  std::string server_encoding = "UTF8";
};
Column classify_postgres_column(const PostgresColumnFacts& facts);

// information_schema.COLUMNS facts of one column.
struct MysqlColumnFacts {
  std::string name;
  std::string column_type;  // COLUMN_TYPE: "int(10) unsigned", "tinyint(1)", "varchar(64)"
  std::string data_type;    // DATA_TYPE: "int", "varchar", "longtext"
  bool nullable = true;
  bool has_default = false;  // COLUMN_DEFAULT is not SQL NULL, or auto_increment
  std::string extra;         // EXTRA: "auto_increment", "VIRTUAL GENERATED", ...
  std::optional<int64_t> char_max_length, numeric_precision, numeric_scale, datetime_precision;
  std::string charset;    // CHARACTER_SET_NAME
  std::string collation;  // COLLATION_NAME
  bool primary_key = false;
  bool json_check = false;  // MariaDB: a CHECK (json_valid(column)) makes a text column JSON
};
Column classify_mysql_column(const MysqlColumnFacts& facts);

// The largest code point a character set stores: utf8mb3/ucs2 0xFFFF, latin1
// 0xFF, ascii 0x7F; others (utf8mb4, UTF8, unknown) 0x10FFFF.
char32_t max_code_point_of(const std::string& charset);

}  // namespace dex::attrstore
