// `dex-server-zd dev` and `local`: one node on local disk. Holds dev.lock in its
// data directory, the node's lease and log in a filesystem object store under
// it (objects/), and the engine's RocksDB store (local/), and serves the API.
// See README.md and docs/architecture.md.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "common/clock.h"

#include "config/config.h"

namespace dex {

class ObjectStore;
class ApiServer;
class Metrics;

// What the role loop of one node process needs, whatever its subcommand.
struct NodeRun {
  std::string program;  // "dev", "local", "serve": for messages
  std::string node_id;
  Duration lease_duration{0};
  bool fail_if_held = false;
  bool holder_is_stopped = false;  // the dev lock is held (dev, local)
  std::filesystem::path local_store_path;
  std::string data_description;  // for the ready line: where the data lives
  SnapshotSettings snapshots;
  // standby.* (serve): cold waits idle; hot follows the log (docs/standby.md).
  std::string standby_mode = "cold";
  Duration held_lease_poll_interval{0};  // 0: the lease's default poll
  Duration lagging_takeover_delay = milliseconds(1500);
  Duration behind_lag_threshold = seconds(10);
  Duration step_down_hold_off = seconds(5);      // standby.stepDownHoldOff
  Duration attempt_drain_timeout = seconds(30);  // lifecycle.attemptDrainTimeout
  Metrics* metrics = nullptr;                    // null: metrics are kept but not served
};

// Spec (Hot standby, Takeover): after a takeover fails before the lease is
// held, a hot standby keeps following and tries again after 1 s, doubling up
// to 30 s.
Duration takeover_retry_backoff(uint32_t failures);

// Acquires the node's lease in `store` (waiting as a cold standby while another
// process holds it: public calls answer UNAVAILABLE meanwhile), opens the log
// and the engine, serves through `api`, and runs until SIGINT/SIGTERM (releases
// the lease, returns 0) or until the node must stop (returns 1). REQUIRES: the
// stop signals are blocked (block_stop_signals) before any thread starts.
int run_node(const NodeRun& run, ObjectStore& store, ApiServer& api);

// `dex-server-zd serve`: S3 (or filesystem) object storage, no dev lock; a
// second process of the same node waits as a cold standby while the lease is
// held and takes over when it is released or expires.
int run_serve_server(const ServeConfig& config);

// Blocks SIGINT and SIGTERM in this thread and every thread it starts later.
void block_stop_signals();

// Runs until SIGINT/SIGTERM (releases the lease, returns 0) or until the node
// must stop (lease lost, log write not accepted in time, storage error: returns
// 1). Startup errors are printed and return 1. REQUIRES: called from main()
// before any other thread starts (it blocks SIGINT/SIGTERM for all threads).
// `program` is "dev" or "local", for messages.
int run_dev_server(const DevConfig& config, std::string_view program);

}  // namespace dex
