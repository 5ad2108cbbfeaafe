#include "engine/flow_type.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "config/config.h"

namespace dex {
namespace {

Status bad(std::string msg) { return Status::invalid_argument(std::move(msg)); }

std::string step_path(size_t index) { return fmt::format("steps[{}]", index); }

// Refuses a key of `node` (a mapping) that is not in `allowed`, naming its path.
Status check_keys(const YAML::Node& node, const std::string& path,
                  const std::set<std::string>& allowed) {
  if (!node.IsMap()) return bad(fmt::format("flow type: '{}' must be a mapping", path));
  for (const auto& entry : node) {
    if (!entry.first.IsScalar())
      return bad(fmt::format("flow type: a key of '{}' is not a name", path));
    std::string key = entry.first.as<std::string>();
    if (!allowed.contains(key)) {
      return bad(
          fmt::format("flow type: unknown key '{}{}{}'", path, path.empty() ? "" : ".", key));
    }
  }
  return Status::ok();
}

StatusOr<std::string> scalar(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) return bad(fmt::format("flow type: '{}' must be a single value", path));
  return node.as<std::string>();
}

StatusOr<int64_t> duration_ms(const YAML::Node& node, const std::string& path) {
  auto text = scalar(node, path);
  if (!text.is_ok()) return text.status();
  auto d = parse_duration(text.value());
  if (!d.is_ok()) return bad(fmt::format("flow type: {}: {}", path, d.status().message()));
  int64_t ms = to_ms(d.value());
  if (std::chrono::milliseconds(ms) != d.value()) {
    return bad(fmt::format("flow type: {}: '{}' is not a whole number of milliseconds", path,
                           text.value()));
  }
  return ms;
}

StatusOr<uint32_t> whole_number(const YAML::Node& node, const std::string& path) {
  auto text = scalar(node, path);
  if (!text.is_ok()) return text.status();
  uint32_t value = 0;
  const std::string& t = text.value();
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || ptr != t.data() + t.size()) {
    return bad(fmt::format("flow type: {}: '{}' is not a whole number", path, t));
  }
  return value;
}

StatusOr<double> real_number(const YAML::Node& node, const std::string& path) {
  auto text = scalar(node, path);
  if (!text.is_ok()) return text.status();
  try {
    size_t used = 0;
    double value = std::stod(text.value(), &used);
    if (used == text.value().size() && std::isfinite(value)) return value;
  } catch (const std::exception&) {
  }
  return bad(fmt::format("flow type: {}: '{}' is not a number", path, text.value()));
}

