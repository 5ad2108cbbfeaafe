// Node: the I/O shell around NodeMachine (docs/node.md). It performs the
// machine's commands — acquire the lease (LeaseKeeper), follow the log when
// hot (Follower), open the log and the engine, drain, release, close the
// local store, watch the lease after a step down — and reports their
// outcomes back. Every decision is the machine's. The API reads the role
// through NodeRoleView; a signal and a step down reach the node as calls.
//
//   Node node(settings, runtime, store, SystemClock::instance());
//   auto api = ApiServer::start(options, node);   // reads node's role
//   node.set_listen_description(api->listen_address());
//   int code = node.run();                          // until it stops
//
// Thread contract: run() on one thread (it returns the exit code); signal()
// and the NodeRoleView methods from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "config/config.h"
#include "node/node_machine.h"
#include "node/role_board.h"

namespace dex {

class ObjectStore;
class Metrics;
class Follower;
class LeaseKeeper;
struct LeaseKeeperOptions;
struct EngineOptions;
struct HandedLocalStore;
namespace attrstore {
class AttributeTable;
}  // namespace attrstore

// What a node process is told besides its settings: where and how it runs.
struct NodeRuntime {
  std::string program;                     // "dev", "local", "serve": for messages
  bool holder_is_stopped = false;          // the dev lock is held (dev, local)
  std::filesystem::path local_store_path;  // the local store (serve: localStore.path)
  std::string data_description;            // for the ready line: where the data lives
  Metrics* metrics = nullptr;              // null: metrics are kept but not served
  // The Attribute Store tables, opened and checked at startup, in the order of
  // settings.attribute_store.stores; they outlive the node. The active
  // process syncs them (docs/attribute-store.md).
  std::vector<attrstore::AttributeTable*> attribute_tables;
};

// Tests only: a shorter bound for the stuck local store (spec: about 64 s),
// and a hook that runs before the stopped serving period's store closes (a
// test makes it block, as a stuck task would).
struct NodeTestHooks {
  Duration stuck_store_limit = kStuckStoreLimit;
  std::function<void()> before_store_close;
};

// What a process says about itself, on any role (dex-web's GET
// /api/v1/process): a snapshot that the role loop refreshes every 100 ms and
// after each command, read without reaching into the loop's objects.
struct NodeStatus {
  std::string process_id;  // this process
  std::string node_id;
  // active, draining, taking-over, hot-standby, cold-standby, stepping-down,
  // starting, stopping
  std::string role = "starting";
  std::string phase = "idle";  // node_phase_name
  bool serving = false;        // public calls reach the engine (RoleState::active)
  bool hot = false;            // standby.mode: hot
  // The follower's state name and lag, while one runs (a hot standby).
  std::optional<std::string> standby_state;
  std::optional<Duration> standby_lag;
  // The epoch held (active) or last seen in the lease, and its holder.
  std::optional<uint64_t> epoch;
  std::optional<std::string> holder_process_id;
  bool lease_released = false;
  std::optional<uint64_t> log_head;      // active: the last durable slot
  std::optional<uint64_t> applied_slot;  // hot standby: the last slot applied
  std::string not_serving_reason;        // RoleState::unavailable_reason while not serving
};

class Node final : public NodeRoleView {
 public:
  // `settings` of any subcommand (dev, local, serve): the node builds the
  // lease keeper's, the follower's and the engine's options from them.
  // `store` and `clock` must outlive the node.
  Node(NodeSettings settings, NodeRuntime runtime, ObjectStore& store, Clock& clock,
       NodeTestHooks hooks = {});
  ~Node() override;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Where the API listens, for the ready line.
  void set_listen_description(std::string listen);
  // Runs the role loop until the process must exit; returns its exit code
  // (0: stopped on a signal after releasing the lease; 1: the node had to
  // stop). Call once.
  int run();
  // SIGTERM / SIGINT: drain, release, exit 0; a second call skips the drain.
  void signal();
  // This process's role, standby state, epoch, holder and log position;
  // any thread.
  NodeStatus status() const;

  // NodeRoleView.
  RoleState state() const override { return board_.state(); }
  bool wait_changed(uint64_t version, Duration timeout) const override {
    return board_.wait_changed(version, timeout);
  }
  StatusOr<std::shared_ptr<Engine>> engine() override { return board_.engine(); }
  void role_applied(uint64_t version) override { board_.role_applied(version); }
  bool can_step_down() const override { return true; }
  StatusOr<StepDownResponse> step_down(const StepDownRequest& request) override;

  class Serving;  // what an active period holds: lease, log, engine

 private:
  // Feeds the machine's output to the loop. REQUIRES: mu_ held.
  void take_locked(NodeActions actions);
  void execute(const NodeCommand& command);
  void start_acquire();
  void open_serving();
  Status open_log(Serving& s, std::optional<Slot> followed_to);
  EngineOptions engine_options(Serving& s, std::shared_ptr<HandedLocalStore> handed);
  void release_serving(bool stays_standby);
  void release_and_fail(const std::string& why);
  bool machine_describe_refused() const;
  // The one place lease.* and standby.* reach the lease keeper.
  LeaseKeeperOptions lease_options() const;
  void close_store();
  void read_lease();
  void answer_step_down(const StepDownAnswer& answer);
  void stop_at_once(const std::string& why);
  void exit_with(const NodeCommand& command);
  void tick();  // every 100 ms: the follower's state, the lease's validity, metrics
  void start_following();
  void stop_following();
  std::string standby_reason() const;
  // Refreshes the snapshot status() answers; the loop thread.
  void publish_status();
  TimePoint now() const { return clock_.now(); }

  // Constant after construction.
  const NodeSettings settings_;
  const NodeRuntime runtime_;
  const NodeTestHooks hooks_;
  ObjectStore& store_;
  Clock& clock_;
  const std::string process_id_;
  const bool hot_;
  std::unique_ptr<Metrics> own_metrics_;
  Metrics& metrics_;

  RoleBoard board_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  NodeMachine machine_;                             // guarded by mu_
  std::deque<NodeCommand> pending_;                 // guarded by mu_
  std::optional<TimePoint> wake_at_;                // guarded by mu_
  std::string listen_;                              // guarded by mu_
  std::optional<StepDownAnswer> step_down_answer_;  // guarded by mu_
  uint64_t step_down_calls_answered_ = 0;           // guarded by mu_
  std::optional<int> exit_code_;                    // guarded by mu_

  // Owned by the loop thread.
  std::unique_ptr<Follower> follower_;
  std::unique_ptr<LeaseKeeper> acquiring_;  // also read by signal() under acquire_mu_
  mutable std::mutex acquire_mu_;
  std::unique_ptr<Serving> serving_;
  std::unique_ptr<LeaseKeeper> released_keeper_;  // a step down watches the lease through it
  std::thread acquirer_;
  std::thread closer_;
  std::future<void> closer_finished_;  // ready once the closer thread is done
  // The lease as last known to the loop: held, seen held by another process,
  // or released by this one (read by publish_status()).
  std::optional<LeaseSeen> last_lease_;

  mutable std::mutex status_mu_;
  NodeStatus status_;  // guarded by status_mu_
};

}  // namespace dex
