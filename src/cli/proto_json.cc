#include "cli/proto_json.h"

#include <absl/strings/escaping.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "cli/output.h"

namespace dex::cli {

namespace {

using json = nlohmann::ordered_json;
namespace pb = google::protobuf;

constexpr const char* kPayloadType = "dex.flow.Payload";

// The prefix up to and including a '_' that every value of the enum shares
// ("FLOW_" for FlowStatus; "" for HistoryKind, whose values differ).
std::string shared_prefix(const pb::EnumDescriptor& type) {
  std::string prefix;
  bool first = true;
  // Bounded by the enum's value count.
  for (int i = 0; i < type.value_count(); ++i) {
    const pb::EnumValueDescriptor* v = type.value(i);
    if (v->number() == 0) continue;
    const std::string name(v->name());
    if (first) {
      prefix = name;
      first = false;
      continue;
    }
    size_t n = 0;
    while (n < prefix.size() && n < name.size() && prefix[n] == name[n]) ++n;
    prefix.resize(n);
  }
  const size_t cut = prefix.rfind('_');
  if (cut == std::string::npos) return "";
  prefix.resize(cut + 1);
  // Only the type's own prefix, which its zero value carries too
  // (FLOW_STATUS_UNSPECIFIED): never a word two values happen to share.
  const pb::EnumValueDescriptor* zero = type.FindValueByNumber(0);
  if (zero == nullptr || std::string(zero->name()).rfind(prefix, 0) != 0) return "";
  return prefix;
}

json scalar(const pb::Message& m, const pb::FieldDescriptor& f, int index);

json field_value(const pb::Message& m, const pb::FieldDescriptor& f) {
  if (!f.is_repeated()) return scalar(m, f, -1);
  const pb::Reflection& r = *m.GetReflection();
  json out = json::array();
  const int n = r.FieldSize(m, &f);
  for (int i = 0; i < n; ++i) out.push_back(scalar(m, f, i));  // bounded by the field's size
  return out;
}

json scalar(const pb::Message& m, const pb::FieldDescriptor& f, int i) {
  const pb::Reflection& r = *m.GetReflection();
  const bool rep = i >= 0;
  using T = pb::FieldDescriptor;
  switch (f.cpp_type()) {
    case T::CPPTYPE_INT32:
      return rep ? r.GetRepeatedInt32(m, &f, i) : r.GetInt32(m, &f);
    case T::CPPTYPE_INT64:
      return rep ? r.GetRepeatedInt64(m, &f, i) : r.GetInt64(m, &f);
    case T::CPPTYPE_UINT32:
      return rep ? r.GetRepeatedUInt32(m, &f, i) : r.GetUInt32(m, &f);
    case T::CPPTYPE_UINT64:
      return rep ? r.GetRepeatedUInt64(m, &f, i) : r.GetUInt64(m, &f);
    case T::CPPTYPE_DOUBLE:
      return rep ? r.GetRepeatedDouble(m, &f, i) : r.GetDouble(m, &f);
    case T::CPPTYPE_FLOAT:
      return rep ? r.GetRepeatedFloat(m, &f, i) : r.GetFloat(m, &f);
    case T::CPPTYPE_BOOL:
      return rep ? r.GetRepeatedBool(m, &f, i) : r.GetBool(m, &f);
    case T::CPPTYPE_ENUM:
      return enum_value_text(*f.enum_type(),
                             rep ? r.GetRepeatedEnumValue(m, &f, i) : r.GetEnumValue(m, &f));
    case T::CPPTYPE_STRING: {
      const std::string s = rep ? r.GetRepeatedString(m, &f, i) : r.GetString(m, &f);
      return f.type() == T::TYPE_BYTES ? json(absl::Base64Escape(s)) : json(s);
    }
    case T::CPPTYPE_MESSAGE:
      return proto_to_json(rep ? r.GetRepeatedMessage(m, &f, i) : r.GetMessage(m, &f));
  }
  return nullptr;
}

}  // namespace

std::string json_text(const json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string enum_value_text(const pb::EnumDescriptor& type, int number) {
  const pb::EnumValueDescriptor* v = type.FindValueByNumber(number);
  if (v == nullptr) return "UNKNOWN";
  const std::string name(v->name());
  const std::string prefix = shared_prefix(type);
  return name.size() > prefix.size() ? name.substr(prefix.size()) : name;
}

json proto_to_json(const pb::Message& message) {
  const pb::Descriptor& d = *message.GetDescriptor();
  const pb::Reflection& r = *message.GetReflection();
  if (d.full_name() == kPayloadType) {
    const pb::FieldDescriptor* data = d.FindFieldByName("data");
    return embed_json(r.GetString(message, data));
  }
  std::vector<const pb::FieldDescriptor*> fields;
  r.ListFields(message, &fields);  // set fields only, in field-number order
  json out = json::object();
  for (const pb::FieldDescriptor* f : fields) {  // bounded by the message's field count
    out[std::string(f->json_name())] = field_value(message, *f);
  }
  return out;
}

}  // namespace dex::cli
