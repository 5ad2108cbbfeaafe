// The attributeStore.* settings (docs/configuration.md): the SQL tables that a
// node projects synced Flow Attributes into. src/config fills them from YAML;
// src/engine's sync loop opens one AttributeTable per store with them. Nothing
// here reads a file or opens a connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace dex::attrstore {

enum class StoreType { kPostgres, kMysql };

// How the sync loop retries a failed attempt (attributeStore.syncRetryPolicy).
struct SyncRetryPolicy {
  Duration initial_interval = milliseconds(100);
  Duration maximum_interval = seconds(30);
  double backoff_coefficient = 2.0;
};

// One store (attributeStore.stores.<name>).
struct StoreSettings {
  std::string name;
  StoreType type = StoreType::kPostgres;
  // A secret (it may hold a password): never in logs, errors or describe
  // output; redact_dsn (attrstore/dsn.h) gives a printable form.
  std::string dsn;
  // Where the DSN came from when not given inline (dsnFile, dsnEnv), for
  // describe output: a path or a variable's name is not a secret.
  std::string dsn_file, dsn_env;
  // As written: "table" or "schema.table" (PostgreSQL), "table" or
  // "database.table" (MySQL); parse_table_name (attrstore/table_name.h).
  std::string table_name;
  bool delete_rows = false;  // deleteRows: a deleted run's row is removed
};

// attributeStore.*
struct AttributeStoreSettings {
  std::vector<StoreSettings> stores;
  Duration schema_sync_interval = std::chrono::minutes(1);
  uint32_t sync_batch_size = 100;
  Duration sync_attempt_timeout = seconds(30);
  SyncRetryPolicy sync_retry_policy;
  // CREATE TABLE IF NOT EXISTS the watermark table at open; false: an
  // operator made it (watermark_table_ddl) and open only checks it.
  bool create_watermark_table = true;
};

// "postgres" / "mysql", as the type key of a store and describe output spell them.
std::string_view store_type_name(StoreType type);
// The inverse of store_type_name; nullopt for any other text.
std::optional<StoreType> parse_store_type(std::string_view text);

}  // namespace dex::attrstore
