// One run's lock keys (docs/flow-rules.md, "Locks"): who holds which key
// (Run.locks) and who waits for which, first come first served
// (Run.lock_waiters). Pure: it edits those two fields of the run and nothing
// else; the run's editor writes the history events and queues the attempts a
// grant lets go.
#pragma once

#include <string>
#include <vector>

#include "dex/flow_records.pb.h"

namespace dex::flow {

class LockTable {
 public:
  // `run` must outlive the table.
  explicit LockTable(Run& run) : run_(run) {}

  // True when `holder`'s `method` now holds every key (none: true at once);
  // false when a key is held or wanted by an earlier waiter: it waits, last.
  bool take(const std::string& holder, Method method,
            const google::protobuf::RepeatedPtrField<std::string>& keys);
  // Releases every key `holder`'s `method` holds; the keys, in held order.
  std::vector<std::string> release(const std::string& holder, Method method);
  // `holder`'s `method` stops waiting (it must wait).
  void drop_waiter(const std::string& holder, Method method);
  // The waiters that can now have all their keys, in queue order, holding
  // them from now on; a waiter wanting a key still held, or wanted by an
  // earlier waiter that stays, stays in the queue.
  std::vector<LockWaiter> grant();

 private:
  void hold(const std::string& holder, Method method, const std::string& key);

  Run& run_;
};

}  // namespace dex::flow
