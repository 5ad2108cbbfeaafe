// dex-example-worker: registers the example flow types (unless --no-register)
// and serves task queue "example" with the Steps of examples/flow-types/.
// SIGINT/SIGTERM shut it down gracefully: running tasks finish and their
// results are acknowledged first.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/version.h"
#include "config/config.h"
#include "embedded_flow_types.h"
#include "handlers.h"
#include "sdk/addresses.h"
#include "sdk/worker.h"

int main(int argc, char** argv) {
  CLI::App app{
      "dex-example-worker: serves the example flow types three-step (fetch -> transform -> "
      "store; transform fails once and is retried) and one-step (echo)"};
  dex::WorkerOptions options;
  std::string queue = "example";
  std::vector<std::string> flow_type_files;
  bool no_register = false;
  std::vector<std::string> server_args;
  app.add_option("--server", server_args,
                 "Address (host:port) of the dex server, default 127.0.0.1:8801. Give every "
                 "process of the node, its active one and its standbys, in any order, "
                 "comma-separated or with --server repeated (host1:8801,host2:8801): the worker "
                 "serves whichever is active and moves when another one takes over")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  app.add_option("--concurrency", options.max_concurrent_tasks, "Tasks run at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--queue", queue, "Task queue to serve")->capture_default_str();
  app.add_option("--worker-id", options.worker_id, "Worker ID (default: <hostname>-<pid>)");
  app.add_option("--flow-type", flow_type_files,
                 "Register this definition file instead of the embedded examples (repeatable)")
      ->check(CLI::ExistingFile);
  app.add_flag("--no-register", no_register, "Do not register flow types; only serve the queue");
  std::string work_time;
  app.add_option("--work-time", work_time,
                 "Make every Step take this long (e.g. 50ms), as real work would; default: none");
  app.set_version_flag("--version", dex::version_line("dex-example-worker"));
  CLI11_PARSE(app, argc, argv);
  if (server_args.empty()) server_args.push_back(options.server_address);
  for (const std::string& arg : server_args) {
    auto parsed = dex::parse_server_addresses(arg);
    if (!parsed.is_ok()) {
      std::cerr << "dex-example-worker: --server: " << parsed.status().message() << "\n";
      return 2;
    }
    options.server_addresses.insert(options.server_addresses.end(), parsed->begin(), parsed->end());
  }
  if (auto s = dex::validate_server_addresses(options.server_addresses); !s.is_ok()) {
    std::cerr << "dex-example-worker: --server: " << s.message() << "\n";
    return 2;
  }
  dex::Duration work{0};
  if (!work_time.empty()) {
    auto parsed = dex::parse_duration(work_time);
    if (!parsed.is_ok()) {
      std::cerr << "dex-example-worker: --work-time: " << parsed.status().message() << "\n";
      return 2;
    }
    work = parsed.value();
  }

  // Signals are taken by one thread with sigwait, so shutdown() runs outside
  // a signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  dex::Worker worker(options);
  worker.handle(queue, [work](dex::TaskContext& task) {
    if (work > dex::Duration(0)) std::this_thread::sleep_for(work);
    return dex::examples::handle_example_step(task);
  });
  if (!no_register) {
    if (flow_type_files.empty()) {
      worker.register_flow_type(dex::examples::kThreeStepDefinition);
      worker.register_flow_type(dex::examples::kOneStepDefinition);
    }
    for (const std::string& file : flow_type_files) {
      std::ifstream in(file);
      std::ostringstream text;
      text << in.rdbuf();
      if (!in) {
        std::cerr << "dex-example-worker: cannot read " << file << "\n";
        return 2;
      }
      worker.register_flow_type(text.str());
    }
  }

  std::thread signal_thread([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    spdlog::info("dex-example-worker: signal {}: shutting down", signal);
    worker.shutdown();
  });
  signal_thread.detach();

  dex::Status s = worker.run();
  if (!s.is_ok()) {
    std::cerr << "dex-example-worker: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
