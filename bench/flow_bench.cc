// Flow benchmark: end-to-end flows through a real `dex-server-zd dev` and a real
// `dex-example-worker`, per durability mode, next to this machine's floor (one
// write+fsync of a small file, one loopback gRPC round trip) measured in the
// same run. Machines here are shared and noisy: read the ratios, not the
// absolute times.
//
// For each mode it starts a fresh server (data in a scratch directory, port 0
// on loopback) and a worker (--concurrency 128) registering bench-one (one
// Step) and bench-three (three Steps in a row), waits until a probe flow of
// each type completes, then for each flow type and client concurrency runs
// closed-loop clients (one dex::Client per thread: StartFlow with a fresh flow
// ID, then WaitFlow until it ends) for a warm-up and a measured period.
//
//   build/bin/flow_bench [--seconds 5] [--modes strict,processCrashSafe,relaxed]
//                        [--concurrency 1,64] [--csv FILE]
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_process.h"
#include "common/version.h"
#include "flow_bench_flow_types.h"
#include "sdk/client.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using dex::bench::add_scratch;
using dex::bench::check_alive;
using dex::bench::Child;
using dex::bench::cleanup;
using dex::bench::cpu_seconds;
using dex::bench::die;
using dex::bench::die_on_signals;
using dex::bench::own_bin_dir;
using dex::bench::percentile;
using dex::bench::require_programs;
using dex::bench::set_program;
using dex::bench::spawn_split;
using dex::bench::stop;
using dex::bench::tail;
using dex::bench::wait_dev_ready;
using dex::bench::warn_unless_clean_exit;

constexpr int kWorkerConcurrency = 128;
constexpr auto kStartTimeout = std::chrono::seconds(60);
constexpr auto kStopGrace = std::chrono::seconds(15);

// ------------------------------------------------------------------ figures

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Floor {
  double p50_ms = 0, p99_ms = 0;
  size_t n = 0;
};

// The same floor as log_append_bench: write 4 KiB to a new file, fsync it and
// its directory (what a strict log append does at least once).
Floor fsync_floor(const fs::path& dir, double seconds) {
  fs::create_directories(dir);
  std::string block(4096, 'x');
  std::vector<double> lat;
  int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd < 0) die(fmt::format("cannot open {}: {}", dir.string(), std::strerror(errno)));
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (int i = 0; Clock::now() < end && i < 20000; ++i) {
    auto t0 = Clock::now();
    fs::path p = dir / fmt::format("f{}", i);
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size()) ||
        fsync(fd) != 0 || close(fd) != 0 || fsync(dir_fd) != 0) {
      die(fmt::format("fsync floor in {}: {}", dir.string(), std::strerror(errno)));
    }
    lat.push_back(ms_since(t0));
  }
  close(dir_fd);
  fs::remove_all(dir);
  return {percentile(lat, 0.5), percentile(lat, 0.99), lat.size()};
}

// One loopback gRPC round trip: AdminService.Describe on the running server.
Floor rtt_floor(const std::string& address, double seconds) {
  dex::ClientOptions options;
  options.server_address = address;
  dex::Client client(options);
  std::vector<double> lat;
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    auto t0 = Clock::now();
    auto r = client.describe();
    if (!r.is_ok()) die("Describe: " + r.status().to_string());
    lat.push_back(ms_since(t0));
  }
  return {percentile(lat, 0.5), percentile(lat, 0.99), lat.size()};
}

struct Row {
  std::string mode, flow_type;
  int concurrency = 0;
  double seconds = 0;
  size_t flows = 0;
  double per_second = 0;
  double flow_p50 = 0, flow_p99 = 0, step_p50 = 0, step_p99 = 0;  // ms
  double server_cpu = 0, worker_cpu = 0, bench_cpu = 0;           // CPU seconds
  double fsync_p50 = 0, rtt_p50 = 0;                              // ms
};

std::string flow_failure(const dex::Flow& flow) {
  std::string why = fmt::format("flow {} ({}) ended {}", flow.flow_id(), flow.flow_type(),
                                dex::FlowStatus_Name(flow.status()));
  if (!flow.error().empty()) why += ": " + flow.error();
  for (const dex::Step& step : flow.steps()) {
    for (const dex::Attempt& a : step.attempts()) {
      if (!a.error().empty()) {
        why += fmt::format("\n    step {} attempt {}: {}", step.name(), a.number(), a.error());
      }
    }
  }
  return why;
}

