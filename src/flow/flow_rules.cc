#include "flow/flow_rules.h"

#include <algorithm>
#include <map>
#include <set>

#include <google/protobuf/util/message_differencer.h>

#include "common/invariant.h"
#include "flow/continue_as_new.h"
#include "flow/declaration.h"
#include "flow/flow_config.h"
#include "flow/limits.h"
#include "flow/record_time.h"
#include "flow/result_check.h"
#include "flow/run_editor.h"
#include "flow/search_index.h"
#include "flow/time_travel.h"

namespace dex::flow {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

ApplyResult applied() { return {}; }
ApplyResult stale(std::string why) {
  return {ApplyKind::kStale, RefusalCode::kNone, std::move(why), ""};
}
ApplyResult rejected(RefusalCode code, std::string why) {
  return {ApplyKind::kRejected, code, std::move(why), ""};
}
ApplyResult invalid(const Status& s) {
  return rejected(RefusalCode::kInvalidArgument, s.message());
}

const char* status_name(FlowStatus status) { return flow_status_name(status); }

// An InvokeRpc's own lock keys (docs/flow-rules.md, "RPCs"): each a name, held
// besides the declaration's, at most kLockKeysMax keys in all once the two
// lists are merged without repeats. The error names the bad key.
Status validate_call_lock_keys(const InvokeRpc& r, const RpcDeclaration& declaration) {
  if (static_cast<size_t>(r.lock_keys_size()) > kLockKeysMax)
    return Status::invalid_argument("lockKeys has " + std::to_string(r.lock_keys_size()) +
                                    " keys; at most " + std::to_string(kLockKeysMax) +
                                    " (lockKeys[" + std::to_string(kLockKeysMax) + "] on)");
  std::set<std::string_view> all(declaration.lock_keys().begin(), declaration.lock_keys().end());
  for (int i = 0; i < r.lock_keys_size(); ++i) {  // bounded by kLockKeysMax
    const std::string& key = r.lock_keys(i);
    if (auto s = validate_name("lockKeys[" + std::to_string(i) + "]", key); !s.is_ok()) return s;
    if (all.insert(key).second && all.size() > kLockKeysMax)
      return Status::invalid_argument("lockKeys[" + std::to_string(i) + "] " + quoted(key) +
                                      " is one key too many: RPC " + quoted(r.name()) +
                                      " holds at most " + std::to_string(kLockKeysMax) +
                                      " lock keys, its declaration's and the call's together");
  }
  return Status::ok();
}

// Client writes a client repeats after a lost answer (docs/api.md, "Repeated
// calls"): each kind remembers its request IDs in Run.write_requests under
// its own prefix, so one ID given to two kinds of call means two requests.
constexpr std::string_view kSetRequest = "set:";
constexpr std::string_view kStopRequest = "stop:";
constexpr std::string_view kSkipRequest = "skip:";

bool write_seen(const Run& run, std::string_view kind, const std::string& id) {
  if (id.empty()) return false;
  const std::string key = std::string(kind) + id;
  const auto& seen = run.write_requests();  // bounded by kWriteRequestsRemembered
  return std::find(seen.begin(), seen.end(), key) != seen.end();
}

void remember_write(Run& run, std::string_view kind, const std::string& id) {
  if (id.empty()) return;
  auto* remembered = run.mutable_write_requests();
  remembered->Add(std::string(kind) + id);
  // Bounded: the oldest is forgotten.
  if (static_cast<size_t>(remembered->size()) > kWriteRequestsRemembered)
    remembered->erase(remembered->begin());
  DEX_INVARIANT(static_cast<size_t>(remembered->size()) <= kWriteRequestsRemembered,
                "a run remembers at most kWriteRequestsRemembered write requests");
}

Status check_request_id(const std::string& id) {
  if (id.size() > kNameBytesMax)
    return Status::invalid_argument("requestId is longer than " + std::to_string(kNameBytesMax) +
                                    " bytes");
  return Status::ok();
}

// Whether `decision` leaves the run within kActiveStepsMax active executions,
// `ending` of them (the decider) ending with it.
Status active_room(const Run& run, const StepDecision& d, size_t ending) {
  size_t adds = d.has_go_to() ? static_cast<size_t>(d.go_to().movements_size()) : 0;
  if (d.has_force_complete_if_channels_empty())
    adds = static_cast<size_t>(d.force_complete_if_channels_empty().otherwise_size());
  if (static_cast<size_t>(run.active_size()) - ending + adds > kActiveStepsMax)
    return Status::invalid_argument("the decision would leave more than " +
                                    std::to_string(kActiveStepsMax) + " active Step executions");
  return Status::ok();
}

// Two declarations of one record that give an index key two types.
Status check_sibling_index_keys(const DeclareFlows& r) {
  std::map<std::string, std::pair<IndexType, std::string>> seen;  // key -> (type, Flow type)
  for (const auto& d : r.declarations()) {                        // bounded by the Worker's hello
    for (const auto& a : d.attributes()) {                        // bounded by kAttributeKeysMax
      if (a.index().type() == INDEX_TYPE_UNSPECIFIED) continue;
      auto [it, fresh] = seen.emplace(std::string(index_key_of(a)),
                                      std::make_pair(a.index().type(), d.flow_type()));
      if (fresh || it->second.first == a.index().type() || it->second.second == d.flow_type())
        continue;
      return Status::invalid_argument("index key " + quoted(it->first) + " is " +
                                      std::string(index_type_name(it->second.first)) +
                                      " in Flow type " + quoted(it->second.second) +
                                      "; Flow type " + quoted(d.flow_type()) + " declares it " +
                                      std::string(index_type_name(a.index().type())));
    }
  }
  return Status::ok();
}

// One apply: the transaction, the effects and the record's time.
class RecordApplier {
 public:
  RecordApplier(FlowTxn& txn, Effects& effects) : txn_(txn), effects_(effects) {}

  ApplyResult declare(const DeclareFlows& r);
  ApplyResult start(const StartFlow& r);
  ApplyResult method_result(const MethodResult& r);
  ApplyResult withdrawn(const AttemptWithdrawn& r);
  ApplyResult timer_fired(const TimerFired& r);
  ApplyResult publish(const PublishToChannel& r);
  ApplyResult stop(const StopFlow& r);
  ApplyResult skip_timer(const SkipTimer& r);
  // A SkipTimer of the run's flow timeout or start delay (run_timer).
  ApplyResult skip_run_timer(const SkipTimer& r, RunEditor& scope);
  ApplyResult set_attributes(const SetAttributes& r);
  ApplyResult invoke_rpc(const InvokeRpc& r);
  ApplyResult attribute_store_synced(const AttributeStoreSynced& r);
  void assign(const TaskAssignment& a, int64_t at_ms);
  void recover(int64_t at_ms);
  // Tells the SubFlow parents of every run closed for good since
  // effects.closed[from] (a close with a Flow retry pending waits for the retry).
  void notify_parents(size_t from);

