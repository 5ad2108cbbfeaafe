#include "flow/search_index.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/search_keys.h"

namespace dex::flow {

namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool fits(AttributeType attribute, IndexType index) {
  switch (index) {
    case INDEX_KEYWORD:
    case INDEX_FULL_TEXT:
      return attribute == ATTRIBUTE_STRING;
    case INDEX_KEYWORD_ARRAY:
      return attribute == ATTRIBUTE_JSON || attribute == ATTRIBUTE_STRING;
    case INDEX_INT:
      return attribute == ATTRIBUTE_INT64;
    case INDEX_DOUBLE:
      return attribute == ATTRIBUTE_DOUBLE || attribute == ATTRIBUTE_INT64;
    case INDEX_BOOL:
      return attribute == ATTRIBUTE_BOOL;
    case INDEX_DATETIME:
      return attribute == ATTRIBUTE_DATETIME;
    default:
      return false;
  }
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Distinct strings in first-seen order, each at most kSearchValueBytesMax, at most `max`.
void add_item(SearchField& f, std::string item, std::set<std::string>& seen, size_t max) {
  if (item.size() > kSearchValueBytesMax || static_cast<size_t>(f.items_size()) >= max) return;
  if (seen.insert(item).second) f.add_items(std::move(item));
}

// A JSON array of strings (other elements are skipped); false for other JSON.
bool json_strings(const std::string& json, SearchField& f) {
  google::protobuf::Value value;
  if (!google::protobuf::util::JsonStringToMessage(json, &value).ok() || !value.has_list_value())
    return false;
  std::set<std::string> seen;
  for (const auto& v : value.list_value().values())  // bounded by the value's size
    if (v.has_string_value()) add_item(f, v.string_value(), seen, kSearchItemsMax);
  return f.items_size() > 0;
}

// The field an indexed Attribute's value gives; false when the value does not
// fit the index (a blob, another type, a long keyword, a NaN).
bool to_field(const AttributeValue& v, IndexType type, SearchField& f) {
  if (v.has_blob()) return false;
  f.set_type(type);
  switch (type) {
    case INDEX_KEYWORD:
      if (!v.has_string_value() || v.string_value().size() > kSearchValueBytesMax) return false;
      f.set_text(v.string_value());
      return true;
    case INDEX_FULL_TEXT:
      if (!v.has_string_value()) return false;
      f.set_text(v.string_value());
      for (auto& t : text_tokens(v.string_value())) f.add_items(std::move(t));
      return true;
    case INDEX_KEYWORD_ARRAY: {
      if (v.has_json_value()) return json_strings(v.json_value(), f);
      if (!v.has_string_value()) return false;
      std::set<std::string> seen;
      add_item(f, v.string_value(), seen, kSearchItemsMax);
      return f.items_size() > 0;
    }
    case INDEX_INT:
      if (!v.has_int64_value()) return false;
      f.set_int_value(v.int64_value());
      return true;
    case INDEX_DOUBLE:
      if (v.has_int64_value())
        f.set_double_value(static_cast<double>(v.int64_value()));
      else if (v.has_double_value() && !std::isnan(v.double_value()))
        f.set_double_value(v.double_value());
      else
        return false;
      return true;
    case INDEX_BOOL:
      if (!v.has_bool_value()) return false;
      f.set_bool_value(v.bool_value());
      return true;
    case INDEX_DATETIME:
      if (!v.has_datetime_unix_ms()) return false;
      f.set_time_ms(v.datetime_unix_ms());
      return true;
    default:
      return false;
  }
}

// The encoded values of a field (one per item or token).
void field_values(const SearchField& f, std::vector<std::string>& out) {
  switch (f.type()) {
    case INDEX_KEYWORD:
      out.push_back(search_keys::keyword(f.text()));
      return;
    case INDEX_FULL_TEXT:
      for (const auto& t : f.items()) out.push_back(search_keys::token(t));
      return;
    case INDEX_KEYWORD_ARRAY:
      for (const auto& i : f.items()) out.push_back(search_keys::keyword(i));
      return;
    case INDEX_INT:
      out.push_back(search_keys::integer(f.int_value()));
      return;
    case INDEX_DOUBLE:
      out.push_back(search_keys::real(f.double_value()));
      return;
    case INDEX_BOOL:
      out.push_back(search_keys::boolean(f.bool_value()));
      return;
    case INDEX_DATETIME:
      out.push_back(search_keys::time(f.time_ms()));
      return;
    default:
      return;
  }
}

void delete_index(FlowTxn& txn, const SearchDoc& doc) {
  for (const auto& e : search_entries(doc)) txn.delete_search_entry(e);  // bounded by the doc
  txn.delete_search_doc(doc.flow_id(), doc.run_id());
}

// The index of one run brought up to date.
void update_run(FlowTxn& txn, const TouchedRun& touched) {
  const RunKey& key = touched.key;
  auto old = txn.search_doc(key.flow_id, key.run_id);
  auto run = txn.run(key.flow_id, key.run_id);
  if (!run) {  // deleted (retention)
    if (old) delete_index(txn, *old);
    return;
  }
  SearchDoc doc;
  if (old && !touched.attributes) {
    // Most records change only the Run: its indexed values are the old doc's,
    // without reading the declaration or the values again (the hot path).
    doc = system_doc(*run);
    *doc.mutable_fields() = old->fields();
  } else {
    auto decl = txn.declaration(run->flow_type(), run->declaration_version());
    DEX_INVARIANT(decl.has_value(), "a run's declaration version is stored");
    doc = build_search_doc(txn, *run, decl->declaration());
  }
  const std::string bytes = doc.SerializeAsString();
  if (old && old->SerializeAsString() == bytes) return;
  const std::vector<std::string> before = old ? search_entries(*old) : std::vector<std::string>{};
  const std::vector<std::string> after = search_entries(doc);
  std::vector<std::string> gone, added;
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(gone));
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(added));
  for (const auto& e : gone) txn.delete_search_entry(e);  // bounded by the old doc's entries
  for (const auto& e : added) txn.put_search_entry(e);    // bounded by the new doc's entries
  txn.put_search_doc(doc);
}

}  // namespace

