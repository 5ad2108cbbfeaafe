// What an apply tells the shell around the rules (docs/flow-rules.md, "The
// flow engine"). The bottom of src/flow.
#pragma once

#include <compare>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "dex/flow_records.pb.h"

namespace dex::flow {

// One run, as the effects name it.
struct RunKey {
  std::string flow_id, run_id;
  bool operator==(const RunKey&) const = default;
  auto operator<=>(const RunKey&) const = default;
};
// Something of one run: a Step execution or an RPC, by its ID.
struct RunItem {
  RunKey run;
  std::string id;
  bool operator==(const RunItem&) const = default;
  auto operator<=>(const RunItem&) const = default;
};
// "<flow>/<run>" and "<flow>/<run>/<id>", for messages and test output.
inline std::ostream& operator<<(std::ostream& out, const RunKey& k) {
  return out << k.flow_id << "/" << k.run_id;
}
inline std::ostream& operator<<(std::ostream& out, const RunItem& i) {
  return out << i.run << "/" << i.id;
}

// What the shell around the rules must learn from an apply: which tasks to
// dispatch, which Worker streams to tell, which timers to watch, whom to wake.
struct Effects {
  struct Queued {
    std::string flow_type;
    TaskRef task;
    uint64_t seq = 0;
    Durability durability = DURABILITY_UNSPECIFIED;
  };
  // Started and Ended also say what metrics label them with (docs/metrics.md):
  // the run's Flow type, the Step type (an RPC: its name; the timeout handler:
  // "") and record times, Unix ms.
  struct Started {
    TaskRef task;
    std::string task_id, worker_id;
    std::string flow_type, type;
    int64_t queued_ms = 0;  // when it was queued; 0: not known (an older version queued it)
    int64_t at_ms = 0;      // the start
  };
  struct Ended {  // a running attempt ended: a result, a timeout, a cancel, recovery
    TaskRef task;
    std::string task_id, worker_id;
    AttemptOutcome outcome = ATTEMPT_OUTCOME_UNSPECIFIED;
    std::string flow_type, type;
    int64_t started_ms = 0;  // the attempt's start
    int64_t at_ms = 0;       // its end
  };
  struct Closed {
    std::string flow_id, run_id;
    FlowStatus status = FLOW_STATUS_UNSPECIFIED;
    std::string flow_type;
  };
  struct RpcEnded {  // an RPC ended, whatever its attempt was doing
    std::string flow_type, name;
    AttemptOutcome outcome = ATTEMPT_OUTCOME_UNSPECIFIED;
    int64_t invoked_ms = 0;  // its InvokeRpc
    int64_t at_ms = 0;       // its end
  };
  std::vector<std::string> runs_started;  // the Flow type of every run created
  std::vector<RpcEnded> rpcs_ended;
  std::vector<Queued> queued;
  std::vector<Started> started;
  std::vector<Ended> ended;
  std::vector<int64_t> timers_set;  // fire times of new durable timers
  std::vector<Closed> closed;
  std::vector<RunKey> history;             // runs with new events
  std::vector<RunItem> steps_done;         // Step executions closed (item: the execution ID)
  std::vector<RunKey> attributes_changed;  // runs with new values
  std::vector<RunItem> rpcs_done;          // RPCs that ended (item: the RPC ID)
  std::vector<RunKey> runs_deleted;        // runs deleted by retention
  void clear() { *this = Effects(); }
};

}  // namespace dex::flow
