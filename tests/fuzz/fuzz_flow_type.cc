// Flow-type definitions (src/engine/flow_type.h), both ways they arrive:
// JSON/YAML text (parse_flow_type) and a FlowType protobuf from the API
// (validate_flow_type). Either answers a valid type or InvalidArgument, never an
// exception. What is accepted is within every limit, validating it again
// returns it unchanged (the documented idempotence), and its retry backoff
// stays within 0..maxInterval.
//
// Input: 0x01 | a serialized dex.FlowType, or else the whole input is
// definition text (so that text seeds are plain YAML/JSON files).
#include <set>

#include "engine/flow_type.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"

namespace dex::fuzz {
namespace {

constexpr char kProtoMode = '\x01';

void check_valid(const FlowType& t) {
  FUZZ_CHECK(validate_name(t.name(), kFlowTypeNameBytesMax, "name").is_ok(), "accepted name '{}'",
             t.name());
  FUZZ_CHECK(t.steps_size() >= 1 && static_cast<size_t>(t.steps_size()) <= kStepsPerFlowTypeMax,
             "accepted {} steps", t.steps_size());
  std::set<std::string> names;
  for (const auto& s : t.steps()) names.insert(s.name());
  FUZZ_CHECK(names.size() == static_cast<size_t>(t.steps_size()), "accepted duplicate steps");
  for (const auto& s : t.steps()) {
    for (const auto& dep : s.after()) {
      FUZZ_CHECK(names.contains(dep) && dep != s.name(), "step '{}' accepted with after '{}'",
                 s.name(), dep);
    }
    if (s.sleep_ms() > 0) {
      FUZZ_CHECK(s.sleep_ms() <= kDefinitionDurationMsMax && s.task_queue().empty(),
                 "sleep step '{}' accepted", s.name());
      continue;
    }
    FUZZ_CHECK(s.sleep_ms() == 0 && !s.task_queue().empty(), "step '{}' accepted", s.name());
    const RetryPolicy& r = s.retry();
    FUZZ_CHECK(r.max_attempts() >= 1 && r.max_attempts() <= kMaxAttemptsMax,
               "step '{}': maxAttempts {}", s.name(), r.max_attempts());
    FUZZ_CHECK(r.initial_interval_ms() > 0 && r.initial_interval_ms() <= r.max_interval_ms() &&
                   r.max_interval_ms() <= kDefinitionDurationMsMax,
               "step '{}': intervals {}..{}", s.name(), r.initial_interval_ms(),
               r.max_interval_ms());
    FUZZ_CHECK(r.backoff_coefficient() >= 1.0 && r.backoff_coefficient() <= kBackoffCoefficientMax,
               "step '{}': backoff {}", s.name(), r.backoff_coefficient());
    FUZZ_CHECK(s.start_to_close_timeout_ms() > 0 && s.heartbeat_timeout_ms() >= 0,
               "step '{}': timeouts", s.name());
    FUZZ_CHECK(s.dispatch() == DISPATCH_MODE_SYNC || s.dispatch() == DISPATCH_MODE_ASYNC,
               "step '{}': dispatch {}", s.name(), static_cast<int>(s.dispatch()));
    for (uint32_t attempt : {1u, 2u, r.max_attempts()}) {
      const int64_t backoff = retry_backoff_ms(r, attempt);
      FUZZ_CHECK(backoff >= 0 && backoff <= r.max_interval_ms(),
                 "step '{}': backoff {} ms after attempt {}", s.name(), backoff, attempt);
    }
  }
}

}  // namespace

int flow_type(const uint8_t* data, size_t size) {
  const ProtobufQuiet quiet;
  const std::string_view input = as_view(data, size);
  StatusOr<FlowType> result = Status::invalid_argument("unset");
  if (!input.empty() && input.front() == kProtoMode) {
    FlowType pb;
    if (!pb.ParseFromArray(input.data() + 1, static_cast<int>(input.size() - 1))) return 0;
    result = validate_flow_type(pb);
  } else {
    result = parse_flow_type(input);
  }
  if (!result.is_ok()) {
    FUZZ_CHECK(result.status().code() == Code::kInvalidArgument && !result.status().message().empty(),
               "{}", result.status().to_string());
    return 0;
  }
  const FlowType& t = result.value();
  check_valid(t);
  auto again = validate_flow_type(t);
  FUZZ_CHECK(again.is_ok(), "validating an accepted type again fails: {}",
             again.status().to_string());
  FUZZ_CHECK(again->SerializeAsString() == t.SerializeAsString(),
             "validate_flow_type is not idempotent");
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(flow_type)
