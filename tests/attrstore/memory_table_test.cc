// The in-memory AttributeTable (a test tool for the sync loop) keeps the SQL
// tables' rules: fencing, the slot forward only, upserts by column, deletes,
// refusal of misfits as a whole, injected failures.
#include "attrstore/memory_table.h"

#include <gtest/gtest.h>

namespace dex::attrstore {
namespace {

flow::AttributeValue str(std::string v) {
  flow::AttributeValue a;
  a.set_string_value(std::move(v));
  return a;
}

std::shared_ptr<MemoryDatabase> database() {
  Column customer;
  customer.name = "customer";
  customer.kind = ColumnKind::kString;
  customer.max_length = 8;
  Column total;
  total.name = "total";
  total.kind = ColumnKind::kDouble;
  return std::make_shared<MemoryDatabase>(memory_schema("id", {customer, total}));
}

TEST(MemoryTable, KeepsTheWatermarkRules) {
  auto db = database();
  MemoryAttributeTable old_table(db, "node", "s"), new_table(db, "node", "s");
  EXPECT_EQ(old_table.schema().key_column, "id");
  EXPECT_TRUE(old_table.commit(1, "old", 0, 1, {}, seconds(1)).status().is_not_found());
  ASSERT_EQ(old_table.claim(1, "old", seconds(1))->outcome, CommitOutcome::kCommitted);
  auto done =
      old_table.commit(1, "old", 0, 3, {{"a", {{"customer", str("acme")}}, false}}, seconds(1));
  ASSERT_TRUE(done.is_ok());
  EXPECT_EQ(done->found, (Watermark{1, 3, "old"}));
  EXPECT_EQ(old_table.commit(1, "old", 0, 4, {}, seconds(1))->outcome, CommitOutcome::kMoved);
  ASSERT_EQ(new_table.claim(2, "new", seconds(1))->found, (Watermark{2, 3, "new"}));
  auto fenced = old_table.commit(1, "old", 3, 4, {}, seconds(1));
  EXPECT_EQ(fenced->outcome, CommitOutcome::kFenced);
  EXPECT_EQ(fenced->found.epoch, 2u);
  EXPECT_EQ(old_table.claim(1, "old", seconds(1))->outcome, CommitOutcome::kFenced);
  EXPECT_EQ(db->rows.at("a").at("customer")->string_value(), "acme");
}

TEST(MemoryTable, UpsertsByColumnDeletesAndRefusesMisfitsAsAWhole) {
  auto db = database();
  MemoryAttributeTable t(db, "node", "s");
  ASSERT_TRUE(t.claim(1, "p", seconds(1)).is_ok());
  ASSERT_TRUE(t.commit(1, "p", 0, 1,
                       {{"a", {{"customer", str("acme")}}, false},
                        {"a", {{"customer", str("bolt")}}, false},
                        {"b", {}, false}},
                       seconds(1))
                  .is_ok());
  EXPECT_EQ(db->rows.at("a").at("customer")->string_value(), "bolt");
  auto refused =
      t.commit(1, "p", 1, 2, {{"c", {}, false}, {"a", {{"customer", str("far too long")}}, false}},
               seconds(1));
  EXPECT_EQ(refused.status().code(), Code::kPermanent);
  EXPECT_EQ(db->rows.count("c"), 0u);
  EXPECT_EQ(t.read_watermark().value()->slot, 1u);
  ASSERT_TRUE(t.commit(1, "p", 1, 2, {{"b", {}, true}}, seconds(1)).is_ok());
  EXPECT_EQ(db->rows.count("b"), 0u);
}

TEST(MemoryTable, InjectedFailuresChangeNothing) {
  auto db = database();
  MemoryAttributeTable t(db, "node", "s");
  ASSERT_TRUE(t.claim(1, "p", seconds(1)).is_ok());
  t.fail_next(Status::transient("connection lost"), 2);
  EXPECT_TRUE(t.commit(1, "p", 0, 1, {{"a", {}, false}}, seconds(1)).status().is_transient());
  EXPECT_TRUE(t.ping().is_transient());
  EXPECT_TRUE(t.ping().is_ok());
  EXPECT_TRUE(db->rows.empty());
  Column extra;
  extra.name = "extra";
  extra.kind = ColumnKind::kInt;
  db->schema.columns.push_back(extra);
  EXPECT_EQ(t.schema().find("extra"), nullptr);
  ASSERT_TRUE(t.refresh_schema().is_ok());
  EXPECT_NE(t.schema().find("extra"), nullptr);
}

}  // namespace
}  // namespace dex::attrstore
