// chaos_worker: a Worker of the fault-injection harness (tests/chaos/README.md)
// that records every attempt it runs, so that the checker can tell which
// attempt produced a Step's recorded output.
//
// Serves task queue "chaos" (tests/chaos/flow-type.yaml) through every address
// of the node. For each task it appends JSON lines to its history file:
//
//   {"ev":"run","worker":"w1","t":<unix ms>,"flow":..,"step":..,"attempt":n,"task":"e3.17"}
//   {"ev":"done","worker":"w1","t":..,"flow":..,"step":..,"attempt":n,"task":..,
//    "result":"output","output":"<the exact JSON text returned>"}   (or "result":"fail")
//
// A line is written and flushed before the handler returns, so every output the
// server can have received is in the file even if the Worker is SIGKILLed right
// after. Each output names its attempt, its task ID and a per-process nonce, so
// two attempts never produce the same output text.
//
// Step "b" fails its first attempt (a retryable failure, as the example's
// "transform" does); every Step takes a seeded time of 5-120 ms, one in twenty
// 0.6-1.5 s, so that a crash or a freeze finds attempts running.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "common/version.h"
#include "sdk/addresses.h"
#include "sdk/worker.h"

namespace {

using nlohmann::json;

double now_ms() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() / 1000.0;
}

std::FILE* g_history = nullptr;
std::mutex g_mu;

void record(const json& line) {
  std::string text = line.dump() + "\n";
  std::lock_guard<std::mutex> lock(g_mu);
  std::fwrite(text.data(), 1, text.size(), g_history);
  std::fflush(g_history);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chaos_worker: serves queue 'chaos' and records every attempt it runs"};
  std::string servers_text, history_path, worker_id;
  uint32_t concurrency = 8;
  uint64_t seed = 1;
  app.add_option("--servers", servers_text, "Every address of the node, comma-separated")
      ->required();
  app.add_option("--history", history_path, "JSON-lines history file (appended)")->required();
  app.add_option("--worker-id", worker_id, "Worker ID")->required();
  app.add_option("--concurrency", concurrency, "Tasks run at once")->check(CLI::Range(1u, 256u));
  app.add_option("--seed", seed, "Seed of the Step durations");
  app.set_version_flag("--version", dex::version_line("chaos_worker"));
  CLI11_PARSE(app, argc, argv);
  auto servers = dex::parse_server_addresses(servers_text);
  if (!servers.is_ok()) {
    std::cerr << "chaos_worker: --servers: " << servers.status().message() << "\n";
    return 2;
  }
  g_history = std::fopen(history_path.c_str(), "a");
  if (g_history == nullptr) {
    std::cerr << "chaos_worker: cannot open " << history_path << "\n";
    return 2;
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  dex::WorkerOptions options;
  options.server_addresses = servers.value();
  options.worker_id = worker_id;
  options.max_concurrent_tasks = concurrency;
  options.reconnect_backoff_max = dex::seconds(1);
  options.shutdown_timeout = dex::seconds(5);
  dex::Worker worker(options);
  std::atomic<uint64_t> nonce{0};
  worker.handle("chaos", [&](dex::TaskContext& task) -> json {
    const uint32_t attempt = task.attempt();
    json base = {{"worker", worker_id},
                 {"flow", task.flow_id()},
                 {"step", task.step()},
                 {"attempt", attempt},
                 {"task", task.task_id()}};
    json run = base;
    run["ev"] = "run";
    run["t"] = now_ms();
    record(run);
    // Seeded by the task so that a replay of the same seed tends to the same shape.
    const uint64_t h = std::hash<std::string>{}(task.task_id() + task.flow_id()) ^ seed;
    int64_t work_ms = 5 + static_cast<int64_t>(h % 116);
    if ((h >> 20) % 20 == 0) work_ms = 600 + static_cast<int64_t>((h >> 8) % 900);
    for (int64_t slept = 0; slept < work_ms && !task.cancelled(); slept += 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    json done = base;
    done["ev"] = "done";
    if (task.step() == "b" && attempt == 1) {
      done["t"] = now_ms();
      done["result"] = "fail";
      record(done);
      throw dex::StepFailure("chaos: step b fails its first attempt on purpose");
    }
    json output = {
        {"attempt", attempt}, {"task", task.task_id()}, {"worker", worker_id}, {"nonce", ++nonce}};
    done["t"] = now_ms();
    done["result"] = "output";
    done["output"] = output.dump();
    record(done);
    return output;
  });

  std::thread signal_thread([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    spdlog::info("chaos_worker: signal {}: shutting down", signal);
    worker.shutdown();
  });
  signal_thread.detach();
  dex::Status s = worker.run();
  if (!s.is_ok()) {
    std::cerr << "chaos_worker: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
