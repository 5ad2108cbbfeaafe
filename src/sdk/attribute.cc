#include "sdk/attribute.h"

#include <cctype>
#include <cmath>

namespace dex {

namespace {

// Names are at most this long (the server's limit for every name).
constexpr size_t kNameBytesMax = 255;

bool same_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// Whether the server takes an index of this type on an Attribute of that
// type: the client's copy of fits() in src/flow/search_index.cc.
bool index_fits(flow::AttributeType attribute, flow::IndexType index) {
  switch (index) {
    case flow::INDEX_KEYWORD:
    case flow::INDEX_FULL_TEXT:
      return attribute == flow::ATTRIBUTE_STRING;
    case flow::INDEX_KEYWORD_ARRAY:
      return attribute == flow::ATTRIBUTE_JSON || attribute == flow::ATTRIBUTE_STRING;
    case flow::INDEX_INT:
      return attribute == flow::ATTRIBUTE_INT64;
    case flow::INDEX_DOUBLE:
      return attribute == flow::ATTRIBUTE_DOUBLE || attribute == flow::ATTRIBUTE_INT64;
    case flow::INDEX_BOOL:
      return attribute == flow::ATTRIBUTE_BOOL;
    case flow::INDEX_DATETIME:
      return attribute == flow::ATTRIBUTE_DATETIME;
    default:
      return false;
  }
}

// What an index type takes, in the SDK's value types.
std::string_view fitting_types(flow::IndexType index) {
  switch (index) {
    case flow::INDEX_KEYWORD:
    case flow::INDEX_FULL_TEXT:
      return "std::string";
    case flow::INDEX_KEYWORD_ARRAY:
      return "std::vector<std::string> or std::string";
    case flow::INDEX_INT:
      return "int64_t";
    case flow::INDEX_DOUBLE:
      return "double or int64_t";
    case flow::INDEX_BOOL:
      return "bool";
    case flow::INDEX_DATETIME:
      return "dex::DateTime";
    default:
      return "nothing";
  }
}

}  // namespace

namespace sdk_internal {

void AttributeCodec<std::vector<std::string>>::encode(const std::vector<std::string>& v,
                                                      flow::AttributeValue* out) {
  out->set_json_value(nlohmann::json(v).dump());
}

std::optional<std::vector<std::string>> AttributeCodec<std::vector<std::string>>::decode(
    const flow::AttributeValue& in) {
  if (in.value_case() != flow::AttributeValue::kJsonValue) return std::nullopt;
  nlohmann::json value = nlohmann::json::parse(in.json_value(), nullptr, false);
  if (!value.is_array()) return std::nullopt;  // also a parse error (discarded)
  std::vector<std::string> out;
  for (const auto& item : value) {  // bounded by the value's size
    if (!item.is_string()) return std::nullopt;
    out.push_back(item.get<std::string>());
  }
  return out;
}

void AttributeCodec<nlohmann::json>::encode(const nlohmann::json& v, flow::AttributeValue* out) {
  try {
    out->set_json_value(v.dump());
  } catch (const nlohmann::json::exception& e) {
    throw AttributeError(std::string("a JSON Attribute value cannot be written as JSON text: ") +
                         e.what());
  }
}

std::optional<nlohmann::json> AttributeCodec<nlohmann::json>::decode(
    const flow::AttributeValue& in) {
  if (in.value_case() != flow::AttributeValue::kJsonValue) return std::nullopt;
  nlohmann::json value = nlohmann::json::parse(in.json_value(), nullptr, false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

}  // namespace sdk_internal

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
      return "JSON";
    case flow::ATTRIBUTE_BYTES:
      return "bytes";
    default:
      return "unspecified";
  }
}

std::string_view index_type_name(flow::IndexType type) {
  switch (type) {
    case flow::INDEX_KEYWORD:
      return "KEYWORD";
    case flow::INDEX_FULL_TEXT:
      return "FULL_TEXT";
    case flow::INDEX_KEYWORD_ARRAY:
      return "KEYWORD_ARRAY";
    case flow::INDEX_INT:
      return "INT";
    case flow::INDEX_DOUBLE:
      return "DOUBLE";
    case flow::INDEX_BOOL:
      return "BOOL";
    case flow::INDEX_DATETIME:
      return "DATETIME";
    default:
      return "UNSPECIFIED";
  }
}

const std::vector<std::string_view>& search_system_fields() {
  static const std::vector<std::string_view> fields = {
      "FlowId",         "RunId",     "FlowType",          "Status",
      "StartTime",      "CloseTime", "ExecutionDuration", "ParentFlowId",
      "ActiveStepTypes"};
  return fields;
}

AttributeDef::AttributeDef(std::string key, flow::AttributeType type, bool is_map, Index index)
    : AttributeDef(std::move(key), type, is_map) {
  const std::string what = describe();
  if (index.type == flow::INDEX_TYPE_UNSPECIFIED || !flow::IndexType_IsValid(index.type)) {
    throw AttributeError(what + ": " + std::to_string(static_cast<int>(index.type)) +
                         " is not an index type (leave the index out for an Attribute that is "
                         "not searchable)");
  }
  const std::string type_name(index_type_name(index.type));
  if (is_map) throw AttributeError(what + " cannot be indexed: an AttributeMap has no index");
  if (!index_fits(type, index.type)) {
    throw AttributeError(what + " cannot have a " + type_name + " index: " + type_name +
                         " indexes " + std::string(fitting_types(index.type)) + " Attributes");
  }
  index_type_ = index.type;
  index_key_given_ = index.key;
  index_key_ = index.key.empty() ? key_ : index.key;
  if (index.key.empty() && key_.empty()) return;  // Flow::validate() names the empty key
  const std::string what_key = what + ": its index key '" + index_key_ + "'";
  if (index_key_.empty()) throw AttributeError(what + ": its index key is empty");
  if (index_key_.size() > kNameBytesMax) {
    throw AttributeError(what_key + " is longer than " + std::to_string(kNameBytesMax) + " bytes");
  }
  for (unsigned char c : index_key_) {
    if (c < 0x20 || c == 0x7f) throw AttributeError(what_key + " contains a control character");
  }
  for (std::string_view field : search_system_fields()) {
    if (same_ignoring_case(field, index_key_)) {
      throw AttributeError(what_key + " is the name of the system field '" + std::string(field) +
                           "' (in any case): give the index another key");
    }
  }
}

AttributeDef::AttributeDef(std::string key, flow::AttributeType type, bool is_map, Sync)
    : AttributeDef(std::move(key), type, is_map) {
  make_synced();
}

AttributeDef::AttributeDef(std::string key, flow::AttributeType type, bool is_map, Index index,
                           Sync)
    : AttributeDef(std::move(key), type, is_map, std::move(index)) {
  make_synced();
}

void AttributeDef::make_synced() {
  if (is_map_) {
    throw AttributeError(describe() +
                         " cannot sync: only plain Attributes sync to the Attribute Store (one "
                         "column each)");
  }
  synced_ = true;
}

flow::AttributeDeclaration AttributeDef::declaration() const {
  flow::AttributeDeclaration d;
  d.set_key(key_);
  d.set_type(type_);
  d.set_is_map(is_map_);
  if (indexed()) {
    d.mutable_index()->set_type(index_type_);
    d.mutable_index()->set_index_key(index_key_given_);
  }
  d.set_sync(synced_);
  return d;
}

std::string AttributeDef::describe() const {
  const std::string_view type =
      type_ == flow::ATTRIBUTE_JSON && index_type_ == flow::INDEX_KEYWORD_ARRAY
          ? "JSON array of strings"
          : attribute_type_name(type_);
  return std::string(type) + (is_map_ ? " AttributeMap '" : " Attribute '") + key_ + "'";
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

void check_json_index(const AttributeDef& def, bool holds_array) {
  const bool keyword_array = def.index_type() == flow::INDEX_KEYWORD_ARRAY;
  if (holds_array && !keyword_array) {
    throw AttributeError(
        "Attribute '" + def.key() +
        "' holds a JSON array (std::vector<std::string>), which the server takes only in an "
        "Attribute indexed KEYWORD_ARRAY: declare it {\"" +
        def.key() + "\", dex::flow::INDEX_KEYWORD_ARRAY}");
  }
  if (!holds_array && keyword_array) {
    throw AttributeError("JSON object Attribute '" + def.key() +
                         "' cannot have a KEYWORD_ARRAY index: such an Attribute holds a JSON "
                         "array of strings; declare it dex::Attribute<std::vector<std::string>> "
                         "(or dex::Attribute<nlohmann::json>)");
  }
}

const flow::SearchField* find_search_field(const flow::FlowSearchRow& row,
                                           const AttributeDef& def) {
  if (!def.indexed()) {
    throw AttributeError(def.describe() +
                         " is not indexed: search rows carry only indexed Attributes");
  }
  for (const auto& f : row.fields()) {  // bounded by the row
    if (f.key() == def.index_key()) return &f;
  }
  return nullptr;
}

std::optional<std::string> search_value(const flow::SearchField& f, std::string*) {
  switch (f.type()) {
    case flow::INDEX_KEYWORD:
    case flow::INDEX_FULL_TEXT:
      return f.text();
    case flow::INDEX_KEYWORD_ARRAY:  // a string Attribute: its one item
      if (f.items_size() > 0) return f.items(0);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::optional<int64_t> search_value(const flow::SearchField& f, int64_t*) {
  if (f.type() == flow::INDEX_INT) return f.int_value();
  if (f.type() == flow::INDEX_DOUBLE) return static_cast<int64_t>(std::llround(f.double_value()));
  return std::nullopt;
}

std::optional<double> search_value(const flow::SearchField& f, double*) {
  if (f.type() == flow::INDEX_DOUBLE) return f.double_value();
  return std::nullopt;
}

std::optional<bool> search_value(const flow::SearchField& f, bool*) {
  if (f.type() == flow::INDEX_BOOL) return f.bool_value();
  return std::nullopt;
}

std::optional<DateTime> search_value(const flow::SearchField& f, DateTime*) {
  if (f.type() == flow::INDEX_DATETIME) return DateTime::from_unix_ms(f.time_ms());
  return std::nullopt;
}

std::optional<std::vector<std::string>> search_value(const flow::SearchField& f,
                                                     std::vector<std::string>*) {
  if (f.type() != flow::INDEX_KEYWORD_ARRAY) return std::nullopt;
  return std::vector<std::string>(f.items().begin(), f.items().end());
}

}  // namespace sdk_internal

}  // namespace dex
