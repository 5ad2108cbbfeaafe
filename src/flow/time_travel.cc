#include "flow/time_travel.h"

#include <algorithm>
#include <set>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/limits.h"
#include "flow/result_check.h"
#include "flow/run_editor.h"

namespace dex::flow {
namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

ApplyResult rejected(RefusalCode code, std::string why) {
  return {ApplyKind::kRejected, code, std::move(why), ""};
}

bool is_active(Phase p) { return p == PHASE_WAIT_FOR || p == PHASE_WAITING || p == PHASE_EXECUTE; }

// The first delta (1-based count) that wrote `step_execution_id`: its creation.
size_t created_at(const std::vector<RunDelta>& deltas, const std::string& step_execution_id) {
  for (size_t i = 0; i < deltas.size(); ++i) {  // bounded by the run's records
    for (const auto& s : deltas[i].steps())
      if (s.step_execution_id() == step_execution_id) return i + 1;
  }
  return 0;
}

ApplyResult check_point_kind(const TimeTravelPoint& point) {
  switch (point.kind()) {
    case TIME_TRAVEL_BEGINNING:
    case TIME_TRAVEL_EVENT_TIME:
      return {};
    case TIME_TRAVEL_FIRST_OF_STEP_TYPE:
    case TIME_TRAVEL_LATEST_OF_STEP_TYPE:
      if (point.step_type().empty())
        return rejected(RefusalCode::kInvalidArgument, "the point names no Step type");
      return {};
    case TIME_TRAVEL_STEP_EXECUTION:
      if (point.step_execution_id().empty())
        return rejected(RefusalCode::kInvalidArgument, "the point names no Step execution");
      return {};
    default:
      return rejected(RefusalCode::kInvalidArgument,
                      "the point's kind is not BEGINNING, EVENT_TIME, FIRST_OF_STEP_TYPE, "
                      "LATEST_OF_STEP_TYPE or STEP_EXECUTION");
  }
}

}  // namespace

ApplyResult resolve_point(const std::vector<RunDelta>& deltas, const Run& run,
                          const TimeTravelPoint& point, TravelPoint* out) {
  DEX_INVARIANT(!deltas.empty() && deltas.front().has_run(), "a journal starts with its run");
  if (auto r = check_point_kind(point); r.kind != ApplyKind::kApplied) return r;
  const std::string name = "run " + quoted(run.run_id()) + " of Flow " + quoted(run.flow_id());
  size_t count = 1;
  std::string execution;
  switch (point.kind()) {
    case TIME_TRAVEL_BEGINNING:
      break;
    case TIME_TRAVEL_EVENT_TIME: {
      // Against the start time a user reads (describe's startedAt): the start's
      // record may carry a later time (its batch's), and the start is in every
      // point from the run's start on.
      if (point.event_time_ms() < run.start_ms())
        return rejected(RefusalCode::kInvalidArgument, "the point's time " +
                                                           std::to_string(point.event_time_ms()) +
                                                           " is before " + name + " started (" +
                                                           std::to_string(run.start_ms()) + ")");
      for (size_t i = 1; i < deltas.size() && deltas[i].at_ms() <= point.event_time_ms(); ++i)
        count = i + 1;  // bounded by the run's records
      break;
    }
    case TIME_TRAVEL_FIRST_OF_STEP_TYPE:
    case TIME_TRAVEL_LATEST_OF_STEP_TYPE: {
      uint32_t n = 0;
      for (const auto& c : run.counters())
        if (c.step_type() == point.step_type()) n = c.count();
      if (n == 0)
        return rejected(RefusalCode::kNotFound,
                        name + " has no execution of Step type " + quoted(point.step_type()));
      execution = step_execution_id(point.step_type(),
                                    point.kind() == TIME_TRAVEL_FIRST_OF_STEP_TYPE ? 1 : n);
      count = created_at(deltas, execution);
      if (count == 0)  // it ran in a run this one continues (continue-as-new)
        return rejected(RefusalCode::kFailedPrecondition,
                        "Step execution " + quoted(execution) + " ran before " + name +
                            " continued run " + quoted(run.continued_from_run_id()) +
                            " as new: time travel to a point of this run");
      break;
    }
    default:  // STEP_EXECUTION
      execution = point.step_execution_id();
      count = created_at(deltas, execution);
      if (count == 0)
        return rejected(RefusalCode::kNotFound,
                        name + " has no Step execution " + quoted(execution));
  }
  // An execution that had ended in the run this one was traveled from: its
  // start is in that run's history, not this one's (one still active there
  // started again when this run began, so this run's start is its start).
  if (!execution.empty() && count == 1) {
    for (const auto& s : deltas.front().steps()) {  // bounded by the start's executions
      if (s.step_execution_id() == execution && !is_active(s.phase()) &&
          s.created_ms() < deltas.front().at_ms())
        return rejected(RefusalCode::kFailedPrecondition,
                        "Step execution " + quoted(execution) + " started before " + name +
                            " did (it came with the run from run " +
                            quoted(run.traveled_from_run_id()) +
                            "): time travel from that run, or to a later point");
    }
  }
  DEX_INVARIANT(count >= 1, "every point resolved to a delta");
  // A point at or after the run's close: the last state before it closed.
  std::vector<bool> running(deltas.size());
  bool now_running = true;
  for (size_t i = 0; i < deltas.size(); ++i) {  // bounded by the run's records
    if (deltas[i].has_run()) now_running = deltas[i].run().status() == FLOW_RUNNING;
    running[i] = now_running;
  }
  const size_t asked = count;
  while (count > 1 && !running[count - 1]) --count;  // bounded by count
  DEX_INVARIANT(running[0], "a run starts RUNNING");
  out->deltas = count;
  // The moment the state stood for, which Timers count their time left from:
  // the time asked, the close's time for a point stepped back from the close,
  // else the time of the record at the point.
  out->at_ms = deltas[count - 1].at_ms();
  if (count < asked) {
    out->at_ms = deltas[count].at_ms();
  } else if (point.kind() == TIME_TRAVEL_EVENT_TIME) {
    out->at_ms = point.event_time_ms();
  }
  out->step_execution_id = execution;
  return {};
}