 private:
  // Where a retry's or a SubFlow child's run comes from.
  struct Origin {
    google::protobuf::RepeatedPtrField<SubFlowParent> parents;
    uint32_t flow_attempt = 1;
    std::string first_run_id, previous_run_id;
    int64_t first_start_ms = 0;
  };
  // Checks a wait's SubFlow conditions against the store (the child's type,
  // its options and initial Attributes, the derived ID); writes nothing.
  Status check_sub_flows(const Run& parent, const StepExecution& step, const Wait& wait);
  // Starts (or attaches to) the child of condition `index` by its reuse policy.
  SubFlowChild sub_flow(const Run& parent, const StepExecution& step, uint32_t index,
                        const SubFlowCondition& c, int64_t at_ms);
  // Tells the parents of `run` (closed for good); true if one of them changed.
  bool tell_parents(const Run& run, int64_t at_ms);
  ApplyResult flow_retry(const TimerFired& r);
  // A RETENTION timer: deletes the run and the earlier runs of its retry chain.
  ApplyResult expire(const TimerFired& r);
  // The run a record names (run_id empty: the Flow ID's latest), with its scope.
  std::optional<RunEditor> open(const std::string& flow_id, const std::string& run_id,
                                int64_t at_ms, std::string* why);
  void start_run(const StartFlow& r, const DeclarationVersion& decl, uint32_t runs_before,
                 const Origin* origin = nullptr);
  ApplyResult rpc_result(RunEditor& scope, const MethodResult& r);
  ApplyResult handler_result(RunEditor& scope, const MethodResult& r);
  // "Flow 'f' run 'r' is STATUS; <what> only while the run is RUNNING".
  static ApplyResult not_running(const std::string& flow_id, const Run& run,
                                 const std::string& what);

  FlowTxn& txn_;
  Effects& effects_;
};

std::optional<RunEditor> RecordApplier::open(const std::string& flow_id, const std::string& run_id,
                                             int64_t at_ms, std::string* why) {
  std::string id = run_id;
  if (id.empty()) {
    auto entry = txn_.flow_id(flow_id);
    if (!entry) {
      *why = "no Flow with ID " + quoted(flow_id);
      return std::nullopt;
    }
    id = entry->run_id();
  }
  auto run = txn_.run(flow_id, id);
  if (!run) {
    *why = "Flow " + quoted(flow_id) + " has no run " + quoted(id);
    return std::nullopt;
  }
  auto decl = txn_.declaration(run->flow_type(), run->declaration_version());
  DEX_INVARIANT(decl.has_value(), "a run's declaration version is stored");
  return std::optional<RunEditor>(std::in_place, txn_, effects_, std::move(*run),
                                  decl->declaration(), at_ms);
}

ApplyResult RecordApplier::declare(const DeclareFlows& r) {
  for (const auto& d : r.declarations()) {  // validate all before writing any
    if (auto s = validate_declaration(d); !s.is_ok()) return invalid(s);
    if (auto s = validate_indexes(d); !s.is_ok()) return invalid(s);
    if (auto s = check_index_keys(txn_, d); !s.is_ok()) return invalid(s);
  }
  if (auto s = check_sibling_index_keys(r); !s.is_ok()) return invalid(s);
  bool changed = false;
  for (const auto& d : r.declarations()) {  // bounded by the Worker's hello
    FlowDeclaration filled = with_defaults(d);
    auto latest = txn_.declaration(d.flow_type(), 0);
    if (latest && google::protobuf::util::MessageDifferencer::Equals(latest->declaration(), filled))
      continue;
    DeclarationVersion version;
    *version.mutable_declaration() = std::move(filled);
    version.set_version(latest ? latest->version() + 1 : 1);
    version.set_declared_at_ms(r.at_unix_ms());
    register_index_keys(txn_, version.declaration(), latest ? &latest->declaration() : nullptr);
    txn_.put_declaration(version);
    changed = true;
  }
  if (!changed)
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "every declaration is current", ""};
  return applied();
}

void RecordApplier::start_run(const StartFlow& r, const DeclarationVersion& decl,
                              uint32_t runs_before, const Origin* origin) {
  Run run;
  run.set_flow_id(r.flow_id());
  run.set_run_id(r.run_id());
  run.set_flow_type(r.flow_type());
  run.set_declaration_version(decl.version());
  run.set_status(FLOW_RUNNING);
  *run.mutable_input() = r.input();
  *run.mutable_options() = r.options();
  // The start's config (StartOptions.config, attribute_store) wins over the
  // declaration's, field by field; the run's store is the config's.
  *run.mutable_config() =
      effective_config(declared_config(decl.declaration()), start_config(r.options()));
  run.set_attribute_store(run.config().attribute_store());
  // Kept as Attributes and in the start event, not in the run rewritten by
  // every apply; but a Flow retry starts with them again.
  if (!r.options().has_retry_policy()) run.mutable_options()->clear_initial_attributes();
  run.set_start_ms(r.at_unix_ms());
  run.set_retention_ms(std::max<int64_t>(r.retention_ms(), 0));
  run.set_flow_attempt(origin != nullptr ? origin->flow_attempt : 1);
  run.set_first_run_id(origin != nullptr && !origin->first_run_id.empty() ? origin->first_run_id
                                                                          : r.run_id());
  run.set_first_start_ms(origin != nullptr && origin->flow_attempt > 1 ? origin->first_start_ms
                                                                       : r.at_unix_ms());
  if (origin != nullptr) {
    *run.mutable_parents() = origin->parents;
    run.set_previous_run_id(origin->previous_run_id);
  }
  FlowIdEntry entry;
  entry.set_flow_id(r.flow_id());
  entry.set_run_id(r.run_id());
  entry.set_status(FLOW_RUNNING);
  entry.set_request_id(r.options().request_id());
  entry.set_runs(runs_before + 1);
  txn_.put_flow_id(entry);
  effects_.runs_started.push_back(r.flow_type());
  RunEditor scope(txn_, effects_, std::move(run), decl.declaration(), r.at_unix_ms());
  HistoryEvent event;
  event.set_kind(FLOW_STARTED);
  *event.mutable_attribute_writes() = r.options().initial_attributes();
  if (origin != nullptr) event.set_previous_run_id(origin->previous_run_id);
  scope.add_event(std::move(event));
  scope.write_attributes(r.options().initial_attributes());
  const auto& options = r.options();
  if (options.timeout_ms() > 0) {
    TimerKey key;
    key.set_flow_id(r.flow_id());
    key.set_run_id(r.run_id());
    key.set_kind(FLOW_TIMEOUT);
    txn_.put_timer(key, later_ms(r.at_unix_ms(), options.timeout_ms()));
    effects_.timers_set.push_back(later_ms(r.at_unix_ms(), options.timeout_ms()));
  }
  if (options.start_delay_ms() > 0) {
    scope.run().set_start_pending(true);
    TimerKey key;
    key.set_flow_id(r.flow_id());
    key.set_run_id(r.run_id());
    key.set_kind(START_DELAY);
    txn_.put_timer(key, later_ms(r.at_unix_ms(), options.start_delay_ms()));
    effects_.timers_set.push_back(later_ms(r.at_unix_ms(), options.start_delay_ms()));
  } else {
    scope.create_start_step();
  }
  scope.flush();
}

