// JSON and bytes Attribute values in the flow rules (docs/flow-rules.md,
// "Attributes"): a JSON Attribute holds any one JSON value (an object, an
// array, a string, a number, true, false or null; null is a value, a write
// without a value deletes), checked strictly (common/json_value.h) wherever a
// write comes from: a start, a Step's result, a client's SetAttributes. An
// Attribute indexed KEYWORD_ARRAY still holds only an array of strings, and
// the size limit holds for every value. Bytes values are kept byte for byte.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/json_value.h"
#include "flow/limits.h"
#include "flow_test_util.h"

namespace dex::flow {
namespace {

using testing::attr_delete;
using testing::attr_json;
using testing::go;
using testing::go_to;
using testing::Harness;
using testing::step_decl;

// J: Start -> Next (reads doc and docs). "doc" JSON, "docs" a JSON
// AttributeMap, "tags" JSON indexed KEYWORD_ARRAY, "raw" bytes.
FlowDeclaration json_declaration() {
  FlowDeclaration d;
  d.set_flow_type("J");
  d.set_start_step_type("Start");
  auto* doc = d.add_attributes();
  doc->set_key("doc");
  doc->set_type(ATTRIBUTE_JSON);
  auto* docs = d.add_attributes();
  docs->set_key("docs");
  docs->set_type(ATTRIBUTE_JSON);
  docs->set_is_map(true);
  auto* tags = d.add_attributes();
  tags->set_key("tags");
  tags->set_type(ATTRIBUTE_JSON);
  tags->mutable_index()->set_type(INDEX_KEYWORD_ARRAY);
  auto* raw = d.add_attributes();
  raw->set_key("raw");
  raw->set_type(ATTRIBUTE_BYTES);
  *d.add_steps() = step_decl("Start");
  auto next = step_decl("Next");
  next.add_attribute_reads("doc");
  next.add_attribute_reads("docs");
  *d.add_steps() = next;
  return d;
}

Attribute json_in(const std::string& instance, const std::string& text) {
  Attribute a = attr_json("docs", text);
  a.set_instance_key(instance);
  return a;
}

Attribute raw(const std::string& bytes) {
  Attribute a;
  a.set_key("raw");
  a.mutable_value()->set_bytes_value(bytes);
  return a;
}

// Every kind of JSON value, as a client would send it.
const std::vector<std::pair<std::string, std::string>>& every_kind() {
  static const std::vector<std::pair<std::string, std::string>> kinds = {
      {"object", R"({"a": [1, {"b": null}]})"},
      {"array", R"([1, "two", false, null, {}])"},
      {"empty-array", "[]"},
      {"string", R"("hello \u00e9 \ud83d\ude00")"},
      {"empty-string", R"("")"},
      {"integer", "-42"},
      {"big-integer", "123456789012345678901234567890"},
      {"number", "6.02e23"},
      {"true", "true"},
      {"false", "false"},
      {"null", "null"},
      {"spaced", " \n[ 1 ]\t"},
  };
  return kinds;
}

class AttributeJson : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(h.declare(json_declaration()).kind, ApplyKind::kApplied); }
  // The stored value of docs[instance] ("" when there is none).
  std::optional<AttributeValue> stored(const std::string& flow_id, const std::string& key,
                                       const std::string& instance = "") {
    for (const auto& a : h.attributes(flow_id, key)) {
      if (a.instance_key() == instance) return a.value();
    }
    return std::nullopt;
  }
  Harness h;
};

TEST_F(AttributeJson, AStartStoresEveryKindOfJsonValueAsItsText) {
  StartOptions o;
  for (const auto& [instance, text] : every_kind())
    *o.add_initial_attributes() = json_in(instance, text);
  auto r = h.apply(h.start_record("f", "r1", "J", "in", o));
  ASSERT_EQ(r.kind, ApplyKind::kApplied) << r.message;
  for (const auto& [instance, text] : every_kind()) {
    auto v = stored("f", "docs", instance);
    ASSERT_TRUE(v.has_value()) << instance;
    ASSERT_TRUE(v->has_json_value()) << instance;
    EXPECT_EQ(v->json_value(), text) << instance << ": kept as written";
  }
  EXPECT_EQ(h.run("f")->attribute_count(), every_kind().size());
}

