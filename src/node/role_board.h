// RoleBoard: the role of a process as a thread-safe value that its owner
// writes and the API reads (role_view.h). The node's role loop owns one; API
// tests drive one directly. It also counts the calls that use the engine, so
// that the owner deletes an engine only after the last one is done. It cannot
// step down (Node adds that). Thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

#include "node/role_view.h"

namespace dex {

class RoleBoard : public NodeRoleView {
 public:
  RoleBoard() = default;
  RoleBoard(const RoleBoard&) = delete;
  RoleBoard& operator=(const RoleBoard&) = delete;

  // The owner's side.
  // Active: serve `engine` (which must stay alive until set_inactive and
  // wait_engine_unused) as `identity`. `lease_valid` is asked on every call:
  // once false, the call and every later one answer UNAVAILABLE and the role
  // turns inactive before anything is read from the engine (spec: Health and
  // probes, a process resumed after a freeze).
  void set_active(
      Engine* engine, NodeIdentity identity,
      std::function<bool()> lease_valid = [] { return true; });
  // Public calls answer UNAVAILABLE with `why`; readiness NOT_SERVING.
  void set_inactive(std::string why);
  // A standby: inactive with `why`, connections closed after about 3 s,
  // dex.HotStandby SERVING while `hot`.
  void set_standby(std::string why, bool hot);
  // dex.HotStandby on a standby (ignored while active).
  void set_hot_standby(bool hot);
  // Why a standby answers UNAVAILABLE (changes nothing else).
  void set_unavailable_reason(std::string why);
  void set_describe_refused(bool refused);
  // Ends every open PollWorkerTask stream (a release).
  void end_worker_streams();
  // Waits until no call uses the engine it got before the last set_inactive;
  // false after `timeout`.
  bool wait_engine_unused(Duration timeout);
  // Waits until a reader reported `version` applied; true at once when no
  // reader ever reported (no API attached), false after `timeout`.
  bool wait_applied(uint64_t version, Duration timeout);

  // NodeRoleView.
  RoleState state() const override;
  bool wait_changed(uint64_t version, Duration timeout) const override;
  StatusOr<std::shared_ptr<Engine>> engine() override;
  void role_applied(uint64_t version) override;
  bool can_step_down() const override { return false; }
  StatusOr<StepDownResponse> step_down(const StepDownRequest& request) override;

 private:
  void changed_locked() {
    ++state_.version;
    changed_.notify_all();
  }

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::condition_variable engine_unused_;
  RoleState state_;                    // guarded by mu_
  Engine* engine_ = nullptr;           // guarded by mu_
  uint64_t engine_users_ = 0;          // guarded by mu_
  std::function<bool()> lease_valid_;  // guarded by mu_
  std::optional<uint64_t> applied_;    // guarded by mu_: the last version a reader applied
};

}  // namespace dex
