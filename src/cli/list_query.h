// `dexcli flow list` as a SearchFlows query (docs/search.md): its filters
// checked and written in the query language, so that the list is a search
// like any other and the server plans it the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dex::cli {

struct ListFilter {
  std::vector<std::string> statuses;  // as the query names them: RUNNING, COMPLETED, ...
  std::vector<std::string> flow_types;
  std::optional<int64_t> since_unix_ms;  // StartTime at or after
  std::optional<int64_t> until_unix_ms;  // StartTime before
};

// The status a --status value names, as queries write it: RUNNING,
// COMPLETED, FAILED, CANCELED, TERMINATED, TIMED_OUT, in any case, with '-'
// for '_' (timed-out) and CANCELLED accepted. InvalidArgument naming the
// value and the choices otherwise.
StatusOr<std::string> status_literal(std::string_view text);

// A --since/--until value: a duration before `now_unix_ms` (30m, 1h, 7d: the
// units of durations elsewhere), an RFC 3339 time (2027-01-15T10:00:00Z) or
// Unix milliseconds. InvalidArgument naming the value otherwise.
StatusOr<int64_t> parse_time_bound(std::string_view text, int64_t now_unix_ms);

// `value` as a query's string literal: single quotes, with \ ' newline and
// tab escaped.
std::string quote_literal(std::string_view value);

// "FlowType IN ('A', 'B') AND Status IN ('RUNNING') AND StartTime >=
// '2027-01-15T10:00:00.000Z' ORDER BY StartTime DESC": newest first, every
// run when no filter is given.
std::string list_query(const ListFilter& filter);

}  // namespace dex::cli
