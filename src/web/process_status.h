// What this server process says about itself at GET /api/v1/process
// (docs/dex-web.md): its role, the standby's state and lag, the node epoch and
// lease holder it last saw, its log position. Unlike the gateway's calls it
// answers on any process, a standby included, because it reads the process's
// own state instead of the public API. The server's wiring (src/server) hands
// the web server a source that reads the node; this header knows nothing of
// the node, so arrows keep running down.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace dex::web {

struct ProcessStatus {
  std::string process_id;  // this process
  std::string node_id;
  // active, draining, taking-over, hot-standby, cold-standby, stepping-down,
  // starting, stopping
  std::string role;
  std::string phase;         // the role loop's phase (docs/node.md): acquiring, hold-off, ...
  bool serving = false;      // public calls reach the engine here
  std::string standby_mode;  // hot | cold (standby.mode)
  // A hot standby's follower: following, bootstrapping, behind, restarting,
  // failed; absent when no follower runs (active, cold).
  std::optional<std::string> standby_state;
  std::optional<double> lag_seconds;  // with standby_state
  // The node epoch held (active) or last seen in the lease (standby), and
  // that lease's holder; absent until the lease was read.
  std::optional<uint64_t> epoch;
  std::optional<std::string> holder_process_id;
  bool lease_released = false;           // the lease last seen was released by its holder
  std::optional<uint64_t> log_head;      // active: the last durable log slot
  std::optional<uint64_t> applied_slot;  // hot standby: the last slot in its local store
  std::string not_serving_reason;        // empty while serving
};

// Read on the request's thread: must be thread-safe and quick.
using ProcessStatusSource = std::function<ProcessStatus()>;

// The JSON answer: lowerCamelCase names, 64-bit integers as decimal strings
// (as the gateway's proto3 JSON), null for what is not known.
std::string process_status_json(const ProcessStatus& status);

}  // namespace dex::web
