// JSON Attributes of any JSON value (dex::Attribute<nlohmann::json>) and bytes
// Attributes (dex::Bytes) in the C++ SDK, end to end: a Worker and a Client
// against a real ApiServer over a real Engine. A start's initial values, a
// Step's writes, an RPC's reads and writes and a Client's writes of arrays,
// strings, numbers, booleans and null, and of bytes with zeros and non-UTF-8,
// all read back as written by the next Step, the RPC and the Client; JSON null
// is a value and a removal deletes; a long JSON array travels as a blob.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "live_stack.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const Attribute<json> kDoc{"doc"};
const AttributeMap<json> kDocs{"docs"};
const Attribute<Bytes> kRaw{"raw"};
const AttributeMap<Bytes> kRaws{"raws"};
const Attribute<json> kLong{"long"};
const Attribute<json> kTags{"tags", flow::INDEX_KEYWORD_ARRAY};  // any JSON type may take it
const Channel kDone("done");

// Every kind of JSON value, by the instance key it is written under.
const std::vector<std::pair<std::string, json>>& kinds() {
  static const std::vector<std::pair<std::string, json>> all = {
      {"object", json::parse(R"({"a": [1, {"b": null}], "c": "d"})")},
      {"array", json::parse(R"([1, "two", false, null, {}, []])")},
      {"empty-array", json::array()},
      {"string", "h\u00e9llo \U0001F600"},
      {"empty-string", ""},
      {"integer", -42},
      {"unsigned", 18'446'744'073'709'551'615u},
      {"double", 2.5},
      {"true", true},
      {"false", false},
      {"null", nullptr},
  };
  return all;
}

// Bytes that are not text: zeros, every byte value, an invalid UTF-8 sequence.
std::string every_byte() {
  std::string b;
  for (int i = 0; i < 256; ++i) b.push_back(static_cast<char>(i));
  return b + std::string("\x00\xc3\x28\xff\x00", 5);
}

// Over the server's blob threshold (256 KiB): stored as a blob, read back whole.
json long_array() {
  json a = json::array();
  for (int i = 0; i < 30'000; ++i) a.push_back("item-" + std::to_string(i));
  return a;
}

// What `get` reads compared with what was written; the differences, by name.
json mismatches(const Context& ctx, const std::string& prefix) {
  json out = json::array();
  for (const auto& [kind, value] : kinds()) {
    auto got = kDocs.get(ctx, prefix + kind);
    if (!got || *got != value) out.push_back(prefix + kind);
  }
  if (kRaws.get(ctx, prefix + "bytes") != Bytes{every_byte()}) out.push_back(prefix + "bytes");
  if (kRaws.get(ctx, prefix + "empty") != Bytes{""}) out.push_back(prefix + "empty");
  return out;
}

void write_all(Context& ctx, const std::string& prefix) {
  for (const auto& [kind, value] : kinds()) kDocs.set(ctx, prefix + kind, value);
  kRaws.set(ctx, prefix + "bytes", Bytes{every_byte()});
  kRaws.set(ctx, prefix + "empty", Bytes{""});
}

// Write: writes every kind (under "step-"), then Check.
class Write final : public Step {
 public:
  std::string type() const override { return "Write"; }
  StepDecision execute(Context& ctx) override {
    write_all(ctx, "step-");
    kDoc.set(ctx, json::array({"written", "by", "the", "step"}));
    kRaw.set(ctx, Bytes{std::string(16, '\0')});
    kLong.set(ctx, long_array());
    kTags.set(ctx, json::array({"eu", "gift"}));
    return StepDecision::go_to("Check");
  }
};

// Check: reads what Write wrote from its task, then waits on "done"; its
// execute reads what the RPC and the Client wrote meanwhile and completes
// with every difference it found.
class Check final : public WaitingStep {
 public:
  std::string type() const override { return "Check"; }
  Wait wait_for(Context& ctx) override {
    json found = mismatches(ctx, "step-");
    if (kDoc.get(ctx) != json::array({"written", "by", "the", "step"})) found.push_back("doc");
    if (kRaw.get(ctx) != Bytes{std::string(16, '\0')}) found.push_back("raw");
    if (kLong.get(ctx) != long_array()) found.push_back("long");
    if (!found.empty()) throw FlowFailure("Check read other values: " + found.dump(), true);
    return Wait::any_of({kDone.for_one()});
  }
  StepDecision execute(Context& ctx) override {
    json found = mismatches(ctx, "client-");
    for (const auto& m : mismatches(ctx, "rpc-")) found.push_back(m);
    if (kDoc.get(ctx) != json(nullptr)) found.push_back("doc (JSON null from the RPC)");
    if (kRaw.get(ctx).has_value()) found.push_back("raw (removed by the client)");
    return StepDecision::graceful_complete({{"mismatches", found}});
  }
};

class Values final : public Flow {
 public:
  std::string type() const override { return "Values"; }
  std::string start_step() const override { return "Write"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Write>(), std::make_shared<Check>()};
  }
  std::vector<Channel> channels() const override { return {kDone}; }
  std::vector<AttributeDef> attributes() const override {
    return {kDoc, kDocs, kRaw, kRaws, kLong, kTags};
  }
  std::vector<Rpc> rpcs() const override {
    // Reads what the Step wrote, writes every kind (under "rpc-") and JSON
    // null into "doc"; answers the differences it read.
    return {Rpc("rewrite", [](Context& ctx, const json&) -> RpcResult {
      json found = mismatches(ctx, "step-");
      write_all(ctx, "rpc-");
      kDoc.set(ctx, nullptr);
      return json{{"mismatches", found}, {"doc", *kDoc.get(ctx)}};
    })};
  }
};

