// `dex-server-zd dev`: one process, zero configuration. Holds dev.lock in its
// data directory, the node's lease in a filesystem object store under it, and
// the node's log there. See README.md and docs/architecture.md.
#pragma once

#include "config/config.h"

namespace dex {

// Runs until SIGINT/SIGTERM (releases the lease, returns 0) or until the node
// must stop (lease lost, log write not accepted in time, storage error: returns
// 1). Startup errors are printed and return 1. REQUIRES: called from main()
// before any other thread starts (it blocks SIGINT/SIGTERM for all threads).
int run_dev_server(const DevConfig& config);

}  // namespace dex