ApplyResult RecordApplier::start(const StartFlow& r) {
  if (auto s = validate_name("flowId", r.flow_id()); !s.is_ok()) return invalid(s);
  if (auto s = validate_name("runId", r.run_id()); !s.is_ok()) return invalid(s);
  if (auto s = validate_name("flowType", r.flow_type()); !s.is_ok()) return invalid(s);
  if (auto s = validate_payload("the input", r.input()); !s.is_ok()) return invalid(s);
  if (auto s = validate_start_options(r.options()); !s.is_ok()) return invalid(s);
  auto decl = txn_.declaration(r.flow_type(), 0);
  if (!decl)
    return rejected(RefusalCode::kInvalidArgument,
                    "Flow type " + quoted(r.flow_type()) + " was never declared by a Worker");
  if (txn_.run(r.flow_id(), r.run_id()))
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "the run exists", r.run_id()};
  auto entry = txn_.flow_id(r.flow_id());
  const std::string& request = r.options().request_id();
  const bool repeat = entry && r.options().ignore_already_started() && !request.empty() &&
                      request == entry->request_id();
  if (!repeat) {  // a repeat answers its run, whatever it writes or its type now declares
    if (auto s = validate_start_for(decl->declaration(), r.options()); !s.is_ok())
      return invalid(s);
    if (auto s = validate_attribute_writes(decl->declaration(), r.options().initial_attributes(),
                                           "initialAttributes");
        !s.is_ok())
      return invalid(s);
    if (auto s = check_attribute_room(txn_, r.flow_id(), r.run_id(), 0,
                                      r.options().initial_attributes());
        !s.is_ok())
      return rejected(RefusalCode::kFailedPrecondition, s.message());
  }
  if (!entry) {
    start_run(r, *decl, 0);
    return {ApplyKind::kApplied, RefusalCode::kNone, "", r.run_id()};
  }
  // A repeat of the request that started the latest run (a client's retry
  // after a failover lost the answer) answers that run, whatever its status
  // now: under a policy that allows a new run after a closed one, a repeat
  // would otherwise start a second run of one start.
  if (repeat)
    return {ApplyKind::kUnchanged, RefusalCode::kNone,
            "the same request started run " + quoted(entry->run_id()), entry->run_id()};
  const auto policy = r.options().id_reuse_policy();
  const bool running = entry->status() == FLOW_RUNNING;
  bool allowed = false;
  switch (policy) {
    case ID_REUSE_POLICY_UNSPECIFIED:
    case ALLOW_IF_NO_RUNNING:
    case TERMINATE_IF_RUNNING:
      allowed = !running || policy == TERMINATE_IF_RUNNING;
      break;
    case ALLOW_IF_PREVIOUS_FAILED:
      allowed = !running && entry->status() != FLOW_COMPLETED;
      break;
    default:  // DISALLOW
      allowed = false;
  }
  if (!allowed) {
    return rejected(RefusalCode::kAlreadyExists,
                    "Flow " + quoted(r.flow_id()) + " already has " +
                        (running ? "a running run "
                                 : std::string("a ") + status_name(entry->status()) + " run ") +
                        quoted(entry->run_id()) + "; its ID reuse policy refuses a new run");
  }
  if (running) {  // TERMINATE_IF_RUNNING
    std::string why;
    auto old = open(r.flow_id(), entry->run_id(), r.at_unix_ms(), &why);
    DEX_INVARIANT(old.has_value(), "a running run exists");
    old->close(FLOW_TERMINATED,
               "replaced by run " + r.run_id() + " (ID reuse policy TERMINATE_IF_RUNNING)");
    old->flush();
  }
  start_run(r, *decl, entry->runs());
  return {ApplyKind::kApplied, RefusalCode::kNone, "", r.run_id()};
}

ApplyResult RecordApplier::method_result(const MethodResult& r) {
  std::string why;
  auto scope = open(r.task().flow_id(), r.task().run_id(), r.at_unix_ms(), &why);
  if (!scope) return stale(why);
  if (scope->run().status() != FLOW_RUNNING)
    return stale("the run is " + std::string(status_name(scope->run().status())));
  if (r.task().method() == RPC) return rpc_result(*scope, r);
  if (r.task().method() == ON_TIMEOUT) return handler_result(*scope, r);
  StepExecution* step = scope->step(r.task().step_execution_id());
  if (step == nullptr) return stale("no Step execution " + quoted(r.task().step_execution_id()));
  const auto& method = step->method();
  if (method.state() != TASK_RUNNING || method.task_id() != r.task_id() ||
      method.method() != r.task().method())
    return stale("task " + quoted(r.task_id()) + " is not the running attempt of " +
                 step->step_execution_id());
  if (auto s = validate_method_result(scope->declaration(), r); !s.is_ok()) return invalid(s);
  if (r.outcome() == ATTEMPT_COMPLETED) {
    if (auto s = check_attribute_room(txn_, scope->run().flow_id(), scope->run().run_id(),
                                      scope->run().attribute_count(), r.attribute_writes());
        !s.is_ok())
      return invalid(s);
  }
  if (r.outcome() != ATTEMPT_COMPLETED) {
    scope->attempt_failed(*step, r.outcome(), r.error(),
                          r.non_retryable() && r.outcome() == ATTEMPT_FAILED,
                          r.outcome() == ATTEMPT_FAILED ? r.retry_after_ms() : 0);
  } else if (r.task().method() == WAIT_FOR) {
    if (auto s = check_sub_flows(scope->run(), *step, r.wait()); !s.is_ok()) return invalid(s);
    std::map<uint32_t, SubFlowChild> children;  // started before the parent's state changes
    for (int i = 0; i < r.wait().conditions_size(); ++i) {  // bounded by kConditionsMax
      const Condition& c = r.wait().conditions(i);
      if (c.has_sub_flow())
        children[static_cast<uint32_t>(i)] =
            sub_flow(scope->run(), *step, static_cast<uint32_t>(i), c.sub_flow(), r.at_unix_ms());
    }
    scope->complete_wait_for(*step, r, children);
  } else {
    if (auto s = active_room(scope->run(), r.decision(), 1); !s.is_ok()) return invalid(s);
    scope->complete_execute(*step, r);
  }
  scope->flush();
  return applied();
}

ApplyResult RecordApplier::not_running(const std::string& flow_id, const Run& run,
                                       const std::string& what) {
  return rejected(RefusalCode::kFailedPrecondition,
                  "Flow " + quoted(flow_id) + " run " + quoted(run.run_id()) + " is " +
                      status_name(run.status()) + "; " + what + " only while the run is RUNNING");
}

ApplyResult RecordApplier::rpc_result(RunEditor& scope, const MethodResult& r) {
  RpcExecution* rpc = scope.rpc(r.task().step_execution_id());
  if (rpc == nullptr || rpc->done() || rpc->method().state() != TASK_RUNNING ||
      rpc->method().task_id() != r.task_id())
    return stale("task " + quoted(r.task_id()) + " is not the running attempt of RPC " +
                 quoted(r.task().step_execution_id()));
  if (auto s = validate_method_result(scope.declaration(), r); !s.is_ok()) return invalid(s);
  if (r.outcome() == ATTEMPT_COMPLETED) {
    if (auto s = check_attribute_room(txn_, scope.run().flow_id(), scope.run().run_id(),
                                      scope.run().attribute_count(), r.attribute_writes());
        !s.is_ok())
      return invalid(s);
    if (static_cast<size_t>(scope.run().active_size()) +
            static_cast<size_t>(r.rpc().next_steps_size()) >
        kActiveStepsMax)
      return rejected(RefusalCode::kInvalidArgument, "the RPC's next Steps would leave more than " +
                                                         std::to_string(kActiveStepsMax) +
                                                         " active Step executions");
    scope.complete_rpc(*rpc, r);
  } else {
    scope.end_rpc(*rpc, r.outcome(), r.error());
  }
  scope.flush();
  return applied();
}

ApplyResult RecordApplier::handler_result(RunEditor& scope, const MethodResult& r) {
  const MethodState& handler = scope.run().timeout_handler();
  if (r.task().step_execution_id() != kTimeoutHandlerId || handler.state() != TASK_RUNNING ||
      handler.task_id() != r.task_id())
    return stale("task " + quoted(r.task_id()) +
                 " is not the running attempt of the timeout handler");
  if (auto s = validate_method_result(scope.declaration(), r); !s.is_ok()) return invalid(s);
  if (r.outcome() != ATTEMPT_COMPLETED) {
    scope.handler_failed(r.outcome(), r.error(), r.non_retryable() && r.outcome() == ATTEMPT_FAILED,
                         r.outcome() == ATTEMPT_FAILED ? r.retry_after_ms() : 0);
    scope.flush();
    return applied();
  }
  if (auto s = check_attribute_room(txn_, scope.run().flow_id(), scope.run().run_id(),
                                    scope.run().attribute_count(), r.attribute_writes());
      !s.is_ok())
    return invalid(s);
  if (auto s = active_room(scope.run(), r.decision(), 0); !s.is_ok()) return invalid(s);
  scope.complete_handler(r);
  scope.flush();
  return applied();
}

