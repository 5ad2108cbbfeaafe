#include "cli/attributes.h"

#include <absl/strings/escaping.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "cli/output.h"
#include "cli/proto_json.h"
#include "cli/time_text.h"

namespace dex::cli {

namespace {

using json = nlohmann::ordered_json;

template <typename Int>
bool parse_whole(std::string_view text, Int& out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

json double_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return d;
}

std::string cut(std::string text, size_t max) {
  if (text.size() > max) text = text.substr(0, max - 3) + "...";
  return text;
}

// One value as a table cell (or a history line): strings as they are.
std::string value_text(const flow::AttributeValue& v, int64_t now, size_t max) {
  using V = flow::AttributeValue;
  switch (v.value_case()) {
    case V::kStringValue:
      return cut(v.string_value(), max);
    case V::kDatetimeUnixMs:
      return now == 0 ? rfc3339_text(v.datetime_unix_ms()) : time_text(v.datetime_unix_ms(), now);
    case V::kBytesValue:
      return cut(absl::Base64Escape(v.bytes_value()), max) +
             fmt::format(" ({} bytes)", v.bytes_value().size());
    case V::VALUE_NOT_SET:
      return "(deleted)";
    default: {
      json j = attribute_json([&] {
        flow::Attribute a;
        *a.mutable_value() = v;
        return a;
      }())["value"];
      return cut(json_text(j), max);
    }
  }
}

std::string full_key(const flow::Attribute& a) {
  return a.instance_key().empty() ? a.key() : a.key() + "[" + a.instance_key() + "]";
}

// KEY=VALUE or KEY[INSTANCE]=VALUE (with_value), or KEY / KEY[INSTANCE].
struct Target {
  std::string key, instance, value;
};

StatusOr<Target> split_target(std::string_view text, bool with_value,
                              const std::string& default_instance) {
  Target t;
  const size_t stop = text.find_first_of(with_value ? "[=" : "[");
  t.key = std::string(text.substr(0, stop));
  if (t.key.empty()) return Status::invalid_argument("the key is empty");
  if (!with_value && t.key.find('=') != std::string::npos) {
    return Status::invalid_argument("a delete names KEY or KEY[INSTANCE], without a value");
  }
  if (stop == std::string_view::npos) {
    if (with_value) return Status::invalid_argument("expected KEY=VALUE");
    t.instance = default_instance;
    return t;
  }
  std::string_view rest = text.substr(stop);
  if (rest[0] == '[') {
    const size_t close = with_value ? rest.find("]=") : rest.size() - 1;
    if (close == std::string_view::npos || rest[close] != ']') {
      return Status::invalid_argument(with_value ? "expected KEY[INSTANCE]=VALUE"
                                                 : "expected KEY or KEY[INSTANCE]");
    }
    t.instance = std::string(rest.substr(1, close - 1));
    if (t.instance.empty()) return Status::invalid_argument("the instance key in [] is empty");
    rest = rest.substr(close + 1);
  } else {
    t.instance = default_instance;
  }
  if (with_value) t.value = std::string(rest.substr(1));  // after '='
  return t;
}

enum class Kind { kString, kInt64, kDouble, kBool, kDatetime, kJson, kBytes, kDelete };

Status fill_value(Kind kind, const std::string& text, flow::AttributeValue& v) {
  switch (kind) {
    case Kind::kString:
      v.set_string_value(text);
      return Status::ok();
    case Kind::kInt64: {
      int64_t n = 0;
      if (!parse_whole(text, n)) {
        return Status::invalid_argument("'" + text + "' is not a whole number (int64)");
      }
      v.set_int64_value(n);
      return Status::ok();
    }
    case Kind::kDouble: {
      char* end = nullptr;
      const double d = text.empty() ? 0 : std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(d)) {
        return Status::invalid_argument("'" + text + "' is not a finite number");
      }
      v.set_double_value(d);
      return Status::ok();
    }
    case Kind::kBool:
      if (text != "true" && text != "false") {
        return Status::invalid_argument("'" + text + "' is not true or false");
      }
      v.set_bool_value(text == "true");
      return Status::ok();
    case Kind::kDatetime: {
      auto ms = parse_datetime(text);
      if (!ms.is_ok()) return ms.status();
      v.set_datetime_unix_ms(*ms);
      return Status::ok();
    }
    case Kind::kJson: {
      // Any one JSON value: an object, an array, a string ("\"text\""), a
      // number, true, false or null (a value; --delete removes). The server
      // checks the rest: an Attribute indexed KEYWORD_ARRAY takes an array of
      // strings only.
      json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded()) {
        return Status::invalid_argument(
            "not valid JSON (an object, an array, a string in double quotes, a number, true, "
            "false or null)");
      }
      v.set_json_value(parsed.dump());
      return Status::ok();
    }
    case Kind::kBytes: {
      std::string bytes;
      if (!absl::Base64Unescape(text, &bytes)) return Status::invalid_argument("not base64");
      v.set_bytes_value(bytes);
      return Status::ok();
    }
    case Kind::kDelete:
      return Status::ok();
  }
  return Status::ok();
}

}  // namespace

std::string attribute_type_name(const flow::AttributeValue& v) {
  using V = flow::AttributeValue;
  switch (v.value_case()) {
    case V::kStringValue:
      return "string";
    case V::kInt64Value:
      return "int64";
    case V::kDoubleValue:
      return "double";
    case V::kBoolValue:
      return "bool";
    case V::kDatetimeUnixMs:
      return "datetime";
    case V::kJsonValue:
      return "json";
    case V::kBytesValue:
      return "bytes";
    case V::VALUE_NOT_SET:
      break;
  }
  return "";
}

