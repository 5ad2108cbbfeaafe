// Seeded simulation of the flow rules (docs/flow-rules.md, "Simulation"). A
// random proposer drives runs of one Flow type with every kind of record:
// starts (ID reuse, request IDs, timeouts, start delays), Worker results with
// random waits and decisions (GoTo, GoToMulti, cancels, every close),
// failures, timeouts and retries, client publishes to a Channel and a
// ChannelMap, timers fired in due order, SkipTimer, StopFlow, withdrawn
// attempts, duplicate and stale records, invalid results, new declaration
// versions, and crashes: the state is rebuilt by replaying the log from
// nothing and must equal the live one, then recovery ends the running
// attempts. After every record:
//  - check_state: every index entry matches the state it serves;
//  - a refused record (stale, rejected, unchanged) changed nothing;
//  - every applied publish's messages are either queued or taken by exactly
//    one wait, each queue's messages taken in FIFO order;
//  - no Step execution has two applied decisions; a closed run never changes;
//  - a repeated publish request (same request ID) changes nothing;
//  - Attributes (initial values, result and RPC writes, SetAttributes): the
//    stored ones are exactly what the applied writes left, in a model;
//  - lock keys (on Work, Fragile, Wait's WaitFor and RPC "r"): in each run's
//    history, between a holder's LOCKS_ACQUIRED and LOCKS_RELEASED no other
//    holder acquires one of its keys;
//  - RPCs (InvokeRpc, results with writes, publishes and next Steps,
//    failures, deadlines, recovery, run close) end once, never retried;
//  - timeouts take every policy; under HANDLER a run starts its timeout
//    handler at most once, and the handler decides or fails at most once;
//  - retention: only a RETENTION timer deletes runs, only closed ones, and
//    nothing of them stays (check_state: no key outlives its run, no Flow ID
//    names a deleted run, no timer or task of it stays indexed);
//  - time travel (from a Flow ID's latest run, an older or a missing one, to
//    points of every kind; repeats of a request ID answer the run they made):
//    an applied one starts the new run with exactly the old run's state at the
//    point, its journal (as before the travel) folded there (travel_mismatch),
//    and links the runs; a closed run takes only that link;
//  - continue-as-new (Step decisions, client requests, FlowConfig history
//    thresholds): the new run holds exactly the old run's Attributes, queued
//    messages and active executions, linked both ways; a closed run never
//    changes after;
//  - FlowConfig (UpdateFlowConfig records setting and clearing fields, small
//    history thresholds, repeated request IDs, invalid ones, closed and
//    missing runs): every verdict is the model's; every run's effective
//    config is what its start and its accepted updates say (a continued run
//    keeps it, a time travel takes the one at its point); each run has one
//    FLOW_CONFIG_UPDATED per accepted update, with both configs; a running
//    run whose history reached a threshold has a continue-as-new pending,
//    and one with a continue-as-new pending has something in flight (else it
//    continued) after any record that added events to it (check_config: the
//    known gap of a record that adds none); its search doc has its active
//    Step types unless its config turned them off.
// A failing seed is printed; FLOW_SIM_SEED=<n> replays it alone.
// FLOW_SIM_SEEDS=<n> runs seeds 1..n instead of all 1,200.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/util/message_differencer.h>

#include "common/random.h"
#include "flow/flow_rules.h"
#include "flow/kv_txn.h"
#include "flow/run_editor.h"
#include "flow/run_journal.h"
#include "flow/state_check.h"
#include "flow/time_travel.h"

