// SearchFlows (docs/search.md): a visibility query over the runs of one
// applied state, answered a page at a time with keyset page tokens. The face
// of src/search: parse (query.h), compile (filter.h), plan and run here.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "dex/flow_api.pb.h"
#include "search/index_reader.h"

namespace dex::search {

inline constexpr int32_t kPageSizeDefault = 100;
inline constexpr int32_t kPageSizeMax = 1000;
// A plan that would read more candidate runs off one index than this reads
// the start-time order instead (docs/search.md, "Plans").
inline constexpr size_t kCandidatesMax = 20'000;

// One page of the runs `request.query` selects, in its order, after
// `request.page_token`. Errors: INVALID_ARGUMENT naming the bad query part,
// page size, token or field. Leaves applied_slot to the caller, who knows
// which slot `reader` shows.
StatusOr<flow::SearchFlowsResponse> search_flows(IndexReader& reader,
                                                 const flow::SearchFlowsRequest& request);

// How the last search_flows on this thread found its rows (for tests and the
// benchmark): "flow-id", "point-stream", "candidates", "start-time", "full-scan".
const char* last_plan();

}  // namespace dex::search
