// A full consistency check of the flow rules' state (docs/flow-rules.md,
// "Invariants"): every index entry (running attempts, task queues, timers,
// Channel messages) is referenced by the state it serves and vice versa.
// The seeded simulation and the fuzz target run it after every record.
#pragma once

#include "common/status.h"
#include "flow/kv_txn.h"

namespace dex::flow {

// Ok, or a Corruption naming the first broken invariant.
Status check_state(KvStore& kv);

}  // namespace dex::flow
