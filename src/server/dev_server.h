// `dex-server-zd dev` and `local`: one node on local disk. Holds dev.lock in its
// data directory, the node's lease and log in a filesystem object store under
// it (objects/), and the engine's RocksDB store (local/), and serves the API.
// See README.md and docs/architecture.md.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "config/config.h"

namespace dex {

// `dex-server-zd serve`: S3 (or filesystem) object storage, no dev lock; a
// second process of the same node waits as a cold standby while the lease is
// held and takes over when it is released or expires.
int run_serve_server(const NodeSettings& settings);

// Blocks SIGINT and SIGTERM in this thread and every thread it starts later.
void block_stop_signals();

// Runs until SIGINT/SIGTERM (releases the lease, returns 0) or until the node
// must stop (lease lost, log write not accepted in time, storage error: returns
// 1). Startup errors are printed and return 1. REQUIRES: called from main()
// before any other thread starts (it blocks SIGINT/SIGTERM for all threads).
// `command` is dev or local.
int run_dev_server(const NodeSettings& settings, Subcommand command);

}  // namespace dex
