// How hard a write is pushed to disk before it is acknowledged (the spec's
// dev.durabilityMode / --durability).
#pragma once

#include <optional>
#include <string_view>

namespace dex {

enum class Durability {
  kStrict,            // fsync file and directory before replying: survives power loss
  kProcessCrashSafe,  // no fsync: survives a process crash, not a host crash
  kRelaxed,           // no fsync; after an abrupt exit the data directory is not trusted
};

std::string_view durability_name(Durability d);
// Accepts exactly "strict", "processCrashSafe", "relaxed".
std::optional<Durability> parse_durability(std::string_view s);

}  // namespace dex
