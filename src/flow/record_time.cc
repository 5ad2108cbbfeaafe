#include "flow/record_time.h"

#include <algorithm>
#include <type_traits>

#include "common/invariant.h"

namespace dex {
namespace {

// Calls f with the kind's message (each has at_unix_ms) of a const or a
// mutable record; nothing for assignments only. No default: -Wswitch makes a
// new kind name its time here.
template <typename Rec, typename F>
void with_kind_time(Rec& r, F&& f) {
  using R = flow::FlowRecord;
  auto call = [&](auto get, auto mut) {
    if constexpr (std::is_const_v<Rec>) {
      f((r.*get)());
    } else {
      f(*(r.*mut)());
    }
  };
  switch (r.kind_case()) {
    case R::kDeclareFlows:
      return call(&R::declare_flows, &R::mutable_declare_flows);
    case R::kStartFlow:
      return call(&R::start_flow, &R::mutable_start_flow);
    case R::kMethodResult:
      return call(&R::method_result, &R::mutable_method_result);
    case R::kAttemptWithdrawn:
      return call(&R::attempt_withdrawn, &R::mutable_attempt_withdrawn);
    case R::kTimerFired:
      return call(&R::timer_fired, &R::mutable_timer_fired);
    case R::kPublish:
      return call(&R::publish, &R::mutable_publish);
    case R::kStopFlow:
      return call(&R::stop_flow, &R::mutable_stop_flow);
    case R::kSkipTimer:
      return call(&R::skip_timer, &R::mutable_skip_timer);
    case R::kSetAttributes:
      return call(&R::set_attributes, &R::mutable_set_attributes);
    case R::kInvokeRpc:
      return call(&R::invoke_rpc, &R::mutable_invoke_rpc);
    case R::kAttributeStoreSynced:
      return call(&R::attribute_store_synced, &R::mutable_attribute_store_synced);
    case R::kTimeTravel:
      return call(&R::time_travel, &R::mutable_time_travel);
    case R::kContinueAsNew:
      return call(&R::continue_as_new, &R::mutable_continue_as_new);
    case R::kUpdateFlowConfig:
      return call(&R::update_flow_config, &R::mutable_update_flow_config);
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

int64_t record_time(const flow::FlowRecord& record) {
  int64_t out = record.at_unix_ms();
  with_kind_time(record, [&](const auto& kind) { out = std::max(out, kind.at_unix_ms()); });
  return out;
}

}  // namespace dex