TEST_F(AttributeJson, AStepAndAClientWriteScalarsArraysAndNullAndTheTaskCarriesThem) {
  ASSERT_EQ(h.start("f", "r1", "J").kind, ApplyKind::kApplied);
  // A Step's result: each kind in turn into "doc", the later write winning.
  const std::string task = h.assign("f", "Start-1");
  FlowRecord r = h.result_record("f", "Start-1", task);
  *r.mutable_method_result()->mutable_decision() = go_to({go("Next")});
  for (const auto& [instance, text] : every_kind()) {
    *r.mutable_method_result()->add_attribute_writes() = attr_json("doc", text);
    *r.mutable_method_result()->add_attribute_writes() = json_in(instance, text);
  }
  *r.mutable_method_result()->add_attribute_writes() = attr_json("doc", R"("last")");
  auto applied = h.apply(r);
  ASSERT_EQ(applied.kind, ApplyKind::kApplied) << applied.message;
  EXPECT_EQ(stored("f", "doc")->json_value(), R"("last")");
  EXPECT_EQ(stored("f", "docs", "null")->json_value(), "null");
  // Next's task carries them (it reads every Attribute).
  KvFlowTxn txn(h.kv);
  size_t carried_docs = 0;
  for (const auto& a : task_attributes(txn, h.ref("f", "Next-1"))) {
    if (a.key() == "docs") ++carried_docs;
    if (a.key() == "doc") {
      EXPECT_EQ(a.value().json_value(), R"("last")");
    }
  }
  EXPECT_EQ(carried_docs, every_kind().size());
  // A client's SetAttributes: a number, then JSON null.
  ASSERT_EQ(h.set_attributes("f", {attr_json("doc", "7")}).kind, ApplyKind::kApplied);
  EXPECT_EQ(stored("f", "doc")->json_value(), "7");
  ASSERT_EQ(h.set_attributes("f", {attr_json("doc", "null")}).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.history("f").back().kind(), ATTRIBUTES_SET);
  EXPECT_EQ(h.history("f").back().attribute_writes(0).value().json_value(), "null");
}

TEST_F(AttributeJson, JsonNullIsAValueAndOnlyAWriteWithoutOneDeletes) {
  ASSERT_EQ(h.start("f", "r1", "J").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr_json("doc", "null")}).kind, ApplyKind::kApplied);
  auto v = stored("f", "doc");
  ASSERT_TRUE(v.has_value()) << "JSON null is stored";
  EXPECT_EQ(v->json_value(), "null");
  EXPECT_EQ(h.run("f")->attribute_count(), 1u);
  ASSERT_EQ(h.set_attributes("f", {attr_delete("doc")}).kind, ApplyKind::kApplied);
  EXPECT_FALSE(stored("f", "doc").has_value()) << "a write without a value deletes";
  EXPECT_EQ(h.run("f")->attribute_count(), 0u);
}

TEST_F(AttributeJson, TextThatIsNotOneJsonValueIsRefusedNamingTheKeyAndWritesNothing) {
  ASSERT_EQ(h.start("f", "r1", "J").kind, ApplyKind::kApplied);
  const std::string deep_ok = std::string(kJsonDepthMax, '[') + std::string(kJsonDepthMax, ']');
  const std::string too_deep =
      std::string(kJsonDepthMax + 1, '[') + std::string(kJsonDepthMax + 1, ']');
  ASSERT_EQ(h.set_attributes("f", {attr_json("doc", deep_ok)}).kind, ApplyKind::kApplied);
  struct Bad {
    std::string text, needle;
  };
  const std::vector<Bad> bad = {
      {"", "is not valid JSON"},
      {"   ", "is not valid JSON"},
      {"{nope", "is not valid JSON"},
      {"nul", "is not valid JSON"},
      {"'single'", "is not valid JSON"},
      {"[1,]", "is not valid JSON"},
      {R"({"a":1,})", "is not valid JSON"},
      {"NaN", "is not valid JSON"},
      {"1e400", "number overflow"},
      {"01", "is not valid JSON"},
      {"1 2", "is not valid JSON"},
      {"{} []", "is not valid JSON"},
      {"[1] // comment", "is not valid JSON"},
      {"\"\xff\xfe\"", "ill-formed UTF-8"},
      {R"("\ud800")", "surrogate"},
      {too_deep, "nested deeper than 100 arrays and objects"},
  };
  for (const auto& b : bad) {
    auto r = h.set_attributes("f", {json_in("x", "1"), attr_json("doc", b.text)});
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << b.text;
    EXPECT_EQ(r.code, RefusalCode::kInvalidArgument) << b.text;
    EXPECT_NE(r.message.find("writes[1]: the value of Attribute 'doc' is"), std::string::npos)
        << r.message;
    EXPECT_NE(r.message.find(b.needle), std::string::npos) << b.text << ": " << r.message;
    // The reason never repeats the bad bytes: it goes into records that hold UTF-8 only.
    EXPECT_EQ(r.message.find('\xff'), std::string::npos) << r.message;
    EXPECT_FALSE(stored("f", "docs", "x").has_value()) << "all or nothing: " << b.text;
  }
  EXPECT_EQ(stored("f", "doc")->json_value(), deep_ok);
  // The same check refuses a start and a Step's result.
  StartOptions o;
  *o.add_initial_attributes() = attr_json("doc", "[1,]");
  auto started = h.apply(h.start_record("g", "r1", "J", "in", o));
  EXPECT_EQ(started.kind, ApplyKind::kRejected);
  EXPECT_NE(started.message.find("Attribute 'doc' is not valid JSON"), std::string::npos)
      << started.message;
  EXPECT_FALSE(h.run("g").has_value());
  const std::string task = h.assign("f", "Start-1");
  FlowRecord result = h.result_record("f", "Start-1", task);
  *result.mutable_method_result()->mutable_decision() = go_to({go("Next")});
  *result.mutable_method_result()->add_attribute_writes() = json_in("y", "true");
  *result.mutable_method_result()->add_attribute_writes() = json_in("z", "tru");
  auto refused = h.apply(result);
  EXPECT_EQ(refused.kind, ApplyKind::kRejected);
  EXPECT_NE(refused.message.find("attributeWrites[1]: the value of AttributeMap 'docs' is not "
                                 "valid JSON"),
            std::string::npos)
      << refused.message;
  EXPECT_FALSE(stored("f", "docs", "y").has_value());
}

