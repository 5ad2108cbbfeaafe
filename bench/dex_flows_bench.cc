// dex Flows benchmark: runs of one and of three Execute-only Steps in a row
// through a real `dex-server-zd dev` (strict durability: every log batch is
// fsynced) and a Worker in this process (the C++ SDK), next to this machine's
// fsync floor measured in the same run.
//
// For each Flow type it prints:
//  - log batches per run, measured alone: `--runs` runs one after another,
//    the log's new slots divided by the runs (one batch per Step transition:
//    expect 2 for one Step and 4 for three);
//  - closed-loop throughput and latency at each concurrency (start, then
//    WaitForFlow until the run closes; one Client per thread).
//
//   build/bin/dex_flows_bench [--seconds 5] [--concurrency 1,64] [--runs 50]
#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_process.h"
#include "common/version.h"
#include "example_flows.h"
#include "flow_bench.h"
#include "sdk/client.h"
#include "sdk/worker.h"

namespace {

namespace fs = std::filesystem;
using namespace dex::bench;

constexpr auto kStartTimeout = std::chrono::seconds(60);

}  // namespace

int main(int argc, char** argv) {
  set_program("dex_flows_bench");
  CLI::App app{
      "dex Flows of one and three Steps through dex-server-zd dev (strict): log batches "
      "per run, flows/s and latency, next to the fsync floor"};
  app.set_version_flag("--version", dex::version_line("dex_flows_bench"));
  double seconds = 5;
  std::vector<int> concurrency{1, 64};
  int runs = 50;
  app.add_option("--seconds", seconds, "Measured seconds per case")->check(CLI::PositiveNumber);
  app.add_option("--concurrency", concurrency, "Client concurrencies")->delimiter(',');
  app.add_option("--runs", runs, "Sequential runs for the batches-per-run figure")
      ->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  die_on_signals("dex_flows_bench");

  const fs::path bin = fs::canonical("/proc/self/exe").parent_path();
  StrictDev dev = start_strict_dev(bin, "dex-flows-bench", kStartTimeout);
  const std::string& address = dev.address;
  dex::WorkerOptions wo;
  wo.server_address = address;
  wo.max_concurrent_tasks = 128;
  dex::Worker worker(wo);
  const std::chrono::milliseconds no_work(0);
  worker.host(dex::examples::pipeline("BenchOne", {"S1"}, no_work));
  worker.host(dex::examples::pipeline("BenchThree", {"S1", "S2", "S3"}, no_work));
  std::thread worker_thread([&] { (void)worker.run(); });

  dex::ClientOptions co;
  co.server_address = address;
  dex::Client client(co);
  // The Worker's hello declared both types once a probe run of each completes.
  for (const char* type : {"BenchOne", "BenchThree"}) {
    await_first_run(client, type, fmt::format("probe-{}", type), kStartTimeout);
  }
  fmt::print(
      "fsync floor (512 B append + fdatasync) p50 {:.3f} ms; dex-server-zd dev strict on {}\n",
      dev.fsync_ms, address);
  fmt::print("{:<11} {:>15} {:>5} {:>9} {:>9} {:>9} {:>10}\n", "flow", "batches/run", "conc",
             "flows/s", "p50 ms", "p99 ms", "p50/fsync");
  for (const std::string type : {"BenchOne", "BenchThree"}) {
    const double batches =
        batches_per_run(client, dev.root / "data", type, fmt::format("seq-{}", type), runs);
    for (int c : concurrency) {
      Figures f = closed_loop(address, c, seconds, [&](int, dex::Client& cl, uint64_t seq) {
        std::string err = run_once(cl, type, fmt::format("{}-{}", type, seq));
        return err.empty() ? err : type + ": " + err;
      });
      check_alive(dev.server);
      fmt::print("{:<11} {:>15.2f} {:>5} {:>9.0f} {:>9.2f} {:>9.2f} {:>10.1f}\n", type, batches, c,
                 f.per_second, f.p50, f.p99, f.p50 / dev.fsync_ms);
    }
  }
  worker.shutdown();
  worker_thread.join();
  warn_unless_clean_exit(dev.server, stop(dev.server, std::chrono::seconds(15)), 10);
  cleanup();
  return 0;
}