ApplyResult RecordApplier::withdrawn(const AttemptWithdrawn& r) {
  std::string why;
  auto scope = open(r.task().flow_id(), r.task().run_id(), r.at_unix_ms(), &why);
  if (!scope) return stale(why);
  if (r.task().method() == RPC) {
    RpcExecution* rpc = scope->rpc(r.task().step_execution_id());
    if (scope->run().status() != FLOW_RUNNING || rpc == nullptr || rpc->done() ||
        rpc->method().state() != TASK_RUNNING || rpc->method().task_id() != r.task_id())
      return stale("task " + quoted(r.task_id()) + " is not running");
    scope->withdraw_rpc(*rpc);
    scope->flush();
    return applied();
  }
  if (r.task().method() == ON_TIMEOUT) {
    const MethodState& handler = scope->run().timeout_handler();
    if (scope->run().status() != FLOW_RUNNING || handler.state() != TASK_RUNNING ||
        handler.task_id() != r.task_id() || r.task().step_execution_id() != kTimeoutHandlerId)
      return stale("task " + quoted(r.task_id()) + " is not running");
    scope->withdraw_handler();
    scope->flush();
    return applied();
  }
  StepExecution* step = scope->step(r.task().step_execution_id());
  if (scope->run().status() != FLOW_RUNNING || step == nullptr ||
      step->method().state() != TASK_RUNNING || step->method().task_id() != r.task_id())
    return stale("task " + quoted(r.task_id()) + " is not running");
  scope->withdraw_attempt(*step);
  scope->flush();
  return applied();
}

ApplyResult RecordApplier::timer_fired(const TimerFired& r) {
  const TimerKey& key = r.key();
  if (key.kind() == FLOW_RETRY) return flow_retry(r);  // its run is closed
  if (key.kind() == RETENTION) return expire(r);       // so is this one
  // Every timer the rules set names its run; one that names none would open the
  // latest run and miss the index entry that was set (found by the fuzzer).
  if (key.run_id().empty()) return stale("the timer names no run");
  std::string why;
  auto scope = open(key.flow_id(), key.run_id(), r.at_unix_ms(), &why);
  if (!scope) return stale(why);
  Run& run = scope->run();
  if (run.status() != FLOW_RUNNING) return stale("the run is closed");
  const int64_t at = r.fire_at_ms();
  switch (key.kind()) {
    case FLOW_TIMEOUT: {
      if (run.options().timeout_ms() <= 0 ||
          later_ms(run.start_ms(), run.options().timeout_ms()) != at)
        return stale("no such flow timeout");
      // Its handler ran (or runs): a run times out once.
      if (run.timeout_handled()) return stale("the flow timeout fired; its handler ran");
      txn_.delete_timer(key, at);
      const std::string why = flow_timeout_reason(run);
      switch (run.options().timeout_policy()) {
        case TIMEOUT_CANCEL:
          scope->close(FLOW_CANCELED, why);
          break;
        case TIMEOUT_HANDLER:
          // A Flow retry starts at the type's latest version, which may have
          // dropped the handler: then the timeout fails the run.
          if (scope->declaration().has_timeout_handler())
            scope->start_timeout_handler(why);
          else
            scope->close(FLOW_TIMED_OUT, why + "; declaration version " +
                                             std::to_string(run.declaration_version()) +
                                             " of Flow type " + quoted(run.flow_type()) +
                                             " has no timeout handler");
          break;
        default:
          scope->close(FLOW_TIMED_OUT, why);
      }
      break;
    }
    case START_DELAY:
      if (!run.start_pending() || later_ms(run.start_ms(), run.options().start_delay_ms()) != at)
        return stale("no pending start");
      txn_.delete_timer(key, at);
      scope->create_start_step();
      break;
    case RETRY: {
      if (key.method() == ON_TIMEOUT) {
        const MethodState& handler = run.timeout_handler();
        if (key.step_execution_id() != kTimeoutHandlerId || handler.state() != TASK_BACKOFF ||
            handler.retry_at_ms() != at)
          return stale("no such retry timer");
        txn_.delete_timer(key, at);
        scope->handler_retry_due();
        break;
      }
      StepExecution* step = scope->step(key.step_execution_id());
      if (step == nullptr || step->method().state() != TASK_BACKOFF ||
          step->method().method() != key.method() || step->method().retry_at_ms() != at)
        return stale("no such retry timer");
      txn_.delete_timer(key, at);
      scope->retry_due(*step);
      break;
    }
    case CONDITION: {
      StepExecution* step = scope->step(key.step_execution_id());
      const uint32_t i = key.condition_index();
      if (step == nullptr || step->phase() != PHASE_WAITING ||
          i >= static_cast<uint32_t>(step->conditions_size()) ||
          !step->wait().conditions(static_cast<int>(i)).has_timer() ||
          step->conditions(static_cast<int>(i)).fired() ||
          step->conditions(static_cast<int>(i)).timer_at_ms() != at)
        return stale("no such Timer condition");
      scope->fire_condition(*step, i, false);
      scope->match_waits();
      break;
    }
    case RPC_DEADLINE: {
      RpcExecution* rpc = scope->rpc(key.step_execution_id());
      if (rpc == nullptr || rpc->done() || rpc->deadline_ms() != at)
        return stale("no such RPC deadline");
      scope->end_rpc(*rpc, ATTEMPT_TIMED_OUT,
                     "the RPC's timeout of " + std::to_string(at - rpc->created_ms()) +
                         " ms passed before it completed");
      break;
    }
    default:
      return stale("unknown timer kind");
  }
  scope->flush();
  return applied();
}

ApplyResult RecordApplier::publish(const PublishToChannel& r) {
  std::string why;
  auto scope = open(r.flow_id(), r.run_id(), r.at_unix_ms(), &why);
  if (!scope) return rejected(RefusalCode::kNotFound, why);
  // A repeat first: a retry whose first try was taken (and maybe consumed by
  // a Step that then closed the run) is answered as the first try was.
  const auto& seen = scope->run().publish_requests();
  if (!r.request_id().empty() && std::find(seen.begin(), seen.end(), r.request_id()) != seen.end())
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "a repeated publish request", ""};
  if (scope->run().status() != FLOW_RUNNING)
    return rejected(RefusalCode::kFailedPrecondition,
                    "Flow " + quoted(r.flow_id()) + " run " + quoted(scope->run().run_id()) +
                        " is " + status_name(scope->run().status()) +
                        "; Channels take messages only while the run is RUNNING");
  if (r.request_id().size() > kNameBytesMax)
    return rejected(RefusalCode::kInvalidArgument,
                    "requestId is longer than " + std::to_string(kNameBytesMax) + " bytes");
  google::protobuf::RepeatedPtrField<Publish> publishes;
  *publishes.Add() = r.publish();
  if (auto s = validate_publishes(scope->declaration(), publishes); !s.is_ok()) return invalid(s);
  scope->append_publishes(publishes);
  if (!r.request_id().empty()) {
    auto* remembered = scope->run().mutable_publish_requests();
    remembered->Add(std::string(r.request_id()));
    // Bounded: the oldest is forgotten.
    if (static_cast<size_t>(remembered->size()) > kPublishRequestsRemembered)
      remembered->erase(remembered->begin());
  }
  HistoryEvent event;
  event.set_kind(CHANNEL_PUBLISHED);
  *event.mutable_publish() = r.publish();
  scope->add_event(std::move(event));
  scope->match_waits();
  scope->flush();
  return applied();
}

