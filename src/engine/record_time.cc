#include "engine/record_time.h"

#include <algorithm>

#include "common/invariant.h"

namespace dex {
namespace {

// Calls f with the kind (each has at_unix_ms); nothing for assignments only.
// No default: -Wswitch makes a new kind name its time here.
template <typename F>
void with_kind_time(flow::FlowRecord& r, F&& f) {
  using R = flow::FlowRecord;
  switch (r.kind_case()) {
    case R::kDeclareFlows:
      return f(*r.mutable_declare_flows());
    case R::kStartFlow:
      return f(*r.mutable_start_flow());
    case R::kMethodResult:
      return f(*r.mutable_method_result());
    case R::kAttemptWithdrawn:
      return f(*r.mutable_attempt_withdrawn());
    case R::kTimerFired:
      return f(*r.mutable_timer_fired());
    case R::kPublish:
      return f(*r.mutable_publish());
    case R::kStopFlow:
      return f(*r.mutable_stop_flow());
    case R::kSkipTimer:
      return f(*r.mutable_skip_timer());
    case R::kSetAttributes:
      return f(*r.mutable_set_attributes());
    case R::kInvokeRpc:
      return f(*r.mutable_invoke_rpc());
    case R::KIND_NOT_SET:
      return;
  }
}

}  // namespace

int64_t stamp_no_earlier(flow::FlowRecord& record, int64_t floor) {
  int64_t out = floor;
  with_kind_time(record, [&](auto& kind) {
    kind.set_at_unix_ms(std::max(kind.at_unix_ms(), floor));
    out = kind.at_unix_ms();
  });
  if (record.at_unix_ms() != 0 || record.kind_case() == flow::FlowRecord::KIND_NOT_SET) {
    record.set_at_unix_ms(std::max(record.at_unix_ms(), floor));
    out = std::max(out, record.at_unix_ms());
  }
  DEX_INVARIANT(out >= floor, "a record's time never goes below the log's");
  return out;
}

}  // namespace dex
