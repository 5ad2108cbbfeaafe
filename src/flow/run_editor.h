// The operations on one run that the flow rules compose (docs/flow-rules.md):
// creating Step executions, queueing and ending method attempts, retries and
// failure policies, matching waits, closing the run. Internal to src/flow/.
//
// A RunEditor loads the run, its declaration version and the Step executions it
// touches, changes them in memory and writes them back in flush(). Callers
// validate a record completely before they change anything, so a refused
// record writes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

#include "dex/flow_records.pb.h"
#include "flow/apply_result.h"
#include "flow/effects.h"
#include "flow/flow_txn.h"
#include "flow/limits.h"

namespace dex::flow {

// A SubFlow condition's child as the apply that records the wait left it.
struct SubFlowChild {
  std::string flow_id, run_id;
  bool attached = false;                // the run existed (a reuse policy attached to it)
  std::optional<SubFlowResult> closed;  // attached to a run closed for good: met at once
};

class RunEditor {
 public:
  // `run` must exist with its declaration version; at_ms is the record's time.
  RunEditor(FlowTxn& txn, Effects& effects, Run run, FlowDeclaration declaration, int64_t at_ms);

  Run& run() { return run_; }
  const FlowDeclaration& declaration() const { return declaration_; }
  int64_t at_ms() const { return at_ms_; }
  // A Step execution of this run, loaded once; nullptr if it does not exist.
  StepExecution* step(std::string_view step_execution_id);
  // An RPC of this run, loaded once; nullptr if it does not exist.
  RpcExecution* rpc(std::string_view rpc_id);

  // Writes Attributes in order (validated, and their room checked with check_attribute_room,
  // before).
  // The writes of synced Attributes also go to the run's Attribute Store as one
  // SyncEntry (docs/attribute-store.md).
  void write_attributes(const google::protobuf::RepeatedPtrField<Attribute>& writes);
  // Whether `write` goes to the run's Attribute Store: the run has one and the
  // declaration marks the (plain) Attribute sync.
  bool syncs(const Attribute& write) const;

  // A new RPC (replacing a done one with its ID): its attempt is queued after
  // its lock keys, its deadline timer set.
  void invoke_rpc(const InvokeRpc& record, const RpcDeclaration& declaration);
  void start_rpc_attempt(RpcExecution& rpc, const std::string& task_id,
                         const std::string& worker_id);
  void withdraw_rpc(RpcExecution& rpc);
  // The RPC's running attempt completed with `result` (validated before).
  void complete_rpc(RpcExecution& rpc, const MethodResult& result);
  // The RPC ends not COMPLETED (whatever its attempt is doing).
  void end_rpc(RpcExecution& rpc, AttemptOutcome outcome, const std::string& error);

  // A new Step execution: its first method's attempt 1 is queued.
  StepExecution& create_step(const std::string& step_type, const Payload& input,
                             const StepOptions* override_options, const std::string& parent,
                             const std::string& recovery_error);
  // The method's running attempt ended with `result`: the result's effects
  // (publishes, wait, decision) or the failure rules.
  // `children`: the SubFlow conditions' children by condition index, started
  // or attached to before (Apply::sub_flow).
  void complete_wait_for(StepExecution& step, const MethodResult& result,
                         const std::map<uint32_t, SubFlowChild>& children);
  void complete_execute(StepExecution& step, const MethodResult& result);
  // `retry_after_ms` (> 0): the Worker's delay before the next attempt, in
  // place of the policy's backoff (clamped to kRetryAfterMaxMs).
  void attempt_failed(StepExecution& step, AttemptOutcome outcome, const std::string& error,
                      bool non_retryable, int64_t retry_after_ms = 0);
  // The retry timer of a method in BACKOFF fired: queue the next attempt.
  void retry_due(StepExecution& step);
  // Hands a queued attempt to a Worker.
  void start_attempt(StepExecution& step, const std::string& task_id, const std::string& worker_id);
  // A running attempt never reached its Worker: queued again, same number.
  void withdraw_attempt(StepExecution& step);
  // A Timer condition's time came (skipped: SkipTimer).
  void fire_condition(StepExecution& step, uint32_t index, bool skipped);
  // A SubFlow condition's child closed for good: the condition is met. False
  // when the condition no longer waits for that child (nothing changes).
  bool sub_flow_closed(const SubFlowParent& parent, const Run& child);

