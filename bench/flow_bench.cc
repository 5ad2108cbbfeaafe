#include "flow_bench.h"

#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace dex::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

StrictDev start_strict_dev(const fs::path& bin, const std::string& name,
                           std::chrono::seconds timeout,
                           const std::vector<std::string>& extra_args) {
  StrictDev dev;
  dev.root = fs::temp_directory_path() / fmt::format("{}-{}", name, getpid());
  fs::create_directories(dev.root);
  add_scratch(dev.root);
  // Before the server starts: its own fsyncs would raise the floor.
  dev.fsync_ms = fsync_floor_ms(dev.root);
  std::vector<std::string> args = {(bin / "dex-server-zd").string(),
                                   "dev",
                                   "--data-dir",
                                   (dev.root / "data").string(),
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--durability",
                                   "strict"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  dev.server =
      spawn_split("dex-server-zd dev", args, dev.root / "server.out", dev.root / "server.log");
  dev.address = wait_dev_ready(dev.server, timeout);
  return dev;
}

std::string run_once(dex::Client& client, const std::string& type, const std::string& id) {
  auto started = client.start(type, id, nlohmann::json{{"n", 1}});
  if (!started.is_ok()) return "start: " + started.status().message();
  auto closed = client.wait_for_flow(id, dex::seconds(60));
  if (!closed.is_ok()) return "wait: " + closed.status().message();
  if (closed->flow().status() != dex::flow::FLOW_COMPLETED)
    return "the run ended " + dex::flow::FlowStatus_Name(closed->flow().status());
  return "";
}

void await_first_run(dex::Client& client, const std::string& type, const std::string& id_prefix,
                     std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string err = "never tried";
  for (int i = 0; Clock::now() < deadline && !err.empty(); ++i) {
    err = run_once(client, type, fmt::format("{}-{}", id_prefix, i));
    if (!err.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!err.empty()) die(fmt::format("no probe run of {} completed: {}", type, err));
}

double batches_per_run(dex::Client& client, const fs::path& data, const std::string& type,
                       const std::string& id_prefix, int runs) {
  const uint64_t before = dev_log_slots(data);
  for (int i = 0; i < runs; ++i) {
    std::string err = run_once(client, type, fmt::format("{}-{}", id_prefix, i));
    if (!err.empty()) die(type + ": " + err);
  }
  return static_cast<double>(dev_log_slots(data) - before) / runs;
}

Figures closed_loop(const std::string& address, int callers, double seconds, const Op& op,
                    const dex::TlsOptions& tls) {
  std::vector<std::vector<double>> lat(callers);
  std::atomic<bool> measuring{false}, done{false};
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&, t] {
      dex::ClientOptions options;
      options.server_address = address;
      options.tls = tls;
      dex::Client client(options);
      // Bounded by `done`, set after the measured period.
      while (!done) {
        const auto t0 = Clock::now();
        std::string err = op(t, client, next++);
        if (!err.empty()) die(err);
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
  return {all.size() / elapsed, percentile(all, 0.5), percentile(all, 0.99)};
}

}  // namespace dex::bench
