// dexcli's Attributes: the JSON and table of a run's Attributes, and the
// typed write flags of `flow attributes set` checked before anything is sent.
//
// JSON of one Attribute: {"key", "instanceKey" (AttributeMap instances only),
// "type", "value"}; type is string, int64, double, bool, datetime, json or
// bytes, and the value is rendered naturally: a string, a number (a double
// that is not finite as "NaN", "Infinity", "-Infinity"), true/false, a
// datetime as RFC 3339 UTC with milliseconds plus "unixMs", a JSON value (an
// object, an array, a string, a number, true, false or null) as the parsed
// value, bytes as base64. A write that deletes has "deleted": true and no type
// or value (a JSON null is a value: "type": "json", "value": null).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/rfc3339.h"
#include "common/status.h"
#include "dex/flow.pb.h"

namespace dex::cli {

// "string", "int64", ...; "" when the value holds nothing.
std::string attribute_type_name(const flow::AttributeValue& value);
nlohmann::ordered_json attribute_json(const flow::Attribute& attribute);
nlohmann::ordered_json attributes_json(const google::protobuf::RepeatedPtrField<flow::Attribute>&);

// KEY, INSTANCE, TYPE, VALUE: datetimes as UTC with their age, long values cut.
std::string attributes_table(const std::vector<flow::Attribute>& attributes, int64_t now_unix_ms);
// "status=\"started\", counts[a]=5": a history event's writes, in a line.
std::string attribute_writes_text(const google::protobuf::RepeatedPtrField<flow::Attribute>&);

// The flags of `flow attributes set`. Each entry is KEY=VALUE, KEY[INSTANCE]=VALUE
// for an AttributeMap instance (the instance runs to the first "]="); deletes
// are KEY or KEY[INSTANCE]. A positional KEY=VALUE is a string. A --json
// VALUE is any one JSON value (a string in double quotes), sent compact.
struct AttributeWriteFlags {
  std::vector<std::string> strings, int64s, doubles, bools, datetimes, jsons, bytes_base64, deletes;
  std::vector<std::string> positional;  // KEY=VALUE: strings
  // The instance key of every write that does not name one in brackets.
  std::string instance;
};

// The writes, or InvalidArgument whose message starts with the bad flag and
// its argument ("--int64 count=abc: ..."). At least one write; the same
// Attribute (key and instance) at most once.
StatusOr<std::vector<flow::Attribute>> parse_attribute_writes(const AttributeWriteFlags& flags);

}  // namespace dex::cli
