#include "cli/flow_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "cli/attributes.h"
#include "cli/output.h"
#include "cli/proto_json.h"
#include "cli/time_text.h"

namespace dex::cli {

using Row = std::vector<std::string>;

std::string render_table(const Row& header, const std::vector<Row>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const Row& r) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], r[i].size());
    }
  };
  measure(header);
  for (const Row& r : rows) measure(r);  // bounded by the rows
  std::string out;
  auto line = [&](const Row& r) {
    std::string text;
    for (size_t i = 0; i < r.size(); ++i) {
      text += r[i];
      if (i + 1 < r.size()) text += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line(header);
  for (const Row& r : rows) line(r);
  return out;
}

namespace {

using json = nlohmann::ordered_json;

std::string render(const Row& header, const std::vector<Row>& rows) {
  return render_table(header, rows);
}

std::string payload_text(const flow::Payload& p, size_t max = 60) {
  std::string text = json_text(embed_json(p.data()));
  if (text.size() > max) text = text.substr(0, max - 3) + "...";
  return text;
}

template <typename Enum>
std::string name_of(Enum value) {
  return enum_value_text(*google::protobuf::GetEnumDescriptor<Enum>(), static_cast<int>(value));
}

std::string condition_text(const flow::ConditionView& v, int64_t now) {
  const flow::Condition& c = v.condition();
  std::string text = c.condition_id().empty() ? "" : c.condition_id() + "=";
  if (c.has_timer()) {
    text += v.skipped() ? "timer skipped"
            : v.fired() ? "timer fired"
                        : "timer in " + age_text(std::max<int64_t>(0, v.timer_unix_ms() - now));
  } else if (c.has_channel()) {
    const flow::ChannelCondition& ch = c.channel();
    text += "channel " + ch.channel();
    if (!ch.instance_key().empty()) text += "[" + ch.instance_key() + "]";
    text += fmt::format(" {} ({} queued)", name_of(ch.match()), v.queued());
    if (v.fired()) text += " taken";
  } else if (c.has_sub_flow()) {
    text += "subflow " + c.sub_flow().flow_type() + " " + v.child_flow_id();
    if (v.fired()) text += " closed";
  }
  return text;
}

std::string waiting_on(const flow::StepExecutionView& e, int64_t now) {
  std::string text;
  for (const flow::ConditionView& v : e.conditions()) {  // bounded by the wait's conditions
    text += (text.empty() ? "" : "; ") + condition_text(v, now);
  }
  if (e.task_state() == flow::TASK_BACKOFF) {
    text = "retry in " + age_text(std::max<int64_t>(0, e.retry_unix_ms() - now));
  }
  return text.empty() ? "-" : text;
}

std::string failure_text(const flow::StepExecutionView& e) {
  if (!e.has_last_failure()) return "-";
  return fmt::format("attempt {} {}: {}", e.last_failure().attempt(),
                     name_of(e.last_failure().outcome()), e.last_failure().error());
}

// The ended executions the state lists (newest first), filtered as the
// active ones, and how many older ones it left out.
std::string ended_text(const flow::GetFlowStateResponse& s, const StateFilter& filter,
                       int64_t now) {
  std::vector<Row> rows;
  for (const flow::StepExecutionView& e : s.ended()) {  // bounded by the ended listed (100)
    const std::string phase = name_of(e.phase());
    if (!filter.step_type.empty() && e.step_type() != filter.step_type) continue;
    if (!filter.phase.empty() && phase != filter.phase) continue;
    const std::string method = e.method() == flow::METHOD_UNSPECIFIED
                                   ? "-"
                                   : fmt::format("{} #{}", name_of(e.method()), e.attempt());
    rows.push_back({e.step_execution_id(), phase, method,
                    e.scheduled_by().empty() ? "-" : e.scheduled_by(),
                    time_text(e.created_unix_ms(), now), failure_text(e)});
  }
  std::string out =
      fmt::format("\nEnded Step executions ({} in all, newest first):\n", s.ended_count());
  out += rows.empty() ? "(no ended Step execution matches)\n"
                      : render({"STEP EXECUTION", "PHASE", "LAST METHOD", "SCHEDULED BY", "CREATED",
                                "LAST FAILURE"},
                               rows);
  const uint64_t listed = static_cast<uint64_t>(s.ended_size());
  if (s.ended_count() > listed)
    out += fmt::format("({} older ended Step executions not shown)\n", s.ended_count() - listed);
  return out;
}

// The Channel queues that hold messages: each queue's oldest messages, one a row.
std::string queues_text(const flow::GetFlowStateResponse& s) {
  std::string out = "\nQueued Channel messages:\n";
  if (s.queues().empty()) return out + "(none)\n";
  std::vector<Row> rows;
  for (const flow::ChannelQueueView& q : s.queues()) {  // bounded by the queues listed (1,000)
    const std::string name =
        q.channel() + (q.instance_key().empty() ? "" : "[" + q.instance_key() + "]");
    bool first = true;
    for (const flow::QueuedMessageView& m : q.messages()) {  // bounded: 5 a queue
      rows.push_back({first ? name : "", first ? std::to_string(q.count()) : "",
                      std::to_string(m.seq()),
                      m.omitted_bytes() > 0 ? fmt::format("(left out: {} bytes)", m.omitted_bytes())
                                            : payload_text(m.message())});
      first = false;
    }
    if (q.count() > static_cast<uint64_t>(q.messages_size()))
      rows.push_back({first ? name : "", first ? std::to_string(q.count()) : "", "...",
                      fmt::format("{} more", q.count() - q.messages_size())});
  }
  out += render({"CHANNEL", "QUEUED", "SEQ", "MESSAGE"}, rows);
  if (s.queues_omitted() > 0)
    out += fmt::format("({} more queues hold messages)\n", s.queues_omitted());
  return out;
}

// A FlowConfig's fields as (name, value) texts, unset ones as their defaults.
std::vector<std::pair<std::string, std::string>> config_fields(const flow::FlowConfig& c) {
  const auto limit = [](uint64_t n, const std::string& unit) {
    return n == 0 ? std::string("never") : fmt::format("{} {}", n, unit);
  };
  return {{"durability", c.default_durability() == flow::DURABILITY_UNSPECIFIED
                             ? std::string("SYNC")
                             : name_of(c.default_durability())},
          {"continue-as-new after", limit(c.continue_as_new_after_events(), "events")},
          {"continue-as-new after", limit(c.continue_as_new_after_bytes(), "bytes")},
          {"Attribute Store", c.attribute_store().empty() ? "none" : c.attribute_store()},
          {"ActiveStepTypes", !c.has_index_active_step_types() || c.index_active_step_types()
                                  ? "indexed"
                                  : "not indexed"}};
}

}  // namespace

std::string config_text(const flow::FlowConfig& config) {
  std::string out;
  for (const auto& [name, value] : config_fields(config))  // bounded: five fields
    out += (out.empty() ? "" : ", ") + name + " " + value;
  return out;
}

std::string config_change_text(const flow::FlowConfig& before, const flow::FlowConfig& after) {
  const auto from = config_fields(before);
  const auto to = config_fields(after);
  std::string out;
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) {  // bounded: five fields
    if (from[i].second == to[i].second) continue;
    out += (out.empty() ? "" : ", ") + from[i].first + " " + from[i].second + " -> " + to[i].second;
  }
  return out.empty() ? "no change" : out;
}