std::string unhostable(const RunImage& image, const FlowDeclaration& decl) {
  for (const auto& id : image.run.active()) {  // bounded by kActiveStepsMax
    const StepExecution& s = image.steps.at(id);
    if (find_step(decl, s.step_type()) == nullptr)
      return "Step execution " + quoted(id) +
             " is active at the point, and the Flow type's "
             "latest declaration has no Step type " +
             quoted(s.step_type());
    if (s.phase() == PHASE_WAIT_FOR && !find_step(decl, s.step_type())->has_wait_for())
      return "Step execution " + quoted(id) + " runs WaitFor at the point, and Step type " +
             quoted(s.step_type()) + " has no WaitFor in the latest declaration";
  }
  for (const auto& [ci, q] : image.queues) {
    if (find_channel(decl, ci.first) == nullptr)
      return "Channel " + quoted(ci.first) +
             " holds messages at the point, and the latest "
             "declaration has no such Channel";
  }
  for (const auto& [ki, v] : image.attributes) {
    const AttributeDeclaration* a = find_attribute(decl, ki.first);
    if (a == nullptr || a->is_map() != !ki.second.empty())
      return "Attribute " + quoted(ki.first) +
             " has a value at the point, and the latest "
             "declaration does not declare it (as " +
             (ki.second.empty() ? "a plain Attribute" : "an AttributeMap") + ")";
  }
  // Each value must also be of the type the latest declaration gives its key.
  google::protobuf::RepeatedPtrField<Attribute> values;
  for (const auto& [ki, v] : image.attributes) {  // bounded by kAttributesMax
    Attribute* a = values.Add();
    a->set_key(ki.first);
    a->set_instance_key(ki.second);
    *a->mutable_value() = v;
  }
  if (auto s = validate_attribute_writes(decl, values, "the point's Attributes"); !s.is_ok())
    return s.message() + " (the latest declaration changed its type)";
  if (image.run.timeout_handler().state() != TASK_STATE_UNSPECIFIED && !decl.has_timeout_handler())
    return "the timeout handler runs at the point, and the latest declaration has none";
  return "";
}