struct Case {
  std::string mode, flow_type, address;
  int concurrency = 1;
  double warmup = 1, seconds = 5;
  pid_t server = -1, worker = -1;
};

Row run_case(const Case& c) {
  struct PerThread {
    std::vector<double> flow_ms, step_ms;
  };
  std::vector<PerThread> results(static_cast<size_t>(c.concurrency));
  std::atomic<bool> stop{false};
  auto measure_start = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(c.warmup));
  auto measure_end = measure_start + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(c.seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < c.concurrency; ++t) {
    threads.emplace_back([&, t] {
      dex::ClientOptions options;
      options.server_address = c.address;
      dex::Client client(options);
      PerThread& mine = results[static_cast<size_t>(t)];
      for (uint64_t n = 0; !stop; ++n) {
        std::string id = fmt::format("{}-{}-c{}-t{}-{}", c.mode, c.flow_type, c.concurrency, t, n);
        auto t0 = Clock::now();
        auto started = client.start_flow(c.flow_type, fmt::format("{{\"n\":{}}}", n), id);
        if (!started.is_ok())
          die(fmt::format("StartFlow {}: {}", id, started.status().to_string()));
        auto waited = client.wait_flow(id, std::chrono::seconds(60));
        if (!waited.is_ok()) die(fmt::format("WaitFlow {}: {}", id, waited.status().to_string()));
        auto t1 = Clock::now();
        const dex::Flow& flow = waited.value().flow();
        if (!waited.value().ended()) die(fmt::format("flow {} did not end within 60 s", id));
        if (flow.status() != dex::FLOW_STATUS_COMPLETED) die(flow_failure(flow));
        if (t0 < measure_start || t1 > measure_end) continue;  // warm-up or straddling the end
        mine.flow_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        // A Step becomes ready when the flow is created (the first) or when the
        // Step before it ends (the chain); its latency runs until its last
        // attempt ends.
        int64_t ready_ms = flow.created_at_ms();
        for (const dex::Step& step : flow.steps()) {
          if (step.attempts().empty())
            die(fmt::format("flow {}: step {} has no attempt", id, step.name()));
          int64_t ended_ms = step.attempts(step.attempts_size() - 1).ended_at_ms();
          mine.step_ms.push_back(static_cast<double>(ended_ms - ready_ms));
          ready_ms = ended_ms;
        }
      }
    });
  }
  std::this_thread::sleep_until(measure_start);
  double server0 = cpu_seconds(c.server), worker0 = cpu_seconds(c.worker),
         bench0 = cpu_seconds(getpid());
  std::this_thread::sleep_until(measure_end);
  double server1 = cpu_seconds(c.server), worker1 = cpu_seconds(c.worker),
         bench1 = cpu_seconds(getpid());
  stop = true;
  for (auto& t : threads) t.join();

  std::vector<double> flow_ms, step_ms;
  for (auto& r : results) {
    flow_ms.insert(flow_ms.end(), r.flow_ms.begin(), r.flow_ms.end());
    step_ms.insert(step_ms.end(), r.step_ms.begin(), r.step_ms.end());
  }
  if (flow_ms.empty()) {
    die(fmt::format("{} {} x{}: no flow completed within the {} s measurement", c.mode, c.flow_type,
                    c.concurrency, c.seconds));
  }
  Row row;
  row.mode = c.mode;
  row.flow_type = c.flow_type;
  row.concurrency = c.concurrency;
  row.seconds = c.seconds;
  row.flows = flow_ms.size();
  row.per_second = static_cast<double>(flow_ms.size()) / c.seconds;
  row.flow_p50 = percentile(flow_ms, 0.5);
  row.flow_p99 = percentile(flow_ms, 0.99);
  row.step_p50 = percentile(step_ms, 0.5);
  row.step_p99 = percentile(step_ms, 0.99);
  row.server_cpu = server1 - server0;
  row.worker_cpu = worker1 - worker0;
  row.bench_cpu = bench1 - bench0;
  return row;
}

// ------------------------------------------------------------------ one mode

// Waits for "dex-server-zd dev ready: ... listening on ADDR ..." on its stdout.
std::string wait_ready(const Child& server) { return wait_dev_ready(server, kStartTimeout); }