ApplyResult RecordApplier::stop(const StopFlow& r) {
  std::string why;
  auto scope = open(r.flow_id(), r.run_id(), r.at_unix_ms(), &why);
  if (!scope) return rejected(RefusalCode::kNotFound, why);
  // A repeat first: its first try closed the run, so the check below would refuse it.
  if (write_seen(scope->run(), kStopRequest, r.request_id()))
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "a repeated stop request", ""};
  if (auto s = check_request_id(r.request_id()); !s.is_ok()) return invalid(s);
  if (scope->run().status() != FLOW_RUNNING)
    return rejected(RefusalCode::kFailedPrecondition,
                    "Flow " + quoted(r.flow_id()) + " run " + quoted(scope->run().run_id()) +
                        " is already " + status_name(scope->run().status()));
  if (r.reason().size() > kPayloadBytesMax)
    return rejected(RefusalCode::kInvalidArgument, "the reason is too long");
  if (!StopMode_IsValid(r.mode()))
    return rejected(RefusalCode::kInvalidArgument,
                    "the stop mode is not CANCEL, TERMINATE or FAIL");
  FlowStatus status = FLOW_CANCELED;
  if (r.mode() == STOP_TERMINATE) status = FLOW_TERMINATED;
  if (r.mode() == STOP_FAIL) status = FLOW_FAILED;
  remember_write(scope->run(), kStopRequest, r.request_id());
  scope->close(status, r.reason().empty() ? "stopped by a client" : r.reason(), true);
  scope->flush();
  return applied();
}

ApplyResult RecordApplier::skip_timer(const SkipTimer& r) {
  std::string why;
  auto scope = open(r.flow_id(), r.run_id(), r.at_unix_ms(), &why);
  if (!scope) return rejected(RefusalCode::kNotFound, why);
  // A repeat first: its first try fired the Timer (and maybe the run closed since).
  if (write_seen(scope->run(), kSkipRequest, r.request_id()))
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "a repeated skip request", ""};
  if (auto s = check_request_id(r.request_id()); !s.is_ok()) return invalid(s);
  if (scope->run().status() != FLOW_RUNNING)
    return rejected(RefusalCode::kFailedPrecondition,
                    "the run is " + std::string(status_name(scope->run().status())));
  if (r.timer_case() == SkipTimer::kRunTimer) return skip_run_timer(r, *scope);
  StepExecution* step = scope->step(r.step_execution_id());
  if (step == nullptr)
    return rejected(RefusalCode::kNotFound, "no Step execution " + quoted(r.step_execution_id()));
  if (step->phase() != PHASE_WAITING)
    return rejected(RefusalCode::kFailedPrecondition,
                    step->step_execution_id() + " is not waiting for its conditions");
  int index = -1;
  if (r.timer_case() == SkipTimer::kConditionIndex) {
    index = static_cast<int>(r.condition_index());
  } else if (r.timer_case() == SkipTimer::kConditionId) {
    for (int i = 0; i < step->wait().conditions_size(); ++i) {
      if (step->wait().conditions(i).condition_id() == r.condition_id()) index = i;
    }
    if (index < 0)
      return rejected(
          RefusalCode::kNotFound,
          step->step_execution_id() + " has no condition with ID " + quoted(r.condition_id()));
  } else {
    return rejected(RefusalCode::kInvalidArgument, "name the Timer by condition index or ID");
  }
  if (index < 0 || index >= step->wait().conditions_size() ||
      !step->wait().conditions(index).has_timer())
    return rejected(RefusalCode::kNotFound,
                    step->step_execution_id() + " has no Timer condition " + std::to_string(index));
  if (step->conditions(index).fired())
    return rejected(RefusalCode::kFailedPrecondition, "the Timer already fired");
  remember_write(scope->run(), kSkipRequest, r.request_id());
  scope->fire_condition(*step, static_cast<uint32_t>(index), true);
  HistoryEvent event;
  event.set_kind(TIMER_SKIPPED);
  event.set_step_execution_id(step->step_execution_id());
  scope->add_event(std::move(event));
  scope->match_waits();
  scope->flush();
  return applied();
}

ApplyResult RecordApplier::skip_run_timer(const SkipTimer& r, RunEditor& scope) {
  const Run& run = scope.run();
  TimerFired fired;
  TimerKey* key = fired.mutable_key();
  key->set_flow_id(run.flow_id());
  key->set_run_id(run.run_id());
  std::string what;
  switch (r.run_timer()) {
    case RUN_TIMER_FLOW_TIMEOUT:
      if (run.options().timeout_ms() <= 0 || run.timeout_handled())
        return rejected(RefusalCode::kFailedPrecondition, run.timeout_handled()
                                                              ? "the flow timeout fired already"
                                                              : "the run has no flow timeout");
      key->set_kind(FLOW_TIMEOUT);
      fired.set_fire_at_ms(later_ms(run.start_ms(), run.options().timeout_ms()));
      what = "the flow timeout";
      break;
    case RUN_TIMER_START_DELAY:
      if (!run.start_pending())
        return rejected(RefusalCode::kFailedPrecondition, "the run's start delay is over");
      key->set_kind(START_DELAY);
      fired.set_fire_at_ms(later_ms(run.start_ms(), run.options().start_delay_ms()));
      what = "the start delay";
      break;
    default:
      return rejected(RefusalCode::kInvalidArgument,
                      "run_timer is not RUN_TIMER_FLOW_TIMEOUT or RUN_TIMER_START_DELAY");
  }
  if (!r.step_execution_id().empty())
    return rejected(RefusalCode::kInvalidArgument,
                    "a skip of " + what + " names no Step execution");
  remember_write(scope.run(), kSkipRequest, r.request_id());
  HistoryEvent event;
  event.set_kind(TIMER_SKIPPED);
  event.set_reason(what);
  scope.add_event(std::move(event));
  scope.flush();
  // As if its timer had fired now (the timer's own apply: policy, handler).
  fired.set_at_unix_ms(r.at_unix_ms());
  const ApplyResult result = timer_fired(fired);
  DEX_INVARIANT(result.kind == ApplyKind::kApplied, "a pending run timer fires");
  return result;
}

ApplyResult RecordApplier::set_attributes(const SetAttributes& r) {
  std::string why;
  auto scope = open(r.flow_id(), r.run_id(), r.at_unix_ms(), &why);
  if (!scope) return rejected(RefusalCode::kNotFound, why);
  // A repeat first: applying it again would put its values back over a Step's
  // later write (a client's retry after a lost answer).
  if (write_seen(scope->run(), kSetRequest, r.request_id()))
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "a repeated set request",
            scope->run().run_id()};
  if (auto s = check_request_id(r.request_id()); !s.is_ok()) return invalid(s);
  if (scope->run().status() != FLOW_RUNNING)
    return not_running(r.flow_id(), scope->run(), "Attributes are set");
  if (auto s = validate_attribute_writes(scope->declaration(), r.writes(), "writes"); !s.is_ok())
    return invalid(s);
  if (auto s = check_attribute_room(txn_, r.flow_id(), scope->run().run_id(),
                                    scope->run().attribute_count(), r.writes());
      !s.is_ok())
    return rejected(RefusalCode::kFailedPrecondition, s.message());
  ApplyResult result = applied();
  result.run_id = scope->run().run_id();
  if (r.writes().empty()) {
    result.kind = ApplyKind::kUnchanged;
    result.message = "no writes";
    return result;
  }
  remember_write(scope->run(), kSetRequest, r.request_id());
  HistoryEvent event;
  event.set_kind(ATTRIBUTES_SET);
  *event.mutable_attribute_writes() = r.writes();
  scope->add_event(std::move(event));
  scope->write_attributes(r.writes());
  scope->flush();
  return result;
}