namespace {

// A SubFlow child an active wait of the image waits for that the new run
// cannot wait for: gone (retention), or waiting for its Flow retry.
std::string unrevivable_child(FlowTxn& txn, const RunImage& image) {
  for (const auto& id : image.run.active()) {  // bounded by kActiveStepsMax
    const StepExecution& s = image.steps.at(id);
    if (s.phase() != PHASE_WAITING) continue;
    for (const auto& c : s.conditions()) {  // bounded by kConditionsMax
      if (c.fired() || c.child_flow_id().empty()) continue;
      auto child = current_child(txn, c);
      if (!child)
        return "Step execution " + quoted(id) + " waits for SubFlow " + quoted(c.child_flow_id()) +
               ", whose run " + quoted(c.child_run_id()) + " no longer exists";
      if (retry_pending(*child))
        return "Step execution " + quoted(id) + " waits for SubFlow " + quoted(c.child_flow_id()) +
               ", which waits for its Flow retry: time travel once the retry started";
    }
  }
  return "";
}

// The new run's record: the image's, as a fresh run of the Flow ID that came
// from `from` (its timers' times moved by `shift`, the point's time to now).
Run new_run(const RunImage& image, const TimeTravel& r, const DeclarationVersion& decl,
            int64_t point_ms) {
  Run run = image.run;
  run.set_run_id(r.new_run_id());
  run.set_declaration_version(decl.version());
  run.set_status(FLOW_RUNNING);
  run.set_start_ms(r.at_unix_ms());
  run.clear_close_ms();
  run.clear_close_reason();
  run.set_next_event(0);
  run.clear_publish_requests();
  run.clear_write_requests();
  run.clear_locks();  // taken again as the executions queue
  run.clear_lock_waiters();
  run.clear_rpcs_open();  // RPCs were the old run's callers'
  run.clear_rpcs_done();
  run.clear_parents();  // a SubFlow child still awaited is refused (apply_time_travel)
  run.set_flow_attempt(1);
  run.set_first_run_id(r.new_run_id());
  run.set_first_start_ms(r.at_unix_ms());
  run.clear_previous_run_id();
  run.clear_retry_at_ms();
  run.clear_next_run_id();
  run.clear_retry_started();
  run.clear_expire_at_ms();
  run.clear_traveled_to_run_id();
  run.set_traveled_from_run_id(r.run_id());
  run.clear_continued_from_run_id();
  run.clear_continue_as_new_pending();  // the travel starts a history of its own
  run.set_history_bytes(0);
  run.mutable_options()->set_request_id(r.request_id());
  // The flow timeout and a start delay keep the time they had left at the
  // point: their deadlines count from start_ms, now the new run's start.
  auto* options = run.mutable_options();
  if (options->timeout_ms() > 0 && !run.timeout_handled()) {
    const int64_t deadline = later_ms(image.run.start_ms(), options->timeout_ms());
    options->set_timeout_ms(std::max<int64_t>(1, ms_between(point_ms, deadline)));
  }
  if (run.start_pending()) {
    const int64_t due = later_ms(image.run.start_ms(), options->start_delay_ms());
    options->set_start_delay_ms(std::max<int64_t>(0, ms_between(point_ms, due)));
  }
  return run;
}

void put_run_timer(FlowTxn& txn, Effects& effects, const Run& run, TimerKind kind, int64_t at_ms) {
  TimerKey key;
  key.set_flow_id(run.flow_id());
  key.set_run_id(run.run_id());
  key.set_kind(kind);
  txn.put_timer(key, at_ms);
  effects.timers_set.push_back(at_ms);
}

// The new run's Channels and Attributes, as the image holds them; its synced
// Attributes go to its Attribute Store whole (a value, or NULL where the
// point had none), since the store's row holds the old run's later writes.
void copy_values(FlowTxn& txn, RunEditor& scope, const RunImage& image) {
  const Run& run = scope.run();
  for (const auto& [ci, q] : image.queues)  // bounded by the run's queues
    txn.put_queue(QueueKey{run.flow_id(), run.run_id(), ci.first, ci.second}, q);
  for (const auto& [cis, m] : image.messages)  // bounded by the run's queued messages
    txn.put_message(QueueKey{run.flow_id(), run.run_id(), std::get<0>(cis), std::get<1>(cis)},
                    std::get<2>(cis), m);
  SyncEntry sync;
  for (const auto& [ki, v] : image.attributes) {  // bounded by kAttributesMax
    Attribute a;
    a.set_key(ki.first);
    a.set_instance_key(ki.second);
    *a.mutable_value() = v;
    txn.put_attribute(run.flow_id(), run.run_id(), a);
    if (scope.syncs(a)) *sync.add_writes() = a;
  }
  for (const auto& d : scope.declaration().attributes()) {  // bounded by the declaration
    Attribute none;
    none.set_key(d.key());
    if (scope.syncs(none) && !image.attributes.contains({d.key(), ""})) *sync.add_writes() = none;
  }
  if (sync.writes_size() > 0) {
    sync.set_flow_id(run.flow_id());
    sync.set_run_id(run.run_id());
    sync.set_at_unix_ms(scope.at_ms());
    txn.append_sync_entry(run.attribute_store(), sync);
  }
}

ApplyResult check_record(const TimeTravel& r) {
  if (auto s = validate_name("flowId", r.flow_id()); !s.is_ok())
    return rejected(RefusalCode::kInvalidArgument, s.message());
  if (r.run_id().empty())
    return rejected(RefusalCode::kInvalidArgument,
                    "time travel needs the exact runId of the run it starts from");
  if (auto s = validate_name("runId", r.run_id()); !s.is_ok())
    return rejected(RefusalCode::kInvalidArgument, s.message());
  if (auto s = validate_name("newRunId", r.new_run_id()); !s.is_ok())
    return rejected(RefusalCode::kInvalidArgument, s.message());
  if (r.request_id().size() > kNameBytesMax)
    return rejected(RefusalCode::kInvalidArgument,
                    "requestId is longer than " + std::to_string(kNameBytesMax) + " bytes");
  if (r.reason().size() > kPayloadBytesMax)
    return rejected(RefusalCode::kInvalidArgument, "the reason is too long");
  return check_point_kind(r.point());
}

}  // namespace

