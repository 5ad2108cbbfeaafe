// The label values of the flow enums in the metrics (docs/metrics.md).
#pragma once

#include <string_view>

#include "dex/flow.pb.h"
#include "dex/flow_records.pb.h"

namespace dex {

// "completed", "failed", "timed_out", "not_completed"; "unspecified" otherwise.
std::string_view attempt_outcome_label(flow::AttemptOutcome outcome);
// "completed", "failed", "canceled", "terminated", "timed_out";
// "running"/"unspecified" for the others.
std::string_view flow_status_label(flow::FlowStatus status);
// The kind label of an attempt's method: "wait_for", "execute",
// "timeout_handler"; "" for RPC attempts (counted as RPC calls instead).
std::string_view attempt_kind_label(flow::Method method);

}  // namespace dex
