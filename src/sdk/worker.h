// The C++ worker SDK: a Worker serves task queues over one
// WorkerTaskService.PollWorkerTask stream (proto/dex/api.proto) and runs the
// Step tasks it receives on a bounded thread pool.
//
//   dex::Worker worker({.server_address = "127.0.0.1:8801"});
//   worker.handle("example", [](dex::TaskContext& task) -> nlohmann::json {
//     if (task.step() == "fetch") return {{"items", 3}};
//     throw dex::StepFailure("unknown step " + task.step(), /*non_retryable=*/true);
//   });
//   dex::Status s = worker.run();  // until worker.shutdown()
//
// Guarantees: every final result (output or failure) is kept until the server
// acknowledges it with a ResultAck; when the stream breaks the Worker
// reconnects with exponential backoff and jitter and re-sends the
// unacknowledged results before anything else. At most max_concurrent_tasks
// handlers run at once, whatever the server sends.
//
// Several addresses (the active process of a node and its standbys, any
// order: {.server_addresses = {"10.0.0.1:8801", "10.0.0.2:8801"}}): each round
// the Worker asks every address's gRPC health at once and tries the one
// SERVING first, skipping one that does not answer while another does (a
// frozen process); a standby refuses the stream with UNAVAILABLE. It backs
// off only between rounds, and searches again whenever the stream breaks or
// is silent for 3 s (the server pings every second). src/sdk/README.md,
// "Frozen processes", has every bound.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "sdk/flow.h"

namespace dex {

struct WorkerOptions {
  // The addresses (host:port) of the processes of one dex node: the active one
  // and its standbys, in any order. Empty: {server_address}. run() refuses a
  // list with a bad or repeated entry, naming it.
  std::vector<std::string> server_addresses;
  // The single-address convenience, used when server_addresses is empty.
  std::string server_address = "127.0.0.1:8801";
  // Stable across reconnects of one Worker process. Empty: "<hostname>-<pid>".
  std::string worker_id;
  // Also the size of the handler thread pool. Must be >= 1.
  uint32_t max_concurrent_tasks = 16;
  // Reconnect delays double from initial to max; each is jittered to [d/2, d].
  // With several addresses the delay comes after each full round over them.
  // The 1 s cap finds a restarted server within about a second; a refused
  // connection is one cheap round trip, so waiting longer saves nothing.
  Duration reconnect_backoff_initial = milliseconds(100);
  Duration reconnect_backoff_max = seconds(1);
  // After shutdown(): how long run() waits for running tasks to finish and
  // their results to be acknowledged. Past it, running tasks see cancelled()
  // and their results are dropped (the server times those attempts out).
  Duration shutdown_timeout = seconds(30);
};

// Thrown by a handler to fail the attempt with `message`. A non-retryable
// failure fails the flow at once; a retryable one consumes an attempt and the
// Step is retried per its retry policy. Any other exception thrown by a
// handler is a retryable failure whose message is its what().
class StepFailure : public std::runtime_error {
 public:
  explicit StepFailure(const std::string& message, bool non_retryable = false)
      : std::runtime_error(message), non_retryable_(non_retryable) {}
  bool non_retryable() const { return non_retryable_; }

 private:
  bool non_retryable_;
};

namespace sdk_internal {
struct TaskState;
class WorkerCore;
}  // namespace sdk_internal

// What a handler sees of one attempt. Valid only during the handler call;
// heartbeat() and cancelled() are thread-safe.
class TaskContext {
 public:
  const std::string& task_id() const;
  const std::string& flow_id() const;
  const std::string& flow_type() const;
  const std::string& step() const;
  const std::string& task_queue() const;
  uint32_t attempt() const;  // from 1
  // {"flow": <flow input>, "steps": {<dependency>: <its output>}}
  const nlohmann::json& input() const;
  // input()["flow"], or null when absent.
  const nlohmann::json& flow_input() const;
  // Tells the server the attempt is alive (needed when the Step has a
  // heartbeat timeout); `details` travel as JSON text. Dropped while the
  // stream is down.
  void heartbeat(const nlohmann::json& details = nullptr);
  // True once the server asked to stop (the attempt ended or its flow was
  // cancelled, seen in a HeartbeatAck), the start-to-close timeout passed, or
  // the Worker's shutdown timeout passed. Long handlers should poll it.
  bool cancelled() const;

  TaskContext(std::shared_ptr<sdk_internal::TaskState> state, sdk_internal::WorkerCore* core);

 private:
  std::shared_ptr<sdk_internal::TaskState> state_;
  sdk_internal::WorkerCore* core_;
};

// Counters, for tests and monitoring.
struct WorkerStats {
  uint64_t streams_opened = 0;    // PollWorkerTask streams whose hello was sent
  uint64_t streams_accepted = 0;  // streams the server accepted (HelloAck received)
  uint64_t streams_refused = 0;   // streams that ended without a HelloAck (a standby, nothing
                                  // listening, no answer)
  uint64_t tasks_received = 0;    // StepTasks received (duplicates excluded)
  uint64_t tasks_finished = 0;    // handler calls that returned or threw
  uint64_t results_accepted = 0;  // ResultAck accepted = true
  uint64_t results_refused = 0;   // ResultAck accepted = false (dropped)
  uint64_t results_resent = 0;    // results sent again on a new stream
  uint64_t heartbeats_sent = 0;
  uint32_t running = 0;  // handlers running now
  // The address whose process accepted the current stream; empty while the
  // Worker is looking for the active process.
  std::string connected_address;
};

class Worker {
 public:
  using Handler = std::function<nlohmann::json(TaskContext&)>;

  explicit Worker(WorkerOptions options = {});
  // Calls shutdown() and waits for run() to return. Not safe to destroy from
  // a handler.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Serves `task_queue` with `handler` (called on pool threads, concurrently).
  // Call before run(); a second handler for the same queue replaces the first.
  void handle(const std::string& task_queue, Handler handler);
  // Hosts a dex Flow (sdk/flow.h): its declaration goes in every hello (the
  // server records it durably), and its WaitFor and Execute tasks run on the
  // pool. Call before run(); a second Flow of the same type replaces the first.
  void host(std::shared_ptr<sdk::Flow> flow);
  // A flow type definition (JSON or YAML text) that run() registers through
  // FlowService before it opens the stream, retrying while the server is
  // unreachable. Call before run().
  void register_flow_type(std::string definition);

  // Serves until shutdown(). Returns ok after a shutdown, InvalidArgument
  // when no handler was given or a flow type was refused. Call once.
  Status run();
  // Graceful: stops taking tasks, lets running and queued ones finish, sends
  // their results and waits for their acks, bounded by shutdown_timeout.
  // Tasks that arrive after shutdown() are neither run nor answered while
  // that lasts (an answer would free capacity for the next task, and each
  // answer costs the Step an attempt); at the end they are handed back as
  // retryable failures, waiting up to 1 s more for those acks. Returns at
  // once; thread-safe; not async-signal-safe (call it from a signal-waiting
  // thread).
  void shutdown();

  const std::string& worker_id() const;
  WorkerStats stats() const;

 private:
  std::unique_ptr<sdk_internal::WorkerCore> core_;
};

// "<hostname>-<pid>": the default worker ID.
std::string default_worker_id();

}  // namespace dex
