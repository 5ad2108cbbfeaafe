// The active process's side of dex Flows (docs/flow-rules.md, "The flow
// engine"): it turns client calls, Worker results, due timers and timeouts
// into flow records, appends them to the log, and hands the attempts they
// start to Workers. The rules that apply the records are src/flow/ (pure); the
// local store applies them (StateMachine); this class decides what to append.
//
// Parts: FlowProposer (appends records, answers callers once applied),
// the dispatcher (flow_dispatch.cc: Workers per Flow type, the FIFO of queued
// tasks, speculative assignments, sends, timeouts), the timer scan, and the
// reads (flow_reads.cc). Internal to src/engine; the API reaches it through
// engine.h.
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

// A long poll re-checks whether its caller went away at least this often.
inline constexpr Duration kWaitSlice = milliseconds(500);

// The deadline of a long poll asking for `timeout_ms` (0: 30 s; at most 60 s).
TimePoint long_poll_deadline(Clock& clock, int64_t timeout_ms);

class FlowEngine {
 public:
  // Threads that read tasks' blob values (fill_).
  static constexpr size_t kFillThreads = 2;
  using WorkerHandle = uint64_t;

  // `workers` (the engine's one list of Worker streams) must outlive this.
  FlowEngine(FlowEngineOptions options, SharedStore& store, LogWriter& log, Clock& clock,
             WorkerPool& workers);
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
  StatusOr<flow::FlowDescription> describe(const flow::FlowRef& ref);
  StatusOr<flow::GetFlowStateResponse> state(const flow::FlowRef& ref);
  StatusOr<flow::GetHistoryEventsResponse> history(const flow::GetHistoryEventsRequest& request);
  // Long polls: end when the awaited thing happened, at `deadline`, when
  // `cancelled()` turns true, or Stopped.
  StatusOr<flow::WaitForFlowResponse> wait_for_flow(const flow::FlowRef& ref, TimePoint deadline,
                                                    const std::function<bool()>& cancelled);
  StatusOr<flow::GetHistoryEventsResponse> wait_for_history_event(
      const flow::WaitForHistoryEventRequest& request, TimePoint deadline,
      const std::function<bool()>& cancelled);
  StatusOr<flow::WaitForStepCompletionResponse> wait_for_step(
      const flow::WaitForStepCompletionRequest& request, TimePoint deadline,
      const std::function<bool()>& cancelled);

  // Attributes and RPCs (flow_rpc.cc).
  StatusOr<flow::GetAttributesResponse> get_attributes(const flow::GetAttributesRequest& request);
  StatusOr<flow::SetAttributesResponse> set_attributes(const flow::SetAttributesRequest& request);
  StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(
      const flow::WaitForAttributeRequest& request, TimePoint deadline,
      const std::function<bool()>& cancelled);
  // Answers once the RPC's end is durable: its output, or why it did not
  // complete (DeadlineExceeded, Transient for NOT_COMPLETED, PreconditionFailed).
  StatusOr<flow::InvokeRpcResponse> invoke_rpc(const flow::InvokeRpcRequest& request,
                                               const std::function<bool()>& cancelled);

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
  // After the record applied: starts sending what it started, releases what
  // it did not.
  void settle(const std::vector<std::string>& reserved, bool applied);
  // Appends `record` (with assignments when `speculative`); `done` runs once
  // applied or refused. ASYNC attempts it assigned are sent at once.
  void propose(flow::FlowRecord record, bool speculative,
               std::function<void(StatusOr<flow::ApplyResult>)> done);
  // propose() of a record speculate() already assigned (`reserved`).
  void propose_speculated(flow::FlowRecord record, std::vector<std::string> reserved,
                          std::function<void(StatusOr<flow::ApplyResult>)> done);
  StatusOr<flow::ApplyResult> propose_and_wait(flow::FlowRecord record, bool speculative);
  // Sends the ASYNC tasks among `reserved` (built by speculate) now.
  void send_prebuilt(const std::vector<std::string>& reserved);
  // Hands a task to its Worker's stream (a task with blob values: on fill_,
  // once they are in place); a withdrawal if the stream is gone.
  void send(const std::string& task_id, const flow::FlowTask& task);
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
  template <typename T>
  StatusOr<std::optional<T>> wait_until(TimePoint deadline, const std::function<bool()>& cancelled,
                                        const std::function<StatusOr<std::optional<T>>()>& ready);
  Status refusal(const flow::ApplyResult& result) const;

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
  auto with_view(Fn fn) -> decltype(fn(std::declval<RocksKv&>()));
  std::vector<std::string> workers_for(const std::string& flow_type) const;
  int64_t now_ms() const { return options_.now_unix_ms(); }

  // Constant after construction.
  const FlowEngineOptions options_;
  SharedStore& store_;
  LogWriter& log_;  // only for lease_valid(): no task is handed out without a valid lease
  Clock& clock_;
  WorkerPool& pool_;  // the streams; which one gets what is dispatcher_'s
  FlowProposer proposer_;

  mutable std::mutex mu_;
  std::condition_variable sched_cv_;    // wake_ or stopped_
  std::condition_variable changed_cv_;  // version_ moved, or stopped_
  bool stopped_ = false;                // guarded by mu_
  bool log_stopped_ = false;            // guarded by mu_
  bool draining_ = false;               // guarded by mu_
  bool wake_ = false;                   // guarded by mu_
  uint64_t version_ = 0;                // guarded by mu_: bumped by every applied change
  uint64_t next_rpc_ = 1;               // guarded by mu_
  Dispatcher dispatcher_;               // guarded by mu_
  // ASYNC attempts' tasks as built with their assignment, sent once (by task ID).
  std::unordered_map<std::string, flow::FlowTask> prebuilt_;  // guarded by mu_
  std::deque<std::string> sends_;                             // guarded by mu_; started, to send
  std::thread scheduler_;
  // Puts tasks' blob values in place and hands them over: a read that misses
  // the cache is a GET, which must hold up neither the scheduler nor the log
  // writer's thread. Its jobs are bounded by the attempts being sent.
  JobPool fill_{kFillThreads};
  std::once_flag stop_once_;
};

template <typename Fn>
inline auto FlowEngine::with_view(Fn fn) -> decltype(fn(std::declval<RocksKv&>())) {
  std::shared_lock<std::shared_mutex> lock(store_.mu);
  if (!store_.sm) return Status::stopped("the engine stopped");
  auto view = store_.sm->flow_view();
  auto out = fn(*view);
  if (!view->status().is_ok()) return view->status();
  return out;
}

// Waits until `ready()` answers a value, the deadline passes (nullopt), the
// caller goes away or the engine stops.
template <typename T>
inline StatusOr<std::optional<T>> FlowEngine::wait_until(
    TimePoint deadline, const std::function<bool()>& cancelled,
    const std::function<StatusOr<std::optional<T>>()>& ready) {
  // Bounded by the deadline: each round waits at most kWaitSlice.
  while (true) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_ || log_stopped_)
        return Status::stopped("the engine stopped (the lease was released or lost)");
      seen = version_;
    }
    auto value = ready();
    if (!value.is_ok() || value->has_value()) return value;
    const TimePoint now = clock_.now();
    if (now >= deadline || (cancelled && cancelled())) return std::optional<T>();
    std::unique_lock<std::mutex> lock(mu_);
    clock_.wait_until(lock, changed_cv_, std::min(deadline, now + kWaitSlice),
                      [&] { return stopped_ || log_stopped_ || version_ != seen; });
  }
}

}  // namespace dex