json attribute_json(const flow::Attribute& a) {
  json out = {{"key", a.key()}};
  if (!a.instance_key().empty()) out["instanceKey"] = a.instance_key();
  const flow::AttributeValue& v = a.value();
  using V = flow::AttributeValue;
  if (!a.has_value() || v.value_case() == V::VALUE_NOT_SET) {
    out["deleted"] = true;
    return out;
  }
  out["type"] = attribute_type_name(v);
  switch (v.value_case()) {
    case V::kStringValue:
      out["value"] = v.string_value();
      break;
    case V::kInt64Value:
      out["value"] = v.int64_value();
      break;
    case V::kDoubleValue:
      out["value"] = double_json(v.double_value());
      break;
    case V::kBoolValue:
      out["value"] = v.bool_value();
      break;
    case V::kDatetimeUnixMs:
      out["value"] = rfc3339_text(v.datetime_unix_ms());
      out["unixMs"] = v.datetime_unix_ms();
      break;
    case V::kJsonValue:
      out["value"] = embed_json(v.json_value());
      break;
    case V::kBytesValue:
      out["value"] = absl::Base64Escape(v.bytes_value());
      break;
    case V::VALUE_NOT_SET:
      break;
  }
  return out;
}

json attributes_json(const google::protobuf::RepeatedPtrField<flow::Attribute>& attributes) {
  json out = json::array();
  for (const flow::Attribute& a : attributes) out.push_back(attribute_json(a));  // bounded
  return out;
}

std::string attributes_table(const std::vector<flow::Attribute>& attributes, int64_t now) {
  if (attributes.empty()) return "(no Attributes)\n";
  std::vector<std::string> keys, instances, types, values;
  size_t wk = 3, wi = 8, wt = 4;                 // the headers' widths
  for (const flow::Attribute& a : attributes) {  // bounded by the Attributes given
    keys.push_back(a.key());
    instances.push_back(a.instance_key().empty() ? "-" : a.instance_key());
    types.push_back(a.has_value() ? attribute_type_name(a.value()) : "-");
    values.push_back(value_text(a.value(), now, 80));
    wk = std::max(wk, keys.back().size());
    wi = std::max(wi, instances.back().size());
    wt = std::max(wt, types.back().size());
  }
  std::string out =
      fmt::format("{:<{}}  {:<{}}  {:<{}}  VALUE\n", "KEY", wk, "INSTANCE", wi, "TYPE", wt);
  for (size_t i = 0; i < keys.size(); ++i) {
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", keys[i], wk, instances[i], wi, types[i], wt,
                       values[i]);
  }
  return out;
}

std::string attribute_writes_text(
    const google::protobuf::RepeatedPtrField<flow::Attribute>& writes) {
  std::string out;
  for (const flow::Attribute& a : writes) {  // bounded by the writes
    out += (out.empty() ? "" : ", ") + full_key(a) + "=";
    if (a.value().value_case() == flow::AttributeValue::kStringValue) {
      out += json_text(json(cut(a.value().string_value(), 40)));
    } else {
      out += value_text(a.value(), 0, 40);
    }
  }
  return out;
}

StatusOr<std::vector<flow::Attribute>> parse_attribute_writes(const AttributeWriteFlags& flags) {
  const std::vector<std::tuple<const char*, Kind, const std::vector<std::string>*>> groups = {
      {"--string", Kind::kString, &flags.strings},
      {"--int", Kind::kInt64, &flags.int64s},
      {"--double", Kind::kDouble, &flags.doubles},
      {"--bool", Kind::kBool, &flags.bools},
      {"--datetime", Kind::kDatetime, &flags.datetimes},
      {"--json", Kind::kJson, &flags.jsons},
      {"--bytes-base64", Kind::kBytes, &flags.bytes_base64},
      {"--delete", Kind::kDelete, &flags.deletes},
      {"KEY=VALUE", Kind::kString, &flags.positional},
  };
  std::vector<flow::Attribute> writes;
  std::map<std::pair<std::string, std::string>, std::string> seen;  // target -> its flag
  for (const auto& [flag, kind, entries] : groups) {
    for (const std::string& entry : *entries) {  // bounded by the flags given
      const std::string named =
          std::string(flag) == "KEY=VALUE" ? "'" + entry + "'" : std::string(flag) + " " + entry;
      auto target = split_target(entry, kind != Kind::kDelete, flags.instance);
      if (!target.is_ok())
        return Status::invalid_argument(named + ": " + target.status().message());
      flow::Attribute a;
      a.set_key(target->key);
      a.set_instance_key(target->instance);
      if (kind != Kind::kDelete) {
        if (Status s = fill_value(kind, target->value, *a.mutable_value()); !s.is_ok()) {
          return Status::invalid_argument(named + ": " + s.message());
        }
      }
      auto [it, fresh] = seen.emplace(std::pair{a.key(), a.instance_key()}, named);
      if (!fresh) {
        return Status::invalid_argument(named + ": " + full_key(a) + " is already written by " +
                                        it->second + " (one write per Attribute)");
      }
      writes.push_back(std::move(a));
    }
  }
  if (writes.empty()) {
    return Status::invalid_argument(
        "nothing to write: give KEY=VALUE (a string), --string, --int, --double, --bool, "
        "--datetime, --json, --bytes-base64 or --delete");
  }
  return writes;
}

}  // namespace dex::cli
