// claim() and commit(): the watermark's rules in one transaction each. The
// watermark row is read FOR UPDATE first, so two processes (an old active one
// and its successor) serialize on it: the older epoch is refused once the
// newer has claimed, and the slot moves forward only from where it was read.
#include <cassert>
#include <limits>

#include "attrstore/sql_table.h"
#include "attrstore/table_check.h"

namespace dex::attrstore {
namespace {

constexpr uint64_t kBigintMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// The process text cut to the column's 256 characters (never inside a character).
std::string cut_process(std::string_view process) {
  size_t chars = 0;
  for (size_t i = 0; i < process.size(); ++i) {
    if ((static_cast<unsigned char>(process[i]) & 0xC0) != 0x80 &&
        ++chars > kWatermarkProcessCharsMax) {
      return std::string(process.substr(0, i));
    }
  }
  return std::string(process);
}

std::string ms_text(Duration d) {
  return std::to_string(std::chrono::duration_cast<milliseconds>(d).count()) + " ms";
}

}  // namespace

SqlAttributeTable::Txn SqlAttributeTable::start_txn(Duration budget) const {
  Txn txn;
  txn.start = SystemClock::instance().now();
  txn.deadline = txn.start + budget;
  txn.bound = store_.type == StoreType::kPostgres ? postgres_bound(budget) : mysql_bound(budget);
  return txn;
}

Status SqlAttributeTable::within_guard(const Txn& txn) const {
  if (SystemClock::instance().now() - txn.start < txn.bound.guard) return Status::ok();
  return Status::transient("the transaction ran past its budget (" + ms_text(txn.bound.guard) +
                           " of " + ms_text(txn.bound.budget) + " before its last write)");
}

Status SqlAttributeTable::begin_txn(const Txn& txn) {
  // A reconnect (not inside a transaction) within the budget too.
  const TimePoint connect_deadline = std::min(txn.deadline, op_deadline());
  if (Status s = session_->connect(connect_deadline); !s.is_ok()) return s;
  return session_->begin(txn.bound, txn.deadline);
}

StatusOr<CommitResult> SqlAttributeTable::claim(uint64_t epoch, std::string_view process,
                                                Duration budget) {
  if (budget <= Duration::zero() || epoch > kBigintMax) {
    return Status::invalid_argument(store_prefix(store_.name) +
                                    "claim needs a positive budget and an epoch below 2^63");
  }
  std::lock_guard lock(mu_);
  const Txn txn = start_txn(budget);
  auto result = claim_locked(epoch, cut_process(process), txn);
  if (!result.is_ok()) {
    session_->rollback(txn.deadline);
    return annotate(result.status(), "claim the watermark of");
  }
  return result;
}

StatusOr<CommitResult> SqlAttributeTable::claim_locked(uint64_t epoch, const std::string& process,
                                                       const Txn& txn) {
  if (Status s = begin_txn(txn); !s.is_ok()) return s;
  const Watermark initial{epoch, 0, process};
  if (Status s = session_->insert_watermark_if_absent(key_, initial, txn.deadline); !s.is_ok())
    return s;
  if (Status s = within_guard(txn); !s.is_ok()) return s;
  auto found = session_->lock_watermark(key_, txn.deadline);
  if (!found.is_ok()) return found.status();
  if (!found->has_value()) return Status::transient("the watermark row vanished during the claim");
  const Watermark& read = **found;
  if (read.epoch > epoch) {
    session_->rollback(txn.deadline);
    return CommitResult{CommitOutcome::kFenced, read};
  }
  const Watermark to{epoch, read.slot, process};
  if (Status s = within_guard(txn); !s.is_ok()) return s;
  if (Status s = session_->update_watermark(key_, to, txn.deadline); !s.is_ok()) return s;
  if (Status s = session_->commit(txn.deadline); !s.is_ok()) return s;
  return CommitResult{CommitOutcome::kCommitted, to};
}

StatusOr<CommitResult> SqlAttributeTable::commit(uint64_t epoch, std::string_view process,
                                                 uint64_t after_slot, uint64_t through_slot,
                                                 const std::vector<RowWrite>& rows,
                                                 Duration budget) {
  assert(through_slot > after_slot && "commit moves the watermark forward");
  if (through_slot <= after_slot || budget <= Duration::zero() || epoch > kBigintMax ||
      through_slot > kBigintMax) {
    return Status::invalid_argument(
        store_prefix(store_.name) +
        "commit needs through_slot > after_slot, values below 2^63 and a positive budget");
  }
  std::lock_guard lock(mu_);
  const Txn txn = start_txn(budget);
  auto result =
      commit_locked(Watermark{epoch, through_slot, cut_process(process)}, after_slot, rows, txn);
  if (!result.is_ok()) {
    session_->rollback(txn.deadline);
    return annotate(result.status(), "commit to");
  }
  return result;
}

StatusOr<CommitResult> SqlAttributeTable::commit_locked(const Watermark& to, uint64_t after_slot,
                                                        const std::vector<RowWrite>& rows,
                                                        const Txn& txn) {
  if (Status s = begin_txn(txn); !s.is_ok()) return s;
  auto found = session_->lock_watermark(key_, txn.deadline);
  if (!found.is_ok()) return found.status();
  if (!found->has_value()) {
    return Status::not_found("there is no watermark row for this node and store; claim() first");
  }
  const Watermark& read = **found;
  if (read.epoch > to.epoch || read.slot != after_slot) {
    session_->rollback(txn.deadline);
    return CommitResult{read.epoch > to.epoch ? CommitOutcome::kFenced : CommitOutcome::kMoved,
                        read};
  }
  if (Status s = apply_rows(rows, txn); !s.is_ok()) return s;
  if (Status s = within_guard(txn); !s.is_ok()) return s;
  if (Status s = session_->update_watermark(key_, to, txn.deadline); !s.is_ok()) return s;
  if (hooks_.before_commit) hooks_.before_commit();
  if (Status s = session_->commit(txn.deadline); !s.is_ok()) return s;
  return CommitResult{CommitOutcome::kCommitted, to};
}

Status SqlAttributeTable::apply_rows(const std::vector<RowWrite>& rows, const Txn& txn) {
  for (const RowWrite& row : rows) {
    if (Status s = within_guard(txn); !s.is_ok()) return s;
    if (Status s = session_->write_row(row, schema_, txn.deadline); !s.is_ok()) return s;
  }
  return Status::ok();
}

}  // namespace dex::attrstore
