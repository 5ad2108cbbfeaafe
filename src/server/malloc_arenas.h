// How many heaps glibc's malloc keeps for the server's threads.
//
// Why: glibc gives threads up to eight arenas per core, and memory freed in
// one arena's middle stays resident in small scattered pieces that
// malloc_trim cannot return. With 1,000,000 runs waiting, 46 MB of heap in
// use held 271 MiB of RSS with the default arenas and 115 MiB with two, at no
// CPU cost the peers rows could tell from noise (docs/performance.md, "Every
// target of issue 30"). Threads keep their own small-allocation caches (tcache), so few
// arenas contend little.
#pragma once

namespace dex {

inline constexpr int kServerMallocArenas = 2;

// Caps the arenas at kServerMallocArenas unless MALLOC_ARENA_MAX is set (an
// operator's choice wins). Call first thing in main, before any thread.
// Returns the cap it set, or 0 when the environment decides.
int limit_malloc_arenas();

}  // namespace dex
