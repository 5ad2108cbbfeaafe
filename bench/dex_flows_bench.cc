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
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_process.h"
#include "common/version.h"
#include "example_flows.h"
#include "sdk/client.h"
#include "sdk/worker.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace dex::bench;

constexpr auto kStartTimeout = std::chrono::seconds(60);

std::string run_once(dex::Client& client, const std::string& type, const std::string& id) {
  auto started = client.start(type, id, nlohmann::json{{"n", 1}});
  if (!started.is_ok()) return "start: " + started.status().message();
  auto closed = client.wait_for_flow(id, dex::seconds(60));
  if (!closed.is_ok()) return "wait: " + closed.status().message();
  if (closed->flow().status() != dex::flow::FLOW_COMPLETED)
    return "the run ended " + dex::flow::FlowStatus_Name(closed->flow().status());
  return "";
}

struct Row {
  std::string type;
  int concurrency = 0;
  double per_second = 0, p50 = 0, p99 = 0;
};

Row closed_loop(const std::string& address, const std::string& type, int concurrency,
                double seconds) {
  std::vector<std::vector<double>> lat(concurrency);
  std::atomic<bool> measuring{false}, done{false};
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&, t] {
      dex::ClientOptions options;
      options.server_address = address;
      dex::Client client(options);
      // Bounded by `done`, set after the measured period.
      while (!done) {
        const auto t0 = Clock::now();
        std::string err = run_once(client, type, fmt::format("{}-{}", type, next++));
        if (!err.empty()) die(type + ": " + err);
        if (measuring)
          lat[t].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // warm-up
  measuring = true;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  done = true;
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  Row r{type, concurrency, all.size() / elapsed, percentile(all, 0.5), percentile(all, 0.99)};
  return r;
}

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
  const fs::path root = fs::temp_directory_path() / fmt::format("dex-flows-bench-{}", getpid());
  fs::create_directories(root);
  add_scratch(root);
  const double fsync_ms = fsync_floor_ms(root);
  Child server =
      spawn_split("dex-server-zd dev",
                  {(bin / "dex-server-zd").string(), "dev", "--data-dir", (root / "data").string(),
                   "--listen", "127.0.0.1:0", "--durability", "strict"},
                  root / "server.out", root / "server.log");
  const std::string address = wait_dev_ready(server, kStartTimeout);
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
    const auto deadline = Clock::now() + kStartTimeout;
    std::string err = "never tried";
    for (int i = 0; Clock::now() < deadline && !err.empty(); ++i) {
      err = run_once(client, type, fmt::format("probe-{}-{}", type, i));
      if (!err.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!err.empty()) die(fmt::format("no probe run of {} completed: {}", type, err));
  }
  fmt::print("fsync floor (512 B write + fsync) p50 {:.3f} ms; dex-server-zd dev strict on {}\n",
             fsync_ms, address);
  fmt::print("{:<11} {:>15} {:>5} {:>9} {:>9} {:>9} {:>10}\n", "flow", "batches/run", "conc",
             "flows/s", "p50 ms", "p99 ms", "p50/fsync");
  for (const char* type : {"BenchOne", "BenchThree"}) {
    const uint64_t before = dev_log_slots(root / "data");
    for (int i = 0; i < runs; ++i) {
      std::string err = run_once(client, type, fmt::format("seq-{}-{}", type, i));
      if (!err.empty()) die(std::string(type) + ": " + err);
    }
    const double batches = static_cast<double>(dev_log_slots(root / "data") - before) / runs;
    for (int c : concurrency) {
      Row r = closed_loop(address, type, c, seconds);
      check_alive(server);
      fmt::print("{:<11} {:>15.2f} {:>5} {:>9.0f} {:>9.2f} {:>9.2f} {:>10.1f}\n", type, batches, c,
                 r.per_second, r.p50, r.p99, r.p50 / fsync_ms);
    }
  }
  worker.shutdown();
  worker_thread.join();
  warn_unless_clean_exit(server, stop(server, std::chrono::seconds(15)), 10);
  cleanup();
  return 0;
}