  // The timeout handler (timeout_handler.cc; docs/flow-rules.md, "Timeout
  // handler"). The flow timeout fired under TIMEOUT_HANDLER and the run's
  // declaration has a handler: its attempt 1 is queued (`why`: the timeout).
  void start_timeout_handler(const std::string& why);
  void start_handler_attempt(const std::string& task_id, const std::string& worker_id);
  // Its running attempt never reached its Worker: queued again, same number.
  void withdraw_handler();
  // Its running attempt completed with `result` (validated before): the
  // decision applies like an Execute's.
  void complete_handler(const MethodResult& result);
  // Its attempt ended otherwise: the next attempt, or (none left) the run
  // ends TIMED_OUT.
  void handler_failed(AttemptOutcome outcome, const std::string& error, bool non_retryable,
                      int64_t retry_after_ms = 0);
  // Its retry timer fired: the next attempt is queued.
  void handler_retry_due();

  // Time travel (run_revive.cc): an execution of the image the run starts
  // from, as it was at the point (`point_ms`), brought back to life in this
  // run. An active one runs its method again from attempt 1 (after its lock
  // keys); a waiting one keeps its wait, each Timer with the time it had left,
  // each SubFlow child still running reporting to this run instead of
  // `from_run_id`, one closed since met with its result now.
  // Call in the run's active order, then match_waits().
  void revive_step(StepExecution step, int64_t point_ms, const std::string& from_run_id);
  // revive_step's SubFlow condition `index`: its child reports here, or met.
  void revive_sub_flow(StepExecution& s, uint32_t index, const std::string& from_run_id);
  // The timeout handler was under way at the point: its attempt 1 is queued.
  void revive_handler();
  // Continue-as-new (continue_as_new.cc): an active execution of the run this
  // one continues, carried as it stood (no attempt of it ran): a queued or
  // locked method is queued again with its attempt number, a backoff keeps
  // its retry time, a wait its Timers' due times; a running SubFlow child it
  // waits for reports to this run. Call in the run's active order, then flush().
  void carry_step(StepExecution step, const std::string& from_run_id);
  // Asks that the run continue as new once no attempt of it runs (no-op when
  // one is pending, or the run is closed or completes gracefully).
  void request_continue_as_new(const std::string& reason);

  void append_publishes(const google::protobuf::RepeatedPtrField<Publish>& publishes);
  // Matches every waiting execution, the first to wait first.
  void match_waits();
  // Creates the start Step (after the start delay, if any).
  void create_start_step();
  // Ends the run (no-op when it is closed): every active execution is canceled.
  // A FAILED or TIMED_OUT end with a Flow retry policy schedules the next run
  // (unless `by_client`: a StopFlow never retries).
  void close(FlowStatus status, const std::string& reason, bool by_client = false);
  void add_event(HistoryEvent event);
  // What every completed WaitFor or Execute does first: `event` (its kind's
  // own fields set) recorded with the attempt and the Attribute writes, the
  // method cleared, the writes and publishes applied.
  void complete_method(StepExecution& step, const MethodResult& result, HistoryKind kind,
                       HistoryEvent event);

  // Hands lock keys to the waiters that can now have all theirs, then writes
  // everything changed. Call once, last.
  void flush();

