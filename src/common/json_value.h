// Whether text is one JSON value (RFC 8259): an object, an array, a string, a
// number, true, false or null, with nothing but whitespace around it. What a
// JSON Attribute may hold (docs/flow-rules.md, "Attributes"). Strict: no
// comments, trailing commas, single quotes, NaN, numbers beyond a double's
// range, invalid UTF-8 or unpaired surrogate escapes; nested at most
// kJsonDepthMax arrays and objects deep, so that every reader of the value
// (the SDKs, dexcli) can take it without deep recursion.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dex {

inline constexpr size_t kJsonDepthMax = 100;

namespace json_value_internal {

// Counts the nesting as the parser goes and stops it past the limit; keeps
// the parser's reason for a syntax error.
class DepthCheck {
 public:
  using Json = nlohmann::json;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(Json::number_integer_t) { return true; }
  bool number_unsigned(Json::number_unsigned_t) { return true; }
  bool number_float(Json::number_float_t, const Json::string_t&) { return true; }
  bool string(Json::string_t&) { return true; }
  bool binary(Json::binary_t&) { return true; }
  bool start_object(size_t) { return open(); }
  bool key(Json::string_t&) { return true; }
  bool end_object() { return close(); }
  bool start_array(size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    error = e.what();
    // nlohmann's messages start "[json.exception.parse_error.101] parse error at line 1, ...".
    if (const size_t at = error.find("] "); at != std::string::npos) error.erase(0, at + 2);
    // "; last read: '<token>'" repeats the text, which may be any bytes: the
    // reason goes into messages and records that hold UTF-8 only.
    constexpr std::string_view kLastRead = "; last read: '";
    if (const size_t at = error.find(kLastRead); at != std::string::npos) {
      const size_t end = error.find("'; expected", at + kLastRead.size());
      error.erase(at, end == std::string::npos ? std::string::npos : end + 1 - at);
    }
    for (char& c : error) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    return false;
  }

  std::string error;  // set when the text is not JSON
  bool too_deep = false;

 private:
  bool open() {
    if (++depth_ > kJsonDepthMax) {
      too_deep = true;
      return false;
    }
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  size_t depth_ = 0;
};

}  // namespace json_value_internal

// OK when `text` is one JSON value; else InvalidArgument saying why ("not
// valid JSON: ..." or the nesting limit), for the caller to prefix with what
// the text is.
inline Status check_json_value(std::string_view text) {
  json_value_internal::DepthCheck check;
  const bool ok = nlohmann::json::sax_parse(text, &check, nlohmann::json::input_format_t::json,
                                            /*strict=*/true);
  if (ok) return Status::ok();
  if (check.too_deep) {
    return Status::invalid_argument("JSON nested deeper than " + std::to_string(kJsonDepthMax) +
                                    " arrays and objects");
  }
  return Status::invalid_argument(
      "not valid JSON: " + (check.error.empty() ? std::string("it does not parse") : check.error));
}

}  // namespace dex
