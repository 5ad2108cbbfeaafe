// What the SearchFlows tests share: an IndexReader over a MemoryKv (the flow
// rules' state in a map, as the engine's RocksDB snapshot holds it), and the
// two Flow types whose Attributes cover every index type.
#pragma once

#include <map>
#include <string>

#include "../flow/flow_test_util.h"
#include "map_reader.h"
#include "search/index_reader.h"

namespace dex::search::testing {

inline flow::AttributeDeclaration indexed(const std::string& key, flow::AttributeType type,
                                          flow::IndexType index,
                                          const std::string& index_key = "") {
  flow::AttributeDeclaration a;
  a.set_key(key);
  a.set_type(type);
  a.mutable_index()->set_type(index);
  a.mutable_index()->set_index_key(index_key);
  return a;
}

// Order: Start (Execute) -> Wait (WaitFor, on Ship SubFlows or a Timer), with
// one indexed Attribute of every index type and one that is not indexed.
inline flow::FlowDeclaration order_declaration() {
  using namespace flow;
  FlowDeclaration d;
  d.set_flow_type("Order");
  d.set_start_step_type("Start");
  *d.add_steps() = flow::testing::step_decl("Start");
  *d.add_steps() = flow::testing::step_decl("Wait", true);
  *d.add_attributes() = indexed("cust", ATTRIBUTE_STRING, INDEX_KEYWORD, "Customer");
  *d.add_attributes() = indexed("note", ATTRIBUTE_STRING, INDEX_FULL_TEXT);
  *d.add_attributes() = indexed("tags", ATTRIBUTE_JSON, INDEX_KEYWORD_ARRAY, "Tags");
  *d.add_attributes() = indexed("qty", ATTRIBUTE_INT64, INDEX_INT);
  *d.add_attributes() = indexed("price", ATTRIBUTE_DOUBLE, INDEX_DOUBLE, "Price");
  *d.add_attributes() = indexed("vip", ATTRIBUTE_BOOL, INDEX_BOOL);
  *d.add_attributes() = indexed("due", ATTRIBUTE_DATETIME, INDEX_DATETIME, "Due");
  auto* plain = d.add_attributes();
  plain->set_key("plain");
  plain->set_type(ATTRIBUTE_STRING);
  return d;
}

// Ship: Pack (Execute). Shares the index keys Customer, qty, Price and Tags
// with Order, from Attributes of other names (and, for Price and Tags, of
// other Attribute types).
inline flow::FlowDeclaration ship_declaration() {
  using namespace flow;
  FlowDeclaration d;
  d.set_flow_type("Ship");
  d.set_start_step_type("Pack");
  *d.add_steps() = flow::testing::step_decl("Pack");
  *d.add_attributes() = indexed("customer", ATTRIBUTE_STRING, INDEX_KEYWORD, "Customer");
  *d.add_attributes() = indexed("qty", ATTRIBUTE_INT64, INDEX_INT);
  *d.add_attributes() = indexed("weight", ATTRIBUTE_INT64, INDEX_DOUBLE, "Price");
  *d.add_attributes() = indexed("label", ATTRIBUTE_STRING, INDEX_KEYWORD_ARRAY, "Tags");
  return d;
}

}  // namespace dex::search::testing
