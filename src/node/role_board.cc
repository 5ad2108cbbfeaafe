#include "node/role_board.h"

#include <fmt/format.h>

#include "dex/api.pb.h"

namespace dex {

void RoleBoard::set_active(Engine* engine, NodeIdentity identity,
                           std::function<bool()> lease_valid) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = engine;
  lease_valid_ = std::move(lease_valid);
  state_.active = engine != nullptr;
  state_.standby_connections = false;
  state_.hot_standby = false;
  state_.identity = std::move(identity);
  changed_locked();
}

void RoleBoard::set_inactive(std::string why) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = nullptr;
  state_.active = false;
  state_.unavailable_reason = std::move(why);
  changed_locked();
}

void RoleBoard::set_standby(std::string why, bool hot) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = nullptr;
  state_.active = false;
  state_.standby_connections = true;
  state_.hot_standby = hot;
  state_.unavailable_reason = std::move(why);
  changed_locked();
}

void RoleBoard::set_hot_standby(bool hot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.active) hot = false;  // the active process is never a hot standby
  if (state_.hot_standby == hot) return;
  state_.hot_standby = hot;
  changed_locked();
}

void RoleBoard::set_unavailable_reason(std::string why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.unavailable_reason == why) return;
  state_.unavailable_reason = std::move(why);
  changed_locked();
}

void RoleBoard::set_describe_refused(bool refused) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.describe_refused == refused) return;
  state_.describe_refused = refused;
  changed_locked();
}

void RoleBoard::end_worker_streams() {
  std::lock_guard<std::mutex> lock(mu_);
  ++state_.worker_streams_generation;
  changed_locked();
}

bool RoleBoard::wait_engine_unused(Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return engine_unused_.wait_for(lock, timeout, [this] { return engine_users_ == 0; });
}

void RoleBoard::role_applied(uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  if (applied_ && *applied_ >= version) return;
  applied_ = version;
  changed_.notify_all();
}

bool RoleBoard::wait_applied(uint64_t version, Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!applied_) return true;
  return changed_.wait_for(lock, timeout, [&] { return *applied_ >= version; });
}

RoleState RoleBoard::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

bool RoleBoard::wait_changed(uint64_t version, Duration timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return state_.version != version; });
}

StatusOr<std::shared_ptr<Engine>> RoleBoard::engine() {
  std::function<bool()> lease_valid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (engine_ == nullptr) return Status::stopped(state_.unavailable_reason);
    lease_valid = lease_valid_;
  }
  // Asked outside the lock on every call: a process resumed after a freeze
  // longer than its lease must not answer from state that another process may
  // have changed since.
  if (lease_valid && !lease_valid()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (engine_ != nullptr) {
      engine_ = nullptr;
      state_.active = false;
      state_.unavailable_reason =
          fmt::format("the lease of node {} is no longer valid", state_.identity.node_id);
      changed_locked();
    }
    return Status::stopped("the lease of this process is no longer valid");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (engine_ == nullptr) return Status::stopped(state_.unavailable_reason);
  ++engine_users_;
  // Not an owner: the deleter only ends the use.
  return std::shared_ptr<Engine>(engine_, [this](Engine*) {
    std::lock_guard<std::mutex> lock(mu_);
    if (--engine_users_ == 0) engine_unused_.notify_all();
  });
}

StatusOr<StepDownResponse> RoleBoard::step_down(const StepDownRequest&) {
  return Status::permanent("this server cannot step down");
}

}  // namespace dex