const std::vector<SystemField>& system_fields() {
  static const std::vector<SystemField> fields = {
      {kFlowIdField, INDEX_KEYWORD, false, true},
      {kRunIdField, INDEX_KEYWORD, false, true},
      {kFlowTypeField, INDEX_KEYWORD, true, true},
      {kStatusField, INDEX_KEYWORD, true, true},
      {kStartTimeField, INDEX_DATETIME, true, true},
      {kCloseTimeField, INDEX_DATETIME, true, true},
      {kDurationField, INDEX_INT, false, true},
      {kParentField, INDEX_KEYWORD, true, true},
      {kActiveStepsField, INDEX_KEYWORD_ARRAY, true, false},
  };
  return fields;
}

const SystemField* find_system_field(std::string_view name) {
  for (const auto& f : system_fields())  // bounded: nine fields
    if (f.name == name) return &f;
  return nullptr;
}

std::string_view index_type_name(IndexType type) {
  switch (type) {
    case INDEX_KEYWORD:
      return "KEYWORD";
    case INDEX_FULL_TEXT:
      return "FULL_TEXT";
    case INDEX_KEYWORD_ARRAY:
      return "KEYWORD_ARRAY";
    case INDEX_INT:
      return "INT";
    case INDEX_DOUBLE:
      return "DOUBLE";
    case INDEX_BOOL:
      return "BOOL";
    case INDEX_DATETIME:
      return "DATETIME";
    default:
      return "UNSPECIFIED";
  }
}

std::string_view search_status_name(FlowStatus status) {
  // The enum's own names less "FLOW_": RUNNING, ..., TIMED_OUT.
  if (status == FLOW_STATUS_UNSPECIFIED || !FlowStatus_IsValid(status)) return "";
  return std::string_view(FlowStatus_Name(status)).substr(std::string_view("FLOW_").size());
}