ApplyResult RecordApplier::invoke_rpc(const InvokeRpc& r) {
  std::string why;
  auto scope = open(r.flow_id(), r.run_id(), r.at_unix_ms(), &why);
  if (!scope) return rejected(RefusalCode::kNotFound, why);
  const std::string run_id = scope->run().run_id();
  if (RpcExecution* old = scope->rpc(r.rpc_id()); old != nullptr) {
    if (!old->done())
      return {ApplyKind::kUnchanged, RefusalCode::kNone, "the RPC is running", run_id};
    if (old->outcome() == ATTEMPT_COMPLETED)
      return {ApplyKind::kUnchanged, RefusalCode::kNone, "the RPC completed", run_id};
  }
  if (scope->run().status() != FLOW_RUNNING)
    return not_running(r.flow_id(), scope->run(), "RPCs are invoked");
  // Like a name, but "req:" + a request ID of kNameBytesMax bytes fits.
  if (r.rpc_id().empty()) return rejected(RefusalCode::kInvalidArgument, "rpcId is empty");
  if (r.rpc_id().size() > kRpcIdBytesMax)
    return rejected(RefusalCode::kInvalidArgument,
                    "rpcId is longer than " + std::to_string(kRpcIdBytesMax) + " bytes");
  for (unsigned char c : r.rpc_id())  // bounded by kRpcIdBytesMax
    if (c < 0x20 || c == 0x7f)
      return rejected(RefusalCode::kInvalidArgument, "rpcId contains a control character");
  const RpcDeclaration* decl = find_rpc(scope->declaration(), r.name());
  if (decl == nullptr)
    return rejected(RefusalCode::kInvalidArgument, "RPC " + quoted(r.name()) +
                                                       " is not declared by Flow type " +
                                                       quoted(scope->run().flow_type()));
  if (auto s = validate_payload("the RPC input", r.input()); !s.is_ok()) return invalid(s);
  if (r.timeout_ms() < 1 || r.timeout_ms() > kRpcTimeoutMsMax)
    return rejected(RefusalCode::kInvalidArgument,
                    "the RPC timeout " + std::to_string(r.timeout_ms()) +
                        " ms is not between 1 and " + std::to_string(kRpcTimeoutMsMax) + " ms");
  if (r.request_id().size() > kNameBytesMax)
    return rejected(RefusalCode::kInvalidArgument,
                    "requestId is longer than " + std::to_string(kNameBytesMax) + " bytes");
  if (auto s = validate_call_lock_keys(r, *decl); !s.is_ok()) return invalid(s);
  scope->invoke_rpc(r, *decl);
  scope->flush();
  return {ApplyKind::kApplied, RefusalCode::kNone, "", run_id};
}

Status RecordApplier::check_sub_flows(const Run& parent, const StepExecution& step,
                                      const Wait& wait) {
  for (int i = 0; i < wait.conditions_size(); ++i) {  // bounded by kConditionsMax
    if (!wait.conditions(i).has_sub_flow()) continue;
    const SubFlowCondition& c = wait.conditions(i).sub_flow();
    const std::string where = "condition " + std::to_string(i) + " (SubFlow)";
    const std::string id =
        sub_flow_id(parent.flow_id(), step.step_execution_id(), static_cast<uint32_t>(i));
    if (auto s = validate_name(where + " derived Flow ID " + quoted(id), id); !s.is_ok()) return s;
    auto decl = txn_.declaration(c.flow_type(), 0);
    if (!decl)
      return Status::invalid_argument(where + " names Flow type " + quoted(c.flow_type()) +
                                      ", which no Worker declared");
    if (auto s = validate_start_for(decl->declaration(), c.options()); !s.is_ok())
      return Status::invalid_argument(where + ": " + s.message());
    if (auto s = validate_attribute_writes(decl->declaration(), c.options().initial_attributes(),
                                           where + " initialAttributes");
        !s.is_ok())
      return s;
    if (static_cast<size_t>(c.options().initial_attributes_size()) > kAttributesMax)
      return Status::invalid_argument(where + " has more than " + std::to_string(kAttributesMax) +
                                      " initialAttributes");
  }
  return Status::ok();
}

SubFlowChild RecordApplier::sub_flow(const Run& parent, const StepExecution& step, uint32_t index,
                                     const SubFlowCondition& c, int64_t at_ms) {
  SubFlowParent me;
  me.set_flow_id(parent.flow_id());
  me.set_run_id(parent.run_id());
  me.set_step_execution_id(step.step_execution_id());
  me.set_condition_index(index);
  SubFlowChild child;
  child.flow_id = sub_flow_id(parent.flow_id(), step.step_execution_id(), index);
  const std::string request = sub_flow_request_id(parent.run_id(), step.step_execution_id(), index);
  auto entry = txn_.flow_id(child.flow_id);
  // Attach when the same request started the latest run (whatever the policy),
  // else by the reuse policy and the latest run's status.
  bool attach = false;
  if (entry) {
    const bool running = entry->status() == FLOW_RUNNING;
    switch (c.reuse_policy()) {
      case SUB_FLOW_ATTACH:
        attach = true;
        break;
      case SUB_FLOW_ALWAYS_RESTART:
        attach = false;
        break;
      default:  // RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
        attach = running || entry->status() == FLOW_COMPLETED;
    }
    if (entry->request_id() == request) attach = true;
    // A run ID is used once per Flow ID: the one this start would take exists
    // (only the same parent run could have started it).
    if (txn_.run(child.flow_id, parent.run_id())) attach = true;
  }
  if (attach) {
    std::string why;
    auto scope = open(child.flow_id, entry->run_id(), at_ms, &why);
    DEX_INVARIANT(scope.has_value(), "a Flow ID's latest run exists");
    child.run_id = entry->run_id();
    child.attached = true;
    if (scope->run().status() == FLOW_RUNNING) {
      auto* parents = scope->run().mutable_parents();
      const bool known = std::any_of(parents->begin(), parents->end(), [&](const SubFlowParent& p) {
        return google::protobuf::util::MessageDifferencer::Equals(p, me);
      });
      if (!known) *parents->Add() = me;
      scope->flush();
    } else {
      // Closed: its result now (a pending Flow retry is not waited for; the
      // policy judged the status it closed with).
      child.closed = sub_flow_result(scope->run());
    }
    return child;
  }
  if (entry && entry->status() == FLOW_RUNNING) {  // ALWAYS_RESTART
    std::string why;
    auto old = open(child.flow_id, entry->run_id(), at_ms, &why);
    DEX_INVARIANT(old.has_value(), "a running run exists");
    old->close(FLOW_TERMINATED, "replaced by run " + parent.run_id() + " of SubFlow " +
                                    quoted(child.flow_id) + " (reuse policy ALWAYS_RESTART)");
    old->flush();
  }
  auto decl = txn_.declaration(c.flow_type(), 0);
  DEX_INVARIANT(decl.has_value(), "a SubFlow's type is declared (checked before)");
  StartFlow r;
  r.set_flow_id(child.flow_id);
  r.set_run_id(parent.run_id());  // unique per Flow ID: one start per parent run
  r.set_flow_type(c.flow_type());
  *r.mutable_input() = c.input();
  *r.mutable_options() = c.options();
  r.mutable_options()->set_request_id(request);
  r.set_at_unix_ms(at_ms);
  r.set_retention_ms(parent.retention_ms());
  Origin origin;
  *origin.parents.Add() = me;
  start_run(r, *decl, entry ? entry->runs() : 0, &origin);
  child.run_id = r.run_id();
  return child;
}

