#include "cli/list_query.h"

#include <cctype>
#include <chrono>

#include "common/rfc3339.h"
#include "common/units.h"
#include "search/query.h"

namespace dex::cli {

namespace {

constexpr std::string_view kStatuses[] = {"RUNNING",    "COMPLETED", "FAILED",          "CANCELED",
                                          "TERMINATED", "TIMED_OUT", "CONTINUED_AS_NEW"};

// "X = 'a'" for one value, "X IN ('a', 'b')" for several.
std::string one_of(std::string_view field, const std::vector<std::string>& values) {
  std::string out(field);
  if (values.size() == 1) return out + " = " + quote_literal(values[0]);
  out += " IN (";
  for (size_t i = 0; i < values.size(); ++i)  // bounded by the flags given
    out += (i == 0 ? "" : ", ") + quote_literal(values[i]);
  return out + ")";
}

}  // namespace

StatusOr<std::string> status_literal(std::string_view text) {
  std::string upper;
  for (char c : text)
    upper += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "CANCELLED") upper = "CANCELED";
  for (std::string_view s : kStatuses)
    if (s == upper) return std::string(s);
  std::string choices;
  for (std::string_view s : kStatuses) choices += (choices.empty() ? "" : ", ") + std::string(s);
  return Status::invalid_argument("'" + std::string(text) + "' is not a run status (" + choices +
                                  ")");
}

StatusOr<int64_t> parse_time_bound(std::string_view text, int64_t now_unix_ms) {
  // A duration ends in its unit's letters; a time ends in a digit or a zone.
  if (auto d = parse_duration(text); d.is_ok()) {
    const int64_t ago = std::chrono::duration_cast<std::chrono::milliseconds>(*d).count();
    return ago >= now_unix_ms ? 0 : now_unix_ms - ago;  // before 1970: from the start
  }
  if (auto t = parse_datetime(text); t.is_ok()) return *t;
  return Status::invalid_argument(
      "'" + std::string(text) +
      "' is neither a duration before now (30m, 1h, 7d) nor a time (RFC 3339 such as "
      "2027-01-15T10:00:00Z, or Unix milliseconds)");
}

std::string quote_literal(std::string_view value) { return search::string_literal(value); }

std::string list_query(const ListFilter& filter) {
  std::vector<std::string> parts;
  if (!filter.flow_types.empty()) parts.push_back(one_of("FlowType", filter.flow_types));
  if (!filter.statuses.empty()) parts.push_back(one_of("Status", filter.statuses));
  if (filter.since_unix_ms)
    parts.push_back("StartTime >= " + quote_literal(rfc3339_text(*filter.since_unix_ms)));
  if (filter.until_unix_ms)
    parts.push_back("StartTime < " + quote_literal(rfc3339_text(*filter.until_unix_ms)));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " AND ") + p;  // at most four
  return out + (out.empty() ? "" : " ") + "ORDER BY StartTime DESC";
}

}  // namespace dex::cli
