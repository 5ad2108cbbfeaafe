// One node's durable state and its engine, in the test process: a
// MemoryObjectStore, a LogWriter of epoch 1 and an Engine over a scratch local
// store, on the system clock. ApiServers (api_process.h) front it.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/engine.h"
#include "log/log.h"
#include "objstore/memory_store.h"

namespace dex {

// The engine a process serves while it is active (several ApiServers of a
// test may front this one engine).
class NodeEngine {
 public:
  NodeEngine() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("dex-sdk-node-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    LogWriterOptions wo;
    wo.node_id = NodeId("n1");
    wo.process_id = ProcessId("p1");
    wo.epoch = Epoch(1);
    wo.on_durable = hook_->on_durable();
    wo.epoch_start_unix_ms = 1'700'000'000'000;
    writer_ = std::make_unique<LogWriter>(
        store_, SystemClock::instance(), wo, [] { return true; }, [](const Status&) {});
    Status opened = writer_->open();
    if (!opened.is_ok()) throw std::runtime_error(opened.to_string());
    EngineOptions eo;
    eo.node_id = wo.node_id;
    eo.process_id = wo.process_id;
    eo.epoch = wo.epoch;
    eo.local_store_path = dir_ / "local";
    eo.log_hook = hook_;
    auto engine = Engine::open(eo, store_, *writer_, SystemClock::instance());
    if (!engine.is_ok()) throw std::runtime_error(engine.status().to_string());
    engine_ = std::move(engine).value();
  }
  ~NodeEngine() {
    engine_->stop();
    engine_.reset();
    (void)writer_->close();
    writer_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Engine& engine() { return *engine_; }

 private:
  std::filesystem::path dir_;
  MemoryObjectStore store_;
  std::shared_ptr<EngineLogHook> hook_ = std::make_shared<EngineLogHook>();
  std::unique_ptr<LogWriter> writer_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace dex
