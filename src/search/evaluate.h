// A compiled query against one run's SearchDoc: whether it matches, where it
// sorts, and the values a result row shows. Pure.
#pragma once

#include <optional>
#include <string>

#include "dex/flow_records.pb.h"
#include "search/filter.h"

namespace dex::search {

// The value of `field` in `doc`; nullopt when the run has none (a running
// run's CloseTime, an Attribute with no value or of another type).
std::optional<flow::SearchField> field_value(const flow::SearchDoc& doc, const FieldRef& field);

// Whether `doc` satisfies `filter` (docs/search.md, "Semantics": a predicate
// on a missing value is false, NOT negates whatever is inside).
bool matches(const Filter& filter, const flow::SearchDoc& doc);

// Bytes that sort like the run's place in `order` ascending: the order field's
// value (a missing one first), then the start time, Flow ID and run ID.
std::string sort_key(const Order& order, const flow::SearchDoc& doc);

}  // namespace dex::search
