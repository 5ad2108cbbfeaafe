// `dexcli flow time-travel --to POINT` (docs/time-travel.md): the point's
// text, and the request ID a batch derives for each run so that running the
// same batch again travels nothing twice.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "dex/flow_records.pb.h"

namespace dex::cli {

// beginning | time:<RFC 3339, Unix ms, or a duration ago: 30m> |
// step-type:<Type> (its latest execution) | first-step-type:<Type> |
// step:<StepExecutionID>. InvalidArgument naming the text and the forms.
StatusOr<flow::TimeTravelPoint> parse_point(std::string_view text, int64_t now_unix_ms);

// The point as parse_point reads it back (times as RFC 3339).
std::string point_text(const flow::TimeTravelPoint& point);

// "tt-<run ID>-<16 hex digits of the point>": the same run and point give the
// same ID in every dexcli process, so a repeat of a batch is answered
// "already done" by the server instead of traveling again.
std::string batch_request_id(std::string_view run_id, const flow::TimeTravelPoint& point);

}  // namespace dex::cli
