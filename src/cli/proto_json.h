// dexcli's JSON for the dex Flow API's messages, one shape per message type
// whichever command prints it: keys are the proto fields' camelCase JSON
// names, unset and empty fields are left out, enum values print without the
// prefix their type's values share (FLOW_COMPLETED → "COMPLETED"), Payloads
// print as the JSON value they hold, and 64-bit integers (Unix ms times and
// ms durations) print as numbers.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace google::protobuf {
class EnumDescriptor;
class Message;
}  // namespace google::protobuf

namespace dex::cli {

nlohmann::ordered_json proto_to_json(const google::protobuf::Message& message);

// `value` as text; bytes that are not UTF-8 (in a Payload, say) print as U+FFFD
// rather than failing the output.
std::string json_text(const nlohmann::ordered_json& value, int indent = -1);

// An enum value's printed name (see above); "UNKNOWN" for a number the type lacks.
std::string enum_value_text(const google::protobuf::EnumDescriptor& type, int number);

}  // namespace dex::cli