ApplyResult apply_time_travel(FlowTxn& txn, Effects& effects, const TimeTravel& r) {
  if (auto c = check_record(r); c.kind != ApplyKind::kApplied) return c;
  auto entry = txn.flow_id(r.flow_id());
  if (!entry) return rejected(RefusalCode::kNotFound, "no Flow with ID " + quoted(r.flow_id()));
  // A repeat (a client's retry after a lost answer) answers the run it made.
  if (!r.request_id().empty() && entry->request_id() == r.request_id()) {
    auto latest = txn.run(r.flow_id(), entry->run_id());
    if (latest && latest->traveled_from_run_id() == r.run_id())
      return {ApplyKind::kUnchanged, RefusalCode::kNone,
              "the same request time traveled to run " + quoted(entry->run_id()), entry->run_id()};
  }
  if (txn.run(r.flow_id(), r.new_run_id()))
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "the run exists", r.new_run_id()};
  auto old = txn.run(r.flow_id(), r.run_id());
  if (!old)
    return rejected(RefusalCode::kNotFound,
                    "Flow " + quoted(r.flow_id()) + " has no run " + quoted(r.run_id()));
  if (entry->run_id() != r.run_id())
    return rejected(RefusalCode::kFailedPrecondition,
                    "run " + quoted(r.run_id()) + " is not the latest run of Flow " +
                        quoted(r.flow_id()) + " (" + quoted(entry->run_id()) +
                        " is): time travel starts from the latest run");
  if (old->status() == FLOW_RUNNING && old->parents_size() > 0)
    return rejected(RefusalCode::kFailedPrecondition,
                    "run " + quoted(r.run_id()) +
                        " is a SubFlow that its parent still waits "
                        "for; time travel of a running SubFlow is not supported yet");
  const auto deltas = txn.run_journal(r.flow_id(), r.run_id());
  if (deltas.empty())
    return rejected(RefusalCode::kFailedPrecondition,
                    "run " + quoted(r.run_id()) +
                        " has no journal to travel in (it started "
                        "before this server kept one)");
  TravelPoint point;
  if (auto p = resolve_point(deltas, *old, r.point(), &point); p.kind != ApplyKind::kApplied)
    return p;
  auto decl = txn.declaration(old->flow_type(), 0);
  DEX_INVARIANT(decl.has_value(), "a run's Flow type is declared");
  const RunImage image = fold_journal(deltas, point.deltas);
  if (auto why = unhostable(image, decl->declaration()); !why.empty())
    return rejected(RefusalCode::kFailedPrecondition, "cannot time travel to that point: " + why);
  if (auto why = unrevivable_child(txn, image); !why.empty())
    return rejected(RefusalCode::kFailedPrecondition, "cannot time travel to that point: " + why);

  // The old run: closed if it still runs, and linked to the new one.
  auto old_decl = txn.declaration(old->flow_type(), old->declaration_version());
  DEX_INVARIANT(old_decl.has_value(), "a run's declaration version is stored");
  RunEditor from(txn, effects, *old, old_decl->declaration(), r.at_unix_ms());
  const std::string why = r.reason().empty() ? "time travel" : r.reason();
  from.close(FLOW_TERMINATED, "time traveled to run " + quoted(r.new_run_id()) + ": " + why, true);
  HistoryEvent traveled;
  traveled.set_kind(TIME_TRAVELED);
  traveled.set_next_run_id(r.new_run_id());
  traveled.set_reason(why);
  from.add_event(std::move(traveled));
  from.run().set_traveled_to_run_id(r.new_run_id());
  from.flush();

  // The new run, from the image.
  // A time asked for that has not come yet stands for now: the time left
  // counts from no later than the travel.
  point.at_ms = std::min(point.at_ms, r.at_unix_ms());
  Run run = new_run(image, r, *decl, point.at_ms);
  FlowIdEntry next = *entry;
  next.set_run_id(r.new_run_id());
  next.set_status(FLOW_RUNNING);
  next.set_request_id(r.request_id());
  next.set_runs(entry->runs() + 1);
  txn.put_flow_id(next);
  effects.runs_started.push_back(run.flow_type());
  RunEditor scope(txn, effects, run, decl->declaration(), r.at_unix_ms());
  HistoryEvent started;
  started.set_kind(FLOW_STARTED);
  started.set_traveled_from_run_id(r.run_id());
  *started.mutable_time_travel_point() = r.point();
  started.set_reason(why);
  scope.add_event(std::move(started));
  copy_values(txn, scope, image);
  const Run& now = scope.run();
  if (now.options().timeout_ms() > 0 && !now.timeout_handled())
    put_run_timer(txn, effects, now, FLOW_TIMEOUT,
                  later_ms(r.at_unix_ms(), now.options().timeout_ms()));
  // Active executions first, in creation order (lock keys are taken in it).
  std::set<std::string> revived;
  for (const auto& id : image.run.active()) {  // bounded by kActiveStepsMax
    StepExecution s = image.steps.at(id);
    s.set_run_id(r.new_run_id());
    scope.revive_step(std::move(s), point.at_ms, r.run_id());
    revived.insert(id);
  }
  for (const auto& [id, step] : image.steps) {  // bounded by the run's executions
    if (revived.contains(id)) continue;
    DEX_INVARIANT(!is_active(step.phase()), "every active execution is listed");
    StepExecution s = step;
    s.set_run_id(r.new_run_id());
    scope.revive_step(std::move(s), point.at_ms, r.run_id());
  }
  if (image.run.timeout_handler().state() != TASK_STATE_UNSPECIFIED) scope.revive_handler();
  if (now.start_pending()) {
    if (now.options().start_delay_ms() > 0)
      put_run_timer(txn, effects, now, START_DELAY,
                    later_ms(r.at_unix_ms(), now.options().start_delay_ms()));
    else
      scope.create_start_step();
  }
  scope.match_waits();
  scope.flush();
  return {ApplyKind::kApplied, RefusalCode::kNone, "", r.new_run_id()};
}

}  // namespace dex::flow
