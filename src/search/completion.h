// Query completion (docs/search.md, "Completing a query"): what a query box
// may offer as the user types. The fields a query can name (the system fields
// and the index keys in use) and distinct values of a KEYWORD field that start
// with a prefix, read from the same index SearchFlows reads. Both are bounded
// by construction: neither reads more than a fixed number of keys, whatever
// the store holds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "dex/flow_api.pb.h"
#include "search/index_reader.h"

namespace dex::search {

// At most this many index keys in one ListSearchKeys answer (then `truncated`).
inline constexpr size_t kSearchKeysMax = 1000;
// ListSearchValues' limit: the default and the most one call may ask for.
inline constexpr int32_t kSearchValuesDefault = 20;
inline constexpr int32_t kSearchValuesMax = 100;
// The longest prefix ListSearchValues takes: a longer KEYWORD is not indexed.
inline constexpr size_t kSearchValuePrefixMax = 1024;

// The system fields, then the index keys in use in name order. Leaves
// applied_slot to the caller.
StatusOr<flow::ListSearchKeysResponse> list_search_keys(IndexReader& reader,
                                                        const flow::ListSearchKeysRequest& request);

// Distinct values of `request.key` (a KEYWORD or KEYWORD_ARRAY field with
// entries, or FlowId) that start with `request.prefix`, in byte order.
// INVALID_ARGUMENT naming the bad key, prefix or limit. Leaves applied_slot to
// the caller.
StatusOr<flow::ListSearchValuesResponse> list_search_values(
    IndexReader& reader, const flow::ListSearchValuesRequest& request);

}  // namespace dex::search
