// The rules of indexed Attributes (docs/search.md, "Indexed Attributes"):
// declarations that give an index key two types are refused naming both Flow
// types, an Attribute's type must fit its index type, a JSON Attribute indexed
// KEYWORD_ARRAY holds an array of strings, and a value becomes searchable in
// the record that writes it and stops being so in the record that deletes it.
#include <gtest/gtest.h>

#include "search/search.h"
#include "search_test_util.h"

namespace dex::search {
namespace {

using namespace dex::flow;
using namespace dex::flow::testing;
using testing::indexed;
using testing::MapReader;

std::vector<std::string> found(Harness& h, const std::string& query) {
  MapReader reader(h.kv.data());
  SearchFlowsRequest request;
  request.set_query(query);
  auto page = search_flows(reader, request);
  EXPECT_TRUE(page.is_ok()) << query << ": " << page.status().message();
  std::vector<std::string> ids;
  if (page.is_ok())
    for (const auto& row : page->rows()) ids.push_back(row.flow_id());
  return ids;
}

FlowDeclaration one_attribute(const std::string& type, AttributeDeclaration a) {
  FlowDeclaration d;
  d.set_flow_type(type);
  d.set_start_step_type("Start");
  *d.add_steps() = step_decl("Start");
  *d.add_attributes() = std::move(a);
  return d;
}

TEST(SearchIndex, AKeyGivenAnotherTypeThanALiveDeclarationIsRefusedNamingBothFlowTypes) {
  Harness h;
  ASSERT_EQ(h.declare(testing::order_declaration()).kind, ApplyKind::kApplied);
  auto r =
      h.declare(one_attribute("Invoice", indexed("c", ATTRIBUTE_INT64, INDEX_INT, "Customer")));
  ASSERT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_EQ(r.code, RefusalCode::kInvalidArgument);
  EXPECT_NE(r.message.find("'Order'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("'Invoice'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("KEYWORD"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("INT"), std::string::npos) << r.message;
  // The same key with the same type is shared.
  EXPECT_EQ(
      h.declare(one_attribute("Invoice", indexed("c", ATTRIBUTE_STRING, INDEX_KEYWORD, "Customer")))
          .kind,
      ApplyKind::kApplied);
}

TEST(SearchIndex, AnAttributeTypeThatDoesNotFitItsIndexIsRefused) {
  Harness h;
  auto r = h.declare(one_attribute("Bad", indexed("n", ATTRIBUTE_STRING, INDEX_INT)));
  ASSERT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("cannot have a INT index: its type is ATTRIBUTE_STRING"),
            std::string::npos)
      << r.message;
}

TEST(SearchIndex, AJsonKeywordArrayHoldsAnArrayOfStringsAndEachIsSearchable) {
  Harness h;
  ASSERT_EQ(h.declare(testing::order_declaration()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("o1", "r1", "Order").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("o2", "r1", "Order").kind, ApplyKind::kApplied);
  EXPECT_EQ(h.set_attributes("o1", {attr_json("tags", R"(["red", "big"])")}).kind,
            ApplyKind::kApplied);
  EXPECT_EQ(h.set_attributes("o2", {attr_json("tags", R"(["red"])")}).kind, ApplyKind::kApplied);
  EXPECT_EQ(found(h, "Tags = 'big'"), std::vector<std::string>{"o1"});
  EXPECT_EQ(found(h, "Tags IN ('red') ORDER BY FlowId"), (std::vector<std::string>{"o1", "o2"}));

  for (const auto& [json, why] : std::vector<std::pair<std::string, std::string>>{
           {R"({"a": 1})", "is not a JSON array"}, {R"(["a", 1])", "not a string"}}) {
    auto r = h.set_attributes("o2", {attr_json("tags", json)});
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << json;
    EXPECT_NE(r.message.find(why), std::string::npos) << r.message;
  }
  EXPECT_EQ(found(h, "Tags = 'red' ORDER BY FlowId"), (std::vector<std::string>{"o1", "o2"}));
}

TEST(SearchIndex, AWriteIndexesTheValueAndADeleteRemovesIt) {
  Harness h;
  ASSERT_EQ(h.declare(testing::order_declaration()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("o1", "r1", "Order").kind, ApplyKind::kApplied);
  EXPECT_TRUE(found(h, "Customer = 'acme'").empty());
  ASSERT_EQ(h.set_attributes("o1", {attr("cust", "acme"), attr_int("qty", 7)}).kind,
            ApplyKind::kApplied);
  EXPECT_EQ(found(h, "Customer = 'acme' AND qty >= 7"), std::vector<std::string>{"o1"});
  ASSERT_EQ(h.set_attributes("o1", {attr("cust", "zeta")}).kind, ApplyKind::kApplied);
  EXPECT_TRUE(found(h, "Customer = 'acme'").empty());
  EXPECT_EQ(found(h, "Customer = 'zeta'"), std::vector<std::string>{"o1"});
  Attribute gone;
  gone.set_key("cust");
  ASSERT_EQ(h.set_attributes("o1", {gone}).kind, ApplyKind::kApplied);
  EXPECT_TRUE(found(h, "Customer = 'zeta'").empty());
  EXPECT_EQ(found(h, "qty = 7"), std::vector<std::string>{"o1"});
}

TEST(SearchIndex, APageTokenGoesOnAfterItsRowWhileRunsStartAndChange) {
  Harness h;
  ASSERT_EQ(h.declare(testing::order_declaration()).kind, ApplyKind::kApplied);
  for (const char* id : {"b", "d", "f", "h"})
    ASSERT_EQ(h.start(id, "r1", "Order").kind, ApplyKind::kApplied);
  MapReader reader(h.kv.data());
  SearchFlowsRequest request;
  request.set_query("ORDER BY FlowId");
  request.set_page_size(2);
  auto first = search_flows(reader, request);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  ASSERT_EQ(first->rows_size(), 2);
  EXPECT_EQ(first->rows(1).flow_id(), "d");
  // Between the pages: a run starts before the cursor and one after it, and
  // one after it gains an Attribute.
  for (const char* id : {"a", "e"}) ASSERT_EQ(h.start(id, "r1", "Order").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("h", {attr("cust", "acme")}).kind, ApplyKind::kApplied);
  request.set_page_token(first->next_page_token());
  request.set_page_size(10);
  auto second = search_flows(reader, request);
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  std::vector<std::string> ids;
  for (const auto& row : second->rows()) ids.push_back(row.flow_id());
  // Strictly after "d": the new "e", and "f" and "h" as they are now; never
  // "b" or "d" again, and "a" (before the cursor) not at all.
  EXPECT_EQ(ids, (std::vector<std::string>{"e", "f", "h"}));
  EXPECT_TRUE(second->next_page_token().empty());
  // A token belongs to its query.
  request.set_query("ORDER BY FlowId DESC");
  auto other = search_flows(reader, request);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("another query"), std::string::npos)
      << other.status().message();
}

}  // namespace
}  // namespace dex::search
