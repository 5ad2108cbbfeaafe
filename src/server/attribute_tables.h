// The Attribute Store tables of a node process (docs/attribute-store.md):
// opened, pinged and described once at startup, before the lease is touched,
// so a missing table or a wrong DSN fails the start naming the store; the
// active process's engine syncs them. `serve --check` opens them the same way.
#pragma once

#include <memory>
#include <vector>

#include "attrstore/attribute_table.h"
#include "config/config.h"

namespace dex {

struct AttributeTables {
  std::vector<std::unique_ptr<attrstore::AttributeTable>> owned;
  std::vector<attrstore::AttributeTable*> pointers() const;
};

// One table per configured store, in order. The first failure answers (naming
// the store, never the DSN); tables opened before it are closed.
StatusOr<AttributeTables> open_attribute_tables(const NodeSettings& settings);

}  // namespace dex