class AttributeValuesEndToEnd : public LiveStackTest {
 protected:
  std::vector<std::shared_ptr<Flow>> flows() const override { return {std::make_shared<Values>()}; }
  void configure(WorkerOptions& wo) const override { wo.worker_id = "w-values"; }
  // Waits until the run's Check Step waits on "done".
  void wait_for_check(const std::string& flow_id) {
    for (int i = 0; i < 1000; ++i) {
      auto h = client_->history(flow_id, 0, true);
      ASSERT_TRUE(h.is_ok()) << h.status().message();
      for (const auto& e : h->events()) {
        if (e.kind() == flow::WAIT_FOR_COMPLETED) return;
        if (e.kind() == flow::FLOW_CLOSED || e.kind() == flow::WAIT_FOR_FAILED)
          FAIL() << "the run ended or its wait failed: " << e.DebugString();
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    FAIL() << "Check never waited";
  }
};

TEST_F(AttributeValuesEndToEnd, AStepAnRpcAndAClientWriteAndReadEveryJsonKindAndBytes) {
  StartOptions start;
  start.initial(kDoc, json("initial string"));
  for (const auto& [kind, value] : kinds()) start.initial(kDocs, "start-" + kind, value);
  start.initial(kRaws, "start-bytes", Bytes{every_byte()});
  ASSERT_TRUE(client_->start("Values", "v-1", json::object(), start).is_ok());
  ASSERT_NO_FATAL_FAILURE(wait_for_check("v-1"));

  // The Client reads the start's and the Step's values as written.
  auto got = client_->get_attributes("v-1");
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  for (const auto& [kind, value] : kinds()) {
    EXPECT_EQ(kDocs.get(*got, "start-" + kind), value) << kind;
    EXPECT_EQ(kDocs.get(*got, "step-" + kind), value) << kind;
  }
  EXPECT_EQ(kDocs.get(*got, "start-null"), json(nullptr)) << "JSON null is a value";
  EXPECT_EQ(kRaws.get(*got, "start-bytes"), Bytes{every_byte()});
  EXPECT_EQ(kRaws.get(*got, "step-bytes"), Bytes{every_byte()});
  EXPECT_EQ(kRaws.get(*got, "step-empty"), Bytes{""}) << "empty bytes are a value";
  EXPECT_EQ(kRaw.get(*got), Bytes{std::string(16, '\0')});
  EXPECT_EQ(kLong.get(*got), long_array());
  EXPECT_EQ(kTags.get(*got), json::array({"eu", "gift"}));
  // The raw values are the JSON texts of those values.
  const flow::AttributeValue* text = sdk_internal::find_attribute(*got, "docs", "step-string");
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(text->json_value(), json("h\u00e9llo \U0001F600").dump());

  // The RPC reads what the Step wrote and writes its own values and JSON null.
  auto rpc = client_->invoke_rpc("v-1", "rewrite", json::object());
  ASSERT_TRUE(rpc.is_ok()) << rpc.status().message();
  EXPECT_EQ((*rpc)["mismatches"], json::array());
  EXPECT_EQ((*rpc)["doc"], json(nullptr));

  // The Client writes every kind and removes raw, in one request.
  std::vector<flow::Attribute> writes;
  for (const auto& [kind, value] : kinds()) writes.push_back(kDocs.write("client-" + kind, value));
  writes.push_back(kRaws.write("client-bytes", Bytes{every_byte()}));
  writes.push_back(kRaws.write("client-empty", Bytes{""}));
  writes.push_back(kRaw.deletion());
  ASSERT_TRUE(client_->set_attributes("v-1", writes).is_ok());
  got = client_->get_attributes("v-1");
  ASSERT_TRUE(got.is_ok());
  for (const auto& [kind, value] : kinds()) {
    EXPECT_EQ(kDocs.get(*got, "rpc-" + kind), value) << kind;
    EXPECT_EQ(kDocs.get(*got, "client-" + kind), value) << kind;
  }
  EXPECT_EQ(kDoc.get(*got), json(nullptr)) << "the RPC's JSON null";
  EXPECT_FALSE(kRaw.get(*got).has_value()) << "the Client's removal";
  EXPECT_EQ(kRaws.all(*got).at("client-bytes"), Bytes{every_byte()});

  // The next Step reads the RPC's and the Client's values from its task.
  ASSERT_TRUE(client_->publish("v-1", "done", {json::object()}).is_ok());
  auto closed = client_->wait_for_flow("v-1", kWait);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  ASSERT_TRUE(closed->closed());
  ASSERT_EQ(closed->flow().status(), flow::FLOW_COMPLETED) << closed->flow().close_reason();
  ASSERT_EQ(closed->flow().outputs_size(), 1);
  EXPECT_EQ(from_payload(closed->flow().outputs(0).output()),
            (json{{"mismatches", json::array()}}));
}

TEST_F(AttributeValuesEndToEnd, TheServerRefusesTextThatIsNotJsonAndAKeywordArrayOfNonStrings) {
  StartOptions start;
  start.initial(kTags, json::array({"ok"}));
  ASSERT_TRUE(client_->start("Values", "v-2", json::object(), start).is_ok());
  ASSERT_NO_FATAL_FAILURE(wait_for_check("v-2"));
  flow::Attribute bad = kDoc.write(json::object());
  bad.mutable_value()->set_json_value("{'single': 'quotes'}");
  Status s = client_->set_attributes("v-2", {kDocs.write("x", 1), bad});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("Attribute 'doc' is not valid JSON"), std::string::npos)
      << s.message();
  s = client_->set_attributes("v-2", {kTags.write(json::array({"a", 1}))});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("indexed KEYWORD_ARRAY"), std::string::npos) << s.message();
  auto got = client_->get_attributes("v-2");
  ASSERT_TRUE(got.is_ok());
  EXPECT_FALSE(kDocs.get(*got, "x").has_value()) << "all or nothing";
  EXPECT_EQ(kTags.get(*got), json::array({"eu", "gift"}));
}

