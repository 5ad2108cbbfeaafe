#include "flow/continue_as_new.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/limits.h"
#include "flow/run_editor.h"
#include "flow/run_journal.h"
#include "flow/time_travel.h"

namespace dex::flow {
namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

ApplyResult rejected(RefusalCode code, std::string why) {
  return {ApplyKind::kRejected, code, std::move(why), ""};
}

// Client writes remember their request IDs per kind (flow_rules.cc).
constexpr std::string_view kContinueRequest = "continue:";

bool is_active(Phase p) { return p == PHASE_WAIT_FOR || p == PHASE_WAITING || p == PHASE_EXECUTE; }

// Nothing of the run is in flight: every attempt waits (queued, locked, in
// backoff) or is done, no RPC is open, the timeout handler is not under way.
bool quiet(FlowTxn& txn, const Run& run) {
  if (run.rpcs_open_size() > 0 || run.timeout_handler().state() != TASK_STATE_UNSPECIFIED)
    return false;
  for (const auto& id : run.active()) {  // bounded by kActiveStepsMax
    auto s = txn.step(run.flow_id(), run.run_id(), id);
    DEX_INVARIANT(s.has_value(), "an active execution exists");
    if (s->method().state() == TASK_RUNNING) return false;
  }
  return true;
}

// The run's state now: its active executions (not the ended ones: the new
// run's footprint stays bounded), queues, messages, Attributes, done RPCs.
RunImage current_image(FlowTxn& txn, const Run& run) {
  RunImage image;
  image.run = run;
  for (const auto& id : run.active()) {  // bounded by kActiveStepsMax
    auto s = txn.step(run.flow_id(), run.run_id(), id);
    DEX_INVARIANT(s.has_value() && is_active(s->phase()), "an active execution exists");
    image.steps.emplace(id, std::move(*s));
  }
  for (auto& [key, q] : txn.queues(run.flow_id(), run.run_id())) {  // bounded by the run's queues
    for (uint64_t seq = q.first_seq(); seq < q.next_seq();
         ++seq) {  // bounded by the queue's messages
      auto m = txn.message(key, seq);
      DEX_INVARIANT(m.has_value(), "a queued message exists");
      image.messages.emplace(std::make_tuple(key.channel, key.instance_key, seq), std::move(*m));
    }
    image.queues.emplace(std::make_pair(key.channel, key.instance_key), q);
  }
  for (auto& a : txn.attributes(run.flow_id(), run.run_id(), "")) {  // bounded by kAttributesMax
    image.attributes.emplace(std::make_pair(a.key(), a.instance_key()), a.value());
  }
  for (const auto& id : run.rpcs_done()) {  // bounded by kRpcsDoneKept
    auto r = txn.rpc(run.flow_id(), run.run_id(), id);
    DEX_INVARIANT(r.has_value() && r->done(), "a done RPC is kept");
    image.rpcs.emplace(id, std::move(*r));
  }
  return image;
}

// Per Step type, the executions the new run counts but does not store: the
// old run's own ended ones and those of the runs before it.
google::protobuf::RepeatedPtrField<StepCounter> counters_before(const RunImage& image) {
  std::map<std::string, uint32_t> carried;
  for (const auto& [id, s] : image.steps) ++carried[s.step_type()];  // bounded by active
  google::protobuf::RepeatedPtrField<StepCounter> out;
  for (const auto& c : image.run.counters()) {  // bounded by the declaration's Step types
    DEX_INVARIANT(c.count() >= carried[c.step_type()], "a counter counts the carried executions");
    const uint32_t before = c.count() - carried[c.step_type()];
    if (before == 0) continue;
    StepCounter* b = out.Add();
    b->set_step_type(c.step_type());
    b->set_count(before);
  }
  return out;
}

// The new run's record: the old one's, as the next run of its chain.
Run next_run(const RunImage& image, const std::string& new_run_id, uint32_t version,
             int64_t at_ms) {
  const Run& old = image.run;
  Run run = old;
  run.set_run_id(new_run_id);
  run.set_declaration_version(version);
  run.set_start_ms(at_ms);
  run.set_next_event(0);
  run.set_history_bytes(0);
  run.clear_locks();  // taken again as the executions queue
  run.clear_lock_waiters();
  run.clear_previous_run_id();  // a Flow retry's link: each continued run expires on its own
  run.clear_traveled_from_run_id();
  run.clear_traveled_to_run_id();
  run.set_continued_from_run_id(old.run_id());
  run.clear_continue_as_new_pending();
  run.set_continued_runs(old.continued_runs() + 1);
  *run.mutable_counters_before() = counters_before(image);
  if (run.first_run_id().empty()) run.set_first_run_id(old.run_id());
  // The flow timeout and a start delay keep their absolute deadlines.
  auto* options = run.mutable_options();
  if (options->timeout_ms() > 0 && !run.timeout_handled()) {
    const int64_t deadline = later_ms(old.start_ms(), options->timeout_ms());
    options->set_timeout_ms(std::max<int64_t>(1, ms_between(at_ms, deadline)));
  }
  if (run.start_pending()) {
    const int64_t due = later_ms(old.start_ms(), options->start_delay_ms());
    options->set_start_delay_ms(std::max<int64_t>(0, ms_between(at_ms, due)));
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

// The image's Channels, Attributes and done RPCs, as the new run's. The
// Attribute Store's row already holds these values: nothing to sync.
void copy_values(FlowTxn& txn, const Run& run, const RunImage& image) {
  for (const auto& [ci, q] : image.queues)  // bounded by the run's queues
    txn.put_queue(QueueKey{run.flow_id(), run.run_id(), ci.first, ci.second}, q);
  for (const auto& [cis, m] : image.messages)  // bounded by the run's queued messages
    txn.put_message(QueueKey{run.flow_id(), run.run_id(), std::get<0>(cis), std::get<1>(cis)},
                    std::get<2>(cis), m);
  for (const auto& [ki, v] : image.attributes) {  // bounded by kAttributesMax
    Attribute a;
    a.set_key(ki.first);
    a.set_instance_key(ki.second);
    *a.mutable_value() = v;
    txn.put_attribute(run.flow_id(), run.run_id(), a);
  }
  for (const auto& [id, r] : image.rpcs) {  // bounded by kRpcsDoneKept
    RpcExecution copy = r;
    copy.set_run_id(run.run_id());
    txn.put_rpc(copy);
  }
}

// The run continues as new now (it is quiet); answers the new run's ID.
std::string continue_run(FlowTxn& txn, Effects& effects, const Run& old, int64_t at_ms) {
  DEX_INVARIANT(old.status() == FLOW_RUNNING && !old.continue_as_new_pending().empty(),
                "only a running run with a continue-as-new pending continues");
  const RunImage image = current_image(txn, old);
  auto old_decl = txn.declaration(old.flow_type(), old.declaration_version());
  DEX_INVARIANT(old_decl.has_value(), "a run's declaration version is stored");
  // The Flow type's latest declaration, unless it cannot host the state (a
  // Step type it dropped is active): then the run's own version goes on.
  auto decl = txn.declaration(old.flow_type(), 0);
  DEX_INVARIANT(decl.has_value(), "a run's Flow type is declared");
  if (decl->version() != old_decl->version() && !unhostable(image, decl->declaration()).empty())
    decl = old_decl;
  const std::string root = old.first_run_id().empty() ? old.run_id() : old.first_run_id();
  std::string new_run_id = continued_run_id(root, old.continued_runs() + 1);
  // Bounded by kRetryChainMax: an ID a run took already (a start that reused
  // the Flow ID's chain root) moves to the next number.
  for (uint32_t n = old.continued_runs() + 2; txn.run(old.flow_id(), new_run_id); ++n) {
    DEX_INVARIANT(n < old.continued_runs() + kRetryChainMax, "a free continued run ID exists");
    new_run_id = continued_run_id(root, n);
  }
  const std::string why = old.continue_as_new_pending();

  // Its SubFlow parents' waits name the new run as their child's.
  for (const auto& p : old.parents()) {  // bounded by the run's parents
    const std::string parent_run = continued_to(txn, p.flow_id(), p.run_id());
    auto waiting = txn.step(p.flow_id(), parent_run, p.step_execution_id());
    const int i = static_cast<int>(p.condition_index());
    if (!waiting || waiting->phase() != PHASE_WAITING || i >= waiting->conditions_size() ||
        waiting->conditions(i).child_flow_id() != old.flow_id() || waiting->conditions(i).fired())
      continue;
    waiting->mutable_conditions(i)->set_child_run_id(new_run_id);
    txn.put_step(*waiting);
  }
  // The old run: closed, linked; its SubFlow parents move with the state.
  RunEditor from(txn, effects, old, old_decl->declaration(), at_ms);
  from.run().clear_parents();
  from.run().set_next_run_id(new_run_id);
  from.close(FLOW_CONTINUED_AS_NEW, "continued as new run " + quoted(new_run_id) + ": " + why,
             true);
  from.flush();

  Run run = next_run(image, new_run_id, decl->version(), at_ms);
  auto entry = txn.flow_id(old.flow_id());
  DEX_INVARIANT(entry.has_value() && entry->run_id() == old.run_id(),
                "a continued run is its Flow ID's latest");
  entry->set_run_id(new_run_id);
  entry->set_status(FLOW_RUNNING);
  entry->set_runs(entry->runs() + 1);
  txn.put_flow_id(*entry);
  effects.runs_started.push_back(run.flow_type());
  copy_values(txn, run, image);
  RunEditor scope(txn, effects, run, decl->declaration(), at_ms);
  HistoryEvent started;
  started.set_kind(FLOW_STARTED);
  started.set_continued_from_run_id(old.run_id());
  started.set_reason(why);
  scope.add_event(std::move(started));
  const Run& now = scope.run();
  if (now.options().timeout_ms() > 0 && !now.timeout_handled())
    put_run_timer(txn, effects, now, FLOW_TIMEOUT, later_ms(at_ms, now.options().timeout_ms()));
  if (now.start_pending())
    put_run_timer(txn, effects, now, START_DELAY, later_ms(at_ms, now.options().start_delay_ms()));
  for (const auto& id : old.active()) {  // bounded by kActiveStepsMax; creation order
    StepExecution s = image.steps.at(id);
    s.set_run_id(new_run_id);
    scope.carry_step(std::move(s), old.run_id());
  }
  scope.flush();
  return new_run_id;
}

}  // namespace

std::string continued_run_id(std::string_view root, uint32_t n) {
  return std::string(root) + ".c" + std::to_string(n);
}

ApplyResult apply_continue_as_new(FlowTxn& txn, Effects& effects, const ContinueAsNew& r) {
  if (auto s = validate_name("flowId", r.flow_id()); !s.is_ok())
    return rejected(RefusalCode::kInvalidArgument, s.message());
  if (r.run_id().empty())
    return rejected(RefusalCode::kInvalidArgument,
                    "continue-as-new needs the exact runId of the run it continues");
  if (auto s = validate_name("runId", r.run_id()); !s.is_ok())
    return rejected(RefusalCode::kInvalidArgument, s.message());
  if (r.request_id().size() > kNameBytesMax)
    return rejected(RefusalCode::kInvalidArgument,
                    "requestId is longer than " + std::to_string(kNameBytesMax) + " bytes");
  if (r.reason().size() > kPayloadBytesMax)
    return rejected(RefusalCode::kInvalidArgument, "the reason is too long");
  auto run = txn.run(r.flow_id(), r.run_id());
  if (!run)
    return rejected(RefusalCode::kNotFound,
                    "Flow " + quoted(r.flow_id()) + " has no run " + quoted(r.run_id()));
  const std::string request = std::string(kContinueRequest) + r.request_id();
  const auto& seen = run->write_requests();  // bounded by kWriteRequestsRemembered
  if (!r.request_id().empty() && std::find(seen.begin(), seen.end(), request) != seen.end())
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "the same request asked already",
            run->next_run_id()};
  if (run->status() != FLOW_RUNNING)
    return rejected(RefusalCode::kFailedPrecondition,
                    "run " + quoted(r.run_id()) + " of Flow " + quoted(r.flow_id()) + " is " +
                        flow_status_name(run->status()) + ": only a running run continues as new");
  if (run->graceful_complete())
    return rejected(RefusalCode::kFailedPrecondition,
                    "run " + quoted(r.run_id()) + " of Flow " + quoted(r.flow_id()) +
                        " completes once its active Steps end (a Step decided GracefulComplete): "
                        "it does not continue as new");
  if (!run->continue_as_new_pending().empty())
    return {ApplyKind::kUnchanged, RefusalCode::kNone,
            "a continue-as-new is pending already: " + run->continue_as_new_pending(), ""};
  auto decl = txn.declaration(run->flow_type(), run->declaration_version());
  DEX_INVARIANT(decl.has_value(), "a run's declaration version is stored");
  RunEditor scope(txn, effects, *run, decl->declaration(), r.at_unix_ms());
  if (!r.request_id().empty()) {
    auto* remembered = scope.run().mutable_write_requests();
    remembered->Add(std::string(request));
    // Bounded: the oldest is forgotten.
    if (static_cast<size_t>(remembered->size()) > kWriteRequestsRemembered)
      remembered->erase(remembered->begin());
  }
  scope.request_continue_as_new(r.reason().empty() ? "a client asked (TriggerContinueAsNew)"
                                                   : "a client asked: " + r.reason());
  scope.flush();
  return {};
}

std::vector<std::pair<RunKey, std::string>> continue_pending(FlowTxn& txn, Effects& effects,
                                                             const std::vector<RunKey>& candidates,
                                                             int64_t at_ms) {
  std::vector<std::pair<RunKey, std::string>> out;
  std::set<RunKey> seen;
  for (const auto& key : candidates) {  // bounded by the runs one record touched
    if (!seen.insert(key).second) continue;
    auto run = txn.run(key.flow_id, key.run_id);
    if (!run || run->status() != FLOW_RUNNING || run->continue_as_new_pending().empty()) continue;
    if (!quiet(txn, *run)) continue;
    out.emplace_back(key, continue_run(txn, effects, *run, at_ms));
  }
  return out;
}

// RunEditor's part (run_editor.h).

void RunEditor::request_continue_as_new(const std::string& reason) {
  if (run_.status() != FLOW_RUNNING || !run_.continue_as_new_pending().empty() ||
      run_.graceful_complete())
    return;
  run_.set_continue_as_new_pending(reason);
  HistoryEvent event;
  event.set_kind(CONTINUE_AS_NEW_REQUESTED);
  event.set_reason(reason);
  add_event(std::move(event));
}

std::string RunEditor::history_threshold_passed() const {
  const FlowConfig& c = run_.config();
  if (c.continue_as_new_after_events() > 0 && run_.next_event() >= c.continue_as_new_after_events())
    return "the run's history reached " + std::to_string(run_.next_event()) +
           " events (FlowConfig continue_as_new_after_events " +
           std::to_string(c.continue_as_new_after_events()) + ")";
  if (c.continue_as_new_after_bytes() > 0 &&
      run_.history_bytes() >= c.continue_as_new_after_bytes())
    return "the run's history reached " + std::to_string(run_.history_bytes()) +
           " bytes (FlowConfig continue_as_new_after_bytes " +
           std::to_string(c.continue_as_new_after_bytes()) + ")";
  return "";
}

void RunEditor::carry_step(StepExecution step, const std::string& from_run_id) {
  DEX_INVARIANT(step.flow_id() == run_.flow_id() && step.run_id() == run_.run_id(),
                "a carried execution belongs to the new run");
  const std::string id = step.step_execution_id();
  StepExecution& s = steps_.insert_or_assign(id, std::move(step)).first->second;
  if (s.phase() == PHASE_WAIT_FOR || s.phase() == PHASE_EXECUTE) {
    MethodState& m = *s.mutable_method();
    DEX_INVARIANT(m.state() != TASK_RUNNING, "no attempt of a continued run runs");
    if (m.state() == TASK_BACKOFF && m.retry_at_ms() > at_ms_) {
      back_off(m, id, m.retry_at_ms());
    } else {
      queue_method(s, m.method(), std::max<uint32_t>(m.attempt(), 1));
    }
    return;
  }
  DEX_INVARIANT(s.phase() == PHASE_WAITING, "a carried execution is active");
  for (int i = 0; i < s.conditions_size(); ++i) {  // bounded by kConditionsMax
    ConditionState& c = *s.mutable_conditions(i);
    if (c.fired()) continue;
    if (c.timer_at_ms() != 0) {
      TimerKey key = timer_key(CONDITION);
      key.set_step_execution_id(id);
      key.set_condition_index(static_cast<uint32_t>(i));
      put_timer(key, c.timer_at_ms());
    }
    if (c.child_flow_id().empty()) continue;
    // The child's running run reports to this run now (a closed one with a
    // Flow retry pending names the old run, which continued_to maps here).
    auto child = txn_.run(c.child_flow_id(), c.child_run_id());
    // Bounded by kRetryChainMax: from the run the wait names along its Flow retries.
    for (size_t hops = 0; child && child->status() != FLOW_RUNNING &&
                          !child->next_run_id().empty() && hops < kRetryChainMax;
         ++hops)
      child = txn_.run(c.child_flow_id(), child->next_run_id());
    if (!child || child->status() != FLOW_RUNNING) continue;
    for (auto& p : *child->mutable_parents()) {  // bounded by the child's parents
      if (p.flow_id() == run_.flow_id() && p.run_id() == from_run_id &&
          p.step_execution_id() == id && p.condition_index() == static_cast<uint32_t>(i))
        p.set_run_id(run_.run_id());
    }
    txn_.put_run(*child);
  }
}

}  // namespace dex::flow
