// MemoryTrimmer (src/server/memory_trimmer.h): heap memory a thread freed in
// the middle of its arena stays in the process until a trim gives it back.
#include "server/memory_trimmer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

namespace dex {
namespace {

using namespace std::chrono_literals;

int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

constexpr int64_t kMiB = 1 << 20;

// On its own thread (so in its own arena, as a server thread's would be):
// 64 MiB in 4 KiB blocks, each written, then all freed but the last, which
// keeps the freed memory from being at the arena's top.
void* allocate_and_free_below_a_kept_block() {
  void* kept = nullptr;
  std::thread([&] {
    std::vector<char*> blocks;
    for (int i = 0; i < 64 * 256; ++i) {  // bounded: 16,384 blocks
      char* b = new char[4096];
      for (int j = 0; j < 4096; j += 512) b[j] = static_cast<char>(i + j);
      blocks.push_back(b);
    }
    for (size_t i = 0; i + 1 < blocks.size(); ++i) delete[] blocks[i];
    kept = blocks.back();
  }).join();
  return kept;
}

TEST(MemoryTrimmer, GivesFreedHeapBackToTheOs) {
  const int64_t before = rss_bytes();
  char* kept = static_cast<char*>(allocate_and_free_below_a_kept_block());
  const int64_t freed = rss_bytes();
  // Without a trim, malloc keeps the freed memory: the test can fail.
  ASSERT_GE(freed - before, 48 * kMiB) << "malloc gave the memory back by itself";

  MemoryTrimmer trimmer(50ms);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (trimmer.trims() < 1 && std::chrono::steady_clock::now() < deadline)  // bounded: 5 s
    std::this_thread::sleep_for(10ms);
  ASSERT_GE(trimmer.trims(), 1u);
  EXPECT_LE(rss_bytes() - before, 16 * kMiB)
      << "RSS " << before / kMiB << " MiB before, " << freed / kMiB << " MiB after the frees, "
      << rss_bytes() / kMiB << " MiB after a trim";
  delete[] kept;
}

TEST(MemoryTrimmer, StopsPromptlyWhenDestroyed) {
  const auto started = std::chrono::steady_clock::now();
  { MemoryTrimmer trimmer(std::chrono::hours(1)); }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
}

}  // namespace
}  // namespace dex