// Without a server: the codec of nlohmann::json, and what a typed Attribute
// declares and refuses.
TEST(AttributeJsonValues, AnyJsonValueEncodesAsItsTextAndDecodesBack) {
  for (const auto& [kind, value] : kinds()) {
    const flow::AttributeValue v = attribute_value(value);
    ASSERT_TRUE(v.has_json_value()) << kind;
    EXPECT_EQ(v.json_value(), value.dump()) << kind;
    EXPECT_EQ(sdk_internal::AttributeCodec<json>::decode(v), value) << kind;
  }
  EXPECT_EQ(attribute_value(json(nullptr)).json_value(), "null");
  flow::AttributeValue bad;
  bad.set_json_value("{oops");
  EXPECT_FALSE(sdk_internal::AttributeCodec<json>::decode(bad).has_value());
  bad.set_string_value("text");
  EXPECT_FALSE(sdk_internal::AttributeCodec<json>::decode(bad).has_value());
  // A string that is not UTF-8 cannot be JSON text.
  EXPECT_THROW((void)attribute_value(json(std::string("\xff"))), AttributeError);
  // A JSON Attribute declares ATTRIBUTE_JSON; one of nlohmann::json may take a
  // KEYWORD_ARRAY index (the server checks the value is an array of strings).
  EXPECT_EQ(kDoc.declaration().type(), flow::ATTRIBUTE_JSON);
  EXPECT_EQ(kTags.declaration().index().type(), flow::INDEX_KEYWORD_ARRAY);
  EXPECT_EQ(kDoc.describe(), "JSON Attribute 'doc'");
  EXPECT_EQ(kRaw.declaration().type(), flow::ATTRIBUTE_BYTES);
  // A value of another type in a response fails naming the key.
  flow::GetAttributesResponse response;
  auto* a = response.add_attributes();
  a->set_key("doc");
  a->mutable_value()->set_bytes_value("x");
  try {
    (void)kDoc.get(response);
    ADD_FAILURE() << "no throw";
  } catch (const AttributeError& e) {
    EXPECT_STREQ(e.what(), "Attribute 'doc' does not hold a JSON value");
  }
}

}  // namespace
}  // namespace dex