std::string describe_table(const flow::FlowDescription& f, int64_t now) {
  std::vector<Row> rows = {
      {"Flow ID", f.flow_id()},
      {"Run ID", f.run_id()},
      {"Flow type", fmt::format("{} (declaration v{})", f.flow_type(), f.declaration_version())},
      {"Status", name_of(f.status())},
      {"Started", time_text(f.start_unix_ms(), now)}};
  if (f.close_unix_ms() != 0) {
    rows.push_back({"Closed", time_text(f.close_unix_ms(), now)});
    rows.push_back({"Took", age_text(f.close_unix_ms() - f.start_unix_ms())});
  } else {
    rows.push_back({"Running for", age_text(std::max<int64_t>(0, now - f.start_unix_ms()))});
  }
  if (!f.close_reason().empty()) rows.push_back({"Reason", f.close_reason()});
  rows.push_back({"Input", payload_text(f.input(), 200)});
  for (const flow::StepOutput& o : f.outputs()) {  // bounded by the Steps that completed it
    rows.push_back({"Output", o.step_execution_id() + " " + payload_text(o.output(), 200)});
  }
  rows.push_back({"Runs with this ID", std::to_string(f.runs())});
  if (f.flow_attempt() > 1) {
    rows.push_back(
        {"Flow attempt", fmt::format("{} (after run {})", f.flow_attempt(), f.previous_run_id())});
  }
  if (!f.continued_from_run_id().empty())
    rows.push_back({"Continues run", f.continued_from_run_id()});
  if (!f.next_run_id().empty() && f.status() == flow::FLOW_CONTINUED_AS_NEW) {
    rows.push_back({"Continued as", f.next_run_id()});
  } else if (!f.next_run_id().empty()) {
    rows.push_back({"Retried as",
                    f.next_run_id() + (f.retry_unix_ms() != 0
                                           ? " (starts " + time_text(f.retry_unix_ms(), now) + ")"
                                           : "")});
  }
  if (f.expire_unix_ms() != 0)
    rows.push_back({"Deleted", time_text(f.expire_unix_ms(), now) + " (flows.retention)"});
  for (const flow::SubFlowParent& p : f.parents()) {  // bounded by the parents that attached
    rows.push_back(
        {"SubFlow of", fmt::format("{} run {} ({} condition {})", p.flow_id(), p.run_id(),
                                   p.step_execution_id(), p.condition_index())});
  }
  std::string out;
  for (const Row& r : rows) out += fmt::format("{:<18} {}\n", r[0] + ":", r[1]);
  return out;
}