StatusOr<StepDef> parse_step(const YAML::Node& node, size_t index) {
  const std::string path = step_path(index);
  static const std::set<std::string> allowed = {
      "name",     "taskQueue", "after", "retry", "startToCloseTimeout", "heartbeatTimeout",
      "dispatch", "sleep"};
  if (auto s = check_keys(node, path, allowed); !s.is_ok()) return s;
  StepDef step;
  if (node["name"]) {
    auto v = scalar(node["name"], path + ".name");
    if (!v.is_ok()) return v.status();
    step.set_name(v.value());
  }
  if (node["taskQueue"]) {
    auto v = scalar(node["taskQueue"], path + ".taskQueue");
    if (!v.is_ok()) return v.status();
    step.set_task_queue(v.value());
  }
  if (const YAML::Node after = node["after"]) {
    if (after.IsScalar()) {
      step.add_after(after.as<std::string>());
    } else if (after.IsSequence()) {
      for (size_t i = 0; i < after.size(); ++i) {
        auto v = scalar(after[i], fmt::format("{}.after[{}]", path, i));
        if (!v.is_ok()) return v.status();
        step.add_after(v.value());
      }
    } else if (!after.IsNull()) {
      return bad(fmt::format("flow type: '{}.after' must be a list of step names", path));
    }
  }
  if (const YAML::Node retry = node["retry"]) {
    const std::string rpath = path + ".retry";
    static const std::set<std::string> retry_keys = {"maxAttempts", "initialInterval",
                                                     "backoffCoefficient", "maxInterval"};
    if (auto s = check_keys(retry, rpath, retry_keys); !s.is_ok()) return s;
    RetryPolicy* policy = step.mutable_retry();
    if (retry["maxAttempts"]) {
      auto v = whole_number(retry["maxAttempts"], rpath + ".maxAttempts");
      if (!v.is_ok()) return v.status();
      if (v.value() == 0) {
        return bad(fmt::format("flow type: {}.maxAttempts must be at least 1", rpath));
      }
      policy->set_max_attempts(v.value());
    }
    if (retry["initialInterval"]) {
      auto v = duration_ms(retry["initialInterval"], rpath + ".initialInterval");
      if (!v.is_ok()) return v.status();
      policy->set_initial_interval_ms(v.value());
    }
    if (retry["backoffCoefficient"]) {
      auto v = real_number(retry["backoffCoefficient"], rpath + ".backoffCoefficient");
      if (!v.is_ok()) return v.status();
      if (v.value() < 1.0) {
        return bad(fmt::format("flow type: {}.backoffCoefficient must be at least 1, not {}", rpath,
                               v.value()));
      }
      policy->set_backoff_coefficient(v.value());
    }
    if (retry["maxInterval"]) {
      auto v = duration_ms(retry["maxInterval"], rpath + ".maxInterval");
      if (!v.is_ok()) return v.status();
      policy->set_max_interval_ms(v.value());
    }
  }
  if (node["startToCloseTimeout"]) {
    auto v = duration_ms(node["startToCloseTimeout"], path + ".startToCloseTimeout");
    if (!v.is_ok()) return v.status();
    step.set_start_to_close_timeout_ms(v.value());
  }
  if (node["heartbeatTimeout"]) {
    auto v = duration_ms(node["heartbeatTimeout"], path + ".heartbeatTimeout");
    if (!v.is_ok()) return v.status();
    step.set_heartbeat_timeout_ms(v.value());
  }
  if (node["dispatch"]) {
    auto v = scalar(node["dispatch"], path + ".dispatch");
    if (!v.is_ok()) return v.status();
    if (v.value() == "SYNC" || v.value() == "sync") {
      step.set_dispatch(DISPATCH_MODE_SYNC);
    } else if (v.value() == "ASYNC" || v.value() == "async") {
      step.set_dispatch(DISPATCH_MODE_ASYNC);
    } else {
      return bad(
          fmt::format("flow type: {}.dispatch must be SYNC or ASYNC, not '{}'", path, v.value()));
    }
  }
  if (node["sleep"]) {
    auto v = duration_ms(node["sleep"], path + ".sleep");
    if (!v.is_ok()) return v.status();
    step.set_sleep_ms(v.value());
  }
  return step;
}

// Names the Steps of one cycle among `remaining` (Steps that Kahn's algorithm
// could not order), following dependencies: "a -> b -> c -> a".
std::string describe_cycle(const FlowType& type, const std::set<std::string>& remaining) {
  std::map<std::string, const StepDef*> by_name;
  for (const auto& s : type.steps()) by_name[s.name()] = &s;
  // Every remaining Step has a remaining dependency; walking them must repeat.
  std::string at = *remaining.begin();
  std::vector<std::string> path;
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i <= remaining.size(); ++i) {
    if (auto it = seen.find(at); it != seen.end()) {
      std::string text;
      for (size_t j = it->second; j < path.size(); ++j) text += path[j] + " -> ";
      return text + at;
    }
    seen[at] = path.size();
    path.push_back(at);
    const StepDef* step = by_name[at];
    for (const auto& dep : step->after()) {
      if (remaining.contains(dep)) {
        at = dep;
        break;
      }
    }
  }
  return fmt::format("{}", fmt::join(remaining, ", "));
}

Status check_duration_ms(int64_t ms, std::string_view field, std::string_view step) {
  if (ms < 0 || ms > kDefinitionDurationMsMax) {
    return bad(fmt::format("flow type: step '{}': {} of {} ms is outside 0..{} ms", step, field, ms,
                           kDefinitionDurationMsMax));
  }
  return Status::ok();
}

}  // namespace

Status validate_name(std::string_view name, size_t bytes_max, std::string_view what) {
  if (name.empty()) return bad(fmt::format("{} is empty", what));
  if (name.size() > bytes_max) {
    return bad(fmt::format("{} '{}...' is {} bytes, over the limit of {}", what, name.substr(0, 32),
                           name.size(), bytes_max));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) {
      return bad(
          fmt::format("{} '{}' may only contain letters, digits, '_', '-' and '.'", what, name));
    }
  }
  return Status::ok();
}

