// The C++ worker SDK: a Worker hosts dex Flows (sdk/flow.h) over one
// WorkerTaskService.PollWorkerTask stream (proto/dex/api.proto): its hello
// declares every hosted Flow type (its Steps, Attributes and RPCs), and it
// runs the WaitFor, Execute and RPC tasks it receives on a bounded thread pool.
//
//   dex::Worker worker({.server_address = "127.0.0.1:8801"});
//   worker.host(std::make_shared<OrderProcessing>());  // a dex::Flow
//   dex::Status s = worker.run();  // until worker.shutdown()
//
// Guarantees: every result (a Wait, a decision or an error) is kept until the
// server acknowledges it with a ResultAck; when the stream breaks the Worker
// reconnects with exponential backoff and jitter and re-sends the
// unacknowledged results before anything else. At most max_concurrent_tasks
// tasks run at once, whatever the server sends.
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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "sdk/flow.h"
#include "sdk/tls_options.h"

namespace dex {

struct WorkerOptions {
  // The addresses (host:port) of the processes of one dex node: the active one
  // and its standbys, in any order. Empty: {server_address}. run() refuses a
  // list with a bad or repeated entry, naming it.
  std::vector<std::string> server_addresses;
  // The single-address convenience, used when server_addresses is empty.
  std::string server_address = "127.0.0.1:8801";
  // Sent as "authorization: Bearer <token>" when the stream opens (a token of
  // the worker role, docs/api.md "Access"). Empty: token_file's first line
  // (read again at each reconnect when it changed), else $DEX_TOKEN, else the
  // file $DEX_TOKEN_FILE names, else none. run() refuses a file it cannot read.
  std::string token;
  std::string token_file;
  // Stable across reconnects of one Worker process. Empty: "<hostname>-<pid>".
  std::string worker_id;
  // Also the size of the thread pool that runs WaitFor and Execute. Must be >= 1.
  uint32_t max_concurrent_tasks = 16;
  // Reconnect delays double from initial to max; each is jittered to [d/2, d].
  // With several addresses the delay comes after each full round over them.
  // The 1 s cap finds a restarted server within about a second; a refused
  // connection is one cheap round trip, so waiting longer saves nothing.
  Duration reconnect_backoff_initial = milliseconds(100);
  Duration reconnect_backoff_max = seconds(1);
  // After shutdown(): how long run() waits for running tasks to finish and
  // their results to be acknowledged. Past it, running tasks see
  // Context::cancelled() and their results are dropped (the server times
  // those attempts out).
  Duration shutdown_timeout = seconds(30);
  // TLS to every address (sdk/tls_options.h); off by default. run() refuses
  // files that cannot be used, naming them; a failed handshake is logged
  // with why (a wrong CA, an expired certificate, a wrong name, a client
  // certificate the server refused).
  TlsOptions tls;
};

namespace sdk_internal {
class WorkerCore;
}  // namespace sdk_internal

// Counters, for tests and monitoring.
struct WorkerStats {
  uint64_t streams_opened = 0;    // PollWorkerTask streams whose hello was sent
  uint64_t streams_accepted = 0;  // streams the server accepted (HelloAck received)
  uint64_t streams_refused = 0;   // streams that ended without a HelloAck (a standby, nothing
                                  // listening, no answer)
  uint64_t tasks_received = 0;    // FlowTasks received (duplicates excluded)
  uint64_t tasks_finished = 0;    // WaitFor, Execute and RPC calls that returned or threw
  uint64_t results_accepted = 0;  // ResultAck accepted = true
  uint64_t results_refused = 0;   // ResultAck accepted = false (dropped)
  uint64_t results_resent = 0;    // results sent again on a new stream
  uint64_t heartbeats_sent = 0;
  uint32_t running = 0;  // tasks running now
  // The address whose process accepted the current stream; empty while the
  // Worker is looking for the active process.
  std::string connected_address;
};

class Worker {
 public:
  explicit Worker(WorkerOptions options = {});
  // Calls shutdown() and waits for run() to return. Not safe to destroy from
  // a Step.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Hosts a dex Flow (sdk/flow.h): its declaration goes in every hello (the
  // server records it durably), and its WaitFor, Execute and RPC tasks run on
  // the pool, concurrently. Call before run(); a second Flow of the same type
  // replaces the first.
  void host(std::shared_ptr<Flow> flow);

  // Serves until shutdown(). Returns ok after a shutdown, InvalidArgument
  // when no Flow is hosted, a Flow is not valid (Flow::validate()) or the
  // options are not valid, or when the active
  // process refuses the hello (a Flow declaration it does not accept, named
  // in the message): then it stops as after shutdown(). Call once.
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
