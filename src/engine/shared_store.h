// The local RocksDB store as the engine's parts share it (the engine's apply
// and housekeeping, and the flow engine). Readers hold `mu` shared while they use `sm`; the
// engine's stop() resets `sm` holding it unique, after which readers find it
// null. Lock order: `mu` before any part's own mutex, never the reverse.
#pragma once

#include <memory>
#include <shared_mutex>

#include "engine/state_machine.h"

namespace dex {

struct SharedStore {
  mutable std::shared_mutex mu;
  std::unique_ptr<StateMachine> sm;
};

}  // namespace dex
