// Times as RFC 3339 text, both ways: the CLI's Attribute values and the
// search language's DATETIME literals read and write the same shape.
// Hand-written: the standard library's chrono parsing (C++20 from_stream) is
// not in the toolchain's libstdc++, and these two functions are small.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dex {

// "2026-12-02T10:00:00.000Z" (always milliseconds: one shape for tools).
std::string rfc3339_text(int64_t unix_ms);
// RFC 3339 ("2026-12-02T10:00:00Z", "2026-12-02T11:00:00.250+01:00"; 'T' or
// a space) or a whole number of Unix milliseconds. Finer than a millisecond
// is refused rather than rounded.
StatusOr<int64_t> parse_datetime(std::string_view text);

}  // namespace dex
