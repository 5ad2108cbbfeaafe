// dexcli inspect lease|log: the offline inspector. Reads a node's lease and
// log straight from object storage, read-only (StoreAccess::kReadOnly), with
// no server: from a dev/local data directory (<data-dir>/objects) or from the
// object store a serve config names (S3 with the config's credentials or the
// AWS_* environment, or a filesystem store), opened by open_object_store as
// the server opens it. Prints JSON on stdout; a failure prints
// "dexcli: <what failed>" on stderr and returns exit code 1. main.cc wires
// the commands and flags to these functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace dex::cli {

// Where `inspect` reads: a dev/local data directory, or a serve config's store.
struct InspectSource {
  std::string data_dir = ".dex-data";
  std::string config_file;  // set: the serve config's store
};

struct InspectLogFlags {
  uint64_t limit = 1000;
  // Every slot from the first one listed (or --from-slot) to the end, read
  // one by one without the reader's skipping of lower epochs: what a checker
  // needs to see a fenced writer's batch. A missing slot is an entry
  // {"slot", "missing": true} instead of an error.
  bool raw = false;
  // Each record in full (protobuf JSON mapping: epochStart, flow records with
  // flow IDs, run IDs, task IDs, outcomes), plus the batch's writeId.
  bool records = false;
  std::optional<uint64_t> from_slot;
};

// The nodeId of the serve config `config_file`, the node inspected when
// --node-id is not given; InvalidArgument naming the problem with the file.
StatusOr<std::string> inspect_config_node_id(const std::string& config_file);

// `dexcli inspect lease`: the lease record of `node_id`. Returns the exit code.
int inspect_lease(const InspectSource& source, const std::string& node_id);

// `dexcli inspect log`: the log's batches in slot order. Returns the exit code.
int inspect_log(const InspectSource& source, const std::string& node_id,
                const InspectLogFlags& flags);

}  // namespace dex::cli
