// dex-peers-worker: the C++ Worker of bench/peers (bench/peers/README.md). It hosts the same
// two dex Flows as the TypeScript Worker there (bench/peers/dex/worker.mjs), every Step one
// Execute that passes the run's input on:
//
//   peers-one     echo                       -> graceful_complete(input)
//   peers-three   echo-1 -> echo-2 -> echo-3  (go_to the next with the input; the last completes)
//   peers-indexed echo, which also writes the Attribute `peer` (indexed KEYWORD as PeerKey) with
//                 the run's Flow ID: peers-one plus one indexed write per run (issue 26's row)
//   peers-attr    the same write to an Attribute that is not indexed: the index's own cost is
//                 peers-indexed's less this one's
//   peers-synced  the same write to an Attribute declared dex::kSync, the Flow's Attribute Store
//                 "peers" (the server's attributeStore.stores.peers, a table with a column
//                 `peer`): the Step's result also puts a SyncEntry, and the server's sync thread
//                 carries it into the table (docs/attribute-store.md); its cost is this row's
//                 less peers-attr's
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
#include "example_flows.h"
#include "sdk/worker.h"

namespace {

const dex::Attribute<std::string> kIndexedPeer{"peer", {dex::flow::INDEX_KEYWORD, "PeerKey"}};
const dex::Attribute<std::string> kPlainPeer{"peer"};
const dex::Attribute<std::string> kSyncedPeer{"peer", dex::kSync};

// echo that writes `peer` (the run's Flow ID) before it completes the run.
class WritingEcho final : public dex::Step {
 public:
  explicit WritingEcho(const dex::Attribute<std::string>& peer) : peer_(peer) {}
  std::string type() const override { return "echo"; }
  dex::AttributeReads attribute_reads() const override { return dex::AttributeReads::none(); }
  dex::StepDecision execute(dex::Context& ctx) override {
    peer_.set(ctx, ctx.flow_id());
    return dex::StepDecision::graceful_complete(ctx.input());
  }

 private:
  const dex::Attribute<std::string>& peer_;
};

class PeersWriting final : public dex::Flow {
 public:
  PeersWriting(std::string type, const dex::Attribute<std::string>& peer,
               std::string attribute_store = "")
      : type_(std::move(type)), peer_(peer), attribute_store_(std::move(attribute_store)) {}
  std::string type() const override { return type_; }
  std::string attribute_store() const override { return attribute_store_; }
  std::string start_step() const override { return "echo"; }
  std::vector<std::shared_ptr<dex::Step>> steps() const override {
    return {std::make_shared<WritingEcho>(peer_)};
  }
  std::vector<dex::AttributeDef> attributes() const override { return {peer_}; }

 private:
  std::string type_;
  const dex::Attribute<std::string>& peer_;
  std::string attribute_store_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The C++ Worker of bench/peers: hosts the dex Flows peers-one, peers-three, peers-indexed, "
      "peers-attr and, with --synced, peers-synced"};
  app.set_version_flag("--version", dex::version_line("dex-peers-worker"));
  std::string server = "127.0.0.1:8801";
  uint32_t concurrency = 128;
  app.add_option("--server", server, "The dex server (host:port)");
  app.add_option("--concurrency", concurrency, "Tasks run at once")->check(CLI::Range(1, 4096));
  bool synced = false;
  app.add_flag("--synced", synced,
               "Also host peers-synced (its store \"peers\" must be configured on the server, "
               "which refuses the hello otherwise)");
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
  const std::chrono::milliseconds no_work(0);
  worker.host(dex::examples::pipeline("peers-one", {"echo"}, no_work));
  worker.host(dex::examples::pipeline("peers-three", {"echo-1", "echo-2", "echo-3"}, no_work));
  worker.host(std::make_shared<PeersWriting>("peers-indexed", kIndexedPeer));
  worker.host(std::make_shared<PeersWriting>("peers-attr", kPlainPeer));
  if (synced) worker.host(std::make_shared<PeersWriting>("peers-synced", kSyncedPeer, "peers"));

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
