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
// nlohmann::json (any JSON value: an object, an array, a string, a number,
// true, false or null), dex::JsonObject (a JSON object, checked) and
// dex::Bytes (any bytes); std::vector<std::string> (a JSON array of strings)
// for an Attribute indexed KEYWORD_ARRAY. JSON null is a value
// (`doc.set(ctx, nullptr)`, read back as a json null); remove() deletes. A misuse (a
// key the Flow does not declare, a key the method does not read, a definition
// whose type differs from the declaration) throws dex::AttributeError naming
// the key; in a Step or RPC it fails the attempt non-retryably.
//
// Searchable Attributes (docs/search.md): a second argument gives the index
// type and, optionally, the key queries use (default: the Attribute's key).
//   const dex::Attribute<std::string> customer{"customer", dex::flow::INDEX_KEYWORD};
//   const dex::Attribute<dex::DateTime> placed{"placed-at",
//                                              {dex::flow::INDEX_DATETIME, "PlacedAt"}};
// An index the server would refuse (a type it does not fit, a system field's
// name) throws dex::AttributeError when the Attribute is constructed.
//
// Synced Attributes (the Attribute Store): dex::kSync as the last argument
// makes the server project the Attribute's writes into the run's Attribute
// Store, a column of the same name in a PostgreSQL or MySQL table (the store
// is the Flow's Flow::attribute_store(), or the start's
// StartOptions::attribute_store).
//   const dex::Attribute<std::string> status{"order-status", dex::kSync};
//   const dex::Attribute<std::string> customer{"customer", dex::flow::INDEX_KEYWORD, dex::kSync};
// Only plain Attributes sync: an AttributeMap has no constructor that takes
// dex::kSync (a compile-time error).
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

// A JSON object (stored as its text), for an Attribute that holds only
// objects: constructing one from a JSON value that is not an object throws
// std::invalid_argument, and a stored value that is not an object does not
// read as one. Any JSON value: dex::Attribute<nlohmann::json>.
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
                "nlohmann::json, dex::JsonObject or dex::Bytes");
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

// Any JSON value, stored as its text. A value that cannot be written as JSON
// text (a string that is not UTF-8) throws AttributeError; a NaN or infinite
// number is written as null (JSON has neither). A stored text that does not
// parse does not decode.
template <>
struct AttributeCodec<nlohmann::json> {
  static constexpr flow::AttributeType kType = flow::ATTRIBUTE_JSON;
  static constexpr const char* kName = "JSON";
  static void encode(const nlohmann::json& v, flow::AttributeValue* out);
  static std::optional<nlohmann::json> decode(const flow::AttributeValue& in);
};

// The keywords of an Attribute indexed KEYWORD_ARRAY: a JSON Attribute that
// holds an array of strings (the server refuses any other value in such an
// Attribute).
template <>
struct AttributeCodec<std::vector<std::string>> {
  static constexpr flow::AttributeType kType = flow::ATTRIBUTE_JSON;
  static constexpr const char* kName = "JSON array of strings";
  static void encode(const std::vector<std::string>& v, flow::AttributeValue* out);
  static std::optional<std::vector<std::string>> decode(const flow::AttributeValue& in);
};

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

// ---------------------------------------------------------------- search index

// How SearchFlows finds runs by an Attribute's value (docs/search.md,
// "Indexed Attributes"): the index type, and the key queries name it by
// (empty: the Attribute's own key). Index keys are shared by every Flow type
// of the node, so one key has one index type everywhere.
//   {dex::flow::INDEX_KEYWORD}                  KEYWORD std::string
//   {dex::flow::INDEX_FULL_TEXT}                words of a std::string
//   {dex::flow::INDEX_KEYWORD_ARRAY}            std::vector<std::string> (or one std::string)
//   {dex::flow::INDEX_INT}                      int64_t
//   {dex::flow::INDEX_DOUBLE, "Total"}          double or int64_t, queried as Total
//   {dex::flow::INDEX_BOOL}, {dex::flow::INDEX_DATETIME}   bool, dex::DateTime
struct Index {
  Index(flow::IndexType type, std::string key = "")  // NOLINT: implicit by design
      : type(type), key(std::move(key)) {}
  flow::IndexType type;
  std::string key;
};

// "KEYWORD", "FULL_TEXT", ... as queries and errors name them.
std::string_view index_type_name(flow::IndexType type);

// ---------------------------------------------------------------- Attribute Store

// The tag of a synced Attribute (AttributeDeclaration.sync): its writes are
// projected into the run's Attribute Store, one column named by its key. The
// run's store is the start's (StartOptions::attribute_store), else its Flow's
// (Flow::attribute_store()); a run without a store syncs nothing. Only plain
// Attributes sync, one value per run and column: an AttributeMap cannot.
//   const dex::Attribute<int64_t> items{"items", dex::kSync};
struct Sync {};
inline constexpr Sync kSync{};

// The names every run has in queries (FlowId, Status, StartTime, ...): no
// index key may take one, in any case.
const std::vector<std::string_view>& search_system_fields();

// ---------------------------------------------------------------- definitions

