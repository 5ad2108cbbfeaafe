#include "flow/lock_table.h"

#include <algorithm>
#include <set>

#include "common/invariant.h"
#include "flow/limits.h"

namespace dex::flow {

void LockTable::hold(const std::string& holder, Method method, const std::string& key) {
  auto* held = run_.add_locks();
  held->set_key(key);
  held->set_holder(holder);
  held->set_method(method);
}

bool LockTable::take(const std::string& holder, Method method,
                     const google::protobuf::RepeatedPtrField<std::string>& keys) {
  DEX_INVARIANT(static_cast<size_t>(keys.size()) <= kLockKeysMax,
                "a method or RPC names at most kLockKeysMax lock keys");
  if (keys.empty()) return true;
  bool free = true;
  for (const auto& key : keys) {             // bounded by kLockKeysMax
    for (const auto& held : run_.locks()) {  // bounded by the run's holders
      if (held.key() == key) free = false;
    }
    for (const auto& w : run_.lock_waiters()) {  // bounded by the run's waiters
      if (std::find(w.keys().begin(), w.keys().end(), key) != w.keys().end()) free = false;
    }
  }
  if (!free) {
    auto* w = run_.add_lock_waiters();
    w->set_holder(holder);
    w->set_method(method);
    *w->mutable_keys() = keys;
    return false;
  }
  for (const auto& key : keys) hold(holder, method, key);  // bounded by kLockKeysMax
  return true;
}

std::vector<std::string> LockTable::release(const std::string& holder, Method method) {
  std::vector<std::string> released;
  auto* locks = run_.mutable_locks();
  for (int i = 0; i < locks->size();) {  // bounded by the run's holders
    if (locks->Get(i).holder() == holder && locks->Get(i).method() == method) {
      released.push_back(locks->Get(i).key());
      locks->erase(locks->begin() + i);
    } else {
      ++i;
    }
  }
  return released;
}

void LockTable::drop_waiter(const std::string& holder, Method method) {
  auto* waiters = run_.mutable_lock_waiters();
  auto it = std::find_if(waiters->begin(), waiters->end(), [&](const LockWaiter& w) {
    return w.holder() == holder && w.method() == method;
  });
  DEX_INVARIANT(it != waiters->end(), "a locked attempt waits in the run's lock queue");
  waiters->erase(it);
}

std::vector<LockWaiter> LockTable::grant() {
  std::vector<LockWaiter> granted;
  if (run_.lock_waiters().empty()) return granted;
  std::set<std::string> taken;  // held, or wanted by an earlier waiter that stays
  for (const auto& held : run_.locks()) taken.insert(held.key());
  google::protobuf::RepeatedPtrField<LockWaiter> staying;
  const auto waiters = run_.lock_waiters();
  for (const auto& w : waiters) {  // bounded by the run's waiters
    const bool free = std::none_of(w.keys().begin(), w.keys().end(),
                                   [&](const std::string& k) { return taken.contains(k); });
    for (const auto& k : w.keys()) taken.insert(k);
    if (!free) {
      *staying.Add() = w;
      continue;
    }
    for (const auto& k : w.keys()) hold(w.holder(), w.method(), k);  // bounded by kLockKeysMax
    granted.push_back(w);
  }
  *run_.mutable_lock_waiters() = std::move(staying);
  return granted;
}

}  // namespace dex::flow