namespace dex::flow {
namespace {

constexpr int kSeeds = 1200;
constexpr int kStepsPerSeed = 250;

FlowDeclaration sim_declaration(int variant) {
  FlowDeclaration d;
  d.set_flow_type("Sim");
  d.set_start_step_type("Start");
  auto add = [&](const char* type, bool wait_for) -> StepDeclaration* {
    auto* s = d.add_steps();
    s->set_step_type(type);
    s->set_has_wait_for(wait_for);
    s->mutable_options()->mutable_execute()->mutable_retry()->set_initial_interval_ms(500);
    return s;
  };
  add("Start", false);
  add("Work", false)
      ->mutable_options()
      ->mutable_execute()
      ->mutable_retry()
      ->set_maximum_attempts(3);
  auto* wait = add("Wait", true);
  wait->mutable_options()->mutable_wait_for()->set_failure_policy(PROCEED_TO_EXECUTE);
  wait->mutable_options()->mutable_wait_for()->mutable_retry()->set_maximum_attempts(2);
  auto* fragile = add("Fragile", false);
  fragile->mutable_options()->mutable_execute()->set_failure_policy(PROCEED_TO_STEP);
  fragile->mutable_options()->mutable_execute()->set_recovery_step_type("Recover");
  fragile->mutable_options()->mutable_execute()->mutable_retry()->set_maximum_attempts(2);
  add("Recover", false);
  d.mutable_steps(1)->mutable_options()->mutable_execute()->add_lock_keys("k1");
  fragile->mutable_options()->mutable_execute()->add_lock_keys("k1");
  fragile->mutable_options()->mutable_execute()->add_lock_keys("k2");
  wait->mutable_options()->mutable_wait_for()->add_lock_keys("k2");
  wait->add_attribute_reads("a");
  for (auto [key, type, is_map] : {std::tuple{"a", ATTRIBUTE_STRING, false},
                                   {"n", ATTRIBUTE_INT64, false},
                                   {"m", ATTRIBUTE_STRING, true},
                                   {"j", ATTRIBUTE_JSON, false}}) {
    auto* a = d.add_attributes();
    a->set_key(key);
    a->set_type(type);
    a->set_is_map(is_map);
    a->set_sync(!is_map && key != std::string("j"));  // a and n go to the Attribute Store
  }
  if (variant != 2) d.set_attribute_store("s1");  // variant 2's runs sync only when started so
  auto* rpc = d.add_rpcs();
  rpc->set_name("r");
  rpc->add_lock_keys("k1");
  rpc->add_attribute_reads("a");
  rpc = d.add_rpcs();
  rpc->set_name("q");
  rpc->add_attribute_reads("m");
  d.add_channels()->set_name("c");
  auto* map = d.add_channels();
  map->set_name("cm");
  map->set_is_map(true);
  if (variant % 2 == 1) add("Extra", false);  // a changed declaration: a new version
  if (variant != 2) {  // variant 2 has no timeout handler (a Flow retry may start on it)
    d.set_has_timeout_handler(true);
    d.mutable_on_timeout()->add_attribute_reads("a");
    auto* retry = d.mutable_on_timeout()->mutable_options()->mutable_retry();
    retry->set_initial_interval_ms(300);
    retry->set_maximum_attempts(2);
  }
  return d;
}

bool is_active(Phase p) { return p == PHASE_WAIT_FOR || p == PHASE_WAITING || p == PHASE_EXECUTE; }

// "" when equal, else what differs.
std::string differences(const google::protobuf::Message& want,
                        const google::protobuf::Message& got) {
  std::string out;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&out);
  return d.Compare(want, got) ? "" : out;
}

// The FlowConfig model (docs/flow-rules.md, "FlowConfig"), written apart from
// src/flow/declaration.cc. The field names as clear_fields names them.
const std::vector<std::string> kConfigFields = {"continue_as_new_after_events",
                                                "continue_as_new_after_bytes", "default_durability",
                                                "attribute_store", "index_active_step_types"};

// Whether `c` sets field `f` (zero: not set).
bool config_sets(const FlowConfig& c, const std::string& f) {
  if (f == "continue_as_new_after_events") return c.continue_as_new_after_events() > 0;
  if (f == "continue_as_new_after_bytes") return c.continue_as_new_after_bytes() > 0;
  if (f == "default_durability") return c.default_durability() != DURABILITY_UNSPECIFIED;
  if (f == "attribute_store") return !c.attribute_store().empty();
  return c.has_index_active_step_types();
}

// Field `f` of `from` into `to`, unset included.
void config_copy(const FlowConfig& from, const std::string& f, FlowConfig& to) {
  if (f == "continue_as_new_after_events") {
    to.set_continue_as_new_after_events(from.continue_as_new_after_events());
  } else if (f == "continue_as_new_after_bytes") {
    to.set_continue_as_new_after_bytes(from.continue_as_new_after_bytes());
  } else if (f == "default_durability") {
    to.set_default_durability(from.default_durability());
  } else if (f == "attribute_store") {
    to.set_attribute_store(from.attribute_store());
  } else if (from.has_index_active_step_types()) {
    to.set_index_active_step_types(from.index_active_step_types());
  } else {
    to.clear_index_active_step_types();
  }
}

// What a cleared field goes back to: the declaration's config, its
// Attribute Store from either field.
FlowConfig declared_model(const FlowDeclaration& d) {
  FlowConfig c = d.config();
  if (c.attribute_store().empty()) c.set_attribute_store(d.attribute_store());
  return c;
}

// A run's config at its start: the declaration's, each field the start sets winning.
FlowConfig start_model(const FlowDeclaration& d, const StartOptions& o) {
  FlowConfig c = declared_model(d);
  FlowConfig start = o.config();
  if (start.attribute_store().empty()) start.set_attribute_store(o.attribute_store());
  for (const auto& f : kConfigFields)
    if (config_sets(start, f)) config_copy(start, f, c);
  return c;
}

bool same_config(const FlowConfig& a, const FlowConfig& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

// Which history threshold of `c` a history of `events` events and `bytes`
// bytes reached ("" if none).
std::string threshold_reached(const FlowConfig& c, uint64_t events, uint64_t bytes) {
  if (c.continue_as_new_after_events() > 0 && events >= c.continue_as_new_after_events())
    return fmt::format("{} events reach continue_as_new_after_events {}", events,
                       c.continue_as_new_after_events());
  if (c.continue_as_new_after_bytes() > 0 && bytes >= c.continue_as_new_after_bytes())
    return fmt::format("{} bytes reach continue_as_new_after_bytes {}", bytes,
                       c.continue_as_new_after_bytes());
  return "";
}

// Time travel's promise (docs/flow-rules.md, "Time travel"): replaying the old
// run's history to the point gives exactly the new run's start state, bar what
// is the new run's own (attempts queued afresh, the time Timers had left from
// now, a wait whose Timer was due at the point met at once). `journal` and
// `old`: the old run's journal and record before the travel, which appends a
// delta to it and may close it. Empty, or what differs; `point` and `image`
// get the point resolved and the state there.
std::string travel_mismatch(KvStore& kv, const std::vector<RunDelta>& journal, const Run& old,
                            const TimeTravel& t, TravelPoint* point, RunImage* image) {
  if (auto r = resolve_point(journal, old, t.point(), point); r.kind != ApplyKind::kApplied)
    return "the point does not resolve against the journal before the travel: " + r.message;
  // As the rules: a moment that has not come yet stands for the travel's own.
  point->at_ms = std::min(point->at_ms, t.at_unix_ms());
  const TravelPoint& p = *point;
  *image = fold_journal(journal, p.deltas);
  const RunImage& im = *image;
  const std::string& flow_id = t.flow_id();
  const std::string& to = t.new_run_id();
  KvFlowTxn txn(kv);
  auto run = txn.run(flow_id, to);
  auto from = txn.run(flow_id, t.run_id());
  auto entry = txn.flow_id(flow_id);
  if (!run || !from) return "the old or the new run is not stored";
  if (!entry || entry->run_id() != to) return "the Flow ID entry does not name the new run";
  if (run->traveled_from_run_id() != t.run_id() || from->traveled_to_run_id() != to)
    return "the runs are not linked";
  if (from->status() != (old.status() == FLOW_RUNNING ? FLOW_TERMINATED : old.status()))
    return fmt::format("the old run was {} and is {}", FlowStatus_Name(old.status()),
                       FlowStatus_Name(from->status()));
  if (run->status() != FLOW_RUNNING || run->start_ms() != t.at_unix_ms())
    return "the new run is not running from the travel's time";
  if (auto d = differences(im.run.input(), run->input()); !d.empty()) return "input: " + d;

  // Attributes: keys, instances, values.
  std::map<std::pair<std::string, std::string>, std::string> want_attributes, got_attributes;
  for (const auto& [ki, v] : im.attributes)  // bounded by kAttributesMax
    want_attributes[ki] = v.SerializeAsString();
  for (const auto& a : txn.attributes(flow_id, to, ""))  // bounded by kAttributesMax
    got_attributes[{a.key(), a.instance_key()}] = a.value().SerializeAsString();
  if (want_attributes != got_attributes)
    return fmt::format("{} Attribute values at the point, {} in the new run (or other values)",
                       want_attributes.size(), got_attributes.size());

  // Step executions.
  std::map<std::string, StepExecution> steps;
  for (auto& [k, v] : kv.scan(keys::steps_prefix(flow_id, to))) {  // bounded by the run's steps
    StepExecution s;
    s.ParseFromString(v);
    steps[s.step_execution_id()] = s;
  }
  const std::set<std::string> active(run->active().begin(), run->active().end());
  // A start delay due at the point (its timer not yet fired) creates the start Step now.
  const bool start_created = im.run.start_pending() && !run->start_pending();
  std::map<std::string, uint32_t> want_counters, got_counters;
  for (const auto& c : im.run.counters()) want_counters[c.step_type()] = c.count();
  for (const auto& c : run->counters()) got_counters[c.step_type()] = c.count();
  if (start_created) {  // the start Step's next execution (an RPC's next Steps may precede it)
    auto decl = txn.declaration(run->flow_type(), run->declaration_version());
    const std::string& type = decl->declaration().start_step_type();
    const std::string start = step_execution_id(type, ++want_counters[type]);
    if (im.steps.contains(start) || !steps.contains(start) || !active.contains(start))
      return "a start delay due at the point did not start " + start;
    steps.erase(start);
  } else if (run->start_pending() != im.run.start_pending()) {
    return "start_pending differs";
  }
  if (want_counters != got_counters) return "the Step counters differ";
  if (steps.size() != im.steps.size())
    return fmt::format("{} Step executions at the point, {} in the new run", im.steps.size(),
                       steps.size());
  size_t active_at_point = 0;
  // Waits met at once (a Timer due at the point), by wait order: what they took.
  std::map<uint64_t, std::pair<const StepExecution*, const StepExecution*>> met;
  for (const auto& [id, was] : im.steps) {  // bounded by the run's executions
    auto it = steps.find(id);
    if (it == steps.end()) return id + " is not in the new run";
    const StepExecution& now = it->second;
    StepExecution want = was;
    want.set_run_id(to);
    active_at_point += is_active(was.phase());
    if (is_active(was.phase()) != active.contains(id))
      return id + (active.contains(id) ? " is active only in the new run" : " is not active");
    const std::string what = id + " (" + Phase_Name(was.phase()) + " at the point): ";
    if (was.phase() == PHASE_WAIT_FOR || was.phase() == PHASE_EXECUTE) {
      // Queued afresh: attempt 1 of the same method.
      const Method method = was.phase() == PHASE_WAIT_FOR ? WAIT_FOR : EXECUTE;
      if (now.method().method() != method || now.method().attempt() != 1)
        return what + "its method is not queued afresh: " + now.method().ShortDebugString();
      StepExecution got = now;
      got.clear_method();
      want.clear_method();
      if (auto d = differences(want, got); !d.empty()) return what + d;
      continue;
    }
    if (was.phase() != PHASE_WAITING) {  // done, failed or canceled: as it was
      if (auto d = differences(want, now); !d.empty()) return what + d;
      continue;
    }
    // Unfired Timers keep the time they had left at the point, from now; a
    // SubFlow child is waited for as it is now (one closed since meets its
    // condition at once).
    bool due = false;
    for (auto& c : *want.mutable_conditions()) {  // bounded by kConditionsMax
      if (!c.fired() && !c.child_flow_id().empty()) {
        if (auto child = current_child(txn, c)) {
          c.set_child_run_id(child->run_id());
          if (child->status() != FLOW_RUNNING) {
            c.set_fired(true);
            *c.mutable_sub_flow() = sub_flow_result(*child);
            due = true;
          }
        }
        continue;
      }
      if (c.fired() || c.timer_at_ms() == 0) continue;
      const int64_t left = std::max<int64_t>(0, c.timer_at_ms() - p.at_ms);
      c.set_timer_at_ms(t.at_unix_ms() + left);
      if (left == 0) {
        c.set_fired(true);
        due = true;
      }
    }
    if (now.phase() == PHASE_WAITING) {
      if (auto d = differences(want, now); !d.empty()) return what + d;
      continue;
    }
    if (now.phase() != PHASE_EXECUTE || !due)
      return what + "it is " + Phase_Name(now.phase()) + " in the new run";
    // Met at once: the same execution, now executing, with what its wait took.
    if (now.method().method() != EXECUTE || now.method().attempt() != 1)
      return what + "met at once, but its Execute is not queued afresh";
    if (now.step_type() != was.step_type() || now.wait_seq() != was.wait_seq() ||
        now.parent_execution_id() != was.parent_execution_id() ||
        !differences(was.input(), now.input()).empty() ||
        !differences(was.locals(), now.locals()).empty() ||
        !differences(was.wait(), now.wait()).empty() ||
        now.conditions_size() != was.conditions_size())
      return what + "met at once, but it is another execution";
    met[was.wait_seq()] = {&was, &now};
  }
  if (active.size() != active_at_point + (start_created ? 1 : 0))
    return "the new run has other active executions";

  // Channels: the queues and payloads of the point, less what waits met at
  // once took from their fronts (in wait order).
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> taken, want_q, got_q;
  for (const auto& [seq, ab] : met) {  // bounded by the run's active executions
    const auto& [was, now] = ab;
    for (int i = 0; i < was->conditions_size(); ++i) {  // bounded by kConditionsMax
      const auto& c = was->wait().conditions(i);
      const auto& before = was->conditions(i).messages();
      const auto& after = now->conditions(i).messages();
      if (after.size() < before.size()) return was->step_execution_id() + " lost messages";
      for (int j = 0; j < before.size(); ++j)  // bounded by the condition's messages
        if (!differences(before[j], after[j]).empty())
          return was->step_execution_id() + "'s messages changed";
      if (!c.has_channel() && after.size() > before.size())
        return was->step_execution_id() + " took messages for a condition without a Channel";
      for (int j = before.size(); j < after.size(); ++j)  // bounded by the queue's length
        taken[{c.channel().channel(), c.channel().instance_key()}].push_back(
            after[j].SerializeAsString());
    }
  }
  for (const auto& [cis, m] : im.messages)  // bounded by the run's queued messages
    want_q[{std::get<0>(cis), std::get<1>(cis)}].push_back(m.SerializeAsString());
  std::map<std::pair<std::string, std::string>, ChannelQueue> got_queues;
  for (const auto& [key, q] : txn.queues(flow_id, to)) {  // bounded by the run's queues
    got_queues[{key.channel, key.instance_key}] = q;
    for (uint64_t seq = q.first_seq(); seq < q.next_seq(); ++seq) {  // bounded by the queue
      auto m = txn.message(key, seq);
      if (!m)
        return fmt::format("queue {}/{} lacks message {}", key.channel, key.instance_key, seq);
      got_q[{key.channel, key.instance_key}].push_back(m->SerializeAsString());
    }
  }
  if (got_queues.size() != im.queues.size()) return "the new run has other Channel queues";
  for (const auto& [ci, q] : im.queues) {  // bounded by the run's queues
    const std::string name = ci.first + "/" + ci.second;
    auto g = got_queues.find(ci);
    if (g == got_queues.end()) return "queue " + name + " is not in the new run";
    const auto& took = taken[ci];
    std::vector<std::string> left = want_q[ci];
    if (left.size() < took.size() || !std::equal(took.begin(), took.end(), left.begin()))
      return "waits met at once in " + name + " took other messages than its first";
    left.erase(left.begin(), left.begin() + static_cast<std::ptrdiff_t>(took.size()));
    if (left != got_q[ci]) return "queue " + name + " holds other messages";
    if (g->second.first_seq() != q.first_seq() + took.size() ||
        g->second.next_seq() != q.next_seq())
      return "queue " + name + " has other bounds";
  }
  for (const auto& [ci, took] : taken)
    if (!took.empty() && !im.queues.contains(ci))
      return "a wait took from a queue not at the point";

  // The run: a fresh one of the Flow ID (no retry chain, parents, RPCs or
  // close), whose flow timeout and start delay keep the time they had left.
  if (run->flow_attempt() != 1 || !run->previous_run_id().empty() || !run->next_run_id().empty() ||
      run->retry_at_ms() != 0 || run->parents_size() > 0 || run->rpcs_open_size() > 0 ||
      run->rpcs_done_size() > 0 || run->close_ms() != 0 || !run->traveled_to_run_id().empty() ||
      run->expire_at_ms() != 0)
    return "the new run carries the old run's chain, parents, RPCs or close: " +
           run->ShortDebugString();
  StartOptions options = im.run.options();
  options.set_request_id(t.request_id());
  if (options.timeout_ms() > 0 && !im.run.timeout_handled())
    options.set_timeout_ms(
        std::max<int64_t>(1, im.run.start_ms() + im.run.options().timeout_ms() - p.at_ms));
  if (im.run.start_pending())
    options.set_start_delay_ms(
        std::max<int64_t>(0, im.run.start_ms() + im.run.options().start_delay_ms() - p.at_ms));
  if (auto d = differences(options, run->options()); !d.empty()) return "options: " + d;
  if (run->timeout_handled() != im.run.timeout_handled()) return "timeout_handled differs";
  if (im.run.timeout_handler().state() != TASK_STATE_UNSPECIFIED &&
      (run->timeout_handler().state() != TASK_QUEUED || run->timeout_handler().attempt() != 1))
    return "the timeout handler is not queued afresh";

  // The run's results so far.
  if (run->graceful_complete() != im.run.graceful_complete()) return "graceful_complete differs";
  if (run->outputs_size() != im.run.outputs_size()) return "the outputs differ";
  for (int i = 0; i < run->outputs_size(); ++i)  // bounded by the run's outputs
    if (auto d = differences(im.run.outputs(i), run->outputs(i)); !d.empty())
      return "output " + std::to_string(i) + ": " + d;
  return "";
}

// Where a point lies in a run's journal, read here apart from resolve_point:
// the deltas to fold (the last state at or before the point in which the run
// still ran), or 0 when the run has no such point.
size_t expected_point(const std::vector<RunDelta>& journal, const Run& run,
                      const TimeTravelPoint& point) {
  if (journal.empty()) return 0;
  auto created = [&](const std::string& id) -> size_t {
    for (size_t i = 0; i < journal.size(); ++i)  // bounded by the run's records
      for (const auto& s : journal[i].steps())
        if (s.step_execution_id() == id) return i + 1;
    return 0;
  };
  size_t at = 0;
  switch (point.kind()) {
    case TIME_TRAVEL_BEGINNING:
      at = 1;
      break;
    case TIME_TRAVEL_EVENT_TIME:                   // the last record at or before the time
      for (size_t i = 0; i < journal.size(); ++i)  // bounded by the run's records
        if (journal[i].at_ms() <= point.event_time_ms()) at = i + 1;
      break;
    case TIME_TRAVEL_FIRST_OF_STEP_TYPE:
    case TIME_TRAVEL_LATEST_OF_STEP_TYPE:
      for (const auto& c : run.counters())
        if (!point.step_type().empty() && c.step_type() == point.step_type() && c.count() > 0)
          at = created(step_execution_id(
              c.step_type(), point.kind() == TIME_TRAVEL_FIRST_OF_STEP_TYPE ? 1 : c.count()));
      break;
    case TIME_TRAVEL_STEP_EXECUTION:
      if (!point.step_execution_id().empty()) at = created(point.step_execution_id());
      break;
    default:
      break;
  }
  std::vector<bool> running;  // after each count of deltas
  bool now_running = true;
  for (const auto& d : journal) {  // bounded by the run's records
    if (d.has_run()) now_running = d.run().status() == FLOW_RUNNING;
    running.push_back(now_running);
  }
  while (at > 1 && !running[at - 1]) --at;  // bounded by at
  return at;
}

struct Sim {
  explicit Sim(uint64_t seed) : random(seed) {}

  Random random;
  MemoryKv kv;
  uint64_t checks = 0;  // check() calls so far
  // The log: records in order; a recovery is an entry without a record.
  struct Entry {
    std::optional<FlowRecord> record;
    int64_t recover_at = 0;
  };
  std::vector<Entry> log;
  int64_t now = 1'000'000;
  uint64_t task_n = 0, epoch = 1, message_n = 0, run_n = 0;
  std::multiset<std::string> published;            // every message of an applied publish
  std::map<std::string, std::string> closed_runs;  // run key -> its bytes at close
  FlowRecord::KindCase record_kind_ = FlowRecord::KIND_NOT_SET;  // the record applying
  std::vector<FlowRecord> applied_results;                       // for duplicates
  // The model of every run's Attributes: run key -> (key, instance) -> value bytes.
  std::map<std::string, std::map<std::pair<std::string, std::string>, std::string>> attributes;
  uint64_t rpc_n = 0;
  std::set<std::string> open_rpcs;  // "<flow>/<run>/<rpc id>" invoked, not yet done
  // "<flow>/<run>/<request id>" of every SetAttributes applied with a request
  // ID: one that applies again undid later writes (fewer than the 256 a run
  // remembers are sent to one run in a schedule).
  std::set<std::string> set_requests;
  std::map<std::string, int> stats;
  std::string failure;
  // Time travel: the old run's record and journal before the travel applies
  // (it appends a delta), and where the point lies (expected_point).
  struct TravelFrom {
    Run run;
    std::vector<RunDelta> journal;
    size_t expected = 0;
  };
  std::optional<TravelFrom> travel_from;
  std::vector<TimeTravel> travel_requests;  // applied with a request ID: repeated later
  uint64_t travel_n = 0;
  // Runs (as check() names them) whose timeout handler a travel revived: its
  // TIMEOUT_HANDLER_STARTED is in the run traveled from.
  std::set<std::string> revived_handlers;
  // The model of every run's FlowConfig, by "<flow>/<run>".
  struct ConfigModel {
    // From the run's start, then after each accepted update: the config, and
    // how many of the run's journal deltas there were once it held (a time
    // travel to a point takes the config of the point).
    std::vector<std::pair<size_t, FlowConfig>> history;
    int updates = 0;                 // accepted ones: FLOW_CONFIG_UPDATED events
    std::set<std::string> requests;  // their request IDs (a continued run remembers them)
    bool threshold_updated = false;  // an update of it (or a run it continued) moved a threshold
    const FlowConfig& now() const { return history.back().second; }
    const FlowConfig& at(size_t deltas) const {
      size_t i = 0;
      while (i + 1 < history.size() && history[i + 1].first <= deltas) ++i;  // bounded
      return history[i].second;
    }
  };
  std::map<std::string, ConfigModel> configs;
  // The update applying, as the model has it (taken in apply(), before a
  // continue-as-new in the same record copies the run's config).
  struct ConfigUpdate {
    std::string run;
    FlowConfig after;
    bool threshold = false;
  };
  std::optional<ConfigUpdate> config_update;
  std::vector<UpdateFlowConfig> config_requests;  // applied with a request ID: repeated later
  uint64_t config_n = 0;

  void fail(const std::string& why) {
    if (failure.empty()) failure = fmt::format("at step record {}: {}", log.size(), why);
  }

  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[random.uniform(v.size())];
  }

  Payload message() {
    Payload p;
    p.set_data("m" + std::to_string(++message_n));
    return p;
  }

  ApplyResult apply(FlowRecord record) {
    Effects fx;
    const auto before = kv.data();
    KvFlowTxn txn(kv, /*slot=*/log.size() + 1);  // each record its own log slot
    record_kind_ = record.kind_case();
    ApplyResult r = apply_record(txn, record, fx);
    if (std::getenv("FLOW_SIM_TRACE"))
      fmt::print(stderr, "#{} {} -> {} {}\n", log.size(), record.ShortDebugString(),
                 apply_kind_name(r.kind), r.message);
    log.push_back({record, 0});
    stats[std::string(apply_kind_name(r.kind))]++;
    if (r.kind != ApplyKind::kApplied && record.assignments_size() == 0 && kv.data() != before)
      fail(fmt::format("a {} record changed the state: {}", apply_kind_name(r.kind), r.message));
    if (r.kind == ApplyKind::kApplied) {
      if (record.has_update_flow_config() && config_update)
        config_applied(record.update_flow_config());
      if (record.has_publish())
        for (const auto& m : record.publish().publish().messages()) published.insert(m.data());
      if (record.has_method_result()) {
        applied_results.push_back(record);
        for (const auto& p : record.method_result().publishes())
          for (const auto& m : p.messages()) published.insert(m.data());
        const auto& m = record.method_result();
        if (m.outcome() == ATTEMPT_COMPLETED)
          write_model(m.task().flow_id() + "/" + m.task().run_id(), m.attribute_writes());
      }
      if (record.has_start_flow())
        write_model(record.start_flow().flow_id() + "/" + r.run_id,
                    record.start_flow().options().initial_attributes());
      if (record.has_set_attributes()) {
        const auto& set = record.set_attributes();
        write_model(set.flow_id() + "/" + r.run_id, set.writes());
        stats["attributes set"]++;
        if (!set.request_id().empty() &&
            !set_requests.insert(set.flow_id() + "/" + r.run_id + "/" + set.request_id()).second)
          fail("a repeated SetAttributes request applied again");
      }
      if (record.has_time_travel()) traveled(record.time_travel());
      if (record.has_invoke_rpc()) {
        stats["rpcs invoked"]++;
        if (!open_rpcs
                 .insert(record.invoke_rpc().flow_id() + "/" + r.run_id + "/" +
                         record.invoke_rpc().rpc_id())
                 .second)
          fail("an RPC still open was invoked anew");
      }
    }
    end_rpcs(fx);
    for (const auto& c : fx.closed) {
      stats[fmt::format("closed {}", FlowStatus_Name(c.status))]++;
      if (c.status == FLOW_CONTINUED_AS_NEW) continued(c.flow_id, c.run_id);
    }
    for (const auto& id : fx.runs_deleted) forget_run(before, id);
    check();
    return r;
  }

  // check()'s name for a run: its events prefix without the separator.
  static std::string run_name(const std::string& flow_id, const std::string& run_id) {
    const std::string prefix = keys::events_prefix(flow_id, run_id);
    return prefix.substr(0, prefix.size() - 1);
  }

  // An applied TimeTravel: the new run starts as the old one stood at the
  // point (travel_mismatch), and the models take the new run's copies of the
  // point's Attributes and messages.
  void traveled(const TimeTravel& t) {
    stats["time travels applied"]++;
    if (!travel_from) return fail(t.new_run_id() + ": a time travel applied from no stored run");
    const std::string what =
        fmt::format("time travel of {} from {} to {}", t.flow_id(), t.run_id(), t.new_run_id());
    const Run& old = travel_from->run;
    TravelPoint point;
    RunImage image;
    if (auto why = travel_mismatch(kv, travel_from->journal, old, t, &point, &image); !why.empty())
      return fail(fmt::format("{} ({}): {}", what, t.point().ShortDebugString(), why));
    if (point.deltas != travel_from->expected)
      fail(fmt::format("{}: the point resolved to {} deltas, not {}", what, point.deltas,
                       travel_from->expected));
    // Timers count their time left from a moment between the record at the
    // point and the next one.
    const auto& journal = travel_from->journal;
    if (point.at_ms < journal[point.deltas - 1].at_ms() ||
        (point.deltas < journal.size() && point.at_ms > journal[point.deltas].at_ms()))
      fail(fmt::format("{}: the point's moment {} is not between its record and the next", what,
                       point.at_ms));
    if (old.status() == FLOW_RUNNING) stats["time travels from a running run"]++;
    {  // The new run's config is the old run's at the point.
      const ConfigModel& from = config_model(old);
      ConfigModel next;
      next.history.push_back({0, from.at(point.deltas)});
      next.threshold_updated = from.threshold_updated;
      if (from.history.size() > 1 && from.history[1].first <= point.deltas)
        stats["time travels to a point after a config update"]++;
      configs[t.flow_id() + "/" + t.new_run_id()] = std::move(next);
    }
    for (const auto& id : image.run.active()) {  // bounded by kActiveStepsMax
      for (const auto& c : image.steps.at(id).conditions())
        if (!c.fired() && !c.child_flow_id().empty()) {
          stats["time travels while a SubFlow runs"]++;
          break;
        }
    }
    if (image.run.active_size() == 0 && !image.run.start_pending())
      stats["time travels to a point with nothing active"]++;
    auto& model = attributes[t.flow_id() + "/" + t.new_run_id()];  // a run the rules started
    for (const auto& [ki, v] : image.attributes)                   // bounded by kAttributesMax
      model[ki] = v.SerializeAsString();
    for (const auto& [cis, m] : image.messages)  // bounded by the run's queued messages
      published.insert(m.data());
    for (const auto& [id, s] : image.steps)  // bounded by the run's executions
      for (const auto& c : s.conditions())
        for (const auto& m : c.messages()) published.insert(m.data());
    if (image.run.timeout_handler().state() != TASK_STATE_UNSPECIFIED) {
      revived_handlers.insert(run_name(t.flow_id(), t.new_run_id()));
      stats["time travel timeout handlers revived"]++;
    }
    if (old.status() == FLOW_RUNNING) return;
    // A closed run takes one change from a travel: the link to the new run
    // (and the TIME_TRAVELED event that moves its next_event).
    KvFlowTxn txn(kv);
    Run now = txn.run(t.flow_id(), t.run_id()).value_or(Run());
    Run was = old;
    for (Run* r : {&now, &was}) {
      r->clear_traveled_to_run_id();
      r->clear_next_event();
      r->clear_history_bytes();
    }
    if (auto d = differences(was, now); !d.empty())
      fail(what + ": the closed run changed beyond its link: " + d);
    Run kept = txn.run(t.flow_id(), t.run_id()).value_or(Run());
    kept.clear_expire_at_ms();
    closed_runs[keys::run(t.flow_id(), t.run_id())] = kept.SerializeAsString();
  }

  // A run that continued as new (Effects::closed): the new run holds exactly
  // its Attributes, Channel messages and active executions (as they stood
  // before its close canceled them), linked both ways; the models take the
  // new run's copies.
  void continued(const std::string& flow_id, const std::string& run_id) {
    stats["continued as new"]++;
    KvFlowTxn txn(kv);
    auto old = txn.run(flow_id, run_id);
    if (!old) return fail(flow_id + "/" + run_id + " continued as new but does not exist");
    const std::string what = "continue-as-new of " + flow_id + "/" + run_id;
    auto run = txn.run(flow_id, old->next_run_id());
    if (!run) return fail(what + ": no new run " + old->next_run_id());
    if (run->continued_from_run_id() != run_id) fail(what + ": the new run is not linked back");
    if (txn.flow_id(flow_id)->run_id() != run->run_id() && run->status() == FLOW_RUNNING)
      fail(what + ": the running new run is not the Flow ID's latest");
    const std::string new_key = flow_id + "/" + run->run_id();
    attributes[new_key] = attributes[flow_id + "/" + run_id];
    {  // The new run keeps the config and the request IDs it remembers.
      const ConfigModel& from = config_model(*old);
      ConfigModel next;
      next.history.push_back({0, from.now()});
      next.requests = from.requests;
      next.threshold_updated = from.threshold_updated;
      if (old->close_reason().find("(FlowConfig continue_as_new_after_") != std::string::npos) {
        stats["continued as new by a history threshold"]++;
        if (from.threshold_updated) stats["continued as new by an updated threshold"]++;
      }
      configs[new_key] = std::move(next);
    }
    std::map<std::pair<std::string, std::string>, std::string> was, now;
    for (const auto& a : txn.attributes(flow_id, run_id, ""))
      was[{a.key(), a.instance_key()}] = a.value().SerializeAsString();
    for (const auto& a : txn.attributes(flow_id, run->run_id(), ""))
      now[{a.key(), a.instance_key()}] = a.value().SerializeAsString();
    // The new run may have moved on in the same record only if it continued at its start.
    if (was != now) fail(what + ": the Attributes differ");
    for (const auto& [key, q] : txn.queues(flow_id, run->run_id())) {
      for (uint64_t seq = q.first_seq(); seq < q.next_seq(); ++seq) {  // bounded by the queue
        auto m = txn.message(key, seq);
        auto m_old = txn.message(QueueKey{flow_id, run_id, key.channel, key.instance_key}, seq);
        if (!m || !m_old || m->data() != m_old->data())
          fail(what + ": a queued message differs from the old run's");
        if (m) published.insert(m->data());
      }
    }
    if (run->continued_runs() != old->continued_runs() + 1) fail(what + ": the chain count is off");
    for (const auto& id : run->active()) {  // bounded by kActiveStepsMax
      auto s = txn.step(flow_id, run->run_id(), id);
      auto s_old = txn.step(flow_id, run_id, id);
      if (!s || !s_old) {
        fail(what + ": carried execution " + id + " is missing");
        continue;
      }
      for (const auto& c : s->conditions())
        for (const auto& m : c.messages()) published.insert(m.data());
      if (s_old->phase() != PHASE_CANCELED || s->step_type() != s_old->step_type() ||
          s->input().data() != s_old->input().data() ||
          s->locals().SerializeAsString() != s_old->locals().SerializeAsString() ||
          s->created_ms() != s_old->created_ms())
        fail(what + ": carried execution " + id + " is not the old run's");
    }
    stats["continued executions"] += run->active_size();
  }

  // A run retention deleted: it was closed for good (or earlier in its retry
  // chain), and what the models keep of it goes with it.
  template <typename Map>
  void forget_run(const Map& before, const RunKey& deleted) {
    const std::string id = deleted.flow_id + "/" + deleted.run_id;
    if (record_kind_ != FlowRecord::kTimerFired) fail(id + " was deleted by a record not a timer");
    stats["runs deleted"]++;
    const std::string& flow_id = deleted.flow_id;
    const std::string& run_id = deleted.run_id;
    auto it = before.find(keys::run(flow_id, run_id));
    if (it == before.end()) fail(id + " was deleted but did not exist");
    Run run;
    run.ParseFromString(it->second);
    if (run.status() == FLOW_RUNNING) fail(id + " was deleted while running");
    if (!run.parents().empty()) stats["subflow runs deleted"]++;
    // Its messages, queued or taken by its waits, leave the published model.
    auto drop = [&](const std::string& data) {
      if (auto m = published.find(data); m != published.end()) published.erase(m);
    };
    for (auto k = before.lower_bound(keys::run_messages_prefix(flow_id, run_id));
         k != before.end() && k->first.starts_with(keys::run_messages_prefix(flow_id, run_id));
         ++k) {
      Payload p;
      p.ParseFromString(k->second);
      drop(p.data());
    }
    for (auto k = before.lower_bound(keys::steps_prefix(flow_id, run_id));
         k != before.end() && k->first.starts_with(keys::steps_prefix(flow_id, run_id)); ++k) {
      StepExecution st;
      st.ParseFromString(k->second);
      for (const auto& c : st.conditions())
        for (const auto& m : c.messages()) drop(m.data());
    }
    attributes.erase(id);
    configs.erase(id);
    revived_handlers.erase(run_name(flow_id, run_id));
    closed_runs.erase(keys::run(flow_id, run_id));
    lock_history.erase(keys::events_prefix(flow_id, run_id));
  }

  // Each invoked RPC ends once; nothing queues a done RPC again.
  void end_rpcs(const Effects& fx) {
    stats["rpcs done"] += static_cast<int>(fx.rpcs_done.size());
    for (const auto& done : fx.rpcs_done) {
      const std::string id = done.run.flow_id + "/" + done.run.run_id + "/" + done.id;
      if (open_rpcs.erase(id) != 1) fail(id + " ended but was not open");
    }
    for (const auto& q : fx.queued)
      if (q.task.method() == RPC && !open_rpcs.contains(q.task.flow_id() + "/" + q.task.run_id() +
                                                        "/" + q.task.step_execution_id()))
        fail(q.task.step_execution_id() + ": an RPC that is not open was queued");
  }

  void write_model(const std::string& run,
                   const google::protobuf::RepeatedPtrField<Attribute>& writes) {
    auto& model = attributes[run];
    for (const auto& w : writes) {
      const auto id = std::pair(w.key(), w.instance_key());
      if (!w.has_value() || w.value().value_case() == AttributeValue::VALUE_NOT_SET)
        model.erase(id);
      else
        model[id] = w.value().SerializeAsString();
    }
  }

  // Between a holder's LOCKS_ACQUIRED and its LOCKS_RELEASED, nobody else
  // acquires one of its keys (each run's history, in order; read on from the
  // last event checked).
  struct LockHistory {
    uint64_t next_seq = 0;
    std::map<std::string, std::string> holder;  // key -> holder
  };
  std::map<std::string, LockHistory> lock_history;  // by events prefix

  void check_locks(const std::string& run_prefix) {
    LockHistory& h = lock_history[run_prefix];
    const auto& data = kv.data();
    for (auto it = data.lower_bound(run_prefix + keys::digits(h.next_seq));
         it != data.end() && it->first.starts_with(run_prefix); ++it) {
      HistoryEvent e;
      e.ParseFromString(it->second);
      h.next_seq = e.seq() + 1;
      const std::string who = e.step_execution_id() + "/" + std::to_string(e.method());
      if (e.kind() == LOCKS_ACQUIRED) {
        stats["locks acquired"]++;
        for (const auto& key : e.lock_keys()) {
          if (h.holder.contains(key))
            fail(fmt::format("{} acquired {} held by {}", who, key, h.holder[key]));
          h.holder[key] = who;
        }
      } else if (e.kind() == LOCKS_RELEASED) {
        for (const auto& key : e.lock_keys()) {
          if (h.holder[key] != who) fail(fmt::format("{} released {} it did not hold", who, key));
          h.holder.erase(key);
        }
      }
    }
  }

  // A run's FlowConfig model; a run first seen (started by a client or the
  // rules) has its start's: the declaration's, overridden by its options.
  ConfigModel& config_model(const Run& run) {
    const std::string key = run.flow_id() + "/" + run.run_id();
    if (auto it = configs.find(key); it != configs.end()) return it->second;
    ConfigModel& m = configs[key];
    KvFlowTxn txn(kv);
    auto decl = txn.declaration(run.flow_type(), run.declaration_version());
    if (!decl) fail(key + ": its declaration version is not stored");
    m.history.push_back({0, decl ? start_model(decl->declaration(), run.options()) : run.config()});
    return m;
  }

  // An UpdateFlowConfig applied as the model said (config_update): the run's
  // config is the model's new one from this record's journal delta on.
  void config_applied(const UpdateFlowConfig& u) {
    auto it = configs.find(config_update->run);
    if (it == configs.end()) return fail(config_update->run + ": an update of a run not modelled");
    KvFlowTxn txn(kv);
    it->second.history.push_back(
        {txn.run_journal(u.flow_id(), u.run_id()).size(), config_update->after});
    it->second.updates++;
    if (!u.request_id().empty()) it->second.requests.insert(u.request_id());
    it->second.threshold_updated = it->second.threshold_updated || config_update->threshold;
  }

  // The run's effective config is the model's, with one FLOW_CONFIG_UPDATED
  // per accepted update; a running run whose history reached a threshold has
  // a continue-as-new pending, and one pending has something in flight.
  void check_config(const Run& run, int updated_events, bool attempt_running) {
    const std::string key = run.flow_id() + "/" + run.run_id();
    const ConfigModel& m = config_model(run);
    if (!same_config(m.now(), run.config()))
      fail(key + ": the effective FlowConfig is not what its start and accepted updates say: " +
           differences(m.now(), run.config()));
    if (run.attribute_store() != m.now().attribute_store())
      fail(fmt::format("{}: Attribute Store '{}', its config says '{}'", key, run.attribute_store(),
                       m.now().attribute_store()));
    if (updated_events != m.updates)
      fail(fmt::format("{}: {} FLOW_CONFIG_UPDATED events, {} accepted updates", key,
                       updated_events, m.updates));
    if (run.status() != FLOW_RUNNING) return;
    // Search: ActiveStepTypes are the active executions' types unless the
    // config turned them off (an update rebuilds the doc in its own apply).
    std::set<std::string> types;
    const FlowConfig& c = m.now();
    if (!c.has_index_active_step_types() || c.index_active_step_types())
      for (const auto& id : run.active()) types.insert(id.substr(0, id.rfind('-')));
    KvFlowTxn txn(kv);
    const auto doc = txn.search_doc(run.flow_id(), run.run_id());
    if (!doc || !std::equal(types.begin(), types.end(), doc->active_step_types().begin(),
                            doc->active_step_types().end()))
      fail(fmt::format("{}: its search doc's ActiveStepTypes are not [{}]", key,
                       fmt::join(types, ", ")));
    if (run.continue_as_new_pending().empty()) {
      const std::string reached = threshold_reached(m.now(), run.next_event(), run.history_bytes());
      if (!run.graceful_complete() && !reached.empty())
        fail(key + ": " + reached + ", but no continue-as-new is pending");
    } else if (!attempt_running && run.rpcs_open_size() == 0 &&
               run.timeout_handler().state() == TASK_STATE_UNSPECIFIED) {
      // docs/flow-rules.md, "Continue-as-new": a busy run continues once its
      // attempts end, even into a retry that writes no event (a FAILED or
      // TIMED_OUT result, recovery's NOT_COMPLETED).
      fail(key + ": nothing of it is in flight, yet its pending continue-as-new (" +
           run.continue_as_new_pending() + ") did not happen");
    }
  }

  // Every check of the header, on the live state.
  void check() {
    // The journal's fold on every fourth check: it costs as much as the rest.
    const auto journals = ++checks % 4 == 0 ? JournalCheck::kAll : JournalCheck::kSkip;
    if (auto s = check_state(kv, journals); !s.is_ok()) fail(s.message());
    std::multiset<std::string> seen;
    std::map<std::string, int> decisions;
    std::set<std::string> busy;  // runs with an attempt running
    for (auto& [k, v] : kv.scan(keys::kStepPrefix)) {
      StepExecution s;
      s.ParseFromString(v);
      if (s.method().state() == TASK_RUNNING) busy.insert(s.flow_id() + "/" + s.run_id());
      for (int i = 0; i < s.conditions_size(); ++i) {
        uint64_t last = 0;
        for (const auto& m : s.conditions(i).messages()) {
          seen.insert(m.data());
          const uint64_t n = std::stoull(m.data().substr(1));
          if (n <= last) fail(s.step_execution_id() + " took messages out of FIFO order");
          last = n;
        }
      }
    }
    for (auto& [k, v] : kv.scan(keys::kMessagePrefix)) {
      Payload p;
      p.ParseFromString(v);
      seen.insert(p.data());
    }
    if (seen != published)
      fail(fmt::format("{} messages published, {} queued or taken", published.size(), seen.size()));
    std::map<std::string, int> handlers_started, handlers_ended, config_events;
    for (auto& [k, v] : kv.scan(keys::kEventPrefix)) {
      HistoryEvent e;
      e.ParseFromString(v);
      const std::string run = k.substr(0, k.rfind(keys::kSep));
      if (e.kind() == FLOW_CONFIG_UPDATED) config_events[run]++;
      if (e.kind() == EXECUTE_COMPLETED && ++decisions[run + e.step_execution_id()] > 1)
        fail(e.step_execution_id() + " has two applied decisions");
      // A run times out once: one handler, which decides or fails once (a
      // handler a time travel revived started in the run traveled from).
      const int revived = revived_handlers.contains(run) ? 1 : 0;
      if (e.kind() == TIMEOUT_HANDLER_STARTED && ++handlers_started[run] + revived > 1)
        fail(run + " started its timeout handler twice");
      if ((e.kind() == TIMEOUT_HANDLER_COMPLETED || e.kind() == TIMEOUT_HANDLER_FAILED) &&
          ++handlers_ended[run] > handlers_started[run] + revived)
        fail(run + ": its timeout handler ended twice, or before it started");
    }
    std::map<std::string, std::map<std::pair<std::string, std::string>, std::string>> stored;
    for (auto& [k, v] : kv.scan(keys::kRunPrefix)) {
      flow::Run run;
      run.ParseFromString(v);
      const std::string key = run.flow_id() + "/" + run.run_id();
      if (!attributes.contains(key)) {
        // Started by the rules (a SubFlow child, a Flow retry): its initial
        // Attributes are its start event's, which are its options'.
        auto events = kv.scan(keys::events_prefix(run.flow_id(), run.run_id()));
        HistoryEvent first;
        if (!events.empty()) first.ParseFromString(events.front().second);
        if (first.kind() != FLOW_STARTED) fail(key + " has no start event");
        if (run.options().has_retry_policy() &&
            !std::equal(first.attribute_writes().begin(), first.attribute_writes().end(),
                        run.options().initial_attributes().begin(),
                        run.options().initial_attributes().end(),
                        [](const Attribute& x, const Attribute& y) {
                          return x.SerializeAsString() == y.SerializeAsString();
                        }))
          fail(key + ": the start wrote other Attributes than its options name");
        write_model(key, first.attribute_writes());
        stats[run.parents_size() > 0 ? "subflow starts" : "flow retry starts"]++;
      }
      KvFlowTxn txn(kv);
      for (const auto& a : txn.attributes(run.flow_id(), run.run_id(), ""))
        stored[key][{a.key(), a.instance_key()}] = a.value().SerializeAsString();
      if (!stored.contains(key) && attributes.contains(key) && !attributes[key].empty())
        fail(key + ": applied Attribute writes are not stored");
      if (stored.contains(key) && stored[key] != attributes[key])
        fail(key + ": the stored Attributes are not what the applied writes left");
      if (run.lock_waiters_size() > 0) stats["lock waits"]++;
      check_locks(keys::events_prefix(run.flow_id(), run.run_id()));
      check_config(run, config_events[run_name(run.flow_id(), run.run_id())], busy.contains(key));
      if (run.status() == FLOW_RUNNING) continue;
      // An abandoned Flow retry starts the closed run's retention later: that
      // is the one change a closed run takes.
      Run kept = run;
      kept.clear_expire_at_ms();
      const std::string bytes = kept.SerializeAsString();
      auto [it, inserted] = closed_runs.emplace(k, bytes);
      if (!inserted && it->second != bytes) fail(run.flow_id() + ": a closed run changed");
    }
  }

  std::vector<std::pair<std::string, TaskRef>> running() {
    KvFlowTxn txn(kv);
    return txn.running();
  }
  std::vector<TaskRef> queued() {
    std::vector<TaskRef> out;
    for (auto& [k, v] : kv.scan(keys::kTaskQueuePrefix)) {
      TaskRef r;
      r.ParseFromString(v);
      out.push_back(r);
    }
    return out;
  }
  std::vector<Run> runs() {
    std::vector<Run> out;
    for (auto& [k, v] : kv.scan(keys::kRunPrefix)) {
      Run r;
      r.ParseFromString(v);
      out.push_back(r);
    }
    return out;
  }

  TaskAssignment assignment(const TaskRef& ref) {
    TaskAssignment a;
    *a.mutable_task() = ref;
    a.set_task_id(fmt::format("e{}.{}", epoch, ++task_n));
    a.set_worker_id(fmt::format("w{}", random.uniform(3)));
    return a;
  }

  // -------------------------------------------------------------- actions
  void declare() {
    FlowRecord r;
    *r.mutable_declare_flows()->add_declarations() =
        sim_declaration(random.chance(0.2) ? 2 : static_cast<int>(random.uniform(2)));
    r.mutable_declare_flows()->set_at_unix_ms(now);
    apply(r);
  }

  void start() {
    FlowRecord r;
    auto* s = r.mutable_start_flow();
    s->set_flow_id(fmt::format("f{}", random.uniform(6)));
    s->set_run_id(fmt::format("r{}", ++run_n));
    s->set_flow_type(random.chance(0.03) ? "Undeclared" : "Sim");
    s->mutable_input()->set_data("in");
    s->set_at_unix_ms(now);
    auto* o = s->mutable_options();
    o->set_id_reuse_policy(static_cast<IdReusePolicy>(random.uniform(5)));
    if (random.chance(0.2)) o->set_timeout_ms(static_cast<int64_t>(random.uniform(20'000)) + 1);
    if (o->timeout_ms() > 0) o->set_timeout_policy(random_timeout_policy());
    if (random.chance(0.15)) o->set_start_delay_ms(static_cast<int64_t>(random.uniform(3'000)) + 1);
    // Half the runs (and their children and retries) are deleted a while
    // after they close; the rest are kept forever.
    if (random.chance(0.5)) s->set_retention_ms(static_cast<int64_t>(random.uniform(8'000)) + 1);
    o->set_request_id(fmt::format("q{}", random.uniform(3)));
    o->set_ignore_already_started(random.chance(0.5));
    if (random.chance(0.25)) o->set_attribute_store("s2");  // else the declaration's (if any)
    // Some runs continue as new on their own once their history is long.
    if (random.chance(0.1))
      o->mutable_config()->set_continue_as_new_after_events(10 + random.uniform(40));
    if (random.chance(0.3))
      for (int i = 0; i < 1 + static_cast<int>(random.uniform(3)); ++i)
        *o->add_initial_attributes() = random_write();
    if (random.chance(0.2)) *o->mutable_retry_policy() = random_flow_retry();
    if (random.chance(0.5)) {  // a Worker is polling: the first attempt rides along
      r.set_at_unix_ms(now);
      TaskRef ref;
      ref.set_flow_id(s->flow_id());
      ref.set_run_id(s->run_id());
      ref.set_step_execution_id("Start-1");
      ref.set_method(EXECUTE);
      ref.set_attempt(1);
      *r.add_assignments() = assignment(ref);
    }
    // A repeat of the request that started the Flow ID's latest run (a retry
    // after a lost answer) answers that run, whatever its status and policy.
    std::optional<FlowIdEntry> entry;
    {
      KvFlowTxn txn(kv);
      entry = txn.flow_id(s->flow_id());
    }
    const bool repeat = entry && o->ignore_already_started() &&
                        entry->request_id() == o->request_id() && s->flow_type() == "Sim";
    ApplyResult result = apply(r);
    if (repeat && (result.kind != ApplyKind::kUnchanged || result.run_id != entry->run_id()))
      fail(fmt::format("a repeated start request of {} got {} {}, not its run {}", s->flow_id(),
                       apply_kind_name(result.kind), result.run_id, entry->run_id()));
  }

  // A random Attribute write: mostly valid, sometimes a delete, rarely invalid.
  Attribute random_write() {
    Attribute a;
    const auto kind = random.uniform(100);
    if (kind < 30) {
      a.set_key("a");
      a.mutable_value()->set_string_value(fmt::format("v{}", random.uniform(100)));
    } else if (kind < 50) {
      a.set_key("n");
      a.mutable_value()->set_int64_value(static_cast<int64_t>(random.uniform(1000)));
    } else if (kind < 75) {
      a.set_key("m");
      a.set_instance_key(fmt::format("i{}", random.uniform(4)));
      a.mutable_value()->set_string_value(fmt::format("v{}", random.uniform(100)));
    } else if (kind < 82) {
      a.set_key("j");
      a.mutable_value()->set_json_value(fmt::format(R"({{"x": {}}})", random.uniform(10)));
    } else if (kind < 95) {  // a delete
      a.set_key(random.chance(0.5) ? "a" : "m");
      if (a.key() == "m") a.set_instance_key(fmt::format("i{}", random.uniform(4)));
    } else if (kind < 97) {
      a.set_key("undeclared");
      a.mutable_value()->set_string_value("x");
    } else if (kind < 99) {
      a.set_key("n");
      a.mutable_value()->set_string_value("not a number");
    } else {
      a.set_key("j");
      a.mutable_value()->set_json_value("[1]");
    }
    return a;
  }

  // Mostly the default (FAIL), often HANDLER, sometimes CANCEL.
  TimeoutPolicy random_timeout_policy() {
    const auto p = random.uniform(10);
    return p < 2 ? TIMEOUT_CANCEL : p < 6 ? TIMEOUT_HANDLER : TIMEOUT_POLICY_UNSPECIFIED;
  }

  // A Flow retry policy: short backoffs, a few runs.
  RetryPolicy random_flow_retry() {
    RetryPolicy p;
    p.set_initial_interval_ms(1 + static_cast<int64_t>(random.uniform(2'000)));
    p.set_maximum_attempts(static_cast<uint32_t>(random.uniform(4)));  // 0: no limit
    if (p.maximum_attempts() == 0) p.set_total_duration_ms(10'000);
    return p;
  }

  // A child Flow of the same type (nested SubFlows: the derived ID's length
  // bounds the depth), every reuse policy, sometimes retried or timed out.
  Condition random_sub_flow(int i) {
    Condition c;
    c.set_condition_id(fmt::format("c{}", i));
    auto* sub = c.mutable_sub_flow();
    sub->set_flow_type(random.chance(0.02) ? "Undeclared" : "Sim");
    sub->mutable_input()->set_data("child");
    sub->set_reuse_policy(static_cast<SubFlowReusePolicy>(random.uniform(4)));
    if (random.chance(0.3)) *sub->mutable_options()->mutable_retry_policy() = random_flow_retry();
    if (random.chance(0.2)) {
      sub->mutable_options()->set_timeout_ms(1 + static_cast<int64_t>(random.uniform(10'000)));
      sub->mutable_options()->set_timeout_policy(random_timeout_policy());
    }
    if (random.chance(0.2)) *sub->mutable_options()->add_initial_attributes() = random_write();
    if (random.chance(0.02)) sub->mutable_options()->set_request_id("mine");  // refused
    return c;
  }

  Condition random_condition(int i) {
    if (random.chance(0.15)) return random_sub_flow(i);
    Condition c;
    c.set_condition_id(fmt::format("c{}", i));
    const auto kind = random.uniform(3);
    if (kind == 0) {
      if (random.chance(0.8))
        c.mutable_timer()->set_duration_ms(static_cast<int64_t>(random.uniform(5'000)));
      else
        c.mutable_timer()->set_at_unix_ms(now + static_cast<int64_t>(random.uniform(5'000)) - 500);
      return c;
    }
    auto* ch = c.mutable_channel();
    if (kind == 1) {
      ch->set_channel("c");
    } else {
      ch->set_channel("cm");
      ch->set_instance_key(fmt::format("k{}", random.uniform(2)));
    }
    ch->set_match(static_cast<ChannelMatch>(1 + random.uniform(5)));
    ch->set_min(static_cast<uint32_t>(1 + random.uniform(2)));
    ch->set_max(ch->min() + static_cast<uint32_t>(random.uniform(2)));
    return c;
  }

  Wait random_wait() {
    Wait w;
    if (random.chance(0.1)) {
      w.set_kind(SKIP);
      return w;
    }
    w.set_kind(static_cast<WaitKind>(1 + random.uniform(3)));
    const int n = 1 + static_cast<int>(random.uniform(3));
    for (int i = 0; i < n; ++i) *w.add_conditions() = random_condition(i);
    if (w.kind() == ANY_COMBINATION_OF) {
      for (int g = 0; g < 2; ++g) {
        auto* group = w.add_combinations();
        for (int i = 0; i < n; ++i)
          if (random.chance(0.6) || group->condition_ids_size() == 0)
            group->add_condition_ids(fmt::format("c{}", i));
      }
    }
    if (random.chance(0.03)) w.mutable_conditions(0)->mutable_channel()->set_channel("nope");
    return w;
  }

  StepMovement movement() {
    static const std::vector<std::string> types = {"Work", "Wait", "Fragile", "Wait"};
    StepMovement m;
    m.set_step_type(pick(types));
    m.mutable_input()->set_data("x");
    if (random.chance(0.1))
      m.mutable_options()->mutable_execute()->mutable_retry()->set_maximum_attempts(1);
    return m;
  }

  StepDecision random_decision(const std::string& self_type) {
    StepDecision d;
    const auto kind = random.uniform(100);
    if (kind < 45) {
      const int n = 1 + static_cast<int>(random.uniform(3));
      for (int i = 0; i < n; ++i) *d.mutable_go_to()->add_movements() = movement();
    } else if (kind < 60) {
      d.mutable_graceful_complete()->set_data(self_type);
    } else if (kind < 65) {
      d.mutable_force_complete()->set_data("done");
    } else if (kind < 68) {
      d.set_force_fail("no");
    } else if (kind < 85) {
      d.mutable_dead_end();
    } else {
      auto* c = d.mutable_force_complete_if_channels_empty();
      auto* ref = c->add_channels();
      ref->set_channel(random.chance(0.5) ? "c" : "cm");
      ref->set_all_instances(ref->channel() == "cm");
      *c->add_otherwise() = movement();
    }
    if (random.chance(0.1)) d.add_cancel_step_types("Wait");
    if (random.chance(0.1)) d.set_cancel_siblings(true);
    if (random.chance(0.04)) d.set_continue_as_new(true);
    if (random.chance(0.02)) d.mutable_go_to()->add_movements()->set_step_type("Undeclared");
    return d;
  }

  void result() {
    auto all = running();
    if (all.empty()) return;
    const auto& [task_id, ref] = pick(all);
    FlowRecord r;
    auto* m = r.mutable_method_result();
    *m->mutable_task() = ref;
    m->set_task_id(task_id);
    m->set_at_unix_ms(now);
    const auto outcome = random.uniform(100);
    if (outcome < 75) {
      m->set_outcome(ATTEMPT_COMPLETED);
      if (random.chance(0.4))
        for (int i = 0; i < 1 + static_cast<int>(random.uniform(3)); ++i)
          *m->add_attribute_writes() = random_write();
      if (ref.method() == RPC) {
        m->mutable_rpc()->mutable_output()->set_data("out");
        if (random.chance(0.3)) *m->mutable_rpc()->add_next_steps() = movement();
      } else if (ref.method() == WAIT_FOR) {
        *m->mutable_wait() = random_wait();
        m->mutable_locals()->set_data("locals");
      } else {
        const std::string type =
            ref.step_execution_id().substr(0, ref.step_execution_id().find('-'));
        *m->mutable_decision() = random_decision(type);
      }
      if (random.chance(0.3)) {
        auto* p = m->add_publishes();
        p->set_channel(random.chance(0.5) ? "c" : "cm");
        if (p->channel() == "cm") p->set_instance_key(fmt::format("k{}", random.uniform(2)));
        *p->add_messages() = message();
      }
    } else {
      m->set_outcome(outcome < 90 ? ATTEMPT_FAILED : ATTEMPT_TIMED_OUT);
      m->set_error("boom");
      m->set_non_retryable(random.chance(0.1));
    }
    // The next Step's first attempt often rides in the same record.
    if (random.chance(0.5)) {
      r.set_at_unix_ms(now);
      for (const auto& q : queued()) *r.add_assignments() = assignment(q);
    }
    auto applied = apply(r);
    if (applied.kind == ApplyKind::kApplied) stats["results"]++;
    if (applied.kind == ApplyKind::kApplied && r.assignments_size() > 0) {
      // A second copy of the same result (a Worker's retry) must be stale.
      FlowRecord again = r;
      again.clear_assignments();
      if (apply(again).kind != ApplyKind::kStale) fail("a repeated result was not stale");
    }
  }

  // A client's TimeTravel: mostly from a Flow ID's latest run, sometimes from
  // an older or a missing one (refused), to a random point of every kind;
  // some repeat an earlier travel's request ID (a retry after a lost answer),
  // which answers the run it made while that is the Flow ID's latest.
  // A client's TriggerContinueAsNew: mostly the Flow ID's latest run, some
  // an older or a missing one (refused); some repeat a request ID.
  void continue_as_new() {
    auto all = runs();
    if (all.empty()) return;
    const Run& some = pick(all);
    FlowRecord r;
    auto* c = r.mutable_continue_as_new();
    c->set_flow_id(some.flow_id());
    std::optional<FlowIdEntry> entry;
    {
      KvFlowTxn txn(kv);
      entry = txn.flow_id(some.flow_id());
    }
    const auto which = random.uniform(100);
    if (which < 80 && entry)
      c->set_run_id(entry->run_id());
    else if (which < 95)
      c->set_run_id(some.run_id());
    else
      c->set_run_id(random.chance(0.5) ? "" : "gone");
    if (random.chance(0.5)) c->set_request_id(fmt::format("can{}", random.uniform(4)));
    c->set_at_unix_ms(now);
    std::optional<Run> before;
    {
      KvFlowTxn txn(kv);
      if (!c->run_id().empty()) before = txn.run(c->flow_id(), c->run_id());
    }
    const ApplyResult result = apply(r);
    stats[fmt::format("continue-as-new requests {}", apply_kind_name(result.kind))]++;
    if (result.kind == ApplyKind::kApplied && (!before || before->status() != FLOW_RUNNING))
      fail("a continue-as-new of a run that is not running applied");
    KvFlowTxn txn(kv);
    auto after = before ? txn.run(c->flow_id(), c->run_id()) : std::nullopt;
    if (result.kind == ApplyKind::kApplied && after && after->status() == FLOW_RUNNING &&
        after->continue_as_new_pending().empty())
      fail("an applied continue-as-new left the run running with none pending");
  }

  void time_travel() {
    auto all = runs();
    if (all.empty()) return;
    FlowRecord r;
    TimeTravel* t = r.mutable_time_travel();
    std::string earlier;  // a repeat: the run the earlier travel made
    if (!travel_requests.empty() && random.chance(0.15)) {
      *t = pick(travel_requests);
      earlier = t->new_run_id();
    } else {
      const Run& some = pick(all);
      t->set_flow_id(some.flow_id());
      std::optional<FlowIdEntry> entry;
      {
        KvFlowTxn txn(kv);
        entry = txn.flow_id(t->flow_id());
      }
      const auto which = random.uniform(100);
      if (which < 2)
        t->set_run_id("");
      else if (which < 82 && entry)
        t->set_run_id(entry->run_id());
      else if (which < 94)
        t->set_run_id(some.run_id());  // the latest, or an older run
      else
        t->set_run_id("gone");
      random_point(*t, some);
      if (random.chance(0.5)) t->set_request_id(fmt::format("tt{}", travel_n + 1));
      if (random.chance(0.3)) t->set_reason("a fix");
    }
    t->set_new_run_id(fmt::format("t{}", ++travel_n));
    t->set_at_unix_ms(now);
    if (t->point().kind() == TIME_TRAVEL_BEGINNING && random.chance(0.5)) {
      r.set_at_unix_ms(now);  // a Worker is polling: the start Step's attempt rides along
      TaskRef ref;
      ref.set_flow_id(t->flow_id());
      ref.set_run_id(t->new_run_id());
      ref.set_step_execution_id("Start-1");
      ref.set_method(EXECUTE);
      ref.set_attempt(1);
      *r.add_assignments() = assignment(ref);
    }
    std::optional<FlowIdEntry> entry;
    std::optional<Run> old;
    std::vector<RunDelta> journal;
    {
      KvFlowTxn txn(kv);
      entry = txn.flow_id(t->flow_id());
      if (!t->run_id().empty()) old = txn.run(t->flow_id(), t->run_id());
      if (old) journal = txn.run_journal(t->flow_id(), t->run_id());
    }
    const size_t expected = old ? expected_point(journal, *old, t->point()) : 0;
    if (old) travel_from = TravelFrom{*old, journal, expected};
    const ApplyResult result = apply(r);
    travel_from.reset();
    const std::string what = fmt::format("a time travel of {} from {} ({})", t->flow_id(),
                                         t->run_id(), t->point().ShortDebugString());
    if (result.kind == ApplyKind::kRejected) stats["time travel refused"]++;
    if (!earlier.empty()) {
      if (entry && entry->run_id() == earlier) {
        stats["time travel repeats"]++;
        if (result.kind != ApplyKind::kUnchanged || result.run_id != earlier)
          fail(fmt::format("a repeat of {} got {} {}, not its run {}", what,
                           apply_kind_name(result.kind), result.run_id, earlier));
      } else if (result.kind == ApplyKind::kApplied) {
        fail("a repeat of " + what + " applied after its Flow ID moved on");
      }
      return;
    }
    if (result.kind == ApplyKind::kApplied && !t->request_id().empty())
      travel_requests.push_back(*t);
    const bool latest = entry && old && entry->run_id() == old->run_id();
    if (result.kind == ApplyKind::kUnchanged) fail(what + " was unchanged, and not a repeat");
    if (result.kind == ApplyKind::kApplied && (!latest || expected == 0))
      fail(what + " applied from a run that is not the latest, or to a point it lacks");
    // From the latest run to a point it has, only a precondition refuses it:
    // what the point holds, a running SubFlow, or a point the run inherited.
    if (result.kind == ApplyKind::kRejected && latest && expected > 0) {
      if (result.code != RefusalCode::kFailedPrecondition)
        fail(what + " was refused: " + result.message);
      if (result.message.find("cannot time travel to that point") != std::string::npos)
        stats["time travel points unhostable"]++;
    }
  }

  // A random point of every kind: times within and around the run's life,
  // Step types declared or not, Step executions of the run or made up.
  void random_point(TimeTravel& t, const Run& some) {
    static const std::vector<std::string> types = {"Start",   "Work",  "Wait", "Fragile",
                                                   "Recover", "Extra", "Nope"};
    std::optional<Run> run;
    {
      KvFlowTxn txn(kv);
      run = txn.run(t.flow_id(), t.run_id());
    }
    const Run& from = run ? *run : some;
    TimeTravelPoint* p = t.mutable_point();
    const auto kind = random.uniform(100);
    if (kind < 20) {
      p->set_kind(TIME_TRAVEL_BEGINNING);
    } else if (kind < 50) {
      p->set_kind(TIME_TRAVEL_EVENT_TIME);
      const int64_t first = from.start_ms() - 1'000;
      const int64_t last = (from.status() == FLOW_RUNNING ? now : from.close_ms()) + 1'000;
      p->set_event_time_ms(
          first + static_cast<int64_t>(random.uniform(std::max<int64_t>(1, last - first))));
    } else if (kind < 65) {
      p->set_kind(TIME_TRAVEL_FIRST_OF_STEP_TYPE);
      p->set_step_type(random.chance(0.05) ? "" : pick(types));
    } else if (kind < 80) {
      p->set_kind(TIME_TRAVEL_LATEST_OF_STEP_TYPE);
      p->set_step_type(random.chance(0.05) ? "" : pick(types));
    } else if (kind < 98) {
      p->set_kind(TIME_TRAVEL_STEP_EXECUTION);
      std::vector<std::string> ids;
      // Bounded by the run's executions.
      for (auto& [k, v] : kv.scan(keys::steps_prefix(from.flow_id(), from.run_id()))) {
        StepExecution s;
        s.ParseFromString(v);
        ids.push_back(s.step_execution_id());
      }
      p->set_step_execution_id(!ids.empty() && random.chance(0.8) ? pick(ids)
                               : random.chance(0.1)               ? ""
                                                                  : "Work-99");
    }  // else no kind: refused
  }

  // A random FlowConfig change: each field set (small history thresholds,
  // sometimes 2^64-1: a client's -1 as the uint64 field holds it), cleared or
  // left; `store`: the run's Attribute Store, mostly set to itself.
  void random_config_change(UpdateFlowConfig& u, const std::string& store) {
    FlowConfig* c = u.mutable_config();
    for (const auto& f : kConfigFields) {
      const auto roll = random.uniform(f == "attribute_store" ? 16 : 6);
      if (roll == 2) u.add_clear_fields(f);
      if (roll >= 2) continue;
      if (f == "continue_as_new_after_events") {
        c->set_continue_as_new_after_events(random.chance(0.05) ? UINT64_MAX
                                                                : 6 + random.uniform(30));
      } else if (f == "continue_as_new_after_bytes") {
        c->set_continue_as_new_after_bytes(random.chance(0.05) ? UINT64_MAX
                                                               : 1'000 + random.uniform(6'000));
      } else if (f == "default_durability") {
        c->set_default_durability(random.chance(0.5) ? SYNC : ASYNC);
      } else if (f == "attribute_store") {
        c->set_attribute_store(!store.empty() && random.chance(0.6) ? store
                               : random.chance(0.5)                 ? "s1"
                                                                    : "s2");
      } else {
        c->set_index_active_step_types(random.chance(0.5));
      }
    }
    if (c->ByteSizeLong() == 0 && u.clear_fields_size() == 0)
      c->set_continue_as_new_after_events(6 + random.uniform(30));
  }

  // The verdict on an UpdateFlowConfig, from the models: checked whole, then
  // the run, a remembered request ID, its status, the Attribute Store, no change.
  struct ConfigVerdict {
    ApplyKind kind = ApplyKind::kApplied;
    RefusalCode code = RefusalCode::kNone;
    FlowConfig before, after;
    bool remembered = false;
  };
  ConfigVerdict expected_config(const UpdateFlowConfig& u, const std::optional<Run>& run) {
    const FlowConfig& c = u.config();
    bool bad = u.run_id().empty() ||
               (c.default_durability() != DURABILITY_UNSPECIFIED &&
                c.default_durability() != SYNC && c.default_durability() != ASYNC) ||
               static_cast<size_t>(u.clear_fields_size()) > kConfigFields.size();
    std::set<std::string> cleared;
    for (const auto& f : u.clear_fields())
      bad = bad ||
            std::find(kConfigFields.begin(), kConfigFields.end(), f) == kConfigFields.end() ||
            !cleared.insert(f).second || config_sets(c, f);
    bool any = !cleared.empty();
    for (const auto& f : kConfigFields) any = any || config_sets(c, f);
    if (bad || !any) return {ApplyKind::kRejected, RefusalCode::kInvalidArgument, {}, {}, false};
    if (!run) return {ApplyKind::kRejected, RefusalCode::kNotFound, {}, {}, false};
    const ConfigModel& m = config_model(*run);
    if (!u.request_id().empty() && m.requests.contains(u.request_id()))
      return {ApplyKind::kUnchanged, RefusalCode::kNone, {}, {}, true};
    if (run->status() != FLOW_RUNNING)
      return {ApplyKind::kRejected, RefusalCode::kFailedPrecondition, {}, {}, false};
    ConfigVerdict v;
    v.before = m.now();
    v.after = v.before;
    KvFlowTxn txn(kv);
    auto decl = txn.declaration(run->flow_type(), run->declaration_version());
    const FlowConfig declared = decl ? declared_model(decl->declaration()) : FlowConfig();
    for (const auto& f : cleared) config_copy(declared, f, v.after);
    for (const auto& f : kConfigFields)
      if (config_sets(c, f)) config_copy(c, f, v.after);
    if (v.after.attribute_store() != v.before.attribute_store()) {
      v.kind = ApplyKind::kRejected;
      v.code = RefusalCode::kFailedPrecondition;
    } else if (same_config(v.before, v.after)) {
      v.kind = ApplyKind::kUnchanged;
    }
    return v;
  }

  // A client's UpdateFlowConfig: mostly of a running run, setting and
  // clearing random fields; some repeat an applied one's request ID (to its
  // run or the Flow ID's latest, with the same or other fields: nothing
  // changes), some are invalid or name a closed or missing run. The verdict
  // must be the model's; an applied one records one FLOW_CONFIG_UPDATED with
  // both configs and asks for a continue-as-new exactly when the new config's
  // threshold is reached, continuing at once when nothing of the run is in
  // flight.
  void update_config() {
    auto all = runs();
    if (all.empty()) return;
    FlowRecord record;
    UpdateFlowConfig* u = record.mutable_update_flow_config();
    if (!config_requests.empty() && random.chance(0.15)) {
      *u = pick(config_requests);
      if (random.chance(0.3)) {  // the Flow ID's latest run: a continued one remembers it
        KvFlowTxn txn(kv);
        if (auto entry = txn.flow_id(u->flow_id())) u->set_run_id(entry->run_id());
      }
      if (random.chance(0.5)) {  // other fields, the same request ID
        u->clear_config();
        u->clear_clear_fields();
        random_config_change(*u, "");
      }
    } else {
      std::vector<const Run*> live;
      for (const auto& r : all)
        if (r.status() == FLOW_RUNNING) live.push_back(&r);
      const Run& run = !live.empty() && random.chance(0.9) ? *pick(live) : pick(all);
      u->set_flow_id(run.flow_id());
      u->set_run_id(run.run_id());
      if (random.chance(0.6)) u->set_request_id(fmt::format("cfg{}", ++config_n));
      random_config_change(*u, run.attribute_store());
      const auto bad = random.uniform(100);
      const std::string& field = pick(kConfigFields);
      if (bad < 3) {
        u->add_clear_fields(random.chance(0.5) ? "continue_as_new_after_event" : "retention_ms");
      } else if (bad < 5) {  // a field cleared twice
        u->add_clear_fields(field);
        u->add_clear_fields(field);
      } else if (bad < 7) {  // set and cleared
        random_config_change(*u, run.attribute_store());
        for (const auto& f : kConfigFields)
          if (config_sets(u->config(), f) &&
              std::find(u->clear_fields().begin(), u->clear_fields().end(), f) ==
                  u->clear_fields().end()) {
            u->add_clear_fields(f);
            break;
          }
      } else if (bad < 9) {
        u->mutable_config()->set_default_durability(static_cast<Durability>(3 + random.uniform(5)));
      } else if (bad < 10) {  // nothing to change
        u->clear_config();
        u->clear_clear_fields();
      } else if (bad < 11) {
        u->set_run_id("");
      } else if (bad < 12) {
        u->set_run_id("gone");
      }
    }
    u->set_at_unix_ms(now);
    const std::string key = u->flow_id() + "/" + u->run_id();
    std::optional<Run> before;
    {
      KvFlowTxn txn(kv);
      if (!u->run_id().empty()) before = txn.run(u->flow_id(), u->run_id());
    }
    const ConfigVerdict want = expected_config(*u, before);
    bool quiet = before && before->rpcs_open_size() == 0 &&
                 before->timeout_handler().state() == TASK_STATE_UNSPECIFIED;
    if (before && quiet) {
      KvFlowTxn txn(kv);
      for (const auto& id : before->active())  // bounded by kActiveStepsMax
        if (auto s = txn.step(u->flow_id(), u->run_id(), id);
            s && s->method().state() == TASK_RUNNING)
          quiet = false;
    }
    config_update.reset();
    if (want.kind == ApplyKind::kApplied) {
      config_update = ConfigUpdate{key, want.after, false};
      config_update->threshold =
          want.after.continue_as_new_after_events() != want.before.continue_as_new_after_events() ||
          want.after.continue_as_new_after_bytes() != want.before.continue_as_new_after_bytes();
    }
    for (const auto& f :
         {u->config().continue_as_new_after_events(), u->config().continue_as_new_after_bytes()})
      if (f == UINT64_MAX) stats["config updates with a threshold of 2^64-1"]++;
    const ApplyResult result = apply(record);
    config_update.reset();
    const std::string what =
        fmt::format("an UpdateFlowConfig of {} ({})", key, u->ShortDebugString());
    if (result.kind != want.kind || result.code != want.code)
      return fail(fmt::format("{} was {} ({}), the model says {} {}", what,
                              apply_kind_name(result.kind), result.message,
                              apply_kind_name(want.kind), static_cast<int>(want.code)));
    if (result.kind == ApplyKind::kRejected) stats["config updates refused"]++;
    if (result.kind == ApplyKind::kUnchanged)
      stats[want.remembered ? "config update repeats" : "config updates unchanged"]++;
    if (result.kind != ApplyKind::kApplied) return;
    stats["config updates applied"]++;
    if (!u->request_id().empty()) config_requests.push_back(*u);
    // Its events: one FLOW_CONFIG_UPDATED with both configs, then a
    // continue-as-new asked for exactly when the new config's threshold is reached.
    std::vector<HistoryEvent> added;
    for (auto& [k, v] : kv.scan(keys::events_prefix(u->flow_id(), u->run_id()))) {
      HistoryEvent e;
      e.ParseFromString(v);
      if (e.seq() >= before->next_event()) added.push_back(std::move(e));
    }
    int updated = 0;
    for (const auto& e : added) updated += e.kind() == FLOW_CONFIG_UPDATED;
    if (updated != 1 || added.front().kind() != FLOW_CONFIG_UPDATED)
      return fail(
          fmt::format("{} applied with {} FLOW_CONFIG_UPDATED events, first", what, updated));
    const HistoryEvent& event = added.front();
    if (!same_config(event.old_config(), want.before) ||
        !same_config(event.new_config(), want.after))
      fail(what + ": FLOW_CONFIG_UPDATED's configs are not the run's before and after: " +
           differences(want.before, event.old_config()) +
           differences(want.after, event.new_config()));
    const bool asks = before->continue_as_new_pending().empty() && !before->graceful_complete() &&
                      !threshold_reached(want.after, event.seq() + 1,
                                         before->history_bytes() + event.ByteSizeLong())
                           .empty();
    const bool asked = added.size() > 1 && added[1].kind() == CONTINUE_AS_NEW_REQUESTED;
    if (asks != asked)
      fail(fmt::format("{} {} a continue-as-new", what, asked ? "asked for" : "did not ask for"));
    if (!asked) return;
    stats["config updates asking continue-as-new"]++;
    const bool continued_now = result.run_id != u->run_id();
    if (continued_now) stats["config updates continuing at once"]++;
    if (continued_now != quiet)
      fail(fmt::format("{} asked for a continue-as-new, and the run {} at once while {}", what,
                       continued_now ? "continued" : "did not continue",
                       quiet ? "nothing of it was in flight" : "an attempt ran"));
  }

  void assign() {
    auto q = queued();
    if (q.empty()) return;
    FlowRecord r;
    r.set_at_unix_ms(now);
    *r.add_assignments() = assignment(pick(q));
    apply(r);
  }

  void publish() {
    auto all = runs();
    if (all.empty()) return;
    const Run& run = pick(all);
    FlowRecord r;
    auto* p = r.mutable_publish();
    p->set_flow_id(run.flow_id());
    if (random.chance(0.5)) p->set_run_id(run.run_id());
    p->mutable_publish()->set_channel(random.chance(0.5) ? "c" : "cm");
    if (p->publish().channel() == "cm")
      p->mutable_publish()->set_instance_key(fmt::format("k{}", random.uniform(2)));
    const int n = 1 + static_cast<int>(random.uniform(3));
    for (int i = 0; i < n; ++i) *p->mutable_publish()->add_messages() = message();
    if (random.chance(0.02)) p->mutable_publish()->set_channel("undeclared");
    p->set_at_unix_ms(now);
    if (random.chance(0.5)) p->set_request_id(fmt::format("req-{}", message_n));
    const bool applied = apply(r).kind == ApplyKind::kApplied;
    // A client's repeat of an applied publish (a retry after a failover) adds nothing.
    if (applied && !p->request_id().empty() && random.chance(0.3) &&
        apply(r).kind != ApplyKind::kUnchanged)
      fail("a repeated publish request was not unchanged");
  }

  void fire_timer() {
    auto timers = kv.scan(keys::kTimerPrefix);
    if (timers.empty()) return;
    FlowRecord r;  // the earliest timer: time moves to it
    int64_t at = 0;
    if (!keys::parse_timer(timers.front().first, r.mutable_timer_fired()->mutable_key(), &at))
      fail("a timer index key does not parse");
    r.mutable_timer_fired()->set_fire_at_ms(at);
    now = std::max(now, at);
    r.mutable_timer_fired()->set_at_unix_ms(now);
    if (apply(r).kind != ApplyKind::kApplied) fail("a due timer did not apply");
    if (apply(r).kind != ApplyKind::kStale) fail("a timer fired twice");
  }

  void set_attributes() {
    auto all = runs();
    if (all.empty()) return;
    const Run& run = pick(all);
    FlowRecord r;
    auto* s = r.mutable_set_attributes();
    s->set_flow_id(run.flow_id());
    if (random.chance(0.5)) s->set_run_id(run.run_id());
    for (int i = 0; i < 1 + static_cast<int>(random.uniform(4)); ++i)
      *s->add_writes() = random_write();
    // A client's repeat after a lost answer: a few request IDs per Flow, so
    // some sets repeat one applied before (maybe with other values).
    if (random.chance(0.5)) s->set_request_id("q-" + std::to_string(random.uniform(6)));
    s->set_at_unix_ms(now);
    if (apply(r).kind == ApplyKind::kUnchanged && !s->request_id().empty())
      stats["attribute sets repeated"]++;
  }

  void invoke_rpc() {
    auto all = runs();
    if (all.empty()) return;
    const Run& run = pick(all);
    FlowRecord r;
    auto* i = r.mutable_invoke_rpc();
    i->set_flow_id(run.flow_id());
    if (random.chance(0.5)) i->set_run_id(run.run_id());
    // A few request IDs: repeats of running, completed and failed RPCs.
    if (random.chance(0.5)) {
      i->set_request_id(fmt::format("{}", random.uniform(4)));
      i->set_rpc_id("req:" + i->request_id());
    } else {
      i->set_rpc_id(fmt::format("rpc:{}.{}", epoch, ++rpc_n));
    }
    i->set_name(random.chance(0.03) ? "nope" : (random.chance(0.5) ? "r" : "q"));
    i->set_timeout_ms(random.chance(0.02) ? 0 : 1 + static_cast<int64_t>(random.uniform(3'000)));
    i->mutable_input()->set_data("rpc-in");
    i->set_at_unix_ms(now);
    // The call's own lock keys, some shared with Steps ("k1", "k2"), now
    // and then one the rules refuse (empty).
    const bool bad_key = random.chance(0.02);
    if (random.chance(0.4)) {
      for (uint64_t n = 1 + random.uniform(2); n > 0; --n)  // bounded by 2
        i->add_lock_keys(fmt::format("k{}", 1 + random.uniform(3)));
    }
    if (bad_key) i->add_lock_keys("");
    if (random.chance(0.5)) {  // a Worker is polling: the attempt rides along
      r.set_at_unix_ms(now);
      TaskRef ref;
      ref.set_flow_id(run.flow_id());
      ref.set_run_id(run.run_id());
      ref.set_step_execution_id(i->rpc_id());
      ref.set_method(RPC);
      ref.set_attempt(1);
      *r.add_assignments() = assignment(ref);
    }
    const ApplyResult result = apply(r);
    if (bad_key && result.kind == ApplyKind::kApplied)
      fail("an InvokeRpc with an empty call lock key was applied");
    if (i->lock_keys_size() > 0 && result.kind == ApplyKind::kApplied)
      stats["rpcs with call lock keys"]++;
  }

  void stop() {
    auto all = runs();
    if (all.empty()) return;
    FlowRecord r;
    r.mutable_stop_flow()->set_flow_id(pick(all).flow_id());
    r.mutable_stop_flow()->set_mode(static_cast<StopMode>(random.uniform(4)));
    r.mutable_stop_flow()->set_at_unix_ms(now);
    apply(r);
  }

  void skip_timer() {
    // Some skip a run's own Timer: its flow timeout or start delay (pending or not).
    if (random.chance(0.25)) {
      auto all = runs();
      if (all.empty()) return;
      const Run& run = pick(all);
      FlowRecord r;
      auto* skip = r.mutable_skip_timer();
      skip->set_flow_id(run.flow_id());
      skip->set_run_id(run.run_id());
      skip->set_run_timer(random.chance(0.5) ? RUN_TIMER_FLOW_TIMEOUT : RUN_TIMER_START_DELAY);
      skip->set_at_unix_ms(now);
      const bool pending = run.status() == FLOW_RUNNING &&
                           (skip->run_timer() == RUN_TIMER_START_DELAY
                                ? run.start_pending()
                                : run.options().timeout_ms() > 0 && !run.timeout_handled());
      const ApplyResult result = apply(r);
      if ((result.kind == ApplyKind::kApplied) != pending)
        fail(fmt::format("a skip of {} of {}/{} was {}", RunTimer_Name(skip->run_timer()),
                         run.flow_id(), run.run_id(), apply_kind_name(result.kind)));
      if (result.kind == ApplyKind::kApplied) stats["run timers skipped"]++;
      return;
    }
    std::vector<StepExecution> waiting;
    for (auto& [k, v] : kv.scan(keys::kStepPrefix)) {
      StepExecution s;
      s.ParseFromString(v);
      if (s.phase() == PHASE_WAITING) waiting.push_back(s);
    }
    if (waiting.empty()) return;
    const auto& s = pick(waiting);
    FlowRecord r;
    auto* skip = r.mutable_skip_timer();
    skip->set_flow_id(s.flow_id());
    skip->set_run_id(s.run_id());
    skip->set_step_execution_id(s.step_execution_id());
    skip->set_condition_index(static_cast<uint32_t>(random.uniform(s.conditions_size() + 1)));
    skip->set_at_unix_ms(now);
    apply(r);
  }

  void withdraw() {
    auto all = running();
    if (all.empty()) return;
    const auto& [task_id, ref] = pick(all);
    FlowRecord r;
    *r.mutable_attempt_withdrawn()->mutable_task() = ref;
    r.mutable_attempt_withdrawn()->set_task_id(task_id);
    r.mutable_attempt_withdrawn()->set_at_unix_ms(now);
    apply(r);
  }

  void duplicate() {
    if (applied_results.empty()) return;
    FlowRecord r = pick(applied_results);
    r.clear_assignments();
    if (apply(r).kind != ApplyKind::kStale) fail("an applied result applied again");
  }

  // A crash: a new process replays the log into an empty store, which must
  // equal the live one; then its EpochStart's recovery runs on both.
  void crash() {
    MemoryKv rebuilt;
    for (size_t i = 0; i < log.size(); ++i) {  // bounded by the records of this seed
      const auto& e = log[i];
      Effects fx;
      KvFlowTxn txn(rebuilt, /*slot=*/i + 1);
      if (e.record)
        apply_record(txn, *e.record, fx);
      else
        recover_attempts(txn, e.recover_at, fx);
    }
    if (rebuilt.data() != kv.data()) fail("replaying the log gave a different state");
    ++epoch;
    now += 1'000;
    Effects fx;
    KvFlowTxn txn(kv);
    const size_t was_running = txn.running().size();
    recover_attempts(txn, now, fx);
    end_rpcs(fx);
    // Recovery leaves runs quiet: one with a continue-as-new pending continues.
    for (const auto& c : fx.closed)
      if (c.status == FLOW_CONTINUED_AS_NEW) continued(c.flow_id, c.run_id);
    if (!txn.open_rpcs().empty()) fail("an RPC is open after recovery");
    log.push_back({std::nullopt, now});
    if (!txn.running().empty()) fail("an attempt still runs after recovery");
    stats["crashes"]++;
    stats["attempts ended by recovery"] += static_cast<int>(was_running);
    check();
  }

  void step() {
    now += static_cast<int64_t>(random.uniform(400));
    // A few % time travel: each folds a journal, which costs.
    if (random.chance(0.02)) {
      time_travel();
      return;
    }
    if (random.chance(0.01)) {
      continue_as_new();
      return;
    }
    if (random.chance(0.03)) {
      update_config();
      return;
    }
    const auto action = random.uniform(100);
    if (action < 8)
      start();
    else if (action < 30)
      result();
    else if (action < 45)
      assign();
    else if (action < 57)
      publish();
    else if (action < 72)
      fire_timer();
    else if (action < 75)
      stop();
    else if (action < 79)
      skip_timer();
    else if (action < 82)
      withdraw();
    else if (action < 86)
      duplicate();
    else if (action < 88)
      crash();
    else if (action < 89)
      declare();
    else if (action < 93)
      set_attributes();
    else if (action < 97)
      invoke_rpc();
    else if (action < 98)
      sync_trim();
    else
      result();
  }

  // The active process's Attribute Store sync told the log how far a store's
  // table holds: its SyncEntries at or below that slot go, the later stay.
  void sync_trim() {
    const std::string store = random.chance(0.7) ? "s1" : "s2";
    const uint64_t through = random.uniform(log.size() + 1);
    FlowRecord r;
    r.mutable_attribute_store_synced()->set_store(store);
    r.mutable_attribute_store_synced()->set_through_slot(through);
    r.mutable_attribute_store_synced()->set_at_unix_ms(now);
    const size_t before = kv.scan(keys::sync_prefix(store)).size();
    const ApplyResult result = apply(r);
    size_t left_below = 0, after = 0;
    for (const auto& [k, v] : kv.scan(keys::sync_prefix(store))) {  // bounded by the entries
      SyncEntry e;
      e.ParseFromString(v);
      left_below += e.slot() <= through;
      ++after;
    }
    if (left_below > 0) fail("an AttributeStoreSynced left an entry at or below its slot");
    if ((result.kind == ApplyKind::kApplied) != (after < before))
      fail("an AttributeStoreSynced's verdict does not match what it removed");
    stats["sync entries trimmed"] += static_cast<int>(before - after);
  }
};

TEST(FlowSim, RulesHoldUnderSeededSchedules) {
  int first = 1, last = kSeeds;
  // FLOW_SIM_SEEDS=n runs seeds 1..n (the sanitizer build runs fewer: it is ~10x slower).
  if (const char* s = std::getenv("FLOW_SIM_SEEDS")) last = std::max(1, std::atoi(s));
  if (const char* s = std::getenv("FLOW_SIM_SEED")) first = last = std::atoi(s);
  std::map<std::string, int> totals;
  size_t records = 0;
  for (int seed = first; seed <= last; ++seed) {
    Sim sim(static_cast<uint64_t>(seed));
    sim.declare();
    for (int i = 0; i < kStepsPerSeed && sim.failure.empty(); ++i) sim.step();
    if (sim.failure.empty()) sim.crash();  // every seed ends with a full replay
    if (sim.failure.empty()) {             // and a check of every run's journal
      if (auto s = check_state(sim.kv, JournalCheck::kAll); !s.is_ok()) sim.fail(s.message());
    }
    ASSERT_TRUE(sim.failure.empty())
        << "seed " << seed << " (FLOW_SIM_SEED=" << seed << "): " << sim.failure;
    for (auto& [k, v] : sim.kv.scan(keys::kRunPrefix)) {  // what the schedule reached
      flow::Run run;
      run.ParseFromString(v);
      if (run.parents_size() > 0) sim.stats["subflow runs"]++;
      if (run.parents_size() > 1) sim.stats["subflows attached by a second parent"]++;
      if (run.flow_attempt() > 1) sim.stats["flow retries"]++;
    }
    for (auto& [k, v] : sim.kv.scan(keys::kEventPrefix)) {
      HistoryEvent e;
      e.ParseFromString(v);
      if (e.kind() == TIMEOUT_HANDLER_STARTED) sim.stats["timeout handlers started"]++;
      if (e.kind() == TIMEOUT_HANDLER_COMPLETED) sim.stats["timeout handler decisions"]++;
      if (e.kind() == TIMEOUT_HANDLER_FAILED) sim.stats["timeout handlers failed"]++;
    }
    for (auto& [k, v] : sim.kv.scan(keys::kStepPrefix)) {
      StepExecution st;
      st.ParseFromString(v);
      for (const auto& c : st.conditions())
        if (c.fired() && c.has_sub_flow()) sim.stats["subflow conditions met"]++;
    }
    for (const auto& [k, v] : sim.stats) totals[k] += v;
    records += sim.log.size();
  }
  std::string summary = fmt::format("{} seeds, {} records:", last - first + 1, records);
  for (const auto& [k, v] : totals) summary += fmt::format(" {} {},", k, v);
  std::printf("%s\n", summary.c_str());
  // The schedules reach every outcome the rules have.
  if (last - first + 1 >= 100) {
    for (const char* kind : {"applied",
                             "stale",
                             "rejected",
                             "unchanged",
                             "closed FLOW_COMPLETED",
                             "closed FLOW_FAILED",
                             "closed FLOW_CANCELED",
                             "closed FLOW_TIMED_OUT",
                             "closed FLOW_TERMINATED",
                             "crashes",
                             "attempts ended by recovery",
                             "attributes set",
                             "rpcs invoked",
                             "rpcs done",
                             "locks acquired",
                             "lock waits",
                             "subflow runs",
                             "subflow conditions met",
                             "flow retries",
                             "timeout handlers started",
                             "timeout handler decisions",
                             "timeout handlers failed",
                             "runs deleted",
                             "subflow runs deleted",
                             "time travels applied",
                             "time travels from a running run",
                             "time travel refused",
                             "time travel repeats",
                             "time travels while a SubFlow runs",
                             "run timers skipped",
                             "config updates applied",
                             "config updates refused",
                             "config updates unchanged",
                             "config update repeats",
                             "config updates asking continue-as-new",
                             "config updates continuing at once",
                             "continued as new by an updated threshold"})
      EXPECT_GT(totals[kind], 0) << kind;
  }
}

}  // namespace
}  // namespace dex::flow
