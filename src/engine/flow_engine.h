// The active process's side of dex Flows (docs/flow-rules.md, "The flow
// engine"): it turns client calls, Worker results, due timers and timeouts
// into flow records, appends them to the log, and hands the attempts they
// start to Workers. The rules that apply the records are src/flow/ (pure); the
// local store applies them (StateMachine); this class decides what to append.
//
// It is the shell around the pure Dispatcher (dispatcher.h: which Worker gets
// which attempt, what is due): its scheduler thread, its mutex, the store
// reads and the sends (flow_dispatch.cc); FlowProposer appends records and
// answers callers once applied; the reads are flow_reads.cc; Attribute calls
// flow_attributes.cc. The long polls (FlowWaits) and the RPC invoker
// (RpcInvoker) are units of their own: this class only tells FlowWaits of
// changes, and the invoker calls propose_and_wait. Internal to src/engine; the
// API reaches it through engine.h.
//
// Threads: calls come from gRPC threads; on_applied() from the log writer's
// thread; one scheduler thread of its own. Lock order: SharedStore::mu, then
// mu_; never the reverse.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/job_pool.h"
#include "common/status.h"
#include "common/types.h"
#include "dex/api.pb.h"
#include "dex/flow_api.pb.h"
#include "engine/dispatcher.h"
#include "engine/flow_proposer.h"
#include "engine/flow_waits.h"
#include "engine/rocks_kv.h"
#include "engine/shared_store.h"
#include "engine/worker_pool.h"

namespace dex {

class BlobStore;
class LogWriter;
class WorkerSink;

struct FlowEngineOptions {
  Epoch epoch;
  std::function<int64_t()> now_unix_ms;  // wall clock written into records
  // Large values (flow_blobs.h): a Worker result's long values become blobs
  // before its record, a task's go back in place before it is sent. Null:
  // values stay in the records.
  BlobStore* blobs = nullptr;
  // Retention written into every start record (0: runs are kept forever).
  int64_t retention_ms = 0;
  // How long a vanished Worker's attempts wait for it (dispatcher.h).
  Duration worker_grace = seconds(5);
};

// The status a refused record's caller gets (InvalidArgument, NotFound, ...).
Status refusal(const flow::ApplyResult& result);

class FlowEngine {
 public:
  // Threads that read tasks' blob values (fill_).
  static constexpr size_t kFillThreads = 2;
  using WorkerHandle = uint64_t;

  // `workers` (the engine's one list of Worker streams) and `waits` (told of
  // every applied change) must outlive this.
  FlowEngine(FlowEngineOptions options, SharedStore& store, LogWriter& log, Clock& clock,
             WorkerPool& workers, FlowWaits& waits);
  ~FlowEngine();
  FlowEngine(const FlowEngine&) = delete;
  FlowEngine& operator=(const FlowEngine&) = delete;

  // After the replay through the EpochStart: loads the queued tasks and
  // starts the scheduler.
  Status start();
  // Stops the scheduler, fails waiting callers with Stopped. Idempotent.
  void stop();
  // The log or the store failed: nothing more will be applied.
  void log_stopped(const Status& why);
  void begin_drain();
  size_t attempts_running() const;

  // The log writer's thread, after the store applied a batch.
  void on_applied(std::vector<FlowRecordResult>& results, const flow::Effects& effects);

