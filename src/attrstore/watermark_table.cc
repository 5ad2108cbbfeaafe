// dex_attribute_sync_watermark: one row per (node ID, store name), written in
// the same transaction as the rows it covers, so that the table and the
// watermark never disagree.
#include "attrstore/attribute_table.h"
#include "attrstore/table_name.h"

namespace dex::attrstore {

std::string watermark_table_ddl(StoreType type, std::string_view schema) {
  const std::string name =
      quoted_table(TableName{std::string(schema), std::string(kWatermarkTable)}, type);
  const bool pg = type == StoreType::kPostgres;
  // MySQL: a binary collation compares node IDs and store names exactly;
  // datetime(6) holds UTC without timestamp's 2038 limit.
  return "CREATE TABLE IF NOT EXISTS " + name +
         " (\n"
         "  node_id varchar(128) NOT NULL,\n"
         "  store varchar(128) NOT NULL,\n"
         "  epoch bigint NOT NULL,\n"
         "  last_slot bigint NOT NULL,\n"
         "  process varchar(256) NOT NULL,\n" +
         (pg ? "  updated_at timestamp with time zone NOT NULL DEFAULT now(),\n"
             : "  updated_at datetime(6) NOT NULL,\n") +
         "  PRIMARY KEY (node_id, store)\n" +
         (pg ? ")" : ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin");
}

}  // namespace dex::attrstore
