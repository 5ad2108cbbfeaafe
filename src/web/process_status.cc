#include "web/process_status.h"

#include <nlohmann/json.hpp>

namespace dex::web {
namespace {

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json decimal_or_null(const std::optional<uint64_t>& value) {
  return value ? nlohmann::json(std::to_string(*value)) : nlohmann::json(nullptr);
}

}  // namespace

std::string process_status_json(const ProcessStatus& s) {
  nlohmann::json j = {
      {"processId", s.process_id},
      {"nodeId", s.node_id},
      {"role", s.role},
      {"phase", s.phase},
      {"serving", s.serving},
      {"standbyMode", s.standby_mode},
      {"standbyState", or_null(s.standby_state)},
      {"lagSeconds", or_null(s.lag_seconds)},
      {"epoch", decimal_or_null(s.epoch)},
      {"holderProcessId", or_null(s.holder_process_id)},
      {"holderIsThisProcess", s.holder_process_id && *s.holder_process_id == s.process_id},
      {"leaseReleased", s.lease_released},
      {"logHead", decimal_or_null(s.log_head)},
      {"appliedSlot", decimal_or_null(s.applied_slot)},
      {"notServingReason",
       s.serving ? nlohmann::json(nullptr) : nlohmann::json(s.not_serving_reason)},
  };
  return j.dump();
}

}  // namespace dex::web
