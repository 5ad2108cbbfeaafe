#include "server/attribute_tables.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace dex {

namespace {
// How long startup waits for one database to answer.
constexpr Duration kConnectTimeoutMax = seconds(10);
}  // namespace

std::vector<attrstore::AttributeTable*> AttributeTables::pointers() const {
  std::vector<attrstore::AttributeTable*> out;
  for (const auto& t : owned) out.push_back(t.get());
  return out;
}

StatusOr<AttributeTables> open_attribute_tables(const NodeSettings& settings) {
  AttributeTables tables;
  const auto& c = settings.attribute_store;
  const Duration timeout = std::min(c.sync_attempt_timeout, kConnectTimeoutMax);
  for (const auto& store : c.stores) {  // bounded by the configured stores
    // MySQL's lock and idle timeouts are whole seconds (at least 1 s): below an
    // 8 s lease (a 2 s budget) the server cannot hold its transactions to a
    // quarter of it (attrstore/transaction_bound.h).
    if (store.type == attrstore::StoreType::kMysql && settings.lease_duration < seconds(8)) {
      spdlog::warn(
          "Attribute Store \"{}\": lease.duration {} ms gives each transaction {} ms, below what "
          "MySQL's whole-second timeouts can enforce; keep lease.duration at 8s or more "
          "(docs/attribute-store-types.md, \"The transaction bound\")",
          store.name, to_ms(settings.lease_duration), to_ms(settings.lease_duration / 4));
    }
    auto table = attrstore::AttributeTable::open(store, c, settings.node_id, timeout);
    if (!table.is_ok()) return table.status();  // names the store; `tables` closes the others
    spdlog::info("Attribute Store \"{}\": {} {} is ready", store.name,
                 attrstore::store_type_name(store.type), table.value()->describe_target());
    tables.owned.push_back(std::move(table.value()));
  }
  return tables;
}

}  // namespace dex
