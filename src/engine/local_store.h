// Opening the engine's local store before replay (docs/snapshots.md, "Restore").
//
// The local store is a cache of the node's log: a process whose store is
// missing, corrupt or behind the start of the log (the log was collected
// behind a snapshot) restores the newest usable snapshot and replays the log
// after it. A corrupt store is kept aside as <path>.corrupt for inspection; a
// store ahead of the log is refused (it belongs to another log), never deleted.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "common/types.h"
#include "engine/state_machine.h"
#include "objstore/object_store.h"

namespace dex {

struct LocalStoreOpened {
  std::unique_ptr<StateMachine> sm;
  // How the store was made usable, for the startup log: "opened", "created",
  // "restored ..." with the reason.
  std::string how;
  std::optional<Slot> restored_slot;  // the snapshot restored, if any
};

// Opens (creating, or restoring from a snapshot) the local store at `path` for
// a holder whose EpochStart is at `epoch_slot`. Every request uses `request`.
// `already_open`: the store at `path` as a hot standby's follower handed it
// over, checked like one opened here (a store behind the log's start is still
// replaced by a snapshot) but neither closed nor opened again.
StatusOr<LocalStoreOpened> open_local_store(ObjectStore& store, const NodeId& node_id,
                                            const std::filesystem::path& path, Slot epoch_slot,
                                            const RequestOptions& request = {},
                                            std::unique_ptr<StateMachine> already_open = nullptr);

// A store handed from the follower to the engine at a takeover (EngineOptions).
struct HandedLocalStore {
  std::unique_ptr<StateMachine> sm;
};

}  // namespace dex
