// Log append benchmark: latency and throughput of LogWriter group commit on the
// filesystem object store, in strict and processCrashSafe, next to this
// machine's floor (one write+fsync of a small file) measured in the same run.
// Machines here are shared and noisy: read the ratios, not the absolute times.
//
//   build/bin/log_append_bench [--seconds N] [--dir DIR]
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <iostream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/random.h"
#include "common/version.h"
#include "log/log_writer.h"
#include "objstore/filesystem_store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Figures {
  double p50_us = 0, p99_us = 0, per_second = 0;
  uint64_t batches = 0, records = 0;
};

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// The floor: write 4 KiB to a new file and fsync it and its directory.
Figures fsync_floor(const fs::path& dir, double seconds) {
  fs::create_directories(dir);
  std::string block(4096, 'x');
  std::vector<double> lat;
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  for (int i = 0; Clock::now() < end && i < 100000; ++i) {
    auto t0 = Clock::now();
    fs::path p = dir / fmt::format("f{}", i);
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) std::abort();
    fsync(fd);
    close(fd);
    fsync(dir_fd);
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  close(dir_fd);
  Figures f;
  f.per_second = static_cast<double>(lat.size()) / seconds;
  f.p50_us = percentile(lat, 0.5);
  f.p99_us = percentile(lat, 0.99);
  return f;
}

Figures run_log(const fs::path& dir, dex::Durability durability, int clients, double seconds) {
  fs::remove_all(dir);
  auto store = dex::FilesystemObjectStore::open(dir, durability);
  if (!store.is_ok()) {
    std::cerr << store.status().to_string() << "\n";
    std::exit(1);
  }
  dex::LogWriterOptions options;
  options.node_id = dex::NodeId("bench");
  options.process_id = dex::ProcessId(dex::make_process_id());
  options.epoch = dex::Epoch(1);
  dex::LogWriter writer(*store.value(), dex::SystemClock::instance(), options, [] { return true; },
                        [](const dex::Status& s) { std::cerr << "fatal: " << s.to_string() << "\n"; });
  if (auto s = writer.open(); !s.is_ok()) {
    std::cerr << s.to_string() << "\n";
    std::exit(1);
  }
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  std::string payload(200, 'r');  // about one flow-step record
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      while (!stop) {
        dex::proto::LogRecord record;
        record.set_opaque(payload);
        auto t0 = Clock::now();
        auto slot = writer.append(std::move(record)).get();
        if (!slot.is_ok()) return;
        lat[static_cast<size_t>(c)].push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  (void)writer.close();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  Figures f;
  f.per_second = static_cast<double>(all.size()) / seconds;
  f.p50_us = percentile(all, 0.5);
  f.p99_us = percentile(all, 0.99);
  f.batches = writer.stats().batches;
  f.records = writer.stats().records;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"log_append_bench: LogWriter group commit on the filesystem store vs the fsync floor"};
  double seconds = 3;
  std::string dir = (fs::temp_directory_path() / "dex-log-bench").string();
  app.add_option("--seconds", seconds, "Seconds per measurement")->capture_default_str();
  app.add_option("--dir", dir, "Scratch directory (deleted and recreated)")->capture_default_str();
  app.set_version_flag("--version", dex::version_line("log_append_bench"));
  CLI11_PARSE(app, argc, argv);

  Figures floor = fsync_floor(fs::path(dir) / "floor", seconds);
  fmt::print("floor: 4 KiB write+fsync(file)+fsync(dir): p50 {:.0f} us, p99 {:.0f} us, {:.0f}/s\n\n",
             floor.p50_us, floor.p99_us, floor.per_second);
  fmt::print("{:<18} {:>7} {:>10} {:>10} {:>11} {:>9} {:>11}\n", "durability", "clients", "p50 us",
             "p99 us", "appends/s", "rec/batch", "p50/floor");
  for (auto durability : {dex::Durability::kStrict, dex::Durability::kProcessCrashSafe}) {
    for (int clients : {1, 16, 64}) {
      Figures f = run_log(fs::path(dir) / "log", durability, clients, seconds);
      fmt::print("{:<18} {:>7} {:>10.0f} {:>10.0f} {:>11.0f} {:>9.1f} {:>10.2f}x\n",
                 dex::durability_name(durability), clients, f.p50_us, f.p99_us, f.per_second,
                 f.batches ? static_cast<double>(f.records) / static_cast<double>(f.batches) : 0.0,
                 f.p50_us / floor.p50_us);
    }
  }
  fs::remove_all(dir);
  return 0;
}
