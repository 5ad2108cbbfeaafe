#include "sdk/attribute.h"

namespace dex {

JsonObject::JsonObject(nlohmann::json value) : value_(std::move(value)) {
  if (!value_.is_object()) {
    throw std::invalid_argument("a dex::JsonObject holds a JSON object, not " +
                                std::string(value_.type_name()) + " " + value_.dump());
  }
}

std::optional<JsonObject> JsonObject::parse(std::string_view text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return std::nullopt;  // also a parse error (discarded)
  return JsonObject(std::move(value));
}

std::string_view attribute_type_name(flow::AttributeType type) {
  switch (type) {
    case flow::ATTRIBUTE_STRING:
      return "string";
    case flow::ATTRIBUTE_INT64:
      return "int64";
    case flow::ATTRIBUTE_DOUBLE:
      return "double";
    case flow::ATTRIBUTE_BOOL:
      return "bool";
    case flow::ATTRIBUTE_DATETIME:
      return "datetime";
    case flow::ATTRIBUTE_JSON:
      return "JSON object";
    case flow::ATTRIBUTE_BYTES:
      return "bytes";
    default:
      return "unspecified";
  }
}

flow::AttributeDeclaration AttributeDef::declaration() const {
  flow::AttributeDeclaration d;
  d.set_key(key_);
  d.set_type(type_);
  d.set_is_map(is_map_);
  return d;
}

std::string AttributeDef::describe() const {
  return std::string(attribute_type_name(type_)) + (is_map_ ? " AttributeMap '" : " Attribute '") +
         key_ + "'";
}

namespace sdk_internal {

const flow::AttributeValue* find_attribute(const flow::GetAttributesResponse& response,
                                           const std::string& key,
                                           const std::string& instance_key) {
  for (const auto& a : response.attributes()) {
    if (a.key() == key && a.instance_key() == instance_key && a.has_value()) return &a.value();
  }
  return nullptr;
}

}  // namespace sdk_internal

}  // namespace dex
