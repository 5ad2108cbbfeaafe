// What an apply tells the shell around the rules (docs/flow-rules.md, "The
// flow engine"). The bottom of src/flow.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dex/flow_records.pb.h"

namespace dex::flow {

// What the shell around the rules must learn from an apply: which tasks to
// dispatch, which Worker streams to tell, which timers to watch, whom to wake.
struct Effects {
  struct Queued {
    std::string flow_type;
    TaskRef task;
    uint64_t seq = 0;
    Durability durability = DURABILITY_UNSPECIFIED;
  };
  struct Started {
    TaskRef task;
    std::string task_id, worker_id;
  };
  struct Ended {  // a running attempt ended: a result, a timeout, a cancel, recovery
    TaskRef task;
    std::string task_id, worker_id;
    AttemptOutcome outcome = ATTEMPT_OUTCOME_UNSPECIFIED;
  };
  struct Closed {
    std::string flow_id, run_id;
    FlowStatus status = FLOW_STATUS_UNSPECIFIED;
  };
  std::vector<Queued> queued;
  std::vector<Started> started;
  std::vector<Ended> ended;
  std::vector<int64_t> timers_set;  // fire times of new durable timers
  std::vector<Closed> closed;
  std::vector<std::string> history;             // "<flow_id>/<run_id>" of runs with new events
  std::vector<std::string> steps_done;          // "<flow_id>/<run_id>/<step execution id>" closed
  std::vector<std::string> attributes_changed;  // "<flow_id>/<run_id>" of runs with new values
  std::vector<std::string> rpcs_done;           // "<flow_id>/<run_id>/<rpc id>" that ended
  std::vector<std::string> runs_deleted;        // "<flow_id>/<run_id>" deleted by retention
  void clear() { *this = Effects(); }
};

}  // namespace dex::flow
