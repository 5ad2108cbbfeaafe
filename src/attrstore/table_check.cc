#include "attrstore/table_check.h"

#include <string>
#include <vector>

namespace dex::attrstore {
namespace {

std::string display(const DescribedTable& t) {
  return t.schema.empty() ? t.table : t.schema + "." + t.table;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

constexpr std::string_view kNeedKey = "it needs exactly one character column (the Flow ID)";

Status check_key(const DescribedTable& t, const std::vector<const Column*>& keys) {
  const std::string name = "table " + display(t);
  if (keys.empty())
    return Status::permanent(name + " has no primary key; " + std::string(kNeedKey));
  if (keys.size() > 1) {
    std::vector<std::string> names;
    for (const Column* c : keys) names.push_back(c->name);
    return Status::permanent(name + " has " + std::to_string(keys.size()) +
                             " primary-key columns (" + join(names) + "); " +
                             std::string(kNeedKey));
  }
  if (keys[0]->kind != ColumnKind::kString) {
    return Status::permanent(
        name + " has the primary key " + keys[0]->name + " of type " + keys[0]->sql_type +
        "; it needs a character column (char, varchar or text) for the Flow ID");
  }
  const std::string& collation = keys[0]->collation;
  if (!collation.empty() && collation != "binary" && !collation.ends_with("_bin")) {
    return Status::permanent(
        name + " has the primary key " + keys[0]->name + " with the collation " + collation +
        ": Flow IDs that differ only in case or accents would share a row; it needs a binary "
        "collation (e.g. utf8mb4_bin)");
  }
  return Status::ok();
}

}  // namespace

StatusOr<TableSchema> check_target_table(const DescribedTable& t) {
  if (!t.unusable.empty()) return Status::permanent("table " + display(t) + " " + t.unusable);
  std::vector<const Column*> keys;
  std::vector<std::string> no_default;
  for (const Column& c : t.columns) {
    if (c.primary_key) {
      keys.push_back(&c);
    } else if (!c.nullable && !c.has_default) {
      no_default.push_back(c.name);
    }
  }
  if (Status s = check_key(t, keys); !s.is_ok()) return s;
  if (!no_default.empty()) {
    return Status::permanent(
        "table " + display(t) + " has NOT NULL columns without a default (" + join(no_default) +
        "): a Flow ID's first row could not be inserted; give them a default or allow NULL");
  }
  TableSchema schema;
  schema.key_column = keys[0]->name;
  schema.columns = t.columns;
  return schema;
}

Status check_watermark_table(const DescribedTable& t) {
  struct Expected {
    std::string_view name;
    ColumnKind kind;
    std::string_view type;
  };
  static constexpr Expected kColumns[] = {
      {"node_id", ColumnKind::kString, "varchar(128)"},
      {"store", ColumnKind::kString, "varchar(128)"},
      {"epoch", ColumnKind::kInt, "bigint"},
      {"last_slot", ColumnKind::kInt, "bigint"},
      {"process", ColumnKind::kString, "varchar(256)"},
      {"updated_at", ColumnKind::kDatetime, "timestamp"},
  };
  const std::string name = "watermark table " + display(t);
  if (!t.unusable.empty()) return Status::permanent(name + " " + t.unusable);
  TableSchema schema;
  schema.columns = t.columns;
  for (const Expected& e : kColumns) {
    const Column* c = schema.find(e.name);
    const bool int_ok = c && (c->kind != ColumnKind::kInt || c->int_max == INT64_MAX);
    if (c == nullptr || c->kind != e.kind || !int_ok) {
      return Status::permanent(name + " has no column " + std::string(e.name) + " " +
                               std::string(e.type) + " (watermark_table_ddl gives its definition)");
    }
  }
  std::vector<std::string> keys;
  for (const Column& c : t.columns) {
    if (c.primary_key) keys.push_back(c.name);
  }
  if (keys.size() != 2 || !schema.find("node_id")->primary_key ||
      !schema.find("store")->primary_key) {
    return Status::permanent(name + " has the primary key (" + join(keys) +
                             "); it needs (node_id, store)");
  }
  return Status::ok();
}

}  // namespace dex::attrstore
