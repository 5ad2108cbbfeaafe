// Typed dex Attributes: per-run values declared in a Flow's persistence
// schema (Flow::attributes()), read by Steps and RPC handlers from their task
// and written in their result, and read or written by clients.
//
//   const dex::Attribute<std::string> status{"order-status"};
//   const dex::AttributeMap<int64_t> stock{"stock"};  // one value per instance key
//
//   // In a Step's wait_for/execute or an RPC handler:
//   std::optional<std::string> s = status.get(ctx);
//   status.set(ctx, "shipped");
//   stock.set(ctx, "sku-1", 4);
//   stock.remove(ctx, "sku-2");
//
// Value types: std::string, int64_t, double, bool, dex::DateTime (Unix ms),
// dex::JsonObject (a JSON object) and dex::Bytes. A misuse (a key the Flow
// does not declare, a key the method does not read, a definition whose type
// differs from the declaration) throws dex::AttributeError naming the key; in
// a Step or RPC it fails the attempt non-retryably.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <compare>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dex/flow.pb.h"
#include "dex/flow_api.pb.h"

namespace dex {

class Context;  // sdk/flow.h

// ---------------------------------------------------------------- value types

// A wall-clock time with millisecond precision (stored as Unix ms).
struct DateTime {
  int64_t unix_ms = 0;

  DateTime() = default;
  DateTime(std::chrono::system_clock::time_point t)  // NOLINT: implicit by design
      : unix_ms(
            std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count()) {}
  static DateTime from_unix_ms(int64_t ms) {
    DateTime d;
    d.unix_ms = ms;
    return d;
  }
  static DateTime now() { return DateTime(std::chrono::system_clock::now()); }
  std::chrono::system_clock::time_point time_point() const {
    return std::chrono::system_clock::time_point(std::chrono::milliseconds(unix_ms));
  }
  auto operator<=>(const DateTime&) const = default;
};

// A JSON object (stored as its text). Constructing one from a JSON value that
// is not an object throws std::invalid_argument.
class JsonObject {
 public:
  JsonObject() : value_(nlohmann::json::object()) {}
  JsonObject(nlohmann::json value);  // NOLINT: implicit by design; checked
  // Parses `text`; std::nullopt when it is not JSON or not an object.
  static std::optional<JsonObject> parse(std::string_view text);
  const nlohmann::json& value() const { return value_; }
  const nlohmann::json& operator*() const { return value_; }
  const nlohmann::json* operator->() const { return &value_; }
  std::string text() const { return value_.dump(); }
  bool operator==(const JsonObject& other) const { return value_ == other.value_; }