TEST_F(AttributeJson, AKeywordArrayAttributeStillHoldsOnlyAnArrayOfStrings) {
  ASSERT_EQ(h.start("f", "r1", "J").kind, ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr_json("tags", R"(["eu", "gift"])")}).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr_json("tags", "[]")}).kind, ApplyKind::kApplied);
  for (const std::string text : {R"("eu")", "null", "{}", "[1]", R"(["a", null])", "7"}) {
    auto r = h.set_attributes("f", {attr_json("tags", text)});
    EXPECT_EQ(r.kind, ApplyKind::kRejected) << text;
    EXPECT_NE(r.message.find("indexed KEYWORD_ARRAY"), std::string::npos) << r.message;
  }
  auto r = h.set_attributes("f", {attr_json("tags", R"(["a",])")});
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("is not valid JSON"), std::string::npos) << r.message;
  EXPECT_EQ(stored("f", "tags")->json_value(), "[]");
}

TEST_F(AttributeJson, TheSizeLimitHoldsForEveryJsonValueAndBytes) {
  ASSERT_EQ(h.start("f", "r1", "J").kind, ApplyKind::kApplied);
  // A JSON string of exactly the limit, quotes included, and one byte more.
  const std::string fits = "\"" + std::string(kPayloadBytesMax - 2, 'x') + "\"";
  ASSERT_EQ(h.set_attributes("f", {attr_json("doc", fits)}).kind, ApplyKind::kApplied);
  auto r = h.set_attributes(
      "f", {attr_json("doc", "\"" + std::string(kPayloadBytesMax - 1, 'x') + "\"")});
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("the limit is"), std::string::npos) << r.message;
  r = h.set_attributes("f", {raw(std::string(kPayloadBytesMax + 1, '\0'))});
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("the limit is"), std::string::npos) << r.message;
}

TEST_F(AttributeJson, BytesAreKeptByteForByteZerosAndNonUtf8Included) {
  ASSERT_EQ(h.start("f", "r1", "J").kind, ApplyKind::kApplied);
  const std::string bytes("\x00\xff\xfe\x80\x00zero\xc3\x28", 11);
  ASSERT_EQ(h.set_attributes("f", {raw(bytes)}).kind, ApplyKind::kApplied);
  EXPECT_EQ(stored("f", "raw")->bytes_value(), bytes);
  ASSERT_EQ(h.set_attributes("f", {raw("")}).kind, ApplyKind::kApplied);
  auto empty = stored("f", "raw");
  ASSERT_TRUE(empty.has_value()) << "empty bytes are a value";
  EXPECT_TRUE(empty->has_bytes_value());
  EXPECT_EQ(empty->bytes_value(), "");
  EXPECT_EQ(h.history("f").back().attribute_writes(0).value().bytes_value(), "");
}

// The check itself: one JSON value, strict, nested at most kJsonDepthMax deep.
TEST(JsonValueCheck, OneStrictJsonValueOfAnyKind) {
  for (const auto& [kind, text] : every_kind())
    EXPECT_TRUE(check_json_value(text).is_ok()) << kind << ": " << check_json_value(text).message();
  for (const std::string text : {"", "{", "[1,]", "'a'", "NaN", "Infinity", "-", "1.", ".5", "+1",
                                 "tru", "nulls", "\"\\x41\"", "\"a\nb\"", "{\"a\" 1}", "[] x"}) {
    Status s = check_json_value(text);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << text;
    EXPECT_EQ(s.message().rfind("not valid JSON: ", 0), 0u) << s.message();
  }
  const std::string deep = std::string(kJsonDepthMax, '[') + std::string(kJsonDepthMax, ']');
  EXPECT_TRUE(check_json_value(deep).is_ok());
  std::string mixed;  // objects count as arrays do
  for (size_t i = 0; i < kJsonDepthMax; ++i) mixed += i % 2 ? "[" : "{\"k\":";
  mixed += "1";
  for (size_t i = kJsonDepthMax; i-- > 0;) mixed += i % 2 ? "]" : "}";
  EXPECT_TRUE(check_json_value(mixed).is_ok()) << check_json_value(mixed).message();
  EXPECT_EQ(check_json_value("[" + deep + "]").message(),
            "JSON nested deeper than 100 arrays and objects");
  // A million levels are refused without deep recursion.
  EXPECT_FALSE(check_json_value(std::string(1'000'000, '[')).is_ok());
}

}  // namespace
}  // namespace dex::flow
