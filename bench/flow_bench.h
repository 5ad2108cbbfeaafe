// What the benchmarks of dex Flows through a real `dex-server-zd dev` with a
// Worker in-process (dex_flows_bench, dex_rpc_bench) share: the strict dev
// server they measure against, one run from start to completion, the probe
// that waits for the Worker's types, and the closed loop of callers that
// yields the figures.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "bench_process.h"
#include "sdk/client.h"

namespace dex::bench {

// A `dex-server-zd dev` with strict durability (every log batch fsynced) whose
// data lives in a scratch directory, and this machine's fsync floor there.
struct StrictDev {
  std::filesystem::path root;  // the scratch directory; the data is in root/"data"
  double fsync_ms = 0;         // fsync_floor_ms(root), measured before the server starts
  Child server;
  std::string address;  // where it listens, once ready
};

// Makes the scratch directory <temp>/<name>-<pid> (removed by cleanup()),
// measures the fsync floor in it, then starts `bin`/dex-server-zd dev on a free
// port and waits up to `timeout` for it to be ready (dies otherwise).
StrictDev start_strict_dev(const std::filesystem::path& bin, const std::string& name,
                           std::chrono::seconds timeout,
                           const std::vector<std::string>& extra_args = {});

// One run of `type` named `id`, from start to completion: "" or what went wrong.
std::string run_once(dex::Client& client, const std::string& type, const std::string& id);

// Runs `type` as `id_prefix`-0, -1, ... every 100 ms until one completes: the
// Worker's hello has declared the type. Dies if none does within `timeout`.
void await_first_run(dex::Client& client, const std::string& type, const std::string& id_prefix,
                     std::chrono::seconds timeout);

// Runs `runs` runs of `type` one after another (`id_prefix`-0, -1, ...): the
// log batches per run of the dev server whose data directory is `data`.
double batches_per_run(dex::Client& client, const std::filesystem::path& data,
                       const std::string& type, const std::string& id_prefix, int runs);

struct Figures {
  double per_second = 0, p50 = 0, p99 = 0;  // ops/s; latencies in ms
};

// `callers` threads, one Client each on `address`, loop `op(caller, client,
// sequence)` for 0.5 s of warm-up, then `seconds` measured; latencies are per
// op. An op answers "" or what went wrong (which is fatal).
using Op = std::function<std::string(int caller, dex::Client&, uint64_t seq)>;
// `tls`: each Client's TLS (sdk/tls_options.h); default plaintext.
Figures closed_loop(const std::string& address, int callers, double seconds, const Op& op,
                    const dex::TlsOptions& tls = {});

}  // namespace dex::bench
