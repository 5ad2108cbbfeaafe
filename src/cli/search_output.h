// dexcli's output of SearchFlows (`flow search`, `flow list`): the JSON of a
// row and of a page, and the table for people. A row's JSON is its proto's
// (proto_json.h) with `fields` as an object of index key to value: KEYWORD
// and FULL_TEXT the text, KEYWORD_ARRAY the items, INT, DOUBLE and BOOL the
// number or bool, DATETIME RFC 3339 UTC with milliseconds.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "dex/flow_api.pb.h"

namespace dex::cli {

nlohmann::ordered_json search_field_json(const flow::SearchField& field);
// {flowId, runId, flowType, status, startUnixMs, closeUnixMs (closed runs),
// parentFlowId (SubFlows), fields (when the row carries any)}.
nlohmann::ordered_json search_row_json(const flow::FlowSearchRow& row);
// {query, rows, nextPageToken ("" on the last page), appliedSlot}.
nlohmann::ordered_json search_page_json(const std::string& query,
                                        const flow::SearchFlowsResponse& page);

// FLOW ID, RUN ID, TYPE, STATUS, STARTED (UTC and age), TOOK (closed runs),
// PARENT (when a row has one), then a column per index key the rows carry;
// "no runs" when there are none.
std::string search_table(const std::vector<flow::FlowSearchRow>& rows, int64_t now_unix_ms);

}  // namespace dex::cli