// What every Attribute and AttributeMap definition is, untyped: its key, its
// type, whether it is a map, its search index, if any, and whether it syncs
// to the Attribute Store. Flow::attributes() lists these, and AttributeReads
// names them.
class AttributeDef {
 public:
  AttributeDef(std::string key, flow::AttributeType type, bool is_map)
      : key_(std::move(key)), type_(type), is_map_(is_map) {}
  // Indexed. Throws AttributeError, naming the Attribute, for an index the
  // server would refuse: a map, an index type that does not fit the
  // Attribute's type, an index key that is a system field's name or not a
  // valid name (docs/search.md, "Indexed Attributes").
  AttributeDef(std::string key, flow::AttributeType type, bool is_map, Index index);
  // Synced (see Sync), with or without an index. Throws AttributeError,
  // naming the Attribute, for a map: only plain Attributes sync (the server
  // refuses a declaration with a synced AttributeMap).
  AttributeDef(std::string key, flow::AttributeType type, bool is_map, Sync);
  AttributeDef(std::string key, flow::AttributeType type, bool is_map, Index index, Sync);
  const std::string& key() const { return key_; }
  flow::AttributeType type() const { return type_; }
  bool is_map() const { return is_map_; }
  bool indexed() const { return index_type_ != flow::INDEX_TYPE_UNSPECIFIED; }
  flow::IndexType index_type() const { return index_type_; }
  // The name queries use: the index's key, else the Attribute's; "" when not indexed.
  const std::string& index_key() const { return index_key_; }
  // Its writes sync to the run's Attribute Store.
  bool synced() const { return synced_; }
  flow::AttributeDeclaration declaration() const;
  // "string Attribute 'order-status'", "int64 AttributeMap 'stock'".
  std::string describe() const;

 private:
  std::string key_;
  flow::AttributeType type_;
  bool is_map_;
  flow::IndexType index_type_ = flow::INDEX_TYPE_UNSPECIFIED;
  std::string index_key_;        // the effective one
  std::string index_key_given_;  // as declared (empty: the Attribute's key)
  bool synced_ = false;

  void make_synced();  // throws AttributeError for a map
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

// The checks a typed definition adds to AttributeDef's, for the value types
// that hold JSON: a dex::JsonObject cannot hold the array a KEYWORD_ARRAY
// index needs, and a std::vector<std::string> needs that index (an
// nlohmann::json may hold anything: no check). Throws AttributeError naming
// the Attribute.
void check_json_index(const AttributeDef& def, bool holds_array);

// An indexed Attribute's field in a search row (the index key's), if the row has it.
const flow::SearchField* find_search_field(const flow::FlowSearchRow& row, const AttributeDef& def);

// A search field as a T, as the index keeps it: a DOUBLE index of an int64
// Attribute gives the value rounded to an integer.
std::optional<std::string> search_value(const flow::SearchField& f, std::string*);
std::optional<int64_t> search_value(const flow::SearchField& f, int64_t*);
std::optional<double> search_value(const flow::SearchField& f, double*);
std::optional<bool> search_value(const flow::SearchField& f, bool*);
std::optional<DateTime> search_value(const flow::SearchField& f, DateTime*);
std::optional<std::vector<std::string>> search_value(const flow::SearchField& f,
                                                     std::vector<std::string>*);
}  // namespace sdk_internal

// One typed value per run; searchable when declared with an Index, synced to
// the run's Attribute Store when declared with dex::kSync.
template <typename T>
class Attribute : public AttributeDef {
  static constexpr bool kHoldsArray = std::is_same_v<T, std::vector<std::string>>;
  // Whether the value type fixes the shape of the JSON (not nlohmann::json).
  static constexpr bool kShapedJson =
      sdk_internal::AttributeCodec<T>::kType == flow::ATTRIBUTE_JSON &&
      !std::is_same_v<T, nlohmann::json>;

 public:
  explicit Attribute(std::string key)
      : AttributeDef(std::move(key), sdk_internal::AttributeCodec<T>::kType, false) {
    if constexpr (kHoldsArray) sdk_internal::check_json_index(*this, true);
  }
  // Indexed (see Index); throws AttributeError when the server would refuse it.
  Attribute(std::string key, Index index)
      : AttributeDef(std::move(key), sdk_internal::AttributeCodec<T>::kType, false,
                     std::move(index)) {
    if constexpr (kShapedJson) sdk_internal::check_json_index(*this, kHoldsArray);
  }
  // Synced to the run's Attribute Store (see Sync), unindexed or indexed.
  Attribute(std::string key, Sync sync)
      : AttributeDef(std::move(key), sdk_internal::AttributeCodec<T>::kType, false, sync) {
    if constexpr (kHoldsArray) sdk_internal::check_json_index(*this, true);
  }
  Attribute(std::string key, Index index, Sync sync)
      : AttributeDef(std::move(key), sdk_internal::AttributeCodec<T>::kType, false,
                     std::move(index), sync) {
    if constexpr (kShapedJson) sdk_internal::check_json_index(*this, kHoldsArray);
  }

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

  // Client side: the value in a row of Client::search_flows, which carries
  // the index keys the query named or SearchOptions::fields asked for;
  // std::nullopt when the row has none. Throws AttributeError for an
  // Attribute that is not indexed.
  std::optional<T> get(const flow::FlowSearchRow& row) const {
    const flow::SearchField* f = sdk_internal::find_search_field(row, *this);
    if (f == nullptr) return std::nullopt;
    return sdk_internal::search_value(*f, static_cast<T*>(nullptr));
  }
};

// A family of typed values per run, one per runtime instance key (non-empty);
// each instance is read and written on its own.
template <typename T>
class AttributeMap : public AttributeDef {
  static_assert(!std::is_same_v<T, std::vector<std::string>>,
                "a JSON array is held only by an Attribute indexed KEYWORD_ARRAY, and an "
                "AttributeMap cannot be indexed");

 public:
  explicit AttributeMap(std::string key)
      : AttributeDef(std::move(key), sdk_internal::AttributeCodec<T>::kType, true) {}
  // An AttributeMap cannot sync to the Attribute Store: only plain Attributes
  // sync (one column each). Declare a dex::Attribute with dex::kSync instead.
  AttributeMap(std::string key, Sync) = delete;

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
