// Query completion over the search index (docs/search.md, "Completing a
// query"). Distinct values come from the entries of one field: the entries of
// one value are adjacent (they differ only after the value's encoding), so
// after reading one entry the next read seeks past all of that value's
// entries. Each value costs one seek and one key, whatever number of runs
// hold it.
#include "search/completion.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "flow/search_index.h"
#include "flow/search_keys.h"

namespace dex::search {

namespace {

namespace sk = flow::search_keys;

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// The first key in [from, to), if any: one seek.
std::optional<std::string> first_key(IndexReader& reader, std::string_view from,
                                     std::string_view to) {
  std::optional<std::string> out;
  reader.scan(from, to, false, [&](std::string_view key, std::string_view) {
    out = std::string(key);
    return false;
  });
  return out;
}

// The string a keyword encoding (after its tag) holds, and the encoding's
// length with its end; nullopt for bytes that are not one.
std::optional<std::pair<std::string, size_t>> decode_keyword(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {  // bounded by the key's length
    if (bytes[i] != '\0') {
      out.push_back(bytes[i]);
      continue;
    }
    if (i + 1 >= bytes.size()) return std::nullopt;
    if (bytes[i + 1] == '\x01') return std::make_pair(out, i + 2);
    if (bytes[i + 1] != '\xff') return std::nullopt;
    out.push_back('\0');
    ++i;
  }
  return std::nullopt;
}

// The field `key` names and its index type; INVALID_ARGUMENT for none or a
// type without listed values.
Status values_field(IndexReader& reader, const std::string& key) {
  if (key.empty()) return Status::invalid_argument("key: required (a KEYWORD field)");
  flow::IndexType type = flow::INDEX_TYPE_UNSPECIFIED;
  if (const auto* f = flow::find_system_field(key)) {
    if (key == flow::kFlowIdField) return Status::ok();  // listed from the runs' documents
    if (!f->indexed)
      return Status::invalid_argument("key " + quoted(key) +
                                      ": the system field has no index to list values from");
    type = f->type;
  } else if (auto bytes = reader.get(sk::index_key(key))) {
    flow::IndexKeyEntry entry;
    if (!entry.ParseFromString(*bytes))
      return Status::corruption("index key " + quoted(key) + ": unreadable entry");
    type = entry.type();
  } else {
    return Status::invalid_argument("key " + quoted(key) +
                                    ": not a system field nor an index key in use");
  }
  if (type != flow::INDEX_KEYWORD && type != flow::INDEX_KEYWORD_ARRAY)
    return Status::invalid_argument("key " + quoted(key) + " is " +
                                    std::string(flow::index_type_name(type)) +
                                    ": values are listed for KEYWORD and KEYWORD_ARRAY keys only");
  return Status::ok();
}

}  // namespace

StatusOr<flow::ListSearchKeysResponse> list_search_keys(IndexReader& reader,
                                                        const flow::ListSearchKeysRequest&) {
  flow::ListSearchKeysResponse out;
  for (const auto& f : flow::system_fields()) {  // bounded: nine fields
    auto* k = out.add_keys();
    k->set_name(std::string(f.name));
    k->set_type(f.type);
    k->set_system(true);
    k->set_sortable(f.sortable);
  }
  const std::string prefix(sk::kIndexKeyPrefix);
  size_t n = 0;
  Status bad = Status::ok();
  // Bounded by kSearchKeysMax + 1 keys.
  reader.scan(prefix, prefix_end(prefix), false, [&](std::string_view key, std::string_view value) {
    if (n++ == kSearchKeysMax) {
      out.set_truncated(true);
      return false;
    }
    flow::IndexKeyEntry entry;
    if (!entry.ParseFromString(std::string(value))) {
      bad = Status::corruption("index key " + quoted(key.substr(prefix.size())) +
                               ": unreadable entry");
      return false;
    }
    auto* k = out.add_keys();
    k->set_name(std::string(key.substr(prefix.size())));
    k->set_type(entry.type());
    // What an ORDER BY accepts: a field of one value with an order.
    k->set_sortable(entry.type() == flow::INDEX_KEYWORD || entry.type() == flow::INDEX_INT ||
                    entry.type() == flow::INDEX_DOUBLE || entry.type() == flow::INDEX_DATETIME ||
                    entry.type() == flow::INDEX_BOOL);
    for (const auto& t : entry.flow_types()) k->add_flow_types(t);
    return true;
  });
  if (!bad.is_ok()) return bad;
  return out;
}

StatusOr<flow::ListSearchValuesResponse> list_search_values(
    IndexReader& reader, const flow::ListSearchValuesRequest& request) {
  if (request.limit() < 0 || request.limit() > kSearchValuesMax)
    return Status::invalid_argument(
        "limit: " + std::to_string(request.limit()) + " is not within 0 (the default, " +
        std::to_string(kSearchValuesDefault) + ") .. " + std::to_string(kSearchValuesMax));
  if (request.prefix().size() > kSearchValuePrefixMax)
    return Status::invalid_argument("prefix: " + std::to_string(request.prefix().size()) +
                                    " bytes, longer than an indexed value (at most " +
                                    std::to_string(kSearchValuePrefixMax) + ")");
  if (auto s = values_field(reader, request.key()); !s.is_ok()) return s;
  const size_t limit =
      static_cast<size_t>(request.limit() == 0 ? kSearchValuesDefault : request.limit());

  flow::ListSearchValuesResponse out;
  if (request.key() == flow::kFlowIdField) {
    // Flow IDs from the documents' keys: one seek per Flow ID, past its runs.
    const std::string start = std::string(sk::kDocPrefix) + request.prefix();
    const std::string end = prefix_end(start);
    std::string from = start;
    for (size_t seeks = 0; seeks <= limit; ++seeks) {  // bounded by limit + 1 seeks
      auto key = first_key(reader, from, end);
      if (!key) break;
      std::string_view flow_id, run_id;
      if (!sk::parse_doc(*key, &flow_id, &run_id))
        return Status::corruption("search index: unreadable document key");
      if (out.values_size() == static_cast<int>(limit)) {
        out.set_truncated(true);
        break;
      }
      out.add_values(std::string(flow_id));
      from = prefix_end(sk::flow_docs(flow_id));
    }
    return out;
  }

  const std::string field = sk::field(request.key());
  const std::string start = field + sk::keyword_prefix(request.prefix());
  const std::string end = prefix_end(start);
  std::string from = start;
  for (size_t seeks = 0; seeks <= limit; ++seeks) {  // bounded by limit + 1 seeks
    auto key = first_key(reader, from, end);
    if (!key) break;
    // The value's encoding follows the field and the keyword tag.
    auto value = decode_keyword(std::string_view(*key).substr(field.size() + 1));
    if (!value)
      return Status::corruption("search index: unreadable entry of " + quoted(request.key()));
    if (out.values_size() == static_cast<int>(limit)) {
      out.set_truncated(true);
      break;
    }
    out.add_values(value->first);
    // Past every entry of this value.
    from = prefix_end(std::string_view(*key).substr(0, field.size() + 1 + value->second));
  }
  return out;
}

}  // namespace dex::search
