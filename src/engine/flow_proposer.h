// Appends flow records to the node's log and answers each caller once its
// record is durable and applied (docs/flow-rules.md, "The flow engine").
// Thread-safe. Callbacks run on the log writer's thread (or the caller's, when
// the append fails at once) and must not block.
#pragma once

#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "dex/flow_records.pb.h"
#include "engine/state_machine.h"

namespace dex {

class LogWriter;

class FlowProposer {
 public:
  using Done = std::function<void(StatusOr<flow::ApplyResult>)>;

  explicit FlowProposer(LogWriter& log) : log_(log) {}

  // Appends `record` (its proposal_id is set here, and its times raised to the
  // last appended record's: see record_time.h); `done` runs once with the
  // rules' result, or with Stopped / InvalidArgument (the writer refused it).
  void propose(flow::FlowRecord record, Done done);
  // Later proposals' times are at least `ms` (the store's time floor, when the
  // engine starts: the previous holder's clock may have been ahead).
  void raise_floor(int64_t ms);
  // The store applied these results (the log writer's thread, in order).
  void applied(std::vector<FlowRecordResult>& results);
  // Every waiting caller gets `why`; later proposals too.
  void stop(const Status& why);

 private:
  LogWriter& log_;
  std::mutex mu_;
  bool stopped_ = false;                        // guarded by mu_
  Status stopped_why_;                          // guarded by mu_
  uint64_t next_id_ = 1;                        // guarded by mu_
  std::unordered_map<uint64_t, Done> pending_;  // guarded by mu_; bounded by the writer's queue
  // Serializes stamping and appending, so records' times rise in log order.
  std::mutex order_mu_;
  int64_t last_stamp_ms_ = 0;  // guarded by order_mu_
};

}  // namespace dex
