// The walks over messages (docs/engine.md, "Large values"): every value over
// the threshold, wherever it sits in a message, becomes a blob and comes back
// byte for byte; a value over the maximum is refused naming its field and the
// limit; a reference a sender set is refused; JSON Attribute values are
// checked before they go; comparisons with a reference need no read.
#include "blob/blob_values.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/digest.h"
#include "dex/flow_api.pb.h"
#include "dex/flow_records.pb.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using ::testing::HasSubstr;

BlobSettings settings() {
  BlobSettings s;
  s.threshold_bytes = 64;
  s.value_bytes_max = 4096;
  s.cache_bytes_max = 0;
  s.message_bytes_max = 1 << 20;
  return s;
}

std::string text(size_t n, char c) { return std::string(n, c); }

// A Worker result with long and short values in every kind of place.
flow::MethodResult busy_result() {
  flow::MethodResult m;
  m.set_outcome(flow::ATTEMPT_COMPLETED);
  auto* go = m.mutable_decision()->mutable_go_to();
  auto* a = go->add_movements();
  a->set_step_type("A");
  a->mutable_input()->set_data(text(100, 'a'));  // long
  auto* b = go->add_movements();
  b->set_step_type("B");
  b->mutable_input()->set_data("short");
  auto* p = m.add_publishes();
  p->set_channel("c");
  p->add_messages()->set_data(text(65, 'm'));  // long
  p->add_messages()->set_data(text(64, 'n'));  // at the threshold: inline
  auto* s = m.add_attribute_writes();
  s->set_key("status");
  s->mutable_value()->set_string_value(text(200, 's'));
  auto* j = m.add_attribute_writes();
  j->set_key("doc");
  j->mutable_value()->set_json_value("{\"k\": \"" + text(100, 'j') + "\"}");
  auto* bytes = m.add_attribute_writes();
  bytes->set_key("raw");
  bytes->mutable_value()->set_bytes_value(std::string(300, '\0'));
  auto* n = m.add_attribute_writes();
  n->set_key("n");
  n->mutable_value()->set_int64_value(5);
  return m;
}

TEST(BlobValues, LongValuesAnywhereBecomeBlobsAndComeBackByteForByte) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), settings());
  const flow::MethodResult original = busy_result();
  flow::MethodResult m = original;
  ASSERT_TRUE(offload_values(blobs, "flow-1", m).is_ok());

  const auto& go = m.decision().go_to();
  EXPECT_TRUE(go.movements(0).input().has_blob());
  EXPECT_TRUE(go.movements(0).input().data().empty());
  EXPECT_EQ(go.movements(0).input().blob().sha256(), sha256_hex(text(100, 'a')));
  EXPECT_FALSE(go.movements(1).input().has_blob());
  EXPECT_TRUE(m.publishes(0).messages(0).has_blob());
  EXPECT_FALSE(m.publishes(0).messages(1).has_blob());
  for (int i = 0; i < 3; ++i) {
    const auto& v = m.attribute_writes(i).value();
    EXPECT_TRUE(v.has_blob()) << i;
    EXPECT_NE(v.value_case(), flow::AttributeValue::VALUE_NOT_SET) << "the type stays named";
  }
  EXPECT_TRUE(m.attribute_writes(0).value().string_value().empty());
  EXPECT_TRUE(m.attribute_writes(1).value().has_json_value());
  EXPECT_TRUE(m.attribute_writes(2).value().has_bytes_value());
  EXPECT_FALSE(m.attribute_writes(3).value().has_blob());
  // The record holds references, not the long values.
  const std::string record = m.SerializeAsString();
  EXPECT_EQ(record.find(text(65, 'm')), std::string::npos);
  EXPECT_EQ(record.find(text(200, 's')), std::string::npos);
  EXPECT_NE(record.find(text(64, 'n')), std::string::npos);
  EXPECT_TRUE(has_blob_refs(m));
  EXPECT_GE(inlined_size(m), original.ByteSizeLong());

  auto keys = list_all(memory, blobs.flow_prefix("flow-1"));
  ASSERT_TRUE(keys.is_ok());
  EXPECT_EQ(keys->size(), 5u);

  ASSERT_TRUE(inline_values(blobs, m, 1 << 20).is_ok());
  EXPECT_FALSE(has_blob_refs(m));
  EXPECT_EQ(m.SerializeAsString(), original.SerializeAsString());
}

TEST(BlobValues, ShortValuesStayInlineAndWriteNothing) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), settings());
  flow::StartFlowRequest r;
  r.set_flow_id("f");
  r.mutable_input()->set_data(text(64, 'x'));
  auto* a = r.mutable_options()->add_initial_attributes();
  a->set_key("k");
  a->mutable_value()->set_string_value("v");
  const std::string before = r.SerializeAsString();
  ASSERT_TRUE(offload_values(blobs, "f", r).is_ok());
  EXPECT_EQ(r.SerializeAsString(), before);
  EXPECT_EQ(memory.counts().puts, 0u);
  EXPECT_FALSE(has_blob_refs(r));
  ASSERT_TRUE(inline_values(blobs, r, 0).is_ok());  // nothing to read, no budget needed
}

