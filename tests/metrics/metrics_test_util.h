// Helpers for the metrics tests: reading one series out of the text exposition.
#pragma once

#include <optional>
#include <sstream>
#include <string>

namespace dex::testing {

// The value of the series written exactly as `series` (name and labels, e.g.
// `dexzd_flows_total{outcome="failed"}`) in a text exposition; nullopt if absent.
inline std::optional<double> series_value(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

// `dexzd_object_store_requests_total{operation="<op>",outcome="<outcome>"}`.
inline std::string request_series(const std::string& op, const std::string& outcome) {
  return "dexzd_object_store_requests_total{operation=\"" + op + "\",outcome=\"" + outcome + "\"}";
}

}  // namespace dex::testing
