// Whether a described table can be the target of a store, and whether a
// described watermark table has dex's columns. Pure. Messages name the table
// and the reason, without the store prefix (the caller adds it).
#pragma once

#include "attrstore/attribute_table.h"
#include "attrstore/sql_session.h"
#include "common/status.h"

namespace dex::attrstore {

// The schema of a target table: exactly one primary-key column, of a character
// type; every other NOT NULL column has a default or is generated. Permanent
// otherwise.
StatusOr<TableSchema> check_target_table(const DescribedTable& table);

// node_id, store, process (character), epoch, last_slot (integer: bigint),
// updated_at (timestamp), primary key (node_id, store). Permanent otherwise.
Status check_watermark_table(const DescribedTable& table);

// The watermark key's limits: the columns are varchar(128).
inline constexpr size_t kWatermarkKeyCharsMax = 128;
// The process column is varchar(256); longer texts are cut to it.
inline constexpr size_t kWatermarkProcessCharsMax = 256;

}  // namespace dex::attrstore
