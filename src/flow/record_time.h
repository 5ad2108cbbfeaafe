// The time a flow record carries, kept in log order: a record stamped when its
// input arrived (a Worker's result, a client's call) may reach the log after a
// record stamped later on another thread, and a new active process's clock may
// be behind the previous holder's. The rules write that time into the history,
// so without this a run's events (and a child's close against its parent's
// wait) could go back in time by the gap.
#pragma once

#include <cstdint>

#include "dex/flow_records.pb.h"

namespace dex {

// Raises every time `record` carries (its kind's and its assignments') to at
// least `floor`; returns the kind's time after that (the new floor).
int64_t stamp_no_earlier(flow::FlowRecord& record, int64_t floor);

// The greatest time `record` carries (0: none).
int64_t record_time(const flow::FlowRecord& record);

}  // namespace dex
