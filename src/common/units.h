// Durations and sizes as people write them in settings, flags and messages
// ("250ms", "10s", "2m"; "256KiB", "64MiB"). In common, not config, so that
// the SDKs and the engine print them without linking the YAML reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace dex {

// Parses "250ms", "10s", "2m", "1h", "7d": a positive whole number and a unit.
StatusOr<Duration> parse_duration(std::string_view text);
// The shortest exact form: 30000ms → "30s".
std::string format_duration(Duration d);

// Parses a size: a whole number of bytes, or with a unit B, KiB, MiB or GiB
// ("256KiB", "64MiB").
StatusOr<uint64_t> parse_bytes(std::string_view text);
// The shortest exact form: 262144 → "256KiB".
std::string format_bytes(uint64_t bytes);

}  // namespace dex
