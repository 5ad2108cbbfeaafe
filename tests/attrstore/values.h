// Attribute values by type, for the Attribute Store's tests (with and without a server).
#pragma once

#include <cstdint>
#include <string>

#include "dex/flow.pb.h"

namespace dex::attrstore::testing {

inline flow::AttributeValue str(std::string v) {
  flow::AttributeValue a;
  a.set_string_value(std::move(v));
  return a;
}
inline flow::AttributeValue i64(int64_t v) {
  flow::AttributeValue a;
  a.set_int64_value(v);
  return a;
}
inline flow::AttributeValue dbl(double v) {
  flow::AttributeValue a;
  a.set_double_value(v);
  return a;
}
inline flow::AttributeValue boolean(bool v) {
  flow::AttributeValue a;
  a.set_bool_value(v);
  return a;
}
inline flow::AttributeValue datetime(int64_t unix_ms) {
  flow::AttributeValue a;
  a.set_datetime_unix_ms(unix_ms);
  return a;
}
inline flow::AttributeValue json(std::string v) {
  flow::AttributeValue a;
  a.set_json_value(std::move(v));
  return a;
}
inline flow::AttributeValue bytes(std::string v) {
  flow::AttributeValue a;
  a.set_bytes_value(std::move(v));
  return a;
}

}  // namespace dex::attrstore::testing