TEST(BlobValues, AValueOverTheMaximumIsRefusedNamingItsFieldAndTheLimit) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), settings());
  flow::MethodResult m = busy_result();
  m.mutable_decision()->mutable_go_to()->mutable_movements(1)->mutable_input()->set_data(
      text(4097, 'x'));
  Status s = offload_values(blobs, "f", m);
  ASSERT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("decision.goTo.movements[1].input is 4097 bytes"));
  EXPECT_THAT(s.message(), HasSubstr("the limit is 4096 bytes (4 KiB"));
  EXPECT_THAT(s.message(), HasSubstr("values.maxSize"));

  flow::SetAttributesRequest set;
  set.mutable_flow()->set_flow_id("f");
  auto* w = set.add_writes();
  w->set_key("counts");
  w->set_instance_key("eu");
  w->mutable_value()->set_bytes_value(text(5000, 'b'));
  s = offload_values(blobs, "f", set);
  ASSERT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("writes[0] (Attribute 'counts', instance 'eu').value is 5000 "
                                     "bytes"));
  // Exactly the maximum is allowed.
  w->mutable_value()->set_bytes_value(text(4096, 'b'));
  EXPECT_TRUE(offload_values(blobs, "f", set).is_ok());
}

TEST(BlobValues, AReferenceFromASenderIsRefused) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), settings());
  // A client naming another Flow's blob would read it through its own run.
  auto theirs = blobs.put("someone-else", text(100, 's'));
  ASSERT_TRUE(theirs.is_ok());
  flow::PublishToChannelRequest p;
  p.set_flow_id("mine");
  *p.add_messages()->mutable_blob() = *theirs;
  Status s = offload_values(blobs, "mine", p);
  ASSERT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("messages[0] carries a blob reference"));

  flow::SetAttributesRequest set;
  auto* w = set.add_writes();
  w->set_key("k");
  w->mutable_value()->set_string_value("");
  *w->mutable_value()->mutable_blob() = *theirs;
  EXPECT_EQ(offload_values(blobs, "mine", set).code(), Code::kInvalidArgument);
}

TEST(BlobValues, ALongJsonAttributeValueMustBeOneJsonValue) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), settings());
  flow::SetAttributesRequest set;
  auto* w = set.add_writes();
  w->set_key("doc");
  w->mutable_value()->set_json_value("[" + text(100, '1') + ",]");
  Status s = offload_values(blobs, "f", set);
  ASSERT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is not valid JSON"));
  EXPECT_EQ(memory.counts().puts, 0u);
  // Any JSON value may be long: an array, a string.
  for (const std::string& value : {"[" + text(100, '1') + "]", "\"" + text(100, 'x') + "\""}) {
    w->mutable_value()->set_json_value(value);
    ASSERT_TRUE(offload_values(blobs, "f", set).is_ok()) << value;
    EXPECT_TRUE(w->value().has_blob());
    EXPECT_TRUE(w->value().has_json_value()) << "the oneof keeps naming the type";
    w->mutable_value()->clear_blob();
  }
  EXPECT_EQ(memory.counts().puts, 2u);
}

TEST(BlobValues, InlineRefusesAnAnswerOverTheBudgetBeforeReadingAnything) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), settings());
  flow::GetAttributesResponse r;
  for (int i = 0; i < 3; ++i) {
    auto* a = r.add_attributes();
    a->set_key("k" + std::to_string(i));
    a->mutable_value()->set_string_value(text(1000, static_cast<char>('a' + i)));
  }
  ASSERT_TRUE(offload_values(blobs, "f", r).is_ok());
  const uint64_t gets = memory.counts().gets;
  Status s = inline_values(blobs, r, 2500);
  ASSERT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("over the limit of 2500 bytes"));
  EXPECT_EQ(memory.counts().gets, gets);
  ASSERT_TRUE(inline_values(blobs, r, 4000).is_ok());
  EXPECT_EQ(r.attributes(2).value().string_value(), text(1000, 'c'));
}

TEST(BlobValues, InlineReportsAMissingBlob) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), settings());
  flow::FlowTask task;
  task.mutable_input()->set_data(text(100, 'i'));
  ASSERT_TRUE(offload_values(blobs, "f", task).is_ok());
  ASSERT_TRUE(memory.remove(task.input().blob().key()).is_ok());
  Status s = inline_values(blobs, task, 1 << 20);
  EXPECT_TRUE(s.is_corruption()) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr(task.input().blob().key()));
}

TEST(BlobValues, SameAttributeValueComparesAReferenceBySha256) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), settings());
  flow::Attribute stored;
  stored.set_key("k");
  stored.mutable_value()->set_string_value(text(100, 'v'));
  ASSERT_TRUE(offload_values(blobs, "f", stored).is_ok());
  ASSERT_TRUE(stored.value().has_blob());
  flow::AttributeValue target;
  target.set_string_value(text(100, 'v'));
  EXPECT_TRUE(same_attribute_value(stored.value(), target));
  target.set_string_value(text(100, 'w'));
  EXPECT_FALSE(same_attribute_value(stored.value(), target));
  target.set_bytes_value(text(100, 'v'));  // same bytes, another type
  EXPECT_FALSE(same_attribute_value(stored.value(), target));
  flow::AttributeValue small;
  small.set_int64_value(3);
  flow::AttributeValue three;
  three.set_int64_value(3);
  EXPECT_TRUE(same_attribute_value(small, three));
  EXPECT_EQ(memory.counts().gets, 0u);
}

}  // namespace
}  // namespace dex