std::vector<std::string> state_hints(const flow::GetFlowStateResponse& s) {
  std::vector<std::string> hints;
  if (s.flow().status() != flow::FLOW_RUNNING) return hints;
  for (const flow::StepExecutionView& e : s.active()) {  // bounded by the active executions
    if (e.task_state() == flow::TASK_QUEUED && s.workers().empty()) {
      hints.push_back(fmt::format(
          "{} waits for a Worker: no Worker connected to this server hosts Flow type '{}'. Start "
          "a Worker that declares it (the Workers hosting it are listed under 'workers')",
          e.step_execution_id(), s.flow().flow_type()));
      break;  // one hint says it for every queued execution
    }
  }
  if (s.active().empty()) {
    hints.push_back("the run is RUNNING with no active Step execution");
  }
  return hints;
}

std::string state_table(const flow::GetFlowStateResponse& s, const StateFilter& filter,
                        const std::vector<std::string>& hints, int64_t now) {
  std::string out = fmt::format("{} run {} ({}, {}): {}\n\n", s.flow().flow_id(), s.flow().run_id(),
                                s.flow().flow_type(), time_text(s.flow().start_unix_ms(), now),
                                name_of(s.flow().status()));
  std::vector<flow::StepExecutionView> active(s.active().begin(), s.active().end());
  std::stable_sort(active.begin(), active.end(), [](const auto& a, const auto& b) {
    return a.created_unix_ms() > b.created_unix_ms();
  });
  std::vector<Row> rows;
  for (const flow::StepExecutionView& e : active) {  // bounded by the active executions
    const std::string phase = name_of(e.phase());
    if (!filter.step_type.empty() && e.step_type() != filter.step_type) continue;
    if (!filter.phase.empty() && phase != filter.phase) continue;
    const std::string failure = failure_text(e);
    const std::string method =
        e.method() == flow::METHOD_UNSPECIFIED
            ? "-"
            : fmt::format("{} #{} {}", name_of(e.method()), e.attempt(), name_of(e.task_state()));
    rows.push_back({e.step_execution_id(), phase, method,
                    e.worker_id().empty() ? "-" : e.worker_id(), waiting_on(e, now),
                    time_text(e.created_unix_ms(), now), failure});
  }
  out += rows.empty() ? "(no active Step execution matches)\n"
                      : render({"STEP EXECUTION", "PHASE", "METHOD", "WORKER", "WAITING ON",
                                "CREATED", "LAST FAILURE"},
                               rows);
  out += ended_text(s, filter, now);
  out += queues_text(s);
  out += "\nAttributes:\n";
  if (s.attributes().empty()) {
    out += "(none)\n";
  } else {
    std::vector<flow::Attribute> attributes;
    std::vector<std::string> omitted;
    for (const flow::AttributeView& a : s.attributes()) {  // bounded by the run's Attributes
      attributes.push_back(a.attribute());
      if (a.omitted_bytes() > 0)
        omitted.push_back(fmt::format(
            "{}{}", a.attribute().key(),
            a.attribute().instance_key().empty() ? "" : "[" + a.attribute().instance_key() + "]"));
    }
    out += attributes_table(attributes, now);
    for (const std::string& o : omitted)
      out += o + ": value left out (the state's size budget); see flow attributes get\n";
  }
  std::string workers;
  for (const std::string& w : s.workers()) workers += (workers.empty() ? "" : ", ") + w;
  out += "\nWorkers hosting " + s.flow().flow_type() + ": " + (workers.empty() ? "none" : workers) +
         "\n";
  if (s.has_config()) out += "FlowConfig: " + config_text(s.config()) + "\n";
  for (const std::string& h : hints) out += "hint: " + h + "\n";
  return out;
}

