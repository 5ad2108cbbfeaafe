#include "engine/worker_pool.h"

#include <fmt/format.h>

#include <vector>

namespace dex {

StatusOr<WorkerPool::WorkerHandle> WorkerPool::new_handle() {
  std::lock_guard<std::mutex> lock(mu_);
  // Checked again by nobody at add(): hellos recorded at the same moment may
  // pass the limit by the gRPC threads in flight, which bounds them too.
  if (streams_.size() >= streams_max_) {
    return Status::invalid_argument(
        fmt::format("{} Worker streams are connected, the limit", streams_max_));
  }
  return next_handle_++;
}

void WorkerPool::add(WorkerHandle handle, std::shared_ptr<WorkerSink> sink, TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_[handle] = Stream{std::move(sink), now};
}

void WorkerPool::remove(WorkerHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(handle);
}

std::shared_ptr<WorkerSink> WorkerPool::sink(WorkerHandle handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(handle);
  return it == streams_.end() ? nullptr : it->second.sink;
}

std::vector<std::shared_ptr<WorkerSink>> WorkerPool::due_pings(TimePoint now) {
  std::vector<std::shared_ptr<WorkerSink>> due;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [handle, s] : streams_) {  // bounded by streams_max_
    if (now - s.last_ping < ping_interval_) continue;
    due.push_back(s.sink);
    s.last_ping = now;
  }
  return due;
}

TimePoint WorkerPool::next_ping(TimePoint latest) const {
  std::lock_guard<std::mutex> lock(mu_);
  TimePoint wake = latest;
  for (const auto& [handle, s] : streams_)  // bounded by streams_max_
    wake = std::min(wake, s.last_ping + ping_interval_);
  return wake;
}

}  // namespace dex
