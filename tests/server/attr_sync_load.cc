// dex-attr-sync-load: the Worker of the Attribute Store end-to-end test
// (tests/server/test_attribute_store.py). It hosts two Flow types whose
// synced Attributes go to two stores of the server's attributeStore.stores:
//
//   SyncPg  (attribute_store "pg")   Attributes n (int64) and label (string),
//   SyncMy  (attribute_store "my")   both dex::kSync
//
// Each has one Step, Inc: WaitFor a Timer of --timer-ms, then Execute reads n
// (attribute_reads: n), writes n + 1 and label = "n=<n + 1>" and goes to Inc
// again with the same input, until n reaches the input's "target"; then it
// completes the run with {"n": target}. The writes are applied with the
// decision, so a retried or stale attempt never counts twice, and a run's
// final row is known: n = target, label = "n=<target>".
//
//   dex-attr-sync-load --server 127.0.0.1:8801,127.0.0.1:8802 [--concurrency 32]
//
// Prints "dex-attr-sync-load ready" once a process accepted its stream;
// SIGTERM or SIGINT shuts it down gracefully (exit 0).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sdk/worker.h"

namespace {

const dex::Attribute<int64_t> kN{"n", dex::kSync};
const dex::Attribute<std::string> kLabel{"label", dex::kSync};

class Inc final : public dex::WaitingStep {
 public:
  explicit Inc(std::chrono::milliseconds timer) : timer_(timer) {}
  std::string type() const override { return "Inc"; }
  dex::StepOptions options() const override {
    // Many short attempts: an attempt lost with a killed or frozen server
    // times out fast and leaves retries (a Step that ran out of attempts would
    // fail its run, which the test would report).
    dex::StepOptions o;
    for (dex::MethodOptions* m : {&o.wait_for, &o.execute}) {
      m->attempt_timeout = std::chrono::seconds(5);
      m->retry.maximum_attempts = 0;  // no limit
      m->retry.initial_interval = std::chrono::milliseconds(100);
      m->retry.maximum_interval = std::chrono::milliseconds(500);
    }
    return o;
  }
  dex::AttributeReads attribute_reads() const override { return {kN}; }
  dex::Wait wait_for(dex::Context&) override {
    return dex::Wait::any_of({dex::Timer::after(timer_)});
  }
  dex::StepDecision execute(dex::Context& ctx) override {
    const dex::json& input = ctx.input();
    if (!input.is_object() || !input.contains("target") || !input["target"].is_number_integer())
      throw dex::FlowFailure("the input needs {\"target\": <integer>}, not " + input.dump(), true);
    const int64_t target = input["target"].get<int64_t>();
    const int64_t n = kN.get(ctx).value_or(0);
    if (n >= target) return dex::StepDecision::graceful_complete({{"n", n}});
    kN.set(ctx, n + 1);
    kLabel.set(ctx, "n=" + std::to_string(n + 1));
    if (n + 1 >= target) return dex::StepDecision::graceful_complete({{"n", n + 1}});
    return dex::StepDecision::go_to("Inc", input);
  }

 private:
  std::chrono::milliseconds timer_;
};

class SyncFlow final : public dex::Flow {
 public:
  SyncFlow(std::string type, std::string store, std::chrono::milliseconds timer)
      : type_(std::move(type)), store_(std::move(store)), timer_(timer) {}
  std::string type() const override { return type_; }
  std::string start_step() const override { return "Inc"; }
  std::vector<std::shared_ptr<dex::Step>> steps() const override {
    return {std::make_shared<Inc>(timer_)};
  }
  std::vector<dex::AttributeDef> attributes() const override { return {kN, kLabel}; }
  std::string attribute_store() const override { return store_; }

 private:
  std::string type_, store_;
  std::chrono::milliseconds timer_;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)  // bounded by the text
    if (!part.empty()) out.push_back(part);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dex-attr-sync-load: hosts SyncPg and SyncMy, counters synced to two stores"};
  std::string servers = "127.0.0.1:8801";
  std::string worker_id;
  uint32_t concurrency = 32;
  int timer_ms = 75;
  app.add_option("--server", servers, "the node's addresses, comma-separated");
  app.add_option("--worker-id", worker_id, "the Worker's ID (default: host-pid)");
  app.add_option("--concurrency", concurrency, "tasks run at once")->check(CLI::Range(1, 1024));
  app.add_option("--timer-ms", timer_ms, "the Timer before each increment")
      ->check(CLI::Range(1, 60'000));
  CLI11_PARSE(app, argc, argv);

  // Block the signals before any thread starts, so that only the waiter takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  dex::WorkerOptions options;
  options.server_addresses = split(servers);
  options.worker_id = worker_id;
  options.max_concurrent_tasks = concurrency;
  dex::Worker worker(options);
  const std::chrono::milliseconds timer(timer_ms);
  worker.host(std::make_shared<SyncFlow>("SyncPg", "pg", timer));
  worker.host(std::make_shared<SyncFlow>("SyncMy", "my", timer));

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    worker.shutdown();
  });
  waiter.detach();
  // "ready" once a process accepted the stream (its hello declared both Flow
  // types). Bounded by `stop`, set when run() returned.
  std::atomic<bool> stop{false};
  std::thread ready([&] {
    while (!stop) {
      if (worker.stats().streams_accepted > 0) {
        std::cout << "dex-attr-sync-load ready (pid " << getpid() << ")" << std::endl;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  dex::Status s = worker.run();
  stop = true;
  ready.join();
  const dex::WorkerStats st = worker.stats();
  std::cout << "dex-attr-sync-load stopped: tasks " << st.tasks_finished << ", results accepted "
            << st.results_accepted << std::endl;
  if (!s.is_ok()) {
    std::cerr << "dex-attr-sync-load: " << s.to_string() << std::endl;
    return 1;
  }
  return 0;
}