std::string history_table(const std::vector<flow::HistoryEvent>& events, int64_t now) {
  std::vector<Row> rows;
  // Newest first; bounded by the events given.
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    const flow::HistoryEvent& e = *it;
    // What the event did first (an RPC, Attribute writes, locks), then the
    // decision or wait it recorded, which may be long and is cut.
    std::vector<std::string> parts;
    if (!e.rpc_name().empty()) {
      parts.push_back("rpc " + e.rpc_name() +
                      (e.has_output() ? " -> " + payload_text(e.output(), 40) : ""));
    }
    if (e.attribute_writes_size() > 0) {
      parts.push_back("set " + attribute_writes_text(e.attribute_writes()));
    }
    if (e.lock_keys_size() > 0) {
      std::string keys;
      for (const std::string& k : e.lock_keys()) keys += (keys.empty() ? "" : ", ") + k;
      parts.push_back(name_of(e.method()) + " locks " + keys);
    }
    if (!e.child_flow_id().empty()) {
      parts.push_back(fmt::format("condition {} child {} run {}{}", e.condition_index(),
                                  e.child_flow_id(), e.child_run_id(),
                                  e.attached() ? " (attached)" : ""));
    }
    if (e.has_decision()) parts.push_back(json_text(proto_to_json(e.decision())));
    if (e.has_publish()) parts.push_back(json_text(proto_to_json(e.publish())));
    if (e.has_wait()) parts.push_back(json_text(proto_to_json(e.wait())));
    if (e.kind() == flow::FLOW_CONFIG_UPDATED)
      parts.push_back("config " + config_change_text(e.old_config(), e.new_config()));
    std::string detail;
    for (const std::string& p : parts) detail += (detail.empty() ? "" : "; ") + p;
    if (e.status() != flow::FLOW_STATUS_UNSPECIFIED)
      detail = (detail.empty() ? "" : detail + " ") + name_of(e.status());
    if (!e.reason().empty()) detail += (detail.empty() ? "" : ": ") + e.reason();
    if (!e.error().empty())
      detail += (detail.empty() ? "" : "; ") + std::string("error: ") + e.error();
    if (!e.next_run_id().empty())
      detail += (e.kind() == flow::TIME_TRAVELED             ? "; time traveled to run "
                 : e.status() == flow::FLOW_CONTINUED_AS_NEW ? "; continued as run "
                                                             : "; retried as run ") +
                e.next_run_id();
    if (!e.continued_from_run_id().empty())
      detail +=
          (detail.empty() ? "" : "; ") + std::string("continues run ") + e.continued_from_run_id();
    if (!e.traveled_from_run_id().empty())
      detail += (detail.empty() ? "" : "; ") + std::string("time traveled from run ") +
                e.traveled_from_run_id();
    if (!e.previous_run_id().empty())
      detail += (detail.empty() ? "" : "; ") + std::string("retry of run ") + e.previous_run_id();
    if (detail.size() > 100) detail = detail.substr(0, 97) + "...";
    rows.push_back({std::to_string(e.seq()), time_text(e.at_ms(), now), name_of(e.kind()),
                    e.step_execution_id().empty() ? "-" : e.step_execution_id(),
                    e.attempt() == 0 ? "-" : std::to_string(e.attempt()), detail});
  }
  return render({"SEQ", "TIME", "EVENT", "STEP EXECUTION", "ATTEMPT", "DETAIL"}, rows);
}

}  // namespace dex::cli
