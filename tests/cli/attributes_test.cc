// dexcli's Attributes: the write flags of `flow attributes set` (typed values,
// AttributeMap instances, errors naming the bad flag), datetimes, and the JSON
// and table of each Attribute type.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cli/attributes.h"
#include "cli/flow_table.h"

namespace dex::cli {
namespace {

using json = nlohmann::ordered_json;

std::vector<flow::Attribute> parse_ok(const AttributeWriteFlags& flags) {
  auto writes = parse_attribute_writes(flags);
  EXPECT_TRUE(writes.is_ok()) << writes.status().message();
  return writes.is_ok() ? *writes : std::vector<flow::Attribute>{};
}

std::string parse_error(const AttributeWriteFlags& flags) {
  auto writes = parse_attribute_writes(flags);
  EXPECT_FALSE(writes.is_ok());
  return writes.is_ok() ? "" : writes.status().message();
}

using Member = std::vector<std::string> AttributeWriteFlags::*;

// Flags with each (member, entry) appended in order.
AttributeWriteFlags with(std::initializer_list<std::pair<Member, std::string>> entries) {
  AttributeWriteFlags f;
  for (const auto& [member, entry] : entries) (f.*member).push_back(entry);
  return f;
}

using F = AttributeWriteFlags;

TEST(AttributeWrites, EachFlagMakesItsType) {
  AttributeWriteFlags f;
  f.strings = {"status=a=b"};  // the first '=' ends the key
  f.int64s = {"count=-9223372036854775808"};
  f.doubles = {"ratio=0.25"};
  f.bools = {"ok=false"};
  f.datetimes = {"due=2026-12-02T10:00:00Z"};
  f.jsons = {"doc={\"a\": [1, 2]}"};
  f.bytes_base64 = {"blob=AP8="};
  f.deletes = {"old"};
  f.positional = {"note=plain text"};
  const auto w = parse_ok(f);
  ASSERT_EQ(w.size(), 9u);
  EXPECT_EQ(w[0].key(), "status");
  EXPECT_EQ(w[0].value().string_value(), "a=b");
  EXPECT_EQ(w[1].value().int64_value(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(w[2].value().double_value(), 0.25);
  EXPECT_TRUE(w[3].value().has_bool_value());
  EXPECT_FALSE(w[3].value().bool_value());
  EXPECT_EQ(w[4].value().datetime_unix_ms(), 1'796'205'600'000);
  EXPECT_EQ(w[5].value().json_value(), R"({"a":[1,2]})");  // sent compact
  EXPECT_EQ(w[6].value().bytes_value(), std::string("\x00\xff", 2));
  EXPECT_EQ(w[7].key(), "old");
  EXPECT_FALSE(w[7].has_value());  // no value: a delete
  EXPECT_EQ(w[8].value().string_value(), "plain text");
  for (const auto& a : w) EXPECT_EQ(a.instance_key(), "") << a.key();
}

TEST(AttributeWrites, JsonTakesAnyJsonValueAndBytesAnyBytes) {
  AttributeWriteFlags f;
  f.jsons = {
      "a=[1, \"two\", null]", "s=\"text\"", "n=-2.5e3", "t=true", "f=false", "z=null", "o={}",
      "k=[\"eu\",\"gift\"]"};
  f.bytes_base64 = {"b=AAD/wyg=", "e="};
  const auto w = parse_ok(f);
  ASSERT_EQ(w.size(), 10u);
  const std::vector<std::string> sent = {
      R"([1,"two",null])", R"("text")", "-2500.0", "true", "false", "null", "{}",
      R"(["eu","gift"])"};
  for (size_t i = 0; i < sent.size(); ++i) {
    ASSERT_TRUE(w[i].value().has_json_value()) << w[i].key();
    EXPECT_EQ(w[i].value().json_value(), sent[i]) << w[i].key();
  }
  EXPECT_EQ(w[8].value().bytes_value(), std::string("\x00\x00\xff\xc3\x28", 5));
  ASSERT_TRUE(w[9].has_value()) << "empty bytes are a value, not a delete";
  EXPECT_TRUE(w[9].value().has_bytes_value());
  EXPECT_EQ(w[9].value().bytes_value(), "");
}

TEST(AttributeWrites, MapInstancesInBracketsOrFromInstanceFlag) {
  AttributeWriteFlags f;
  f.int64s = {"counts[eu-west]=3", "counts[a]b]=4", "total=7"};
  f.deletes = {"counts[gone]", "other"};
  f.instance = "default";
  const auto w = parse_ok(f);
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[0].key(), "counts");
  EXPECT_EQ(w[0].instance_key(), "eu-west");
  EXPECT_EQ(w[0].value().int64_value(), 3);
  EXPECT_EQ(w[1].instance_key(), "a]b");  // the instance runs to the first "]="
  EXPECT_EQ(w[2].key(), "total");
  EXPECT_EQ(w[2].instance_key(), "default");
  EXPECT_EQ(w[3].instance_key(), "gone");
  EXPECT_FALSE(w[3].has_value());
  EXPECT_EQ(w[4].instance_key(), "default");
}

TEST(AttributeWrites, ErrorsNameTheFlagAndItsArgument) {
  const std::vector<std::pair<AttributeWriteFlags, std::string>> cases = {
      {with({{&F::int64s, "n=abc"}}), "--int n=abc: 'abc' is not a whole number (int64)"},
      {with({{&F::int64s, "n=9223372036854775808"}}), "--int n=9223372036854775808: "},
      {with({{&F::int64s, "n=1.5"}}), "--int n=1.5: "},
      {with({{&F::doubles, "x=nan"}}), "--double x=nan: 'nan' is not a finite number"},
      {with({{&F::doubles, "x="}}), "--double x=: "},
      {with({{&F::bools, "b=yes"}}), "--bool b=yes: 'yes' is not true or false"},
      {with({{&F::datetimes, "d=2026-02-30T00:00:00Z"}}), "--datetime d=2026-02-30T00:00:00Z: "},
      {with({{&F::datetimes, "d=tomorrow"}}),
       "--datetime d=tomorrow: 'tomorrow' is not a datetime"},
      {with({{&F::jsons, "j={nope"}}), "--json j={nope: not valid JSON"},
      {with({{&F::jsons, "j=text"}}),
       "--json j=text: not valid JSON (an object, an array, a "
       "string in double quotes"},
      {with({{&F::jsons, "j="}}), "--json j=: not valid JSON"},
      {with({{&F::jsons, "j=[1,]"}}), "--json j=[1,]: not valid JSON"},
      {with({{&F::bytes_base64, "b=!!"}}), "--bytes-base64 b=!!: not base64"},
      {with({{&F::strings, "novalue"}}), "--string novalue: expected KEY=VALUE"},
      {with({{&F::strings, "=v"}}), "--string =v: the key is empty"},
      {with({{&F::strings, "m[]=v"}}), "--string m[]=v: the instance key in [] is empty"},
      {with({{&F::strings, "m[x=v"}}), "--string m[x=v: expected KEY[INSTANCE]=VALUE"},
      {with({{&F::deletes, "k=v"}}),
       "--delete k=v: a delete names KEY or KEY[INSTANCE], without a value"},
      {with({{&F::deletes, "m[x"}}), "--delete m[x: expected KEY or KEY[INSTANCE]"},
      {with({{&F::positional, "justakey"}}), "'justakey': expected KEY=VALUE"},
      {with({{&F::strings, "s=1"}, {&F::deletes, "s"}}),
       "--delete s: s is already written by --string s=1 (one write per Attribute)"},
      {with({{&F::int64s, "m[a]=1"}, {&F::int64s, "m[a]=2"}}),
       "--int m[a]=2: m[a] is already written by --int m[a]=1"},
      {with({}), "nothing to write"},
  };
  for (const auto& [flags, expected] : cases) {
    const std::string message = parse_error(flags);
    EXPECT_EQ(message.rfind(expected, 0), 0u) << "got: " << message << "\nwant: " << expected;
  }
  // Different instances of one map, or a plain key and a map instance, are distinct.
  EXPECT_EQ(
      parse_ok(with({{&F::int64s, "m[a]=1"}, {&F::int64s, "m[b]=2"}, {&F::int64s, "m=3"}})).size(),
      3u);
}

TEST(Datetime, Rfc3339AndUnixMillisecondsParse) {
  EXPECT_EQ(*parse_datetime("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*parse_datetime("2026-12-02T10:00:00Z"), 1'796'205'600'000);
  EXPECT_EQ(*parse_datetime("2026-12-02t10:00:00.5z"), 1'796'205'600'500);
  EXPECT_EQ(*parse_datetime("2026-12-02 11:00:00.250+01:00"), 1'796'205'600'250);
  EXPECT_EQ(*parse_datetime("2026-12-02T05:30:00.120000-04:30"), 1'796'205'600'120);
  EXPECT_EQ(*parse_datetime("2024-02-29T00:00:00Z"), 1'709'164'800'000);  // a leap day
  EXPECT_EQ(*parse_datetime("1969-12-31T23:59:59.999Z"), -1);
  EXPECT_EQ(*parse_datetime("1796205600000"), 1'796'205'600'000);
  EXPECT_EQ(*parse_datetime("-1"), -1);
  for (const char* bad : {"2025-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-02T24:00:00Z",
                          "2026-12-02T10:00:00", "2026-12-02T10:00:00+0100",
                          "2026-12-02T10:00:00.0001Z", "2026-12-02T10:00:00.Z", "2026-12-02", ""}) {
    EXPECT_FALSE(parse_datetime(bad).is_ok()) << bad;
  }
  // Zeros beyond the millisecond lose nothing.
  EXPECT_EQ(*parse_datetime("2026-12-02T10:00:00.100000000Z"), 1'796'205'600'100);
}

TEST(Datetime, PrintsAsRfc3339UtcWithMilliseconds) {
  EXPECT_EQ(rfc3339_text(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339_text(1'796'205'600'250), "2026-12-02T10:00:00.250Z");
  EXPECT_EQ(rfc3339_text(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(rfc3339_text(1'709'164'800'000), "2024-02-29T00:00:00.000Z");
  // Round trip through the parser over a spread of times.
  for (int64_t ms = -5'000'000'000'000; ms < 5'000'000'000'000; ms += 123'456'789'012) {
    EXPECT_EQ(*parse_datetime(rfc3339_text(ms)), ms) << rfc3339_text(ms);
  }
}

flow::Attribute attr(const std::string& key, const std::string& instance = "") {
  flow::Attribute a;
  a.set_key(key);
  a.set_instance_key(instance);
  return a;
}

TEST(AttributeJson, EachTypeRendersNaturally) {
  google::protobuf::RepeatedPtrField<flow::Attribute> list;
  auto add = [&](const std::string& key, const std::string& instance = "") {
    *list.Add() = attr(key, instance);
    return list.Mutable(list.size() - 1)->mutable_value();
  };
  add("s")->set_string_value("started");
  add("counts", "eu")->set_int64_value(9'007'199'254'740'993);  // beyond a double's exact range
  add("d")->set_double_value(2.5);
  add("b")->set_bool_value(true);
  add("at")->set_datetime_unix_ms(1'796'205'600'250);
  add("doc")->set_json_value(R"({"a":[1,{"b":null}]})");
  add("raw")->set_bytes_value(std::string("\x00\xff", 2));
  const json j = attributes_json(list);
  EXPECT_EQ(j, json::parse(R"([
    {"key": "s", "type": "string", "value": "started"},
    {"key": "counts", "instanceKey": "eu", "type": "int64", "value": 9007199254740993},
    {"key": "d", "type": "double", "value": 2.5},
    {"key": "b", "type": "bool", "value": true},
    {"key": "at", "type": "datetime", "value": "2026-12-02T10:00:00.250Z", "unixMs": 1796205600250},
    {"key": "doc", "type": "json", "value": {"a": [1, {"b": null}]}},
    {"key": "raw", "type": "bytes", "value": "AP8="}])"))
      << j.dump();
  EXPECT_EQ(j[1]["value"].get<int64_t>(), 9'007'199'254'740'993);
}

TEST(AttributeJson, NonFiniteDoublesDeletesAndBadJsonStillPrint) {
  flow::Attribute a = attr("x");
  a.mutable_value()->set_double_value(std::nan(""));
  EXPECT_EQ(attribute_json(a)["value"], "NaN");
  a.mutable_value()->set_double_value(-std::numeric_limits<double>::infinity());
  EXPECT_EQ(attribute_json(a)["value"], "-Infinity");
  a.mutable_value()->set_json_value("{not json");
  EXPECT_EQ(attribute_json(a)["value"], "{not json");  // kept as text rather than failing
  const flow::Attribute deleted = attr("m", "a");
  EXPECT_EQ(attribute_json(deleted),
            json::parse(R"({"key":"m","instanceKey":"a","deleted":true})"));
}

TEST(AttributeJson, JsonScalarsArraysAndNullRenderAsThemselvesAndNullIsNotADelete) {
  google::protobuf::RepeatedPtrField<flow::Attribute> list;
  for (const std::string text : {R"("text")", "[1,null]", "-2.5", "false", "null"}) {
    *list.Add() = attr("doc");
    list.Mutable(list.size() - 1)->mutable_value()->set_json_value(text);
  }
  const json j = attributes_json(list);
  EXPECT_EQ(j, json::parse(R"([
    {"key": "doc", "type": "json", "value": "text"},
    {"key": "doc", "type": "json", "value": [1, null]},
    {"key": "doc", "type": "json", "value": -2.5},
    {"key": "doc", "type": "json", "value": false},
    {"key": "doc", "type": "json", "value": null}])"))
      << j.dump();
  // In a table and a history line a JSON string keeps its quotes (a string
  // Attribute's value has none) and null shows as null, not "(deleted)".
  const std::vector<flow::Attribute> rows(list.begin(), list.end());
  const std::string t = attributes_table(rows, 0);
  EXPECT_NE(t.find("doc  -         json  \"text\"\n"), std::string::npos) << t;
  EXPECT_NE(t.find("doc  -         json  null\n"), std::string::npos) << t;
  EXPECT_EQ(attribute_writes_text(list),
            R"(doc="text", doc=[1,null], doc=-2.5, doc=false, doc=null)");
}

TEST(AttributeTable, OneRowPerAttributeWithReadableValues) {
  std::vector<flow::Attribute> list = {attr("status"), attr("counts", "eu"), attr("due"),
                                       attr("raw")};
  list[0].mutable_value()->set_string_value("started");
  list[1].mutable_value()->set_int64_value(3);
  list[2].mutable_value()->set_datetime_unix_ms(1'796'205'600'000);
  list[3].mutable_value()->set_bytes_value(std::string(100, 'x'));
  const std::string t = attributes_table(list, 1'796'205'605'000);
  EXPECT_EQ(t.substr(0, t.find('\n')), "KEY     INSTANCE  TYPE      VALUE") << t;
  EXPECT_NE(t.find("status  -         string    started\n"), std::string::npos) << t;
  EXPECT_NE(t.find("counts  eu        int64     3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("due     -         datetime  2026-12-02 10:00:00.000 UTC (5.0s ago)\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("... (100 bytes)\n"), std::string::npos) << t;  // long values are cut
  EXPECT_EQ(attributes_table({}, 0), "(no Attributes)\n");
}

TEST(HistoryTable, RpcAndAttributeEventsShowTheirDetail) {
  flow::HistoryEvent rpc;
  rpc.set_seq(4);
  rpc.set_kind(flow::RPC_COMPLETED);
  rpc.set_rpc_name("set-status");
  rpc.mutable_output()->set_data(R"({"ok":true})");
  *rpc.add_attribute_writes() = attr("status");
  rpc.mutable_attribute_writes(0)->mutable_value()->set_string_value("paused");
  *rpc.add_attribute_writes() = attr("counts", "a");  // a delete
  flow::HistoryEvent locks;
  locks.set_seq(5);
  locks.set_kind(flow::LOCKS_ACQUIRED);
  locks.set_method(flow::RPC);
  locks.add_lock_keys("order");
  flow::HistoryEvent waited;  // the writes come before the (long) wait, which is cut
  waited.set_seq(6);
  waited.set_kind(flow::WAIT_FOR_COMPLETED);
  *waited.add_attribute_writes() = attr("status");
  waited.mutable_attribute_writes(0)->mutable_value()->set_string_value("started");
  waited.mutable_wait()->set_kind(flow::ANY_OF);
  for (int i = 0; i < 5; ++i) {
    waited.mutable_wait()->add_conditions()->mutable_channel()->set_channel("done");
  }
  const std::string t = history_table({rpc, locks, waited}, 0);
  EXPECT_NE(t.find(R"(set status="started"; {"kind":"ANY_OF","conditions":[{"channel":)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find(R"(rpc set-status -> {"ok":true}; set status="paused", counts[a]=(deleted))"
                   "\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("LOCKS_ACQUIRED"), std::string::npos) << t;
  EXPECT_NE(t.find("RPC locks order"), std::string::npos) << t;
}

}  // namespace
}  // namespace dex::cli
