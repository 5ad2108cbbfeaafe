// The search index's key layout (docs/search.md, "The index"): what the flow
// rules write for each run and what SearchFlows' planner scans. Pure encoding,
// no store: the bottom of the search index.
//
//   ~x/d/<flowId>\x1f<runId>                       -> SearchDoc (one per run)
//   ~x/i/<key>\x1f<value><start><flowId>\x1f<runId><lengths> -> "" (one per value)
//   ~x/k/<indexKey>                                -> IndexKeyEntry
//
// <value> is a type tag and an order-preserving encoding, so that one field's
// entries of one type sort by value; <start> is the run's start time (8 bytes,
// order-preserving), so that the entries of one value sort by start time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dex/flow.pb.h"
#include "dex/flow_records.pb.h"

namespace dex::flow::search_keys {

inline constexpr std::string_view kDocPrefix = "~x/d/";
inline constexpr std::string_view kEntryPrefix = "~x/i/";
inline constexpr std::string_view kIndexKeyPrefix = "~x/k/";

std::string doc(std::string_view flow_id, std::string_view run_id);
// Every run of one Flow ID.
std::string flow_docs(std::string_view flow_id);
std::string index_key(std::string_view key);
// Every entry of one field: "~x/i/<key>\x1f".
std::string field(std::string_view key);

// Value encodings, each a type tag and bytes that sort like the value.
// Strings are escaped (\0 -> \0\xff) and end with \0\x01, so a prefix of a
// string's encoding without the end is the encoding of every string that
// starts with it.
std::string keyword(std::string_view s);         // KEYWORD, KEYWORD_ARRAY items
std::string keyword_prefix(std::string_view s);  // every keyword starting with s
std::string token(std::string_view s);           // FULL_TEXT tokens (already folded)
std::string token_prefix(std::string_view s);
std::string integer(int64_t v);
std::string real(double v);  // -0.0 as 0.0; never NaN
std::string boolean(bool v);
std::string time(int64_t unix_ms);
// The tag of each encoding: the prefix of every value of the type.
inline constexpr char kKeywordTag = 'k', kTokenTag = 't', kIntTag = 'i', kRealTag = 'd',
                      kBoolTag = 'b', kTimeTag = 'T';

// One entry: field(key) + value + start + flowId \x1f runId + the two IDs' lengths.
std::string entry(std::string_view key, std::string_view value, int64_t start_ms,
                  std::string_view flow_id, std::string_view run_id);

// The run an entry names. Its start time is read from the fixed-width bytes
// before the IDs; false for a key that is not an entry.
struct EntryRun {
  int64_t start_ms = 0;
  std::string_view flow_id, run_id;
};
bool parse_entry(std::string_view entry_key, EntryRun* out);
// The run of a doc key.
bool parse_doc(std::string_view doc_key, std::string_view* flow_id, std::string_view* run_id);

// The 8 bytes that sort like `v` (big-endian, sign bit flipped).
std::string sortable64(int64_t v);
int64_t from_sortable64(std::string_view eight_bytes);

}  // namespace dex::flow::search_keys
