// Seeded randomness: every random choice in dex (backoff jitter, fault
// injection, simulation) draws from one of these so that a seed replays.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "common/clock.h"

namespace dex {

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  uint64_t next() { return engine_(); }
  // Uniform in [0, n); n > 0. The modulo bias is below 2^-40 for n < 2^24.
  uint64_t uniform(uint64_t n) { return engine_() % n; }
  // Uniform in [lo, hi].
  Duration between(Duration lo, Duration hi) {
    if (hi <= lo) return lo;
    return lo +
           Duration(static_cast<int64_t>(uniform(static_cast<uint64_t>((hi - lo).count()) + 1)));
  }
  // True with probability p.
  bool chance(double p) { return static_cast<double>(engine_() >> 11) * 0x1.0p-53 < p; }

 private:
  std::mt19937_64 engine_;  // the raw output sequence is fixed by the C++ standard
};

// 128 random bits as 32 hex digits, from the OS: write IDs and process IDs.
std::string random_hex_id();
// "<hostname>-<pid>-<8 hex>": the holder process ID written into the lease.
std::string make_process_id();

}  // namespace dex
