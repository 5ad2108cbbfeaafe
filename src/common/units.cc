#include "common/units.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <utility>

namespace dex {

StatusOr<Duration> parse_duration(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument(fmt::format(
        "invalid duration '{}': {} (use a whole number and a unit: 250ms, 10s, 2m, 1h, 7d)", text,
        why));
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return bad("it must start with a number");
  uint64_t number = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc() || ptr != text.data() + digits) return bad("the number is too large");
  std::string_view unit = text.substr(digits);
  uint64_t unit_ns = 0;
  if (unit == "ms")
    unit_ns = 1'000'000ull;
  else if (unit == "s")
    unit_ns = 1'000'000'000ull;
  else if (unit == "m")
    unit_ns = 60'000'000'000ull;
  else if (unit == "h")
    unit_ns = 3'600'000'000'000ull;
  else if (unit == "d")
    unit_ns = 86'400'000'000'000ull;
  else if (unit.empty())
    return bad("the unit is missing");
  else
    return bad(fmt::format("unknown unit '{}'", unit));
  if (number == 0) return bad("it must be positive");
  if (number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / unit_ns) {
    return bad("the number is too large");
  }
  return Duration(static_cast<int64_t>(number * unit_ns));
}

std::string format_duration(Duration d) {
  int64_t ns = d.count();
  if (ns % 86'400'000'000'000 == 0 && ns != 0) return fmt::format("{}d", ns / 86'400'000'000'000);
  if (ns % 3'600'000'000'000 == 0 && ns != 0) return fmt::format("{}h", ns / 3'600'000'000'000);
  if (ns % 60'000'000'000 == 0 && ns != 0) return fmt::format("{}m", ns / 60'000'000'000);
  if (ns % 1'000'000'000 == 0) return fmt::format("{}s", ns / 1'000'000'000);
  return fmt::format("{}ms", ns / 1'000'000);
}

StatusOr<uint64_t> parse_bytes(std::string_view text) {
  static constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10}, {"B", 1}, {"", 1}};
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit_text = text.substr(digits);
  for (const auto& [unit, scale] : kUnits) {  // bounded by kUnits
    if (unit_text != unit) continue;
    uint64_t number = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, number);
    if (digits == 0 || ec != std::errc() || number > std::numeric_limits<uint64_t>::max() / scale)
      break;
    return number * scale;
  }
  return Status::invalid_argument(fmt::format(
      "'{}' is not a size: a whole number of bytes, or with a unit B, KiB, MiB or GiB (256KiB, "
      "64MiB)",
      text));
}

std::string format_bytes(uint64_t bytes) {
  if (bytes != 0 && bytes % (1ull << 30) == 0) return fmt::format("{}GiB", bytes >> 30);
  if (bytes != 0 && bytes % (1ull << 20) == 0) return fmt::format("{}MiB", bytes >> 20);
  if (bytes != 0 && bytes % (1ull << 10) == 0) return fmt::format("{}KiB", bytes >> 10);
  return fmt::format("{}B", bytes);
}

}  // namespace dex
