// A full consistency check of the flow rules' state (docs/flow-rules.md,
// "Invariants"): every index entry (running attempts, task queues, timers,
// Channel messages) is referenced by the state it serves and vice versa.
// The seeded simulation and the fuzz target run it after every record.
#pragma once

#include "common/status.h"
#include "flow/kv_txn.h"

#include <map>
#include <string>
#include <vector>

namespace dex::flow {

// Whether check_state also folds every run's journal (docs/flow-rules.md,
// "Run journal") and compares it with the run: the costliest check, which a
// long simulation runs on some of its checks only.
enum class JournalCheck { kAll, kSkip };

// A run's state as KvFlowTxn stores it (its record, Step executions, Channel
// queues and messages, Attributes, RPCs), key by key; and the same keys as the
// first `count` deltas of a journal rebuild them (run_journal.h).
using StateKeys = std::map<std::string, std::string, std::less<>>;
StateKeys run_state(KvStore& kv, const RunKey& run);
StateKeys folded_state(const std::vector<RunDelta>& deltas, size_t count);

// Ok, or a Corruption naming the first broken invariant.
Status check_state(KvStore& kv, JournalCheck journals = JournalCheck::kAll);

}  // namespace dex::flow