std::vector<std::string> text_tokens(std::string_view text, size_t max) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::string token;
  auto flush = [&] {
    if (!token.empty() && out.size() < max && token.size() <= kSearchValueBytesMax &&
        seen.insert(token).second)
      out.push_back(token);
    token.clear();
  };
  for (char c : text) {  // bounded by the text's length
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || u >= 0x80)
      token.push_back(static_cast<char>(std::tolower(u)));
    else
      flush();
  }
  flush();
  return out;
}

std::string_view index_key_of(const AttributeDeclaration& a) {
  return a.index().index_key().empty() ? std::string_view(a.key())
                                       : std::string_view(a.index().index_key());
}

Status validate_indexes(const FlowDeclaration& decl) {
  const std::string type = "Flow type " + quoted(decl.flow_type());
  std::set<std::string_view> keys;
  for (const auto& a : decl.attributes()) {  // bounded by kAttributeKeysMax
    if (a.index().type() == INDEX_TYPE_UNSPECIFIED) continue;
    const std::string what = type + " Attribute " + quoted(a.key());
    if (!IndexType_IsValid(a.index().type()))
      return Status::invalid_argument(what + " has an unknown index type");
    const std::string_view key = index_key_of(a);
    if (auto s = validate_name(what + " index key", key); !s.is_ok()) return s;
    for (const auto& f : system_fields())  // bounded: nine fields
      if (same_ignoring_case(f.name, key))
        return Status::invalid_argument(what + " uses the system field " + quoted(f.name) +
                                        " as its index key");
    if (a.is_map())
      return Status::invalid_argument(what + " is an AttributeMap, which cannot be indexed");
    if (!fits(a.type(), a.index().type()))
      return Status::invalid_argument(what + " cannot have a " +
                                      std::string(index_type_name(a.index().type())) +
                                      " index: its type is " + AttributeType_Name(a.type()));
    if (!keys.insert(key).second)
      return Status::invalid_argument(type + " declares the index key " + quoted(key) + " twice");
  }
  if (keys.size() > kIndexedAttributesMax)
    return Status::invalid_argument(type + " declares more than " +
                                    std::to_string(kIndexedAttributesMax) + " indexed Attributes");
  return Status::ok();
}

Status check_index_keys(FlowTxn& txn, const FlowDeclaration& decl) {
  for (const auto& a : decl.attributes()) {  // bounded by kAttributeKeysMax
    if (a.index().type() == INDEX_TYPE_UNSPECIFIED) continue;
    const std::string_view key = index_key_of(a);
    auto entry = txn.index_key(key);
    if (!entry || entry->type() == a.index().type()) continue;
    for (const auto& other : entry->flow_types()) {  // bounded by the Flow types declaring it
      if (other == decl.flow_type()) continue;
      return Status::invalid_argument(
          "index key " + quoted(key) + " is " + std::string(index_type_name(entry->type())) +
          " in Flow type " + quoted(other) + "; Flow type " + quoted(decl.flow_type()) +
          " declares it " + std::string(index_type_name(a.index().type())));
    }
  }
  return Status::ok();
}

void register_index_keys(FlowTxn& txn, const FlowDeclaration& decl,
                         const FlowDeclaration* previous) {
  std::map<std::string, IndexType> now;
  for (const auto& a : decl.attributes())  // bounded by kAttributeKeysMax
    if (a.index().type() != INDEX_TYPE_UNSPECIFIED)
      now[std::string(index_key_of(a))] = a.index().type();
  if (previous) {
    for (const auto& a : previous->attributes()) {  // bounded by kAttributeKeysMax
      const std::string key(index_key_of(a));
      if (a.index().type() == INDEX_TYPE_UNSPECIFIED || now.count(key)) continue;
      auto entry = txn.index_key(key);
      if (!entry) continue;
      auto* types = entry->mutable_flow_types();
      types->erase(std::remove(types->begin(), types->end(), decl.flow_type()), types->end());
      if (types->empty())
        txn.delete_index_key(key);
      else
        txn.put_index_key(*entry);
    }
  }
  for (const auto& [key, type] : now) {  // bounded by kIndexedAttributesMax
    IndexKeyEntry entry = txn.index_key(key).value_or(IndexKeyEntry());
    entry.set_index_key(key);
    entry.set_type(type);
    std::set<std::string> types(entry.flow_types().begin(), entry.flow_types().end());
    types.insert(decl.flow_type());
    entry.clear_flow_types();
    for (const auto& t : types) entry.add_flow_types(t);
    txn.put_index_key(entry);
  }
}

