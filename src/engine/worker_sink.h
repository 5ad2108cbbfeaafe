// What the engine and the gRPC layer share about Worker streams: the sink the
// layer implements, the error of a result whose outcome is unknown, and the
// limits of a hello. Below engine.h, so that the engine's parts use these
// without the engine's face.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "dex/flow_api.pb.h"

namespace dex {

// The future of Engine::complete_task holds this when the engine stopped before
// the result was applied: the outcome is unknown, so no ack must be sent (the
// Worker re-sends the result to the next active process).
class EngineStoppedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Limits on Worker streams (InvalidArgument above them).
inline constexpr size_t kWorkerIdBytesMax = 256;
inline constexpr uint32_t kWorkerConcurrentTasksMax = 1000;
inline constexpr size_t kWorkersMax = 10'000;
inline constexpr size_t kTaskErrorBytesMax = 64u << 10;

// The engine's side of one Worker stream. The gRPC layer implements it.
class WorkerSink {
 public:
  virtual ~WorkerSink() = default;
  // Hands a WaitFor or Execute attempt to the Worker (docs/flow-rules.md);
  // false if the stream is gone (the engine then treats the attempt as never
  // received). Called from engine threads; must not block long.
  virtual bool send_task(const flow::FlowTask& task) = 0;
  virtual bool send_ping() = 0;
};

}  // namespace dex