bool RecordApplier::tell_parents(const Run& run, int64_t at_ms) {
  bool changed = false;
  for (const auto& p : run.parents()) {  // bounded by the parents that attached
    std::string why;
    auto scope = open(p.flow_id(), continued_to(txn_, p.flow_id(), p.run_id()), at_ms, &why);
    if (!scope || !scope->sub_flow_closed(p, run)) continue;
    scope->flush();
    changed = true;
  }
  return changed;
}

void RecordApplier::notify_parents(size_t from) {
  // A parent's wait being met never closes a run, but a loop keeps it right if it did.
  for (size_t i = from; i < effects_.closed.size(); ++i) {
    const auto closed = effects_.closed[i];
    auto run = txn_.run(closed.flow_id, closed.run_id);
    DEX_INVARIANT(run.has_value(), "a closed run exists");
    if (run->parents().empty() || retry_pending(*run)) continue;
    tell_parents(*run, run->close_ms());
  }
}

ApplyResult RecordApplier::flow_retry(const TimerFired& r) {
  const TimerKey& key = r.key();
  auto run = txn_.run(key.flow_id(), key.run_id());
  if (!run || !retry_pending(*run) || run->retry_at_ms() != r.fire_at_ms())
    return stale("no such Flow retry");
  auto entry = txn_.flow_id(key.flow_id());
  if ((entry && entry->run_id() == run->next_run_id()) || !txn_.timer_set(key, r.fire_at_ms()))
    return stale("the Flow retry started, or was abandoned");
  txn_.delete_timer(key, r.fire_at_ms());
  if (!entry || entry->run_id() != run->run_id()) {
    // Another start took the Flow ID after this run closed (and that run may
    // be deleted already): no retry. This run ends its chain: the SubFlow
    // parents learn its end, and its retention starts now.
    tell_parents(*run, r.at_unix_ms());
    schedule_retention(txn_, effects_, *run, r.at_unix_ms());
    txn_.put_run(*run);
    return applied();
  }
  auto decl = txn_.declaration(run->flow_type(), 0);
  DEX_INVARIANT(decl.has_value(), "a run's Flow type is declared");
  StartFlow start;
  start.set_flow_id(run->flow_id());
  start.set_run_id(run->next_run_id());
  start.set_flow_type(run->flow_type());
  *start.mutable_input() = run->input();
  *start.mutable_options() = run->options();
  start.set_at_unix_ms(r.at_unix_ms());
  start.set_retention_ms(run->retention_ms());
  if (txn_.run(start.flow_id(), start.run_id())) return stale("the retry's run exists");
  Origin origin;
  origin.parents = run->parents();
  // A parent that continued as new since this run closed, its waiting
  // execution carried: its continuation.
  for (auto& p : origin.parents) {  // bounded by the parents that attached
    const std::string to = continued_to(txn_, p.flow_id(), p.run_id());
    if (to != p.run_id() && txn_.step(p.flow_id(), to, p.step_execution_id())) p.set_run_id(to);
  }
  origin.flow_attempt = std::max<uint32_t>(run->flow_attempt(), 1) + 1;
  origin.first_run_id = run->first_run_id().empty() ? run->run_id() : run->first_run_id();
  origin.first_start_ms = run->first_start_ms();
  origin.previous_run_id = run->run_id();
  start_run(start, *decl, entry->runs(), &origin);
  return applied();
}

ApplyResult RecordApplier::expire(const TimerFired& r) {
  const TimerKey& key = r.key();
  auto run = txn_.run(key.flow_id(), key.run_id());
  if (!run || run->status() == FLOW_RUNNING || run->expire_at_ms() != r.fire_at_ms() ||
      !txn_.timer_set(key, r.fire_at_ms()))
    return stale("no such retention timer");
  txn_.delete_timer(key, r.fire_at_ms());
  auto entry = txn_.flow_id(key.flow_id());
  bool entry_gone = false;
  std::string row_store;  // the store of the Flow ID's latest run, if it is deleted
  std::optional<Run> at = std::move(run);
  // Bounded by kRetryChainMax: a retry chain is as long as its runs.
  for (size_t hops = 0; at && hops < kRetryChainMax; ++hops) {
    DEX_INVARIANT(at->status() != FLOW_RUNNING, "a retry chain's earlier runs are closed");
    DEX_INVARIANT(at->run_id() == key.run_id() || at->retry_at_ms() != 0,
                  "an earlier run of a chain closed with its retry pending");
    txn_.delete_run(at->flow_id(), at->run_id());
    effects_.runs_deleted.push_back(RunKey{at->flow_id(), at->run_id()});
    if (entry && entry->run_id() == at->run_id()) {
      entry_gone = true;
      row_store = at->attribute_store();
    }
    if (at->previous_run_id().empty()) break;
    at = txn_.run(at->flow_id(), at->previous_run_id());
  }
  // The Flow ID is free again once its latest run is gone (a start with the
  // same request ID then starts anew).
  if (entry_gone) txn_.delete_flow_id(key.flow_id());
  // The Flow ID's row in its Attribute Store goes too, where the store is set
  // to delete rows (the sync decides; docs/attribute-store.md).
  if (!row_store.empty()) {
    SyncEntry gone;
    gone.set_flow_id(key.flow_id());
    gone.set_run_id(entry->run_id());
    gone.set_delete_row(true);
    gone.set_at_unix_ms(r.at_unix_ms());
    txn_.append_sync_entry(row_store, gone);
  }
  return applied();
}

ApplyResult RecordApplier::attribute_store_synced(const AttributeStoreSynced& r) {
  if (r.store().empty()) return invalid(Status::invalid_argument("the store is empty"));
  if (txn_.trim_sync_entries(r.store(), r.through_slot()) == 0)
    return {ApplyKind::kUnchanged, RefusalCode::kNone, "nothing to trim", ""};
  return applied();
}

void RecordApplier::assign(const TaskAssignment& a, int64_t at_ms) {
  if (a.task_id().empty() || a.worker_id().empty()) return;
  std::string why;
  auto scope = open(a.task().flow_id(), a.task().run_id(), at_ms, &why);
  if (!scope || scope->run().status() != FLOW_RUNNING) return;
  if (a.task().method() == RPC) {
    RpcExecution* rpc = scope->rpc(a.task().step_execution_id());
    if (rpc == nullptr || rpc->done() || rpc->method().state() != TASK_QUEUED ||
        a.task().attempt() != 1)
      return;
    scope->start_rpc_attempt(*rpc, a.task_id(), a.worker_id());
    scope->flush();
    return;
  }
  if (a.task().method() == ON_TIMEOUT) {
    const MethodState& handler = scope->run().timeout_handler();
    if (a.task().step_execution_id() != kTimeoutHandlerId || handler.state() != TASK_QUEUED ||
        handler.attempt() != a.task().attempt())
      return;
    scope->start_handler_attempt(a.task_id(), a.worker_id());
    scope->flush();
    return;
  }
  StepExecution* step = scope->step(a.task().step_execution_id());
  if (step == nullptr || step->method().state() != TASK_QUEUED ||
      step->method().method() != a.task().method() ||
      step->method().attempt() != a.task().attempt())
    return;
  scope->start_attempt(*step, a.task_id(), a.worker_id());
  scope->flush();
}

