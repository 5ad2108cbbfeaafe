#include "flow/wait_eval.h"

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/flow_rules.h"
#include "flow/result_check.h"

namespace dex::flow {
namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

Status validate_channel(const FlowDeclaration& decl, const ChannelCondition& c,
                        const std::string& where) {
  const ChannelDeclaration* channel = find_channel(decl, c.channel());
  if (channel == nullptr)
    return Status::invalid_argument(where + " names Channel " + quoted(c.channel()) +
                                    ", which Flow type " + quoted(decl.flow_type()) +
                                    " does not declare");
  if (channel->is_map()) {
    if (auto s = validate_name(where + " instanceKey of ChannelMap " + quoted(c.channel()),
                               c.instance_key());
        !s.is_ok())
      return s;
  } else if (!c.instance_key().empty()) {
    return Status::invalid_argument(where + " gives an instanceKey, but " + quoted(c.channel()) +
                                    " is a Channel, not a ChannelMap");
  }
  switch (c.match()) {
    case FOR_ONE:
      return Status::ok();
    case FOR_N:
    case AT_LEAST:
      if (c.min() < 1) return Status::invalid_argument(where + " needs n >= 1");
      return Status::ok();
    case AT_MOST:
      if (c.max() < 1) return Status::invalid_argument(where + " needs n >= 1");
      return Status::ok();
    case AT_LEAST_AT_MOST:
      if (c.max() < 1 || c.min() > c.max())
        return Status::invalid_argument(where + " needs 0 <= min <= max and max >= 1");
      return Status::ok();
    default:
      return Status::invalid_argument(where +
                                      " has no match kind (ForOne, ForN, AtLeast, "
                                      "AtMost, AtLeastAtMost)");
  }
}

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

Status validate_wait(const FlowDeclaration& decl, const Wait& wait) {
  if (wait.kind() == SKIP) {
    if (wait.conditions_size() != 0 || wait.combinations_size() != 0)
      return Status::invalid_argument("a skipped wait has no conditions");
    return Status::ok();
  }
  if (wait.kind() != ANY_OF && wait.kind() != ALL_OF && wait.kind() != ANY_COMBINATION_OF)
    return Status::invalid_argument(
        "the wait has no kind (AnyOf, AllOf, AnyCombinationOf or skip)");
  if (wait.conditions_size() == 0)
    return Status::invalid_argument(
        "the wait has no conditions (return skip to run Execute "
        "at once)");
  if (static_cast<size_t>(wait.conditions_size()) > kConditionsMax)
    return Status::invalid_argument("the wait has more than " + std::to_string(kConditionsMax) +
                                    " conditions");
  std::set<std::string> ids;
  for (int i = 0; i < wait.conditions_size(); ++i) {  // bounded by kConditionsMax
    const Condition& c = wait.conditions(i);
    const std::string where = "condition " + std::to_string(i);
    if (!c.condition_id().empty()) {
      if (auto s = validate_name(where + " conditionId", c.condition_id()); !s.is_ok()) return s;
      if (!ids.insert(c.condition_id()).second)
        return Status::invalid_argument(where + ": conditionId " + quoted(c.condition_id()) +
                                        " is used twice");
    } else if (wait.kind() == ANY_COMBINATION_OF) {
      return Status::invalid_argument(where +
                                      " has no conditionId; AnyCombinationOf needs one "
                                      "on every condition");
    }
    if (c.has_timer()) {
      if (c.timer().when_case() == TimerCondition::WHEN_NOT_SET)
        return Status::invalid_argument(where + " is a Timer without a duration or a time");
      if (c.timer().has_duration_ms() &&
          (c.timer().duration_ms() < 0 || c.timer().duration_ms() > kDurationMsMax))
        return Status::invalid_argument(where +
                                        " is a Timer whose duration is negative or "
                                        "longer than ten years");
    } else if (c.has_channel()) {
      if (auto s = validate_channel(decl, c.channel(), where); !s.is_ok()) return s;
    } else if (c.has_sub_flow()) {
      if (auto s = validate_sub_flow(c.sub_flow(), where + " (SubFlow)"); !s.is_ok()) return s;
    } else {
      return Status::invalid_argument(where +
                                      " is neither a Timer, a Channel nor a SubFlow condition");
    }
  }
  if (wait.kind() != ANY_COMBINATION_OF) {
    if (wait.combinations_size() != 0)
      return Status::invalid_argument("combinations are for AnyCombinationOf only");
    return Status::ok();
  }
  if (wait.combinations_size() == 0)
    return Status::invalid_argument("AnyCombinationOf has no combinations of condition IDs");
  for (int g = 0; g < wait.combinations_size(); ++g) {  // bounded by kConditionsMax in practice
    const auto& group = wait.combinations(g);
    if (group.condition_ids_size() == 0)
      return Status::invalid_argument("combination " + std::to_string(g) + " is empty");
    for (const auto& id : group.condition_ids()) {
      if (!ids.contains(id))
        return Status::invalid_argument("combination " + std::to_string(g) + " names conditionId " +
                                        quoted(id) + ", which no condition has");
    }
  }
  if (static_cast<size_t>(wait.combinations_size()) > kConditionsMax)
    return Status::invalid_argument("AnyCombinationOf has more than " +
                                    std::to_string(kConditionsMax) + " combinations");
  return Status::ok();
}

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