  // ------------------------------------------------------- dex.FlowService
  StatusOr<flow::StartFlowResponse> start_flow(const flow::StartFlowRequest& request);
  Status stop_flow(const flow::StopFlowRequest& request);
  Status publish(const flow::PublishToChannelRequest& request);
  Status skip_timer(const flow::SkipTimerRequest& request);
  // docs/time-travel.md; a dry run applies the record to a scratch copy of
  // the store and answers the new run from it.
  StatusOr<flow::TimeTravelResponse> time_travel(const flow::TimeTravelRequest& request);
  StatusOr<flow::TriggerContinueAsNewResponse> continue_as_new(
      const flow::TriggerContinueAsNewRequest& request);
  // docs/flow-rules.md, "FlowConfig": answers the run's effective config after.
  StatusOr<flow::UpdateFlowConfigResponse> update_flow_config(
      const flow::UpdateFlowConfigRequest& request);
  StatusOr<flow::FlowDescription> describe(const flow::FlowRef& ref);
  StatusOr<flow::GetFlowStateResponse> state(const flow::FlowRef& ref);
  StatusOr<flow::GetHistoryEventsResponse> history(const flow::GetHistoryEventsRequest& request);
  // Attributes (flow_attributes.cc).
  StatusOr<flow::GetAttributesResponse> get_attributes(const flow::GetAttributesRequest& request);
  // flow_search.cc: a search over one consistent view of the store.
  StatusOr<flow::SearchFlowsResponse> search_flows(const flow::SearchFlowsRequest& request);
  // Query completion, over the same kind of view.
  StatusOr<flow::ListSearchKeysResponse> list_search_keys(
      const flow::ListSearchKeysRequest& request);
  StatusOr<flow::ListSearchValuesResponse> list_search_values(
      const flow::ListSearchValuesRequest& request);
  StatusOr<flow::SetAttributesResponse> set_attributes(const flow::SetAttributesRequest& request);

  // Appends `record` (with assignments of the attempts it queues when
  // `speculative`) and answers the rules' verdict once it applied; Stopped
  // when the engine or its log stopped first. The RPC invoker's way in.
  StatusOr<flow::ApplyResult> propose_and_wait(flow::FlowRecord record, bool speculative);

  // ------------------------------------------------------------ Worker streams
  // Records the hello's declarations (durably, before it returns) and lets the
  // stream take tasks of those Flow types.
  Status connect(WorkerHandle handle, const WorkerHello& hello, std::shared_ptr<WorkerSink> sink);
  void disconnect(WorkerHandle handle);
  // False when the task is not a running flow attempt of this process.
  bool knows_task(const std::string& task_id) const;
  HeartbeatAck heartbeat(const TaskHeartbeat& heartbeat);
  // Resolves once the result is durable (accepted) or refused.
  std::future<ResultAck> complete(WorkerHandle handle, const flow::FlowTaskResult& result);

 private:
  // Assigns the attempts `record` will queue to free Workers (docs/flow-rules.md,
  // "One batch per Step transition"), applying it to a scratch copy of the
  // store first. Fills `reserved` with the task ids reserved (mu_ not held).
  // Returns the rules' verdict on the record as the scratch copy saw it.
  flow::ApplyResult speculate(flow::FlowRecord& record, std::vector<std::string>& reserved);
  // A dry run of a TimeTravel record: applied to a scratch copy, never logged.
  StatusOr<flow::TimeTravelResponse> time_travel_preview(const flow::FlowRecord& record);
  // The value budget of a GetFlowState (and a dry run's start): kStateValueBytesMax,
  // or half the blob store's message limit when that is less.
  uint64_t state_values_max() const;
  // After the record applied or was refused: releases the attempts it did
  // not start (what it started is sent from on_applied).
  void settle(const std::vector<std::string>& reserved);
  // Appends `record` (with assignments when `speculative`); `done` runs once
  // applied or refused. ASYNC attempts it assigned are sent at once.
  void propose(flow::FlowRecord record, bool speculative,
               std::function<void(StatusOr<flow::ApplyResult>)> done);
  // propose() of a record speculate() already assigned (`reserved`).
  void propose_speculated(flow::FlowRecord record, std::vector<std::string> reserved,
                          std::function<void(StatusOr<flow::ApplyResult>)> done);
  // Sends the ASYNC tasks among `reserved` (built by speculate) now.
  void send_prebuilt(const std::vector<std::string>& reserved);
  // Hands a task to its Worker's stream (a task with blob values: on fill_,
  // once they are in place); a withdrawal if the stream is gone. `early`: it
  // was built before its record applied (Dispatcher::begin_send).
  void send(const std::string& task_id, const flow::FlowTask& task, bool early = false);
  // A Worker's result: proposed, or held while its task waits for its check
  // (Dispatcher::result_waits), or answered stale.
  void handle_result(const flow::FlowTaskResult& result,
                     std::shared_ptr<std::promise<ResultAck>> promise);
  // Checks the tasks sent early whose records applied (checks_) against the
  // store: the same inputs, their results count; other inputs (the record
  // applied otherwise than its view said), the attempt is withdrawn and runs
  // again built from the store, and its results are answered stale.
  void check_early();
  // Hands the results held for `task_id` back to handle_result (on the
  // scheduler, outside mu_). REQUIRES: mu_ held.
  void unhold(const std::string& task_id);
  void handle_unheld();
  // Answers every held result with `why` (the engine or its log stopped).
  void fail_held(const Status& why);
  // The hand-over itself: `sink` null or broken withdraws the attempt.
  void deliver(const std::string& task_id, const std::shared_ptr<WorkerSink>& sink,
               const flow::FlowTask& task);
  // Large values (flow_blobs.cc). Stores the long values of a Worker's result
  // as blobs; on failure the result becomes the attempt's failure and the
  // reason is returned (empty: stored).
  std::string store_values(const std::string& flow_id, flow::MethodResult& m);
  // Puts the task's blob values back in place (options_.blobs is set); false
  // when one cannot be read (the attempt is then ending FAILED).
  bool put_values_back(const std::string& task_id, flow::FlowTask& task);