// The worker is connected once both flow types are registered and a probe
// flow of each completes.
void wait_worker(const std::string& address, const Child& server, const Child& worker) {
  dex::ClientOptions options;
  options.server_address = address;
  dex::Client client(options);
  auto deadline = Clock::now() + kStartTimeout;
  for (const char* type : {"bench-one", "bench-three"}) {
    std::string id = fmt::format("probe-{}", type);
    for (;;) {
      check_alive(server);
      check_alive(worker);
      if (Clock::now() > deadline) {
        die(fmt::format("the worker did not complete a {} flow within {} s; last lines of {}:\n{}",
                        type, kStartTimeout.count(), worker.log.string(), tail(worker.log, 20)));
      }
      if (!client.get_flow_type(type).is_ok() || !client.start_flow(type, "{}", id).is_ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      auto waited = client.wait_flow(id, std::chrono::seconds(1));
      if (!waited.is_ok() || !waited.value().ended()) continue;
      if (waited.value().flow().status() != dex::FLOW_STATUS_COMPLETED) {
        die(flow_failure(waited.value().flow()));
      }
      break;
    }
  }
}

struct Options {
  double seconds = 5, warmup = 1;
  std::vector<std::string> modes{"strict", "processCrashSafe", "relaxed"};
  std::vector<int> concurrency{1, 64};
  std::string csv;
  std::string dir = fs::temp_directory_path().string();
};

std::vector<Row> run_mode(const Options& o, const std::string& mode, const fs::path& root,
                          const fs::path& bin, const Floor& fsync) {
  fs::path mode_dir = root / mode;
  fs::create_directories(mode_dir);
  Child server =
      spawn_split("dex-server-zd dev (" + mode + ")",
                  {(bin / "dex-server-zd").string(), "dev", "--data-dir",
                   (mode_dir / "data").string(), "--listen", "127.0.0.1:0", "--durability", mode},
                  mode_dir / "server.out", mode_dir / "server.log");
  std::string address = wait_ready(server);
  Child worker = spawn_split(
      "dex-example-worker",
      {(bin / "dex-example-worker").string(), "--server", address, "--concurrency",
       std::to_string(kWorkerConcurrency), "--flow-type", (root / "bench-one.yaml").string(),
       "--flow-type", (root / "bench-three.yaml").string()},
      mode_dir / "worker.log", mode_dir / "worker.log");
  wait_worker(address, server, worker);
  Floor rtt = rtt_floor(address, 1);
  std::cerr << fmt::format(
      "{}: server {} on {}, worker {} connected; Describe round trip p50 {:.3f} ms, p99 {:.3f} "
      "ms ({} calls)\n",
      mode, server.pid, address, worker.pid, rtt.p50_ms, rtt.p99_ms, rtt.n);

  std::vector<Row> rows;
  for (const char* type : {"bench-one", "bench-three"}) {
    for (int concurrency : o.concurrency) {
      Case c{mode, type, address, concurrency, o.warmup, o.seconds, server.pid, worker.pid};
      Row row = run_case(c);
      row.fsync_p50 = fsync.p50_ms;
      row.rtt_p50 = rtt.p50_ms;
      check_alive(server);
      check_alive(worker);
      std::cerr << fmt::format("  {} x{}: {:.0f} flows/s, flow p50 {:.1f} ms, step p50 {:.0f} ms\n",
                               type, concurrency, row.per_second, row.flow_p50, row.step_p50);
      rows.push_back(row);
    }
  }
  int worker_status = stop(worker, kStopGrace);
  int server_status = stop(server, kStopGrace);
  warn_unless_clean_exit(server, server_status, 10);
  warn_unless_clean_exit(worker, worker_status);
  fs::remove_all(mode_dir);
  return rows;
}

void print_table(const std::vector<Row>& rows) {
  fmt::print("{:<17} {:<12} {:>4} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>9}\n",
             "mode", "flow type", "conc", "flows/s", "flow p50", "flow p99", "step p50", "step p99",
             "srv CPU", "wkr CPU", "cli CPU", "p50/fsync", "p50/rtt");
  fmt::print("{:<17} {:<12} {:>4} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>9}\n",
             "", "", "", "", "ms", "ms", "ms", "ms", "s", "s", "s", "", "");
  for (const Row& r : rows) {
    fmt::print(
        "{:<17} {:<12} {:>4} {:>8.0f} {:>9.2f} {:>9.2f} {:>8.0f} {:>8.0f} {:>8.2f} {:>8.2f} "
        "{:>8.2f} {:>9.1f}x {:>8.1f}x\n",
        r.mode, r.flow_type, r.concurrency, r.per_second, r.flow_p50, r.flow_p99, r.step_p50,
        r.step_p99, r.server_cpu, r.worker_cpu, r.bench_cpu, r.flow_p50 / r.fsync_p50,
        r.flow_p50 / r.rtt_p50);
  }
}

void write_csv(const std::string& file, const std::vector<Row>& rows) {
  std::ofstream out(file);
  out << "mode,flow_type,concurrency,seconds,flows,flows_per_s,flow_p50_ms,flow_p99_ms,"
         "step_p50_ms,step_p99_ms,server_cpu_s,worker_cpu_s,bench_cpu_s,fsync_p50_ms,"
         "rtt_p50_ms,flow_p50_over_fsync_p50,flow_p50_over_rtt_p50\n";
  for (const Row& r : rows) {
    out << fmt::format(
        "{},{},{},{},{},{:.1f},{:.3f},{:.3f},{:.0f},{:.0f},{:.2f},{:.2f},{:.2f},"
        "{:.3f},{:.3f},{:.2f},{:.2f}\n",
        r.mode, r.flow_type, r.concurrency, r.seconds, r.flows, r.per_second, r.flow_p50,
        r.flow_p99, r.step_p50, r.step_p99, r.server_cpu, r.worker_cpu, r.bench_cpu, r.fsync_p50,
        r.rtt_p50, r.flow_p50 / r.fsync_p50, r.flow_p50 / r.rtt_p50);
  }
  if (!out.flush()) die("cannot write " + file);
}

}  // namespace

