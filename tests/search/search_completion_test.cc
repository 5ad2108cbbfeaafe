// Query completion (docs/search.md, "Completing a query"): ListSearchKeys
// lists the system fields and the index keys in use with their types and
// declarers; ListSearchValues lists distinct KEYWORD and KEYWORD_ARRAY values
// by prefix, at most `limit`, and refuses a key it cannot list.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "flow/search_index.h"
#include "search/completion.h"
#include "search_test_util.h"

namespace dex::search {
namespace {

using namespace dex::flow;
using namespace dex::flow::testing;
using testing::MapReader;

std::vector<std::string> values(Harness& h, const std::string& key, const std::string& prefix,
                                int32_t limit = 0, bool* truncated = nullptr) {
  MapReader reader(h.kv.data());
  ListSearchValuesRequest request;
  request.set_key(key);
  request.set_prefix(prefix);
  request.set_limit(limit);
  auto out = list_search_values(reader, request);
  EXPECT_TRUE(out.is_ok()) << key << ": " << out.status().message();
  if (!out.is_ok()) return {};
  if (truncated) *truncated = out->truncated();
  return {out->values().begin(), out->values().end()};
}

Status refusal(Harness& h, const std::string& key, const std::string& prefix, int32_t limit = 0) {
  MapReader reader(h.kv.data());
  ListSearchValuesRequest request;
  request.set_key(key);
  request.set_prefix(prefix);
  request.set_limit(limit);
  auto out = list_search_values(reader, request);
  return out.is_ok() ? Status::ok() : out.status();
}

TEST(SearchCompletion, KeysAreTheSystemFieldsThenTheIndexKeysInUseWithTypesAndDeclarers) {
  Harness h;
  ASSERT_EQ(h.declare(testing::order_declaration()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.declare(testing::ship_declaration()).kind, ApplyKind::kApplied);
  MapReader reader(h.kv.data());
  auto keys = list_search_keys(reader, ListSearchKeysRequest());
  ASSERT_TRUE(keys.is_ok()) << keys.status().message();
  EXPECT_FALSE(keys->truncated());
  ASSERT_EQ(keys->keys_size(), static_cast<int>(system_fields().size()) + 7);
  EXPECT_EQ(keys->keys(0).name(), "FlowId");
  EXPECT_TRUE(keys->keys(0).system());
  EXPECT_EQ(keys->keys(3).name(), "Status");
  std::map<std::string, SearchKeyInfo> by_name;
  for (const auto& k : keys->keys()) by_name[k.name()] = k;
  EXPECT_FALSE(by_name["ActiveStepTypes"].sortable());
  const auto& customer = by_name["Customer"];
  EXPECT_FALSE(customer.system());
  EXPECT_EQ(customer.type(), INDEX_KEYWORD);
  EXPECT_TRUE(customer.sortable());
  EXPECT_EQ(std::vector<std::string>(customer.flow_types().begin(), customer.flow_types().end()),
            (std::vector<std::string>{"Order", "Ship"}));
  EXPECT_EQ(by_name["Tags"].type(), INDEX_KEYWORD_ARRAY);
  EXPECT_FALSE(by_name["Tags"].sortable());
  EXPECT_EQ(by_name["note"].type(), INDEX_FULL_TEXT);
  EXPECT_FALSE(by_name["note"].sortable());
  EXPECT_EQ(by_name["vip"].type(), INDEX_BOOL);
  EXPECT_EQ(by_name["Due"].type(), INDEX_DATETIME);
  EXPECT_EQ(std::vector<std::string>(by_name["note"].flow_types().begin(),
                                     by_name["note"].flow_types().end()),
            std::vector<std::string>{"Order"});
  // Index keys follow the system fields in name order.
  std::vector<std::string> index_keys;
  for (const auto& k : keys->keys())
    if (!k.system()) index_keys.push_back(k.name());
  EXPECT_TRUE(std::is_sorted(index_keys.begin(), index_keys.end()));
}

TEST(SearchCompletion, KeywordValuesAreDistinctInByteOrderByPrefixAndBounded) {
  Harness h;
  ASSERT_EQ(h.declare(testing::order_declaration()).kind, ApplyKind::kApplied);
  const std::vector<std::string> customers = {"acme", "acme",    "ac",
                                              "beta", "acme-eu", std::string("a\0z", 3)};
  for (size_t i = 0; i < customers.size(); ++i) {
    const std::string id = "o" + std::to_string(i);
    ASSERT_EQ(h.start(id, "r1", "Order").kind, ApplyKind::kApplied);
    ASSERT_EQ(h.set_attributes(id, {attr("cust", customers[i])}).kind, ApplyKind::kApplied);
  }
  EXPECT_EQ(values(h, "Customer", "ac"), (std::vector<std::string>{"ac", "acme", "acme-eu"}));
  EXPECT_EQ(values(h, "Customer", ""),
            (std::vector<std::string>{std::string("a\0z", 3), "ac", "acme", "acme-eu", "beta"}));
  EXPECT_EQ(values(h, "Customer", "zz"), std::vector<std::string>{});
  bool truncated = false;
  EXPECT_EQ(values(h, "Customer", "ac", 2, &truncated), (std::vector<std::string>{"ac", "acme"}));
  EXPECT_TRUE(truncated);
  EXPECT_EQ(values(h, "Customer", "ac", 3, &truncated).size(), 3u);
  EXPECT_FALSE(truncated);
  // System fields with entries: the Flow type, the status; FlowId from the runs.
  EXPECT_EQ(values(h, "FlowType", ""), std::vector<std::string>{"Order"});
  EXPECT_EQ(values(h, "Status", "R"), std::vector<std::string>{"RUNNING"});
  EXPECT_EQ(values(h, "FlowId", "o", 3, &truncated), (std::vector<std::string>{"o0", "o1", "o2"}));
  EXPECT_TRUE(truncated);
}

TEST(SearchCompletion, KeywordArrayValuesAreTheItems) {
  Harness h;
  ASSERT_EQ(h.declare(testing::order_declaration()).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("o1", "r1", "Order").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.start("o2", "r1", "Order").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("o1", {attr_json("tags", R"(["red", "big", "eu-west"])")}).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("o2", {attr_json("tags", R"(["red", "eu-north"])")}).kind,
            ApplyKind::kApplied);
  EXPECT_EQ(values(h, "Tags", ""), (std::vector<std::string>{"big", "eu-north", "eu-west", "red"}));
  EXPECT_EQ(values(h, "Tags", "eu-"), (std::vector<std::string>{"eu-north", "eu-west"}));
}

TEST(SearchCompletion, AKeyWithoutListedValuesOrABadInputIsRefusedNamingIt) {
  Harness h;
  ASSERT_EQ(h.declare(testing::order_declaration()).kind, ApplyKind::kApplied);
  const auto expect_refused = [](const Status& s, const std::string& words) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  };
  expect_refused(refusal(h, "Nope", ""), "'Nope'");
  expect_refused(refusal(h, "qty", ""), "'qty' is INT");
  expect_refused(refusal(h, "note", ""), "FULL_TEXT");
  expect_refused(refusal(h, "StartTime", ""), "DATETIME");
  expect_refused(refusal(h, "RunId", ""), "'RunId'");
  expect_refused(refusal(h, "", ""), "key");
  expect_refused(refusal(h, "Customer", std::string(kSearchValuePrefixMax + 1, 'a')), "prefix");
  expect_refused(refusal(h, "Customer", "", kSearchValuesMax + 1), "limit");
  expect_refused(refusal(h, "Customer", "", -1), "limit");
  EXPECT_TRUE(refusal(h, "Customer", std::string(kSearchValuePrefixMax, 'a')).is_ok());
}

}  // namespace
}  // namespace dex::search
