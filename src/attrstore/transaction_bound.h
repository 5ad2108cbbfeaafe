// How one transaction's budget is split into server-side timeouts, so that the
// transaction ends (committed, or rolled back by the server) within the budget
// even if this process freezes mid-transaction (docs/attribute-store-types.md,
// "The transaction bound").
//
// Every statement of a transaction checks, on the server's clock, that less
// than `guard` has passed since BEGIN; a statement that passes runs at most
// `statement` (lock waits included: `lock` <= statement where the database
// allows); a client that then freezes is disconnected by the server after
// `idle` (idle in transaction), which rolls back and releases the locks. So the
// worst case is guard + statement + idle <= budget.
#pragma once

#include "common/clock.h"

namespace dex::attrstore {

struct TransactionBound {
  Duration budget{};
  Duration guard{};      // a statement starting later than this after BEGIN is refused
  Duration statement{};  // statement timeout
  Duration lock{};       // lock wait timeout
  Duration idle{};       // idle-in-transaction timeout
};

// PostgreSQL (millisecond timeouts): guard budget/2, statement, lock and idle
// budget/4 each.
TransactionBound postgres_bound(Duration budget);

// MariaDB: its lock and idle timeouts are whole seconds (at least 1), so they
// are budget/4 rounded down, at least 1 s; max_statement_time is budget/4;
// the guard is budget/2, or less when the rounding up to 1 s would otherwise
// break the bound, but never below budget/4. Budgets of 4 s and more keep the
// bound exactly; below about 2.7 s the 1 s minimums win and the worst case is
// budget/4 + budget/4 + 1 s (a 1 s budget: up to 1.5 s).
TransactionBound mysql_bound(Duration budget);

}  // namespace dex::attrstore
