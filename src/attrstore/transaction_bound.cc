#include "attrstore/transaction_bound.h"

#include <algorithm>
#include <cassert>

namespace dex::attrstore {
namespace {

constexpr Duration kMinTimeout = milliseconds(1);
constexpr Duration kMysqlMinWholeTimeout = seconds(1);

Duration at_least(Duration d, Duration min) { return std::max(d, min); }

}  // namespace

TransactionBound postgres_bound(Duration budget) {
  assert(budget > Duration::zero());
  TransactionBound b;
  b.budget = budget;
  b.guard = at_least(budget / 2, kMinTimeout);
  b.statement = at_least(budget / 4, kMinTimeout);
  b.lock = b.statement;
  b.idle = at_least(budget / 4, kMinTimeout);
  return b;
}

TransactionBound mysql_bound(Duration budget) {
  assert(budget > Duration::zero());
  TransactionBound b;
  b.budget = budget;
  const Duration quarter = budget / 4;
  const Duration whole_quarter = std::chrono::duration_cast<seconds>(quarter);  // rounds down
  b.idle = at_least(whole_quarter, kMysqlMinWholeTimeout);
  b.lock = at_least(whole_quarter, kMysqlMinWholeTimeout);
  b.statement = at_least(quarter, kMinTimeout);
  const Duration room = budget - b.statement - b.idle;
  b.guard = std::max(std::min(budget / 2, room), at_least(quarter, kMinTimeout));
  return b;
}

}  // namespace dex::attrstore
