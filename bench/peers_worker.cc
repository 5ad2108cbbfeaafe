// dex-peers-worker: the C++ Worker of bench/peers (bench/peers/README.md). It hosts the same
// two dex Flows as the TypeScript Worker there (bench/peers/dex/worker.mjs), every Step one
// Execute that passes the run's input on:
//
//   peers-one     echo                       -> graceful_complete(input)
//   peers-three   echo-1 -> echo-2 -> echo-3  (go_to the next with the input; the last completes)
//
// The hello declares both Flow types; nothing is registered beforehand.
//
//   build-bench/bin/dex-peers-worker --server 127.0.0.1:8801 [--concurrency 128]
//
// Prints "dex-cpp-worker ready" once a process accepted its stream; SIGTERM or SIGINT shuts it
// down gracefully (exit 0).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/version.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace {

using dex::sdk::Context;
using dex::sdk::StepDecision;

// One Step of a chain: go to `next` with the input, or complete with it when `next` is empty.
class Echo final : public dex::sdk::Step {
 public:
  Echo(std::string type, std::string next) : type_(std::move(type)), next_(std::move(next)) {}
  std::string type() const override { return type_; }
  StepDecision execute(Context& ctx) override {
    if (next_.empty()) return StepDecision::graceful_complete(ctx.input());
    return StepDecision::go_to(next_, ctx.input());
  }

 private:
  std::string type_, next_;
};

class Chain final : public dex::sdk::Flow {
 public:
  Chain(std::string type, const std::vector<std::string>& names) : type_(std::move(type)) {
    for (size_t i = 0; i < names.size(); ++i)
      steps_.push_back(
          std::make_shared<Echo>(names[i], i + 1 < names.size() ? names[i + 1] : std::string()));
    start_ = names.front();
  }
  std::string type() const override { return type_; }
  std::string start_step() const override { return start_; }
  std::vector<std::shared_ptr<dex::sdk::Step>> steps() const override { return steps_; }

 private:
  std::string type_, start_;
  std::vector<std::shared_ptr<dex::sdk::Step>> steps_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The C++ Worker of bench/peers: hosts the dex Flows peers-one and peers-three"};
  app.set_version_flag("--version", dex::version_line("dex-peers-worker"));
  std::string server = "127.0.0.1:8801";
  uint32_t concurrency = 128;
  app.add_option("--server", server, "The dex server (host:port)");
  app.add_option("--concurrency", concurrency, "Tasks run at once")->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);

  // Block the signals before any thread starts, so that only the waiter below takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  dex::WorkerOptions options;
  options.server_address = server;
  options.max_concurrent_tasks = concurrency;
  dex::Worker worker(options);
  worker.host(std::make_shared<Chain>("peers-one", std::vector<std::string>{"echo"}));
  worker.host(std::make_shared<Chain>("peers-three",
                                      std::vector<std::string>{"echo-1", "echo-2", "echo-3"}));

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    worker.shutdown();
  });
  waiter.detach();
  // "ready" once the server accepted the stream (its hello declared both Flow types). Bounded
  // by `stop`, set when run() returned.
  std::atomic<bool> stop{false};
  std::thread ready([&] {
    while (!stop) {
      if (worker.stats().streams_accepted > 0) {
        std::cout << "dex-cpp-worker ready (pid " << getpid() << ")" << std::endl;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  dex::Status s = worker.run();
  stop = true;
  ready.join();
  const dex::WorkerStats st = worker.stats();
  std::cout << "dex-cpp-worker stopped: tasks " << st.tasks_finished << ", results accepted "
            << st.results_accepted << std::endl;
  if (!s.is_ok()) {
    std::cerr << "dex-peers-worker: " << s.to_string() << std::endl;
    return 1;
  }
  return 0;
}