SearchDoc build_search_doc(FlowTxn& txn, const Run& run, const FlowDeclaration& decl) {
  SearchDoc doc = system_doc(run);
  std::map<std::string_view, const AttributeDeclaration*> indexed;  // by index key
  for (const auto& a : decl.attributes())                           // bounded by kAttributeKeysMax
    if (a.index().type() != INDEX_TYPE_UNSPECIFIED) indexed[index_key_of(a)] = &a;
  for (const auto& [key, a] : indexed) {  // bounded by kIndexedAttributesMax
    auto value = txn.attribute(run.flow_id(), run.run_id(), a->key(), "");
    if (!value) continue;
    SearchField f;
    f.set_key(std::string(key));
    if (to_field(*value, a->index().type(), f)) *doc.add_fields() = std::move(f);
  }
  return doc;
}

SearchDoc system_doc(const Run& run) {
  SearchDoc doc;
  doc.set_flow_id(run.flow_id());
  doc.set_run_id(run.run_id());
  doc.set_flow_type(run.flow_type());
  doc.set_status(run.status());
  doc.set_start_ms(run.start_ms());
  doc.set_close_ms(run.status() == FLOW_RUNNING ? 0 : run.close_ms());
  if (run.parents_size() > 0) doc.set_parent_flow_id(run.parents(0).flow_id());
  // FlowConfig.index_active_step_types false: the run has no ActiveStepTypes.
  if (!indexes_active_step_types(run.config())) return doc;
  std::set<std::string_view> steps;
  for (const auto& id : run.active()) {  // bounded by kActiveStepsMax
    const size_t dash = id.rfind('-');
    if (dash != std::string::npos) steps.insert(std::string_view(id).substr(0, dash));
  }
  for (auto s : steps) doc.add_active_step_types(std::string(s));
  return doc;
}

std::vector<std::string> search_entries(const SearchDoc& d) {
  std::vector<std::pair<std::string_view, std::string>> values;  // (field key, encoded value)
  values.emplace_back(kFlowTypeField, search_keys::keyword(d.flow_type()));
  values.emplace_back(kStatusField, search_keys::keyword(search_status_name(d.status())));
  values.emplace_back(kStartTimeField, search_keys::time(d.start_ms()));
  if (d.close_ms() != 0) values.emplace_back(kCloseTimeField, search_keys::time(d.close_ms()));
  if (!d.parent_flow_id().empty())
    values.emplace_back(kParentField, search_keys::keyword(d.parent_flow_id()));
  for (const auto& s : d.active_step_types())  // bounded by the run's Step types
    values.emplace_back(kActiveStepsField, search_keys::keyword(s));
  std::vector<std::string> encoded;
  for (const auto& f : d.fields()) {  // bounded by kIndexedAttributesMax
    encoded.clear();
    field_values(f, encoded);
    for (auto& v : encoded) values.emplace_back(f.key(), std::move(v));
  }
  std::vector<std::string> out;
  out.reserve(values.size());
  for (const auto& [key, value] : values)  // bounded by the doc's values
    out.push_back(search_keys::entry(key, value, d.start_ms(), d.flow_id(), d.run_id()));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void update_search_index(FlowTxn& txn) {
  for (const auto& key : txn.take_touched_runs())
    update_run(txn, key);  // bounded by the touched runs
}

}  // namespace dex::flow
