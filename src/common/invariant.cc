#include "common/invariant.h"

#include <cstdio>
#include <cstdlib>

namespace dex {

void invariant_failed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "dex: invariant failed at %s:%d: %s (%s)\n", file, line, message, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace dex