 private:
  // A SubFlow condition's child that has not closed for good, as Execute sees it.
  SubFlowResult running_child(const std::string& flow_id, const std::string& run_id);
  TaskRef task_ref(const StepExecution& step) const;
  TaskRef rpc_ref(const RpcExecution& rpc) const;
  // What metrics label an attempt of `ref` with: its Step type, its RPC's
  // name, "" for the timeout handler (Effects::Started, Ended).
  std::string type_of(const TaskRef& ref) const;
  // Queues the method's attempt: first its lock keys (acquire false: it holds
  // them already), or TASK_LOCKED behind the keys' holders and earlier waiters.
  void queue_method(StepExecution& step, Method method, uint32_t attempt, bool acquire = true);
  void enqueue(MethodState& state, const TaskRef& ref, Durability durability);
  void start(MethodState& state, const TaskRef& ref, const std::string& task_id,
             const std::string& worker_id);
  // True when `holder` now holds every key; false when it waits (a LockWaiter).
  bool take_locks(const std::string& holder, Method method, uint32_t attempt,
                  const google::protobuf::RepeatedPtrField<std::string>& keys);
  void release_locks(const std::string& holder, Method method, uint32_t attempt);
  void drop_waiter(const std::string& holder, Method method);
  void grant_waiters();
  void lock_event(HistoryKind kind, const std::string& holder, Method method, uint32_t attempt,
                  const std::vector<std::string>& keys);
  void end_rpc_attempt(RpcExecution& rpc, AttemptOutcome outcome);
  // Ends whatever the current method is doing (running, queued, backoff).
  void clear_method(StepExecution& step, AttemptOutcome running_outcome);
  // The same for any method's state; `ref` names its attempt (and its holder).
  void clear_state(MethodState& state, const TaskRef& ref, AttemptOutcome running_outcome);
  // When the attempt after `attempt` may start (its retry policy), or
  // nullopt when none is left.
  std::optional<int64_t> next_attempt_at(const MethodState& state, const RetryPolicy& retry,
                                         uint32_t attempt, bool non_retryable,
                                         int64_t retry_after_ms = 0) const;
  // The next attempt waits for its retry timer (TASK_BACKOFF).
  void back_off(MethodState& state, const std::string& holder, int64_t retry_at);
  // The FlowConfig thresholds the history passed, as a reason; "" if none.
  std::string history_threshold_passed() const;
  TaskRef handler_ref() const;
  void queue_handler(uint32_t attempt);
  void finish_step(StepExecution& step, Phase phase);
  // Cancels what the decision names. `parent`: the decider's parent, whose
  // other children are its siblings; nullptr for the timeout handler, whose
  // siblings are every active execution.
  void cancel_steps(const std::string& self, const std::string* parent,
                    const StepDecision& decision);
  // The decision's kind, by the execution `decider` (of `step_type`; the
  // timeout handler: "timeout" and no type): new executions name it as
  // their parent, outputs name it.
  void apply_decision(const std::string& step_type, const std::string& decider,
                      const StepDecision& decision);
  void maybe_complete();
  void consume(StepExecution& step, uint32_t index, uint64_t count);
  bool channels_empty(const google::protobuf::RepeatedPtrField<ChannelRef>& channels);
  void put_timer(const TimerKey& key, int64_t fire_at_ms);
  TimerKey timer_key(TimerKind kind) const;
  uint64_t queued_count(const QueueKey& key);

  FlowTxn& txn_;
  Effects& effects_;
  Run run_;
  FlowDeclaration declaration_;
  const int64_t at_ms_;
  std::map<std::string, StepExecution, std::less<>> steps_;  // loaded or created
  std::map<std::string, RpcExecution, std::less<>> rpcs_;    // loaded or created
  bool events_added_ = false;
  bool attributes_changed_ = false;
};

// Whether `writes` (validated) leave the run within kAttributesMax stored
// instances, counting from `count` stored now.
Status check_attribute_room(FlowTxn& txn, const std::string& flow_id, const std::string& run_id,
                            uint32_t count,
                            const google::protobuf::RepeatedPtrField<Attribute>& writes);
const char* flow_status_name(FlowStatus status);
// The RPC ID prefix of Step executions an RPC creates: "rpc:<name>".
std::string rpc_parent(std::string_view rpc_name);

// The Step execution ID of the n-th execution of a type: "<type>-<n>".
std::string step_execution_id(std::string_view step_type, uint32_t n);
// A SubFlow's derived Flow ID: "<parent flow id>/<step execution id>/<index>".
std::string sub_flow_id(std::string_view parent_flow_id, std::string_view step_execution_id,
                        uint32_t index);
// Its derived request ID: the parent run, execution and index.
std::string sub_flow_request_id(std::string_view parent_run_id, std::string_view step_execution_id,
                                uint32_t index);
// A Flow retry's run ID: "<first run id>.<attempt>".
std::string retry_run_id(std::string_view first_run_id, uint32_t attempt);
// A run as a SubFlow result (outputs and reason once closed).
SubFlowResult sub_flow_result(const Run& run);
// The run `run_id` of `flow_id` is, or continues as (continue-as-new), now:
// follows next_run_id while a run closed CONTINUED_AS_NEW (bounded by
// kRetryChainMax). A SubFlow child tells the parent run it names this way.
std::string continued_to(FlowTxn& txn, const std::string& flow_id, const std::string& run_id);
// A SubFlow condition's child as it is now: the run its wait names, followed
// along its Flow retries and continuations (bounded by kRetryChainMax);
// nullopt if that run is gone (retention).
std::optional<Run> current_child(FlowTxn& txn, const ConditionState& c);
// Whether a closed run waits for its Flow retry (its SubFlow parents wait too).
bool retry_pending(const Run& run);
// The longest retry chain walked in one apply (following next or previous runs).
inline constexpr size_t kRetryChainMax = 10'000;
// A run closed for good (`closed_ms`): its RETENTION timer, when it has a
// retention (docs/flow-rules.md, "Retention"). Writes the timer, not the run.
void schedule_retention(FlowTxn& txn, Effects& effects, Run& run, int64_t closed_ms);
// "the flow timeout of <n> ms passed": why a run timed out.
std::string flow_timeout_reason(const Run& run);

}  // namespace dex::flow
