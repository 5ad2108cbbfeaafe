#include "cli/search_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "cli/flow_table.h"
#include "cli/proto_json.h"
#include "cli/time_text.h"
#include "common/rfc3339.h"

namespace dex::cli {

namespace {

using json = nlohmann::ordered_json;

json number_json(double d) {
  if (std::isfinite(d)) return d;
  return d > 0 ? "Infinity" : "-Infinity";  // JSON has no infinities (a NaN is never indexed)
}

// A field's value in a table cell, long text cut.
std::string field_text(const flow::SearchField& f) {
  constexpr size_t kCellMax = 40;
  std::string text;
  switch (f.type()) {
    case flow::INDEX_KEYWORD:
    case flow::INDEX_FULL_TEXT:
      text = f.text();
      break;
    case flow::INDEX_KEYWORD_ARRAY:
      for (const auto& item : f.items()) text += (text.empty() ? "" : ",") + item;
      break;
    case flow::INDEX_INT:
      text = std::to_string(f.int_value());
      break;
    case flow::INDEX_DOUBLE:
      text = fmt::format("{}", f.double_value());
      break;
    case flow::INDEX_BOOL:
      text = f.bool_value() ? "true" : "false";
      break;
    case flow::INDEX_DATETIME:
      text = rfc3339_text(f.time_ms());
      break;
    default:
      break;
  }
  if (text.size() > kCellMax) text = text.substr(0, kCellMax - 3) + "...";
  return text;
}

}  // namespace

json search_field_json(const flow::SearchField& f) {
  switch (f.type()) {
    case flow::INDEX_KEYWORD:
    case flow::INDEX_FULL_TEXT:
      return f.text();
    case flow::INDEX_KEYWORD_ARRAY: {
      json items = json::array();
      for (const auto& item : f.items()) items.push_back(item);
      return items;
    }
    case flow::INDEX_INT:
      return f.int_value();
    case flow::INDEX_DOUBLE:
      return number_json(f.double_value());
    case flow::INDEX_BOOL:
      return f.bool_value();
    case flow::INDEX_DATETIME:
      return rfc3339_text(f.time_ms());
    default:
      return nullptr;
  }
}

json search_row_json(const flow::FlowSearchRow& row) {
  json out = proto_to_json(row);
  if (row.fields_size() > 0) {
    json fields = json::object();
    for (const auto& f : row.fields()) fields[f.key()] = search_field_json(f);
    out["fields"] = std::move(fields);  // in place of the proto's list
  }
  return out;
}

json search_page_json(const std::string& query, const flow::SearchFlowsResponse& page) {
  json rows = json::array();
  for (const auto& r : page.rows()) rows.push_back(search_row_json(r));
  return {{"query", query},
          {"rows", std::move(rows)},
          {"nextPageToken", page.next_page_token()},
          {"appliedSlot", page.applied_slot()}};
}

std::string search_table(const std::vector<flow::FlowSearchRow>& rows, int64_t now) {
  if (rows.empty()) return "no runs\n";
  std::set<std::string> keys;
  bool parents = false;
  for (const auto& r : rows) {  // bounded by the rows
    for (const auto& f : r.fields()) keys.insert(f.key());
    parents = parents || !r.parent_flow_id().empty();
  }
  std::vector<std::string> header = {"FLOW ID", "RUN ID", "TYPE", "STATUS", "STARTED", "TOOK"};
  if (parents) header.push_back("PARENT");
  header.insert(header.end(), keys.begin(), keys.end());
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows) {  // bounded by the rows
    std::vector<std::string> line = {
        r.flow_id(),
        r.run_id(),
        r.flow_type(),
        enum_value_text(*flow::FlowStatus_descriptor(), r.status()),
        time_text(r.start_unix_ms(), now),
        r.close_unix_ms() == 0 ? "-" : age_text(r.close_unix_ms() - r.start_unix_ms())};
    if (parents) line.push_back(r.parent_flow_id().empty() ? "-" : r.parent_flow_id());
    for (const auto& key : keys) {  // bounded by the index keys
      auto f = std::find_if(r.fields().begin(), r.fields().end(),
                            [&](const flow::SearchField& x) { return x.key() == key; });
      line.push_back(f == r.fields().end() ? "-" : field_text(*f));
    }
    cells.push_back(std::move(line));
  }
  return render_table(header, cells);
}

}  // namespace dex::cli