  void run_scheduler();
  void send_started();
  // Proposes the due timers; returns when the next one is due (wall ms).
  std::optional<int64_t> fire_timers();
  // Ends the attempts the dispatcher says are due (timeouts, Workers gone).
  void end_due_attempts();
  void dispatch();
  void withdraw(const std::string& task_id);
  void propose_ending(const Dispatcher::Ending& ending);
  // Whether attempts may be handed out now. REQUIRES: mu_ held.
  Dispatcher::Gate gate() const;
  // The store's view (null once stopped), under store_.mu shared.
  template <typename Fn>
  auto with_view(Fn fn) -> decltype(fn(std::declval<RocksKv&>())) {
    return dex::with_view(store_, std::move(fn));
  }
  std::vector<std::string> workers_for(const std::string& flow_type) const;
  int64_t now_ms() const { return options_.now_unix_ms(); }

  // Constant after construction.
  const FlowEngineOptions options_;
  SharedStore& store_;
  LogWriter& log_;  // only for lease_valid(): no task is handed out without a valid lease
  Clock& clock_;
  WorkerPool& pool_;  // the streams; which one gets what is dispatcher_'s
  FlowWaits& waits_;  // the long polls, told of every applied change
  FlowProposer proposer_;

  mutable std::mutex mu_;
  std::condition_variable sched_cv_;  // wake_ or stopped_
  bool stopped_ = false;              // guarded by mu_
  bool log_stopped_ = false;          // guarded by mu_
  bool draining_ = false;             // guarded by mu_
  bool wake_ = false;                 // guarded by mu_
  Dispatcher dispatcher_;             // guarded by mu_
  // ASYNC attempts' tasks as built with their assignment, sent once (by task ID).
  std::unordered_map<std::string, flow::FlowTask> prebuilt_;  // guarded by mu_
  std::deque<std::string> sends_;                             // guarded by mu_; started, to send
  // Tasks sent early (by task ID) as sent, until checked against the store.
  std::unordered_map<std::string, flow::FlowTask> early_;  // guarded by mu_
  std::deque<std::string> checks_;  // guarded by mu_; early tasks whose records applied
  struct HeldResult {
    flow::FlowTaskResult result;
    std::shared_ptr<std::promise<ResultAck>> promise;
  };
  // Results of early tasks not checked yet (Dispatcher::result_waits), and
  // those released to be handled again. Bounded by the results Workers send
  // for the attempts held.
  std::unordered_map<std::string, std::vector<HeldResult>> held_;  // guarded by mu_
  std::deque<HeldResult> unheld_;                                  // guarded by mu_
  std::thread scheduler_;
  // Puts tasks' blob values in place and hands them over: a read that misses
  // the cache is a GET, which must hold up neither the scheduler nor the log
  // writer's thread. Its jobs are bounded by the attempts being sent.
  JobPool fill_{kFillThreads};
  std::once_flag stop_once_;
};

}  // namespace dex
