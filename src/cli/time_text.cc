#include "cli/time_text.h"

#include <fmt/format.h>

#include <ctime>

namespace dex::cli {

std::string age_text(int64_t ms) {
  if (ms < 1000) return fmt::format("{}ms", ms);
  if (ms < 60'000) return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000);
  const int64_t s = ms / 1000;
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
}

std::string time_text(int64_t unix_ms, int64_t now) {
  if (unix_ms == 0) return "-";
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &utc);
  const int64_t age = now - unix_ms;
  const std::string rel = age >= 0 ? age_text(age) + " ago" : "in " + age_text(-age);
  return fmt::format("{}.{:03} UTC ({})", buf, unix_ms % 1000, rel);
}

}  // namespace dex::cli
