#include "server/malloc_arenas.h"

#include <malloc.h>

#include <cstdlib>

namespace dex {

int limit_malloc_arenas() {
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return 0;
  return mallopt(M_ARENA_MAX, kServerMallocArenas) == 1 ? kServerMallocArenas : 0;
}

}  // namespace dex
