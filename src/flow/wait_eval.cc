#include "flow/wait_eval.h"

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "common/invariant.h"

namespace dex::flow {
namespace {

// Messages condition c needs and takes out of `available`; nullopt: not met.
std::optional<uint64_t> channel_take(const ChannelCondition& c, uint64_t available) {
  switch (c.match()) {
    case FOR_ONE:
      if (available < 1) return std::nullopt;
      return 1;
    case FOR_N:
      if (available < c.min()) return std::nullopt;
      return c.min();
    case AT_LEAST:
      if (available < c.min()) return std::nullopt;
      return available;
    case AT_MOST:
      return std::min<uint64_t>(available, c.max());
    case AT_LEAST_AT_MOST:
      if (available < c.min()) return std::nullopt;
      return std::min<uint64_t>(available, c.max());
    default:
      DEX_INVARIANT(false, "a stored wait has a condition without a match kind");
  }
}

using QueueId = std::tuple<std::string, std::string>;

// Whether every condition in `group` is met at once; fills `take`.
bool group_met(const Wait& wait, const std::vector<ConditionState>& states,
               const std::function<uint64_t(const ChannelCondition&)>& queued,
               const std::vector<uint32_t>& group, std::vector<uint64_t>& take) {
  std::map<QueueId, uint64_t> left;  // what the group's earlier conditions left in each queue
  std::vector<uint64_t> group_take(wait.conditions_size(), 0);
  for (uint32_t i : group) {  // bounded by kConditionsMax
    const Condition& c = wait.conditions(i);
    if (c.has_timer() || c.has_sub_flow()) {  // a Timer's time came; a SubFlow's child closed
      if (!states[i].fired()) return false;
      continue;
    }
    DEX_INVARIANT(c.has_channel(), "a stored condition is a Timer, a Channel or a SubFlow");
    QueueId id{c.channel().channel(), c.channel().instance_key()};
    auto it = left.find(id);
    if (it == left.end()) it = left.emplace(id, queued(c.channel())).first;
    auto n = channel_take(c.channel(), it->second);
    if (!n) return false;
    DEX_INVARIANT(*n <= it->second, "a condition takes more messages than are queued");
    it->second -= *n;
    group_take[i] = *n;
  }
  take = std::move(group_take);
  return true;
}

}  // namespace

WaitMatch match_wait(const Wait& wait, const std::vector<ConditionState>& states,
                     const std::function<uint64_t(const ChannelCondition&)>& queued) {
  DEX_INVARIANT(states.size() == static_cast<size_t>(wait.conditions_size()),
                "one state per condition");
  std::vector<std::vector<uint32_t>> groups;  // candidate sets, in the order they are tried
  const auto n = static_cast<uint32_t>(wait.conditions_size());
  if (wait.kind() == ANY_OF) {
    for (uint32_t i = 0; i < n; ++i) groups.push_back({i});
  } else if (wait.kind() == ALL_OF) {
    groups.emplace_back();
    for (uint32_t i = 0; i < n; ++i) groups.back().push_back(i);
  } else if (wait.kind() == ANY_COMBINATION_OF) {
    std::map<std::string, uint32_t> index;
    for (uint32_t i = 0; i < n; ++i) index[wait.conditions(i).condition_id()] = i;
    for (const auto& combination : wait.combinations()) {
      groups.emplace_back();
      for (const auto& id : combination.condition_ids()) groups.back().push_back(index.at(id));
    }
  }
  WaitMatch match;
  for (const auto& group : groups) {  // bounded by kConditionsMax
    std::vector<uint64_t> take;
    if (!group_met(wait, states, queued, group, take)) continue;
    match.met = true;
    match.satisfied = group;
    match.take = std::move(take);
    return match;
  }
  return match;
}

}  // namespace dex::flow