 private:
  nlohmann::json value_;
};

// Raw bytes.
struct Bytes {
  std::string data;
  bool operator==(const Bytes&) const = default;
};

// A misused Attribute: its message names the key. In a Step or an RPC handler
// it fails the attempt, non-retryably (the Worker catches it as a FlowFailure).
class AttributeError : public std::runtime_error {
 public:
  explicit AttributeError(const std::string& message) : std::runtime_error(message) {}
};

namespace sdk_internal {

template <typename T>
struct AttributeCodec {
  static_assert(sizeof(T) == 0,
                "dex Attributes hold std::string, int64_t, double, bool, dex::DateTime, "
                "dex::JsonObject or dex::Bytes");
};

#define DEX_ATTRIBUTE_CODEC(T, TYPE, NAME, CASE, GET, SET)                    \
  template <>                                                                 \
  struct AttributeCodec<T> {                                                  \
    static constexpr flow::AttributeType kType = flow::TYPE;                  \
    static constexpr const char* kName = NAME;                                \
    static void encode(const T& v, flow::AttributeValue* out) { SET; }        \
    static std::optional<T> decode(const flow::AttributeValue& in) {          \
      if (in.value_case() != flow::AttributeValue::CASE) return std::nullopt; \
      return GET;                                                             \
    }                                                                         \
  };
DEX_ATTRIBUTE_CODEC(std::string, ATTRIBUTE_STRING, "string", kStringValue, in.string_value(),
                    out->set_string_value(v))
DEX_ATTRIBUTE_CODEC(int64_t, ATTRIBUTE_INT64, "int64", kInt64Value, in.int64_value(),
                    out->set_int64_value(v))
DEX_ATTRIBUTE_CODEC(double, ATTRIBUTE_DOUBLE, "double", kDoubleValue, in.double_value(),
                    out->set_double_value(v))
DEX_ATTRIBUTE_CODEC(bool, ATTRIBUTE_BOOL, "bool", kBoolValue, in.bool_value(),
                    out->set_bool_value(v))
DEX_ATTRIBUTE_CODEC(DateTime, ATTRIBUTE_DATETIME, "datetime", kDatetimeUnixMs,
                    DateTime::from_unix_ms(in.datetime_unix_ms()),
                    out->set_datetime_unix_ms(v.unix_ms))
DEX_ATTRIBUTE_CODEC(JsonObject, ATTRIBUTE_JSON, "JSON object", kJsonValue,
                    JsonObject::parse(in.json_value()), out->set_json_value(v.text()))
DEX_ATTRIBUTE_CODEC(Bytes, ATTRIBUTE_BYTES, "bytes", kBytesValue, Bytes{in.bytes_value()},
                    out->set_bytes_value(v.data))
#undef DEX_ATTRIBUTE_CODEC

}  // namespace sdk_internal

// An Attribute value as the API carries it, e.g. for Client::wait_for_attribute.
template <typename T>
flow::AttributeValue attribute_value(const T& value) {
  flow::AttributeValue out;
  sdk_internal::AttributeCodec<T>::encode(value, &out);
  return out;
}
inline flow::AttributeValue attribute_value(const char* value) {
  return attribute_value(std::string(value));
}

// "string", "int64", ... for messages.
std::string_view attribute_type_name(flow::AttributeType type);

// ---------------------------------------------------------------- definitions

// What every Attribute and AttributeMap definition is, untyped: its key, its
// type and whether it is a map. Flow::attributes() lists these, and
// AttributeReads names them.
class AttributeDef {
 public:
  AttributeDef(std::string key, flow::AttributeType type, bool is_map)
      : key_(std::move(key)), type_(type), is_map_(is_map) {}
  const std::string& key() const { return key_; }
  flow::AttributeType type() const { return type_; }
  bool is_map() const { return is_map_; }
  flow::AttributeDeclaration declaration() const;
  // "string Attribute 'order-status'", "int64 AttributeMap 'stock'".
  std::string describe() const;

 private:
  std::string key_;
  flow::AttributeType type_;
  bool is_map_;
};

// The Attributes a Step or an RPC reads (its tasks carry only those): every
// one the Flow declares (the default), or the ones listed.
//   dex::AttributeReads attribute_reads() const override { return {status, stock}; }
class AttributeReads {
 public:
  AttributeReads() = default;  // every declared Attribute
  AttributeReads(std::initializer_list<AttributeDef> defs) : all_(false) {
    for (const auto& d : defs) keys_.push_back(d.key());
  }
  static AttributeReads all() { return {}; }
  static AttributeReads none() { return of_keys({}); }
  static AttributeReads of_keys(std::vector<std::string> keys) {
    AttributeReads r;
    r.all_ = false;
    r.keys_ = std::move(keys);
    return r;
  }
  bool is_all() const { return all_; }
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  bool all_ = true;
  std::vector<std::string> keys_;
};

namespace sdk_internal {
// The Context's side of typed access (sdk/flow.cc); each throws AttributeError.
std::optional<flow::AttributeValue> read_attribute(const Context& context, const AttributeDef& def,
                                                   const std::string& instance_key);
std::vector<std::string> attribute_instances(const Context& context, const AttributeDef& def);
void write_attribute(Context& context, const AttributeDef& def, const std::string& instance_key,
                     std::optional<flow::AttributeValue> value);

// The stored value as a T; throws AttributeError naming the key when it holds another type.
template <typename T>
T decode_attribute(const AttributeDef& def, const std::string& instance_key,
                   const flow::AttributeValue& value) {
  std::optional<T> out = AttributeCodec<T>::decode(value);
  if (!out) {
    throw AttributeError("Attribute '" + def.key() +
                         (instance_key.empty() ? "" : "' instance '" + instance_key) +
                         "' does not hold a " + AttributeCodec<T>::kName + " value");
  }
  return *std::move(out);
}

// The value of (key, instance_key) in a GetAttributesResponse, if any.
const flow::AttributeValue* find_attribute(const flow::GetAttributesResponse& response,
                                           const std::string& key, const std::string& instance_key);
}  // namespace sdk_internal

// One typed value per run.
template <typename T>
class Attribute : public AttributeDef {
 public:
  explicit Attribute(std::string key)
      : AttributeDef(std::move(key), sdk_internal::AttributeCodec<T>::kType, false) {}