int main(int argc, char** argv) {
  set_program("flow_bench");
  CLI::App app{
      "flow_bench: flows/s and flow and step latency through dex-server-zd dev and "
      "dex-example-worker, per durability mode, next to the fsync and gRPC round-trip floor"};
  Options o;
  app.add_option("--seconds", o.seconds, "Measured seconds per case")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "Warm-up seconds per case (discarded)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--modes", o.modes, "Durability modes, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"strict", "processCrashSafe", "relaxed"}));
  app.add_option("--concurrency", o.concurrency, "Client concurrencies, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--csv", o.csv, "Also write the figures to this CSV file");
  app.add_option("--dir", o.dir,
                 "Parent of the scratch directory (server data and the fsync floor; removed "
                 "afterwards)")
      ->capture_default_str();
  app.set_version_flag("--version", dex::version_line("flow_bench"));
  CLI11_PARSE(app, argc, argv);

  // SIGINT/SIGTERM are taken by one thread that cleans up; children unblock them.
  die_on_signals("the server and worker are killed");

  fs::path bin = own_bin_dir();
  require_programs(bin, {"dex-server-zd", "dex-example-worker"});
  fs::path root = fs::path(o.dir) / fmt::format("dex-flow-bench-{}", getpid());
  add_scratch(root);
  fs::create_directories(root);
  std::ofstream(root / "bench-one.yaml") << dex::bench::kBenchOneDefinition;
  std::ofstream(root / "bench-three.yaml") << dex::bench::kBenchThreeDefinition;

  Floor fsync = fsync_floor(root / "floor", 2);
  std::cerr << fmt::format(
      "floor: 4 KiB write+fsync(file)+fsync(dir) in {}: p50 {:.3f} ms, p99 {:.3f} ms ({} "
      "writes)\n",
      root.string(), fsync.p50_ms, fsync.p99_ms, fsync.n);

  std::vector<Row> rows;
  std::vector<std::pair<std::string, double>> rtts;
  for (const std::string& mode : o.modes) {
    auto mode_rows = run_mode(o, mode, root, bin, fsync);
    rtts.emplace_back(mode, mode_rows.front().rtt_p50);
    rows.insert(rows.end(), mode_rows.begin(), mode_rows.end());
  }

  fmt::print("\nflow_bench: {} s per case after {} s warm-up; worker --concurrency {}; {} CPUs\n",
             o.seconds, o.warmup, kWorkerConcurrency, std::thread::hardware_concurrency());
  fmt::print("floor: 4 KiB write+fsync(file)+fsync(dir) p50 {:.3f} ms, p99 {:.3f} ms\n",
             fsync.p50_ms, fsync.p99_ms);
  for (const auto& [mode, rtt] : rtts) {
    fmt::print("floor: loopback gRPC round trip (Describe), {} server: p50 {:.3f} ms\n", mode, rtt);
  }
  fmt::print("\n");
  print_table(rows);
  if (!o.csv.empty()) {
    write_csv(o.csv, rows);
    fmt::print("\nwrote {}\n", o.csv);
  }
  cleanup();
  return 0;
}