StatusOr<FlowType> validate_flow_type(const FlowType& input) {
  FlowType type = input;
  if (auto s = validate_name(type.name(), kFlowTypeNameBytesMax, "flow type name"); !s.is_ok()) {
    return s;
  }
  const std::string& tn = type.name();
  if (type.steps_size() == 0) return bad(fmt::format("flow type '{}' has no steps", tn));
  if (static_cast<size_t>(type.steps_size()) > kStepsPerFlowTypeMax) {
    return bad(fmt::format("flow type '{}' has {} steps, over the limit of {}", tn,
                           type.steps_size(), kStepsPerFlowTypeMax));
  }
  std::set<std::string> names;
  for (int i = 0; i < type.steps_size(); ++i) {
    const StepDef& step = type.steps(i);
    if (auto s = validate_name(step.name(), kStepNameBytesMax,
                               fmt::format("flow type '{}': step name ({})", tn, step_path(i)));
        !s.is_ok()) {
      return s;
    }
    if (!names.insert(step.name()).second) {
      return bad(fmt::format("flow type '{}': duplicate step '{}'", tn, step.name()));
    }
  }
  for (StepDef& step : *type.mutable_steps()) {
    const std::string& sn = step.name();
    std::set<std::string> deps;
    for (const auto& dep : step.after()) {
      if (!names.contains(dep)) {
        return bad(
            fmt::format("flow type '{}': step '{}' depends on unknown step '{}'", tn, sn, dep));
      }
      if (dep == sn) {
        return bad(fmt::format("flow type '{}': step '{}' depends on itself (a cycle: {} -> {})",
                               tn, sn, sn, sn));
      }
      if (!deps.insert(dep).second) {
        return bad(
            fmt::format("flow type '{}': step '{}' lists dependency '{}' twice", tn, sn, dep));
      }
    }
    if (step.sleep_ms() < 0) {
      return bad(fmt::format("flow type '{}': step '{}': sleep must be positive", tn, sn));
    }
    if (step.sleep_ms() > 0) {
      if (auto s = check_duration_ms(step.sleep_ms(), "sleep", sn); !s.is_ok()) return s;
      if (!step.task_queue().empty()) {
        return bad(fmt::format(
            "flow type '{}': step '{}' is a sleep step and cannot have a taskQueue", tn, sn));
      }
      if (step.has_retry() || step.start_to_close_timeout_ms() != 0 ||
          step.heartbeat_timeout_ms() != 0 || step.dispatch() != DISPATCH_MODE_UNSPECIFIED) {
        return bad(fmt::format(
            "flow type '{}': step '{}' is a sleep step: retry, timeouts and dispatch do not apply",
            tn, sn));
      }
      continue;
    }
    if (step.task_queue().empty()) {
      return bad(fmt::format("flow type '{}': step '{}' needs a taskQueue (or a sleep)", tn, sn));
    }
    if (auto s = validate_name(step.task_queue(), kTaskQueueBytesMax,
                               fmt::format("flow type '{}': step '{}': taskQueue", tn, sn));
        !s.is_ok()) {
      return s;
    }
    RetryPolicy* retry = step.mutable_retry();
    if (retry->max_attempts() == 0) retry->set_max_attempts(kDefaultMaxAttempts);
    if (retry->max_attempts() > kMaxAttemptsMax) {
      return bad(
          fmt::format("flow type '{}': step '{}': retry.maxAttempts {} is over the limit of {}", tn,
                      sn, retry->max_attempts(), kMaxAttemptsMax));
    }
    if (retry->initial_interval_ms() == 0)
      retry->set_initial_interval_ms(kDefaultInitialIntervalMs);
    if (auto s = check_duration_ms(retry->initial_interval_ms(), "retry.initialInterval", sn);
        !s.is_ok()) {
      return s;
    }
    if (retry->backoff_coefficient() == 0)
      retry->set_backoff_coefficient(kDefaultBackoffCoefficient);
    if (!(retry->backoff_coefficient() >= 1.0 &&
          retry->backoff_coefficient() <= kBackoffCoefficientMax)) {
      return bad(
          fmt::format("flow type '{}': step '{}': retry.backoffCoefficient {} is outside 1..{}", tn,
                      sn, retry->backoff_coefficient(), kBackoffCoefficientMax));
    }
    if (retry->max_interval_ms() == 0) {
      retry->set_max_interval_ms(std::min(retry->initial_interval_ms() * kDefaultMaxIntervalFactor,
                                          kDefinitionDurationMsMax));
    }
    if (auto s = check_duration_ms(retry->max_interval_ms(), "retry.maxInterval", sn); !s.is_ok()) {
      return s;
    }
    if (retry->max_interval_ms() < retry->initial_interval_ms()) {
      return bad(fmt::format(
          "flow type '{}': step '{}': retry.maxInterval ({} ms) is below retry.initialInterval "
          "({} ms)",
          tn, sn, retry->max_interval_ms(), retry->initial_interval_ms()));
    }
    if (step.start_to_close_timeout_ms() == 0) {
      step.set_start_to_close_timeout_ms(kDefaultStartToCloseTimeoutMs);
    }
    if (auto s = check_duration_ms(step.start_to_close_timeout_ms(), "startToCloseTimeout", sn);
        !s.is_ok()) {
      return s;
    }
    if (auto s = check_duration_ms(step.heartbeat_timeout_ms(), "heartbeatTimeout", sn);
        !s.is_ok()) {
      return s;
    }
    if (step.dispatch() == DISPATCH_MODE_UNSPECIFIED) step.set_dispatch(DISPATCH_MODE_SYNC);
    if (step.dispatch() != DISPATCH_MODE_SYNC && step.dispatch() != DISPATCH_MODE_ASYNC) {
      return bad(fmt::format("flow type '{}': step '{}': unknown dispatch mode {}", tn, sn,
                             static_cast<int>(step.dispatch())));
    }
  }
  // A DAG: Kahn's algorithm orders every Step, or the rest contains a cycle.
  std::map<std::string, int> waiting;
  std::map<std::string, std::vector<std::string>> dependents;
  for (const auto& step : type.steps()) {
    waiting[step.name()] = step.after_size();
    for (const auto& dep : step.after()) dependents[dep].push_back(step.name());
  }
  std::vector<std::string> ready;
  for (const auto& [name, count] : waiting) {
    if (count == 0) ready.push_back(name);
  }
  std::set<std::string> remaining(names);
  while (!ready.empty()) {
    std::string name = ready.back();
    ready.pop_back();
    remaining.erase(name);
    for (const auto& d : dependents[name]) {
      if (--waiting[d] == 0) ready.push_back(d);
    }
  }
  if (!remaining.empty()) {
    return bad(fmt::format("flow type '{}' has a dependency cycle: {}", tn,
                           describe_cycle(type, remaining)));
  }
  return type;
}

