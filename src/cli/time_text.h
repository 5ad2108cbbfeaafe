// Times and ages as dexcli's tables print them.
#pragma once

#include <cstdint>
#include <string>

namespace dex::cli {

// "2026-12-01 21:44:13.120 UTC (5.2s ago)"; "-" for 0.
std::string time_text(int64_t unix_ms, int64_t now_unix_ms);
// "850ms", "5.2s", "3m12s", "2h05m", "3d04h".
std::string age_text(int64_t ms);

}  // namespace dex::cli
