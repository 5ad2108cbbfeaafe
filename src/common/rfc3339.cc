#include "common/rfc3339.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace dex {

namespace {

constexpr int64_t kMsPerDay = 86'400'000;

// Days since 1970-01-01 of a proleptic Gregorian date, and back (the
// well-known era-based civil calendar algorithms, exact for any int64 day).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void civil_from_days(int64_t z, int64_t& y, int64_t& m, int64_t& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp + (mp < 10 ? 3 : -9);
  y = yoe + era * 400 + (m <= 2);
}

bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t days_in_month(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : kDays[m - 1];
}

// `n` decimal digits at `text[pos]`, or -1.
int64_t digits(std::string_view text, size_t pos, size_t n) {
  if (pos + n > text.size()) return -1;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

bool parse_whole(std::string_view text, int64_t& out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string rfc3339_text(int64_t unix_ms) {
  // Floor division: a time before 1970 is the day before plus a positive remainder.
  int64_t days = unix_ms / kMsPerDay;
  int64_t rem = unix_ms % kMsPerDay;
  if (rem < 0) {
    rem += kMsPerDay;
    --days;
  }
  int64_t y = 0, m = 0, d = 0;
  civil_from_days(days, y, m, d);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", y, m, d, rem / 3'600'000,
                     rem / 60'000 % 60, rem / 1000 % 60, rem % 1000);
}

StatusOr<int64_t> parse_datetime(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  int64_t whole = 0;
  if (parse_whole(text, whole)) return whole;  // Unix milliseconds
  const auto bad = [&](const std::string& why) {
    return Status::invalid_argument(
        quoted + " is not a datetime (RFC 3339 like 2026-12-02T10:00:00Z, or Unix ms): " + why);
  };
  const int64_t y = digits(text, 0, 4), mo = digits(text, 5, 2), d = digits(text, 8, 2);
  const int64_t h = digits(text, 11, 2), mi = digits(text, 14, 2), s = digits(text, 17, 2);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || s < 0 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' ||
      text[16] != ':') {
    return bad("expected YYYY-MM-DDTHH:MM:SS");
  }
  if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo)) return bad("no such date");
  if (h > 23 || mi > 59 || s > 59) return bad("no such time of day");
  size_t pos = 19;
  int64_t ms = 0;
  if (pos < text.size() && text[pos] == '.') {
    size_t n = 0;
    for (++pos; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos, ++n) {
      if (n < 3) {
        ms = ms * 10 + (text[pos] - '0');
      } else if (text[pos] != '0') {
        return bad("finer than a millisecond");
      }
    }
    if (n == 0) return bad("no digits after '.'");
    for (; n < 3; ++n) ms *= 10;
  }
  int64_t offset_min = 0;
  const std::string_view zone = text.substr(std::min(pos, text.size()));
  if (zone == "Z" || zone == "z") {
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' &&
             digits(zone, 1, 2) >= 0 && digits(zone, 4, 2) >= 0 && digits(zone, 1, 2) <= 23 &&
             digits(zone, 4, 2) <= 59) {
    offset_min = digits(zone, 1, 2) * 60 + digits(zone, 4, 2);
    if (zone[0] == '-') offset_min = -offset_min;
  } else {
    return bad("expected a time zone: Z or +HH:MM");
  }
  return days_from_civil(y, mo, d) * kMsPerDay + h * 3'600'000 + mi * 60'000 + s * 1000 + ms -
         offset_min * 60'000;
}

}  // namespace dex
