#include "common/durability.h"

namespace dex {

std::string_view durability_name(Durability d) {
  switch (d) {
    case Durability::kStrict:
      return "strict";
    case Durability::kProcessCrashSafe:
      return "processCrashSafe";
    case Durability::kRelaxed:
      return "relaxed";
  }
  return "unknown";
}

std::optional<Durability> parse_durability(std::string_view s) {
  if (s == "strict") return Durability::kStrict;
  if (s == "processCrashSafe") return Durability::kProcessCrashSafe;
  if (s == "relaxed") return Durability::kRelaxed;
  return std::nullopt;
}

}  // namespace dex
