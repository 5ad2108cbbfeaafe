#include "cli/time_travel_point.h"

#include <cstdio>

#include "cli/list_query.h"
#include "common/rfc3339.h"

namespace dex::cli {

namespace {

constexpr std::string_view kForms =
    "beginning, time:<RFC 3339 time, Unix ms or a duration ago such as 30m>, "
    "step-type:<StepType> (its latest execution), first-step-type:<StepType>, "
    "step:<StepExecutionID>";

Status bad(std::string_view text, std::string_view why) {
  return Status::invalid_argument("--to '" + std::string(text) + "': " + std::string(why) +
                                  "; the points are " + std::string(kForms));
}

// FNV-1a, 64 bits: a hash that stays the same across processes and builds
// (std::hash and absl::Hash promise neither), for request IDs only.
uint64_t fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {  // bounded by the text
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

StatusOr<flow::TimeTravelPoint> parse_point(std::string_view text, int64_t now_unix_ms) {
  flow::TimeTravelPoint point;
  if (text == "beginning") {
    point.set_kind(flow::TIME_TRAVEL_BEGINNING);
    return point;
  }
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return bad(text, "not a point");
  const std::string_view form = text.substr(0, colon);
  const std::string_view value = text.substr(colon + 1);
  if (value.empty()) return bad(text, "nothing after '" + std::string(form) + ":'");
  if (form == "time") {
    auto at = parse_time_bound(value, now_unix_ms);
    if (!at.is_ok()) return bad(text, at.status().message());
    point.set_kind(flow::TIME_TRAVEL_EVENT_TIME);
    point.set_event_time_ms(*at);
  } else if (form == "step-type" || form == "first-step-type") {
    point.set_kind(form == "step-type" ? flow::TIME_TRAVEL_LATEST_OF_STEP_TYPE
                                       : flow::TIME_TRAVEL_FIRST_OF_STEP_TYPE);
    point.set_step_type(std::string(value));
  } else if (form == "step") {
    point.set_kind(flow::TIME_TRAVEL_STEP_EXECUTION);
    point.set_step_execution_id(std::string(value));
  } else {
    return bad(text, "unknown form '" + std::string(form) + "'");
  }
  return point;
}

std::string point_text(const flow::TimeTravelPoint& point) {
  switch (point.kind()) {
    case flow::TIME_TRAVEL_BEGINNING:
      return "beginning";
    case flow::TIME_TRAVEL_EVENT_TIME:
      return "time:" + rfc3339_text(point.event_time_ms());
    case flow::TIME_TRAVEL_LATEST_OF_STEP_TYPE:
      return "step-type:" + point.step_type();
    case flow::TIME_TRAVEL_FIRST_OF_STEP_TYPE:
      return "first-step-type:" + point.step_type();
    case flow::TIME_TRAVEL_STEP_EXECUTION:
      return "step:" + point.step_execution_id();
    default:
      return "unknown";
  }
}

std::string batch_request_id(std::string_view run_id, const flow::TimeTravelPoint& point) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv1a(point_text(point))));
  return "tt-" + std::string(run_id) + "-" + hex;
}

}  // namespace dex::cli
