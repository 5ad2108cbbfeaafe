// Gives the heap memory the process has freed back to the OS, every interval.
//
// Why: glibc's malloc keeps what a thread frees in that thread's arena, and
// gives back only the free memory at an arena's top. The server's threads free
// large amounts in the middle of arenas (RocksDB memtables after each flush, a
// snapshot's buffers, bursts of requests), so RSS only grew: with 100,000 runs
// waiting, 119 MB of heap held by malloc against 38 MB in use. malloc_trim(0)
// releases every free page of every arena (docs/performance.md, "Every target of issue 30").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace dex {

class MemoryTrimmer {
 public:
  // Every `interval` (> 0) on its own thread, from construction until destruction.
  explicit MemoryTrimmer(std::chrono::milliseconds interval);
  ~MemoryTrimmer();
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  // Trims done so far.
  uint64_t trims() const;

  // The interval the server uses: often enough that freed memory does not pile
  // up between snapshots, rarely enough that its cost (each arena locked while
  // its free chunks are walked, a few ms at most) does not show.
  static constexpr std::chrono::milliseconds kServerInterval{10'000};

 private:
  void run();

  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t trims_ = 0;
  std::thread thread_;
};

}  // namespace dex