  // In a Step or RPC handler: the value as the task carried it, with this
  // method's own writes applied; std::nullopt when it has none.
  std::optional<T> get(const Context& context) const {
    auto v = sdk_internal::read_attribute(context, *this, "");
    if (!v) return std::nullopt;
    return sdk_internal::decode_attribute<T>(*this, "", *v);
  }
  // Written with the method's result (in call order); later gets see it.
  void set(Context& context, const T& value) const {
    sdk_internal::write_attribute(context, *this, "", attribute_value(value));
  }
  // Deletes the value (a write without a value).
  void remove(Context& context) const {
    sdk_internal::write_attribute(context, *this, "", std::nullopt);
  }

  // Client side: the value in an answer of Client::get_attributes.
  std::optional<T> get(const flow::GetAttributesResponse& response) const {
    const flow::AttributeValue* v = sdk_internal::find_attribute(response, key(), "");
    if (v == nullptr) return std::nullopt;
    return sdk_internal::decode_attribute<T>(*this, "", *v);
  }
  // Client side: a write for Client::set_attributes or StartOptions.
  flow::Attribute write(const T& value) const {
    flow::Attribute a;
    a.set_key(key());
    *a.mutable_value() = attribute_value(value);
    return a;
  }
  flow::Attribute deletion() const {
    flow::Attribute a;
    a.set_key(key());
    return a;
  }
};

// A family of typed values per run, one per runtime instance key (non-empty);
// each instance is read and written on its own.
template <typename T>
class AttributeMap : public AttributeDef {
 public:
  explicit AttributeMap(std::string key)
      : AttributeDef(std::move(key), sdk_internal::AttributeCodec<T>::kType, true) {}

  std::optional<T> get(const Context& context, const std::string& instance_key) const {
    auto v = sdk_internal::read_attribute(context, *this, instance_key);
    if (!v) return std::nullopt;
    return sdk_internal::decode_attribute<T>(*this, instance_key, *v);
  }
  void set(Context& context, const std::string& instance_key, const T& value) const {
    sdk_internal::write_attribute(context, *this, instance_key, attribute_value(value));
  }
  void remove(Context& context, const std::string& instance_key) const {
    sdk_internal::write_attribute(context, *this, instance_key, std::nullopt);
  }
  // The instance keys that have a value (the task's, with this method's
  // writes applied), in order.
  std::vector<std::string> instances(const Context& context) const {
    return sdk_internal::attribute_instances(context, *this);
  }
  // Every instance with its value, by instance key.
  std::map<std::string, T> all(const Context& context) const {
    std::map<std::string, T> out;
    for (const auto& k : instances(context)) {
      if (auto v = get(context, k)) out.emplace(k, *std::move(v));
    }
    return out;
  }

  // Client side, as Attribute's.
  std::optional<T> get(const flow::GetAttributesResponse& response,
                       const std::string& instance_key) const {
    const flow::AttributeValue* v = sdk_internal::find_attribute(response, key(), instance_key);
    if (v == nullptr) return std::nullopt;
    return sdk_internal::decode_attribute<T>(*this, instance_key, *v);
  }
  std::map<std::string, T> all(const flow::GetAttributesResponse& response) const {
    std::map<std::string, T> out;
    for (const auto& a : response.attributes()) {
      if (a.key() != key() || a.instance_key().empty() || !a.has_value()) continue;
      out.emplace(a.instance_key(),
                  sdk_internal::decode_attribute<T>(*this, a.instance_key(), a.value()));
    }
    return out;
  }
  flow::Attribute write(const std::string& instance_key, const T& value) const {
    flow::Attribute a;
    a.set_key(key());
    a.set_instance_key(instance_key);
    *a.mutable_value() = attribute_value(value);
    return a;
  }
  flow::Attribute deletion(const std::string& instance_key) const {
    flow::Attribute a;
    a.set_key(key());
    a.set_instance_key(instance_key);
    return a;
  }
};

}  // namespace dex
