// The Worker streams connected to this process: one list, read by the flow
// engine (whose stream gets a task) and by the engine's housekeeping (which
// stream is due a ping). Which Worker gets which attempt, and its slots, are
// the dispatcher's (dispatcher.h). Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace dex {

class WorkerSink;

class WorkerPool {
 public:
  using WorkerHandle = uint64_t;

  WorkerPool(size_t streams_max, Duration ping_interval)
      : streams_max_(streams_max), ping_interval_(ping_interval) {}

  // A handle for a new stream, or InvalidArgument at the limit of streams.
  StatusOr<WorkerHandle> new_handle();
  // The stream takes tasks and pings from now on (after its hello was recorded).
  void add(WorkerHandle handle, std::shared_ptr<WorkerSink> sink, TimePoint now);
  void remove(WorkerHandle handle);
  // Null when the stream ended.
  std::shared_ptr<WorkerSink> sink(WorkerHandle handle) const;
  // The streams silent for a ping interval (marked pinged at `now`).
  std::vector<std::shared_ptr<WorkerSink>> due_pings(TimePoint now);
  // When the next stream is due a ping (at most `latest`).
  TimePoint next_ping(TimePoint latest) const;

 private:
  struct Stream {
    std::shared_ptr<WorkerSink> sink;
    TimePoint last_ping;
  };
  const size_t streams_max_;
  const Duration ping_interval_;
  mutable std::mutex mu_;
  WorkerHandle next_handle_ = 1;            // guarded by mu_
  std::map<WorkerHandle, Stream> streams_;  // guarded by mu_; bounded by streams_max_
};

}  // namespace dex
