// The flow rules' side of Attribute Store sync (docs/attribute-store.md): the
// writes of synced Attributes become SyncEntries of the run's store, in log
// order, in the record's own transaction; AttributeStoreSynced trims them; a
// deleted latest run leaves an entry that removes its row. check_state runs
// after every record (flow_test_util.h).
#include <gtest/gtest.h>

#include "flow_test_util.h"

namespace dex::flow {
namespace {

using namespace dex::flow::testing;

// "S" syncs "status" and "count" to store "reporting" by default; "note" is
// not synced; "tags" is a map.
FlowDeclaration synced_declaration(const std::string& store = "reporting") {
  FlowDeclaration d;
  d.set_flow_type("S");
  d.set_start_step_type("Work");
  d.set_attribute_store(store);
  *d.add_steps() = step_decl("Work");
  for (auto [key, type, sync] : {std::tuple{"status", ATTRIBUTE_STRING, true},
                                 {"count", ATTRIBUTE_INT64, true},
                                 {"note", ATTRIBUTE_STRING, false}}) {
    auto* a = d.add_attributes();
    a->set_key(key);
    a->set_type(type);
    a->set_sync(sync);
  }
  auto* tags = d.add_attributes();
  tags->set_key("tags");
  tags->set_type(ATTRIBUTE_STRING);
  tags->set_is_map(true);
  return d;
}

class AttributeSync : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(h.declare(synced_declaration()).kind, ApplyKind::kApplied); }

  // The store's entries, oldest first.
  std::vector<SyncEntry> entries(const std::string& store = "reporting") {
    std::vector<SyncEntry> out;
    for (const auto& [k, v] : h.kv.scan(keys::sync_prefix(store))) {
      SyncEntry e;
      EXPECT_TRUE(e.ParseFromString(v));
      out.push_back(e);
    }
    return out;
  }
  ApplyResult synced(const std::string& store, uint64_t through_slot) {
    FlowRecord r;
    r.mutable_attribute_store_synced()->set_store(store);
    r.mutable_attribute_store_synced()->set_through_slot(through_slot);
    r.mutable_attribute_store_synced()->set_at_unix_ms(h.now);
    return h.apply(r);
  }

  Harness h;
};

TEST_F(AttributeSync, SyncedWritesBecomeEntriesOfTheRunsStoreInLogOrder) {
  StartOptions o;
  *o.add_initial_attributes() = attr("status", "new");
  *o.add_initial_attributes() = attr("note", "private");
  ASSERT_EQ(h.start("f", "r1", "S", o).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->attribute_store(), "reporting") << "the declaration's default";
  ASSERT_EQ(h.set_attributes("f", {attr_int("count", 3), attr("tags", "k", "v")}).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr_delete("status"), attr("note", "n2")}).kind,
            ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr("note", "only unsynced")}).kind, ApplyKind::kApplied);

  auto e = entries();
  ASSERT_EQ(e.size(), 3u) << "one entry per record that wrote a synced Attribute";
  EXPECT_EQ(e[0].flow_id(), "f");
  EXPECT_EQ(e[0].run_id(), "r1");
  ASSERT_EQ(e[0].writes_size(), 1) << "note is not synced";
  EXPECT_EQ(e[0].writes(0).key(), "status");
  EXPECT_EQ(e[0].writes(0).value().string_value(), "new");
  ASSERT_EQ(e[1].writes_size(), 1) << "a map instance never syncs";
  EXPECT_EQ(e[1].writes(0).value().int64_value(), 3);
  ASSERT_EQ(e[2].writes_size(), 1);
  EXPECT_FALSE(e[2].writes(0).has_value()) << "a delete sets the column to NULL";
  EXPECT_LT(e[0].slot(), e[1].slot());
  EXPECT_LT(e[1].slot(), e[2].slot()) << "each entry carries its record's slot";
}

TEST_F(AttributeSync, AStartOptionChoosesTheStoreAndNoStoreMeansNoEntries) {
  StartOptions o;
  o.set_attribute_store("ops");
  *o.add_initial_attributes() = attr("status", "a");
  ASSERT_EQ(h.start("f", "r1", "S", o).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("f")->attribute_store(), "ops");
  EXPECT_TRUE(entries().empty());
  ASSERT_EQ(entries("ops").size(), 1u);

  ASSERT_EQ(h.declare(synced_declaration("")).kind, ApplyKind::kApplied);
  StartOptions none;
  *none.add_initial_attributes() = attr("status", "b");
  ASSERT_EQ(h.start("g", "r1", "S", none).kind, ApplyKind::kApplied);
  EXPECT_EQ(h.run("g")->attribute_store(), "");
  EXPECT_EQ(entries("ops").size(), 1u) << "a run without a store syncs nothing";
  // A later declaration does not move a running run to another store.
  ASSERT_EQ(h.set_attributes("f", {attr("status", "c")}).kind, ApplyKind::kApplied);
  EXPECT_EQ(entries("ops").size(), 2u);
}

TEST_F(AttributeSync, SyncedTrimsThroughASlotOnly) {
  for (int i = 0; i < 4; ++i) {
    StartOptions o;
    *o.add_initial_attributes() = attr_int("count", i);
    ASSERT_EQ(h.start("f" + std::to_string(i), "r1", "S", o).kind, ApplyKind::kApplied);
  }
  auto e = entries();
  ASSERT_EQ(e.size(), 4u);
  ASSERT_EQ(synced("reporting", e[1].slot()).kind, ApplyKind::kApplied);
  auto left = entries();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].flow_id(), "f2");
  EXPECT_EQ(synced("reporting", e[1].slot()).kind, ApplyKind::kUnchanged) << "a repeat";
  EXPECT_EQ(synced("other", e[3].slot()).kind, ApplyKind::kUnchanged) << "another store's";
  EXPECT_EQ(entries().size(), 2u);
  EXPECT_EQ(synced("", 99).kind, ApplyKind::kRejected);
  ASSERT_EQ(synced("reporting", e[3].slot() + 100).kind, ApplyKind::kApplied);
  EXPECT_TRUE(entries().empty());
}

TEST_F(AttributeSync, DeletingTheLatestRunLeavesAnEntryThatRemovesTheRow) {
  FlowRecord start = h.start_record("f", "r1", "S");
  start.mutable_start_flow()->set_retention_ms(1'000);
  ASSERT_EQ(h.apply(start).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.set_attributes("f", {attr("status", "done")}).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.execute("f", "Work-1", graceful("out")).kind, ApplyKind::kApplied);
  ASSERT_EQ(h.fire_next_timer().kind, ApplyKind::kApplied);
  ASSERT_FALSE(h.run("f").has_value());
  auto e = entries();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_TRUE(e[1].delete_row());
  EXPECT_EQ(e[1].flow_id(), "f");
  EXPECT_EQ(e[1].writes_size(), 0);
}

TEST_F(AttributeSync, OnlyPlainAttributesSync) {
  auto d = synced_declaration();
  d.set_flow_type("Bad");
  d.mutable_attributes(3)->set_sync(true);  // the map
  auto r = h.declare(d);
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("AttributeMap 'tags' as synced"), std::string::npos) << r.message;
  StartOptions o;
  o.set_attribute_store(std::string(1, '\x01'));
  r = h.start("f", "r1", "S", o);
  EXPECT_EQ(r.kind, ApplyKind::kRejected);
  EXPECT_NE(r.message.find("attributeStore contains a control character"), std::string::npos)
      << r.message;
}

}  // namespace
}  // namespace dex::flow
