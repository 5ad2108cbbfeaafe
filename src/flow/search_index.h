// The search index of the runs (docs/search.md): a SearchDoc per run and its
// ordered entries (search_keys.h), kept by the flow rules in the same
// transaction as the record that changed a value, so a search reads exactly
// one applied slot and a replay or a hot standby rebuilds the same index.
// Also the index keys in use (which Flow types declare each, and its type).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "dex/flow.pb.h"
#include "dex/flow_records.pb.h"
#include "flow/flow_txn.h"

namespace dex::flow {

// Limits of what one run puts in the index (docs/search.md, "Limits").
inline constexpr size_t kIndexedAttributesMax = 64;   // per declaration
inline constexpr size_t kSearchItemsMax = 64;         // KEYWORD_ARRAY items per value
inline constexpr size_t kSearchTokensMax = 256;       // FULL_TEXT tokens per value
inline constexpr size_t kSearchValueBytesMax = 1024;  // a longer KEYWORD is not indexed

// The fields every run has. Indexed ones have entries; the others are
// evaluated on the SearchDoc only.
struct SystemField {
  std::string_view name;
  IndexType type;
  bool indexed;   // has entries (~x/i/<name>)
  bool sortable;  // may follow ORDER BY
};
const std::vector<SystemField>& system_fields();
// nullptr for a name that is not a system field (names are case-sensitive).
const SystemField* find_system_field(std::string_view name);
inline constexpr std::string_view kFlowIdField = "FlowId", kRunIdField = "RunId",
                                  kFlowTypeField = "FlowType", kStatusField = "Status",
                                  kStartTimeField = "StartTime", kCloseTimeField = "CloseTime",
                                  kDurationField = "ExecutionDuration",
                                  kParentField = "ParentFlowId",
                                  kActiveStepsField = "ActiveStepTypes";

std::string_view index_type_name(IndexType type);  // "KEYWORD", ...
// A status as queries write it ("RUNNING", ...); "" for UNSPECIFIED.
std::string_view search_status_name(FlowStatus status);

// FULL_TEXT's tokens: maximal runs of letters, digits and non-ASCII bytes,
// ASCII case-folded, distinct, in first-seen order, at most `max`.
std::vector<std::string> text_tokens(std::string_view text, size_t max = kSearchTokensMax);

// The index key of an Attribute declaration (its own, or the Attribute's key).
std::string_view index_key_of(const AttributeDeclaration& a);
// Checks a declaration's indexes: a type that fits the Attribute's, a plain
// Attribute (not a map), a name, no system field's name, no key twice,
// at most kIndexedAttributesMax.
Status validate_indexes(const FlowDeclaration& declaration);

// Checks that `declaration` gives no index key another type than the live
// (latest) declaration of another Flow type does; names both Flow types.
Status check_index_keys(FlowTxn& txn, const FlowDeclaration& declaration);
// Records `declaration` as its Flow type's live one in the index keys:
// `previous` (its type's former latest, or nullptr) gives up the keys it no
// longer declares.
void register_index_keys(FlowTxn& txn, const FlowDeclaration& declaration,
                         const FlowDeclaration* previous);

// The SearchDoc of `run` as the state holds it now.
SearchDoc build_search_doc(FlowTxn& txn, const Run& run, const FlowDeclaration& declaration);
// Its system fields only (what the Run record alone gives).
SearchDoc system_doc(const Run& run);
// The entry keys of a doc, sorted, without repeats.
std::vector<std::string> search_entries(const SearchDoc& doc);

// Brings the index of every run the transaction touched (FlowTxn::take_touched_runs)
// up to date: writes the changed doc and the entries that differ; a deleted
// run loses its doc and entries.
void update_search_index(FlowTxn& txn);

}  // namespace dex::flow
