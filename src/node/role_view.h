// What the API reads of the process's role (docs/node.md): one interface
// instead of setters, so the node's role loop never calls up into the API. The
// API watches it (wait_changed) and applies what it says: readiness, the
// standby's short-lived connections, ending Worker streams at a release.
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"

namespace dex {

class Engine;
class StepDownRequest;
class StepDownResponse;

// Who answers Describe.
struct NodeIdentity {
  std::string node_id;
  Epoch epoch;
  std::string holder_process_id;
};

struct RoleState {
  uint64_t version = 0;  // raised by every change
  // Public calls reach the engine (active, or draining).
  bool active = false;
  // Connections are closed after about 3 s (spec: a standby). False while
  // active, and also while a stopping process winds down.
  bool standby_connections = true;
  // dex.HotStandby: a following hot standby.
  bool hot_standby = false;
  // A step down or its hold-off is in progress: Describe answers FAILED_PRECONDITION.
  bool describe_refused = false;
  // Raised at every release: open PollWorkerTask streams end, so their
  // Workers reconnect and find the active process.
  uint64_t worker_streams_generation = 0;
  // Why public calls answer UNAVAILABLE while not active.
  std::string unavailable_reason = "this process is starting up";
  NodeIdentity identity;  // valid while active
};

class NodeRoleView {
 public:
  virtual ~NodeRoleView() = default;
  virtual RoleState state() const = 0;
  // Blocks until state().version differs from `version` or `timeout` passed;
  // true if it changed.
  virtual bool wait_changed(uint64_t version, Duration timeout) const = 0;
  // The engine to serve a call with, or Stopped naming why there is none (a
  // standby; the lease is no longer valid, checked on every call). The
  // pointer counts as a use until dropped: the role's owner deletes an engine
  // only after every call that got it is done with it.
  virtual StatusOr<std::shared_ptr<Engine>> engine() = 0;
  // The API reports that everything state `version` asks for is in place
  // (readiness pushed, the server for the role listening), so that the node
  // says "ready" only once a client that reads it is served.
  virtual void role_applied(uint64_t version) = 0;
  // AdminService.StepDown; false: this server cannot step down (UNIMPLEMENTED).
  virtual bool can_step_down() const = 0;
  // Errors: PreconditionFailed (does not match, or one is in progress),
  // Stopped (the process stopped first), Permanent (INTERNAL: the stuck store).
  virtual StatusOr<StepDownResponse> step_down(const StepDownRequest& request) = 0;
};

}  // namespace dex