StatusOr<FlowType> parse_flow_type(std::string_view text) {
  if (text.size() > kFlowTypeDefinitionBytesMax) {
    return bad(fmt::format("flow type definition is {} bytes, over the limit of {}", text.size(),
                           kFlowTypeDefinitionBytesMax));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return bad(fmt::format("flow type definition is not valid JSON or YAML: {}", e.what()));
  }
  if (!root.IsMap()) return bad("flow type definition must be a mapping with 'name' and 'steps'");
  FlowType type;
  try {
    if (auto s = check_keys(root, "", {"name", "steps"}); !s.is_ok()) return s;
    if (!root["name"]) return bad("flow type definition has no 'name'");
    auto name = scalar(root["name"], "name");
    if (!name.is_ok()) return name.status();
    type.set_name(name.value());
    const YAML::Node steps = root["steps"];
    if (!steps || steps.IsNull())
      return bad(fmt::format("flow type '{}' has no steps", name.value()));
    if (!steps.IsSequence()) return bad("flow type: 'steps' must be a list");
    if (steps.size() > kStepsPerFlowTypeMax) {
      return bad(fmt::format("flow type '{}' has {} steps, over the limit of {}", name.value(),
                             steps.size(), kStepsPerFlowTypeMax));
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      auto step = parse_step(steps[i], i);
      if (!step.is_ok()) return step.status();
      *type.add_steps() = std::move(step).value();
    }
  } catch (const YAML::Exception& e) {
    return bad(fmt::format("flow type definition: {}", e.what()));
  }
  return validate_flow_type(type);
}

int64_t retry_backoff_ms(const RetryPolicy& policy, uint32_t attempt) {
  assert(attempt >= 1);
  // Repeated multiplication, capped at every step: the same inputs give the same
  // result on every host (IEEE doubles), and the loop is bounded by maxAttempts.
  double interval = static_cast<double>(policy.initial_interval_ms());
  const double cap = static_cast<double>(policy.max_interval_ms());
  for (uint32_t i = 1; i < attempt && interval < cap; ++i) interval *= policy.backoff_coefficient();
  return static_cast<int64_t>(std::llround(std::min(interval, cap)));
}

}  // namespace dex
