// The local RocksDB store as the engine's parts share it (the engine's apply
// and housekeeping, and the flow engine). Readers hold `mu` shared while they use `sm`; the
// engine's stop() resets `sm` holding it unique, after which readers find it
// null. Lock order: `mu` before any part's own mutex, never the reverse.
#pragma once

#include <memory>
#include <shared_mutex>
#include <utility>

#include "common/status.h"
#include "engine/rocks_kv.h"
#include "engine/state_machine.h"

namespace dex {

struct SharedStore {
  mutable std::shared_mutex mu;
  std::unique_ptr<StateMachine> sm;
};

// Runs `fn` over a read-only view of the store (`mu` held shared): its answer,
// the view's read error, or Stopped once the store closed.
template <typename Fn>
auto with_view(const SharedStore& store, Fn fn) -> decltype(fn(std::declval<RocksKv&>())) {
  std::shared_lock<std::shared_mutex> lock(store.mu);
  if (!store.sm) return Status::stopped("the engine stopped");
  auto view = store.sm->flow_view();
  auto out = fn(*view);
  if (!view->status().is_ok()) return view->status();
  return out;
}

}  // namespace dex