void RecordApplier::recover(int64_t at_ms) {
  // An RPC's caller waited on the old process: whatever its attempt is doing,
  // nobody waits for it any more. RPCs first, so a key one releases goes to
  // a waiting Step, never to an RPC that this recovery ends next.
  for (const auto& ref : txn_.open_rpcs()) {  // bounded by the open RPCs
    std::string why;
    auto scope = open(ref.flow_id(), ref.run_id(), at_ms, &why);
    DEX_INVARIANT(scope.has_value(), "an open RPC belongs to a run");
    // All of the run's at once: a key one releases goes to none of them.
    const std::vector<std::string> open_ids(scope->run().rpcs_open().begin(),
                                            scope->run().rpcs_open().end());
    if (open_ids.empty()) continue;    // ended with an earlier one of its run
    for (const auto& id : open_ids) {  // bounded by the run's open RPCs
      RpcExecution* rpc = scope->rpc(id);
      DEX_INVARIANT(rpc != nullptr && !rpc->done(), "an open RPC is stored, not done");
      scope->end_rpc(*rpc, ATTEMPT_NOT_COMPLETED,
                     "the RPC was interrupted: a new process took over the node");
    }
    scope->flush();
  }
  for (const auto& [task_id, ref] : txn_.running()) {  // bounded by the running attempts
    std::string why;
    auto scope = open(ref.flow_id(), ref.run_id(), at_ms, &why);
    DEX_INVARIANT(scope.has_value(), "a running attempt belongs to a run");
    // An earlier attempt's failure may have closed the run (and ended this one).
    if (scope->run().status() != FLOW_RUNNING || ref.method() == RPC) continue;
    if (ref.method() == ON_TIMEOUT) {
      const MethodState& handler = scope->run().timeout_handler();
      if (handler.state() != TASK_RUNNING || handler.task_id() != task_id) continue;
      scope->handler_failed(ATTEMPT_NOT_COMPLETED,
                            "the attempt was interrupted: a new process took over the node", false);
      scope->flush();
      continue;
    }
    StepExecution* step = scope->step(ref.step_execution_id());
    DEX_INVARIANT(step != nullptr, "a running attempt belongs to an execution");
    if (step->method().state() != TASK_RUNNING || step->method().task_id() != task_id) continue;
    scope->attempt_failed(*step, ATTEMPT_NOT_COMPLETED,
                          "the attempt was interrupted: a new process took over the node", false);
    scope->flush();
  }
}

}  // namespace

ApplyResult apply_record(FlowTxn& txn, const FlowRecord& record, Effects& effects,
                         SearchIndexing indexing) {
  txn.take_touched_runs();  // only this record's runs are indexed below
  RecordApplier apply(txn, effects);
  const size_t closed_before = effects.closed.size();
  ApplyResult result;
  switch (record.kind_case()) {
    case FlowRecord::kDeclareFlows:
      result = apply.declare(record.declare_flows());
      break;
    case FlowRecord::kStartFlow:
      result = apply.start(record.start_flow());
      break;
    case FlowRecord::kMethodResult:
      result = apply.method_result(record.method_result());
      break;
    case FlowRecord::kAttemptWithdrawn:
      result = apply.withdrawn(record.attempt_withdrawn());
      break;
    case FlowRecord::kTimerFired:
      result = apply.timer_fired(record.timer_fired());
      break;
    case FlowRecord::kPublish:
      result = apply.publish(record.publish());
      break;
    case FlowRecord::kStopFlow:
      result = apply.stop(record.stop_flow());
      break;
    case FlowRecord::kSkipTimer:
      result = apply.skip_timer(record.skip_timer());
      break;
    case FlowRecord::kSetAttributes:
      result = apply.set_attributes(record.set_attributes());
      break;
    case FlowRecord::kInvokeRpc:
      result = apply.invoke_rpc(record.invoke_rpc());
      break;
    case FlowRecord::kAttributeStoreSynced:
      result = apply.attribute_store_synced(record.attribute_store_synced());
      break;
    case FlowRecord::kTimeTravel:
      result = apply_time_travel(txn, effects, record.time_travel());
      break;
    case FlowRecord::kContinueAsNew:
      result = apply_continue_as_new(txn, effects, record.continue_as_new());
      break;
    case FlowRecord::kUpdateFlowConfig:
      result = apply_update_flow_config(txn, effects, record.update_flow_config());
      break;
    case FlowRecord::KIND_NOT_SET:
      result = {ApplyKind::kUnchanged, RefusalCode::kNone, "assignments only", ""};
      break;
  }
  apply.notify_parents(closed_before);
  // Before the assignments: an attempt they hand out would keep the run busy.
  // Every run the record wrote, not only those it wrote events to: an attempt
  // that fails into a retry (or a retry timer firing) writes no event, yet may
  // leave a pending continue-as-new's run quiet.
  for (const auto& [from, to] :
       continue_pending(txn, effects, txn.touched_runs(), record_time(record))) {
    if (record.has_continue_as_new() && result.kind == ApplyKind::kApplied &&
        from.run_id == record.continue_as_new().run_id())
      result.run_id = to;  // the client learns the new run
    if (record.has_update_flow_config() && result.kind == ApplyKind::kApplied &&
        from.run_id == record.update_flow_config().run_id())
      result.run_id = to;  // a lowered threshold continued the run at once
  }
  for (const auto& a : record.assignments()) apply.assign(a, record.at_unix_ms());
  txn.journal(record_time(record));
  if (indexing == SearchIndexing::kUpdate) update_search_index(txn);
  return result;
}

void recover_attempts(FlowTxn& txn, int64_t at_ms, Effects& effects) {
  txn.take_touched_runs();
  RecordApplier apply(txn, effects);
  const size_t closed_before = effects.closed.size();
  apply.recover(at_ms);
  apply.notify_parents(closed_before);
  // Recovery ends attempts into retries without an event: every run it wrote.
  continue_pending(txn, effects, txn.touched_runs(), at_ms);
  txn.journal(at_ms);
  update_search_index(txn);
}

std::vector<std::string> task_attribute_reads(FlowTxn& txn, const TaskRef& task) {
  std::vector<std::string> out;
  auto run = txn.run(task.flow_id(), task.run_id());
  if (!run) return out;
  auto decl = txn.declaration(run->flow_type(), run->declaration_version());
  if (!decl) return out;
  const google::protobuf::RepeatedPtrField<std::string>* reads = nullptr;
  if (task.method() == RPC) {
    auto rpc = txn.rpc(task.flow_id(), task.run_id(), task.step_execution_id());
    if (!rpc) return out;
    if (const RpcDeclaration* d = find_rpc(decl->declaration(), rpc->name()))
      reads = &d->attribute_reads();
  } else if (task.method() == ON_TIMEOUT) {
    reads = &decl->declaration().on_timeout().attribute_reads();
  } else {
    auto step = txn.step(task.flow_id(), task.run_id(), task.step_execution_id());
    if (!step) return out;
    if (const StepDeclaration* d = find_step(decl->declaration(), step->step_type()))
      reads = &d->attribute_reads();
  }
  if (reads != nullptr) out.assign(reads->begin(), reads->end());
  return out;
}

std::vector<Attribute> task_attributes(FlowTxn& txn, const TaskRef& task) {
  std::vector<Attribute> out;
  for (const auto& key : task_attribute_reads(txn, task)) {  // bounded by kAttributeKeysMax
    for (auto& a : txn.attributes(task.flow_id(), task.run_id(), key)) out.push_back(std::move(a));
  }
  return out;
}

}  // namespace dex::flow
