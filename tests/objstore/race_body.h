// Bodies that racing writers write and readers check: each is complete and
// self-describing, so a reader can tell a torn or mixed object from a good one.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace dex::objstore_test {

inline constexpr size_t kRaceBodyBytes = 256 * 1024;

// "body <n>\n" then a filler that depends on n and the position, to kRaceBodyBytes.
inline std::string race_body(int n) {
  std::string body = fmt::format("body {}\n", n);
  body.reserve(kRaceBodyBytes);
  for (size_t i = body.size(); i < kRaceBodyBytes; ++i) {
    body.push_back(static_cast<char>((static_cast<size_t>(n) * 131 + i * 7) % 251));
  }
  return body;
}

// True if `body` is exactly race_body(n) for the n its header names.
inline bool is_race_body(std::string_view body) {
  if (body.size() != kRaceBodyBytes || !body.starts_with("body ")) return false;
  size_t end = body.find('\n');
  if (end == std::string_view::npos || end > 16) return false;
  int n = 0;
  for (size_t i = 5; i < end; ++i) {
    if (body[i] < '0' || body[i] > '9') return false;
    n = n * 10 + (body[i] - '0');
  }
  return body == race_body(n);
}

}  // namespace dex::objstore_test
