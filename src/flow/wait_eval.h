// Waits: whether a wait's conditions meet it (docs/flow-rules.md, "Waits").
// Pure; the checks of a wait are in result_check.h.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "dex/flow.pb.h"
#include "dex/flow_records.pb.h"

namespace dex::flow {

// How a wait is met, if it is.
struct WaitMatch {
  bool met = false;
  std::vector<uint32_t> satisfied;  // the conditions that met it, in order
  std::vector<uint64_t> take;       // per condition (all of them): messages to take
};

// Decides whether `wait` is met now. `states[i]` is condition i's state (a
// Timer counts when fired); `queued(c)` is how many messages c's queue holds.
// The first condition (ANY_OF) or group (ANY_COMBINATION_OF) in order that is
// met wins, and only it takes messages; conditions on one queue share it, the
// earlier condition taking first.
WaitMatch match_wait(const Wait& wait, const std::vector<ConditionState>& states,
                     const std::function<uint64_t(const ChannelCondition&)>& queued);

}  // namespace dex::flow
