#include "server/memory_trimmer.h"

#include <malloc.h>

#include "common/invariant.h"

namespace dex {

MemoryTrimmer::MemoryTrimmer(std::chrono::milliseconds interval) : interval_(interval) {
  DEX_INVARIANT(interval.count() > 0, "a trimmer's interval is positive");
  thread_ = std::thread([this] { run(); });
}

MemoryTrimmer::~MemoryTrimmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t MemoryTrimmer::trims() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trims_;
}

void MemoryTrimmer::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {  // bounded by stop
    lock.unlock();
    malloc_trim(0);
    lock.lock();
    ++trims_;
  }
}

}  // namespace dex
