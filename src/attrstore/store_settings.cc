#include "attrstore/store_settings.h"

namespace dex::attrstore {

std::string_view store_type_name(StoreType type) {
  switch (type) {
    case StoreType::kPostgres:
      return "postgres";
    case StoreType::kMysql:
      return "mysql";
  }
  return "unknown";
}

std::optional<StoreType> parse_store_type(std::string_view text) {
  if (text == "postgres") return StoreType::kPostgres;
  if (text == "mysql") return StoreType::kMysql;
  return std::nullopt;
}

}  // namespace dex::attrstore
