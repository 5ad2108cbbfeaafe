// limit_malloc_arenas (src/server/malloc_arenas.h): threads share at most two
// malloc arenas, unless MALLOC_ARENA_MAX says otherwise.
#include "server/malloc_arenas.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include <barrier>
#include <string>
#include <thread>
#include <vector>

namespace dex {
namespace {

// How many heaps (arenas) malloc_info reports.
int arenas() {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  malloc_info(0, out);
  fclose(out);
  int n = 0;
  for (std::string s(text, size); s.find("<heap nr=") != std::string::npos;  // bounded by s
       s = s.substr(s.find("<heap nr=") + 1))
    ++n;
  free(text);
  return n;
}

TEST(MallocArenas, AnOperatorsMallocArenaMaxWins) {
  setenv("MALLOC_ARENA_MAX", "8", 1);
  EXPECT_EQ(limit_malloc_arenas(), 0);
  unsetenv("MALLOC_ARENA_MAX");
}

TEST(MallocArenas, SixteenThreadsAllocatingAtOnceShareTwoArenas) {
  ASSERT_EQ(limit_malloc_arenas(), kServerMallocArenas);
  constexpr int kThreads = 16;
  std::barrier together(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {  // bounded: 16 threads
    threads.emplace_back([&together] {
      std::vector<std::string> held;
      together.arrive_and_wait();  // all allocate at once: contention makes arenas
      for (int i = 0; i < 2000; ++i) held.emplace_back(200, 'x');
      together.arrive_and_wait();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(arenas(), kServerMallocArenas);
}

}  // namespace
}  // namespace dex
