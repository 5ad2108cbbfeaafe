// claim() and commit() against real servers: rows upserted column by column,
// the later write of a Flow ID wins, deletes, the watermark forward only
// (kMoved) and fenced by epoch (kFenced), and a refresh that finds new columns.
#include "sql_fixture.h"

namespace dex::attrstore::testing {
namespace {

class CommitTest : public SqlTest {
 protected:
  void SetUp() override {
    SqlTest::SetUp();
    create("id " + key_type() +
           " PRIMARY KEY, customer varchar(32), total double precision, note text");
  }
  static constexpr Duration kBudget = seconds(5);
};

TEST_P(CommitTest, ClaimCreatesTheWatermarkAndCommitMovesIt) {
  auto t = open_table();
  ASSERT_NE(t, nullptr);
  auto none = t->read_watermark();
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  auto claimed = t->claim(3, "proc-1", kBudget);
  ASSERT_TRUE(claimed.is_ok()) << claimed.status().to_string();
  EXPECT_EQ(claimed->outcome, CommitOutcome::kCommitted);
  EXPECT_EQ(claimed->found, (Watermark{3, 0, "proc-1"}));
  auto done = t->commit(3, "proc-1", 0, 5,
                        {upsert("a", {{"customer", str("acme")}, {"total", dbl(1.5)}}),
                         upsert("b", {{"customer", str("bolt")}})},
                        kBudget);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(done->outcome, CommitOutcome::kCommitted);
  EXPECT_EQ(done->found, (Watermark{3, 5, "proc-1"}));
  EXPECT_EQ(cell("a", "customer"), "acme");
  EXPECT_EQ(cell("a", "total"), "1.5");
  EXPECT_EQ(cell("b", "customer"), "bolt");
  EXPECT_EQ(cell("b", "total"), std::nullopt);
  auto read = t->read_watermark();
  ASSERT_TRUE(read.is_ok());
  EXPECT_EQ(**read, (Watermark{3, 5, "proc-1"}));
  EXPECT_EQ(watermark_text(), "3/5/proc-1");
}

TEST_P(CommitTest, AnUpsertSetsOnlyItsColumnsAndNullSetsNull) {
  auto t = open_table();
  ASSERT_TRUE(t->claim(1, "p", kBudget).is_ok());
  ASSERT_TRUE(
      t->commit(1, "p", 0, 1,
                {upsert("a", {{"customer", str("acme")}, {"total", dbl(1)}, {"note", str("n")}})},
                kBudget)
          .is_ok());
  ASSERT_TRUE(
      t->commit(1, "p", 1, 2, {upsert("a", {{"total", dbl(2)}, {"note", std::nullopt}})}, kBudget)
          .is_ok());
  EXPECT_EQ(cell("a", "customer"), "acme");
  EXPECT_EQ(cell("a", "total"), "2");
  EXPECT_EQ(cell("a", "COALESCE(note, 'null!')"), "null!");
  // A row of no fields: the Flow ID's row exists, nothing else changes.
  ASSERT_TRUE(t->commit(1, "p", 2, 3, {upsert("a", {}), upsert("new", {})}, kBudget).is_ok());
  EXPECT_EQ(cell("a", "customer"), "acme");
  EXPECT_EQ(cell("new", "id"), "new");
}

TEST_P(CommitTest, TheLaterWriteOfAFlowIdWins) {
  auto t = open_table();
  ASSERT_TRUE(t->claim(1, "p", kBudget).is_ok());
  auto done = t->commit(1, "p", 0, 1,
                        {upsert("a", {{"customer", str("first")}, {"total", dbl(1)}}),
                         upsert("a", {{"customer", str("second")}}),
                         upsert("a", {{"note", str("x")}, {"note", str("y")}})},
                        kBudget);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(cell("a", "customer"), "second");
  EXPECT_EQ(cell("a", "total"), "1");
  EXPECT_EQ(cell("a", "note"), "y");
}

TEST_P(CommitTest, DeleteRowRemovesTheRowInOrder) {
  auto t = open_table();
  ASSERT_TRUE(t->claim(1, "p", kBudget).is_ok());
  ASSERT_TRUE(
      t->commit(1, "p", 0, 1, {upsert("a", {{"customer", str("a")}}), upsert("b", {})}, kBudget)
          .is_ok());
  auto done = t->commit(1, "p", 1, 2,
                        {RowWrite{"a", {}, true}, RowWrite{"nobody", {}, true},
                         RowWrite{"b", {}, true}, upsert("b", {{"customer", str("again")}})},
                        kBudget);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ(cell("a", "id"), std::nullopt);
  EXPECT_EQ(cell("b", "customer"), "again");
  EXPECT_EQ(row_count(), 1);
}

TEST_P(CommitTest, TheWatermarkMovesForwardOnlyFromWhereItIs) {
  auto t = open_table();
  ASSERT_TRUE(t->claim(1, "p", kBudget).is_ok());
  ASSERT_TRUE(t->commit(1, "p", 0, 5, {upsert("a", {{"customer", str("five")}})}, kBudget).is_ok());
  // A batch that starts anywhere but slot 5 (a retry of a batch that landed,
  // or a gap) changes nothing and says where the watermark is.
  for (uint64_t after : {0u, 3u, 6u}) {
    auto moved =
        t->commit(1, "p", after, after + 10, {upsert("a", {{"customer", str("stale")}})}, kBudget);
    ASSERT_TRUE(moved.is_ok()) << moved.status().to_string();
    EXPECT_EQ(moved->outcome, CommitOutcome::kMoved);
    EXPECT_EQ(moved->found, (Watermark{1, 5, "p"}));
  }
  EXPECT_EQ(cell("a", "customer"), "five");
  EXPECT_EQ(watermark_text(), "1/5/p");
}

TEST_P(CommitTest, ANewerEpochFencesTheOlderProcess) {
  auto old_table = open_table();
  auto new_table = open_table();
  ASSERT_NE(old_table, nullptr);
  ASSERT_NE(new_table, nullptr);
  ASSERT_TRUE(old_table->claim(1, "old", kBudget).is_ok());
  ASSERT_TRUE(old_table->commit(1, "old", 0, 2, {upsert("a", {{"customer", str("old")}})}, kBudget)
                  .is_ok());
  auto claimed = new_table->claim(2, "new", kBudget);
  ASSERT_TRUE(claimed.is_ok());
  EXPECT_EQ(claimed->found, (Watermark{2, 2, "new"}));  // the slot is kept
  auto fenced =
      old_table->commit(1, "old", 2, 3, {upsert("a", {{"customer", str("zombie")}})}, kBudget);
  ASSERT_TRUE(fenced.is_ok()) << fenced.status().to_string();
  EXPECT_EQ(fenced->outcome, CommitOutcome::kFenced);
  EXPECT_EQ(fenced->found, (Watermark{2, 2, "new"}));
  auto reclaim = old_table->claim(1, "old", kBudget);
  ASSERT_TRUE(reclaim.is_ok());
  EXPECT_EQ(reclaim->outcome, CommitOutcome::kFenced);
  EXPECT_EQ(cell("a", "customer"), "old");
  ASSERT_TRUE(new_table->commit(2, "new", 2, 3, {upsert("a", {{"customer", str("new")}})}, kBudget)
                  .is_ok());
  EXPECT_EQ(cell("a", "customer"), "new");
  EXPECT_EQ(watermark_text(), "2/3/new");
}

TEST_P(CommitTest, CommitWithoutAClaimIsNotFound) {
  auto t = open_table();
  auto done = t->commit(1, "p", 0, 1, {upsert("a", {})}, kBudget);
  ASSERT_FALSE(done.is_ok());
  EXPECT_TRUE(done.status().is_not_found()) << done.status().to_string();
  EXPECT_EQ(row_count(), 0);
}

TEST_P(CommitTest, AFieldOfNoColumnIsRefusedAndNothingLands) {
  auto t = open_table();
  ASSERT_TRUE(t->claim(1, "p", kBudget).is_ok());
  auto done =
      t->commit(1, "p", 0, 1,
                {upsert("a", {{"customer", str("x")}}), upsert("b", {{"nope", i64(1)}})}, kBudget);
  ASSERT_FALSE(done.is_ok());
  EXPECT_EQ(done.status().code(), Code::kInvalidArgument) << done.status().to_string();
  EXPECT_EQ(row_count(), 0);
  EXPECT_EQ(watermark_text(), "1/0/p");
}

TEST_P(CommitTest, RefreshSchemaFindsAnAddedColumnAndKeepsTheOldOnFailure) {
  auto t = open_table();
  ASSERT_TRUE(t->claim(1, "p", kBudget).is_ok());
  raw().exec("ALTER TABLE " + table() + " ADD COLUMN score integer");
  EXPECT_EQ(t->schema().find("score"), nullptr);
  ASSERT_TRUE(t->refresh_schema().is_ok());
  ASSERT_NE(t->schema().find("score"), nullptr);
  EXPECT_EQ(t->schema().find("score")->kind, ColumnKind::kInt);
  ASSERT_TRUE(t->commit(1, "p", 0, 1, {upsert("a", {{"score", i64(9)}})}, kBudget).is_ok());
  EXPECT_EQ(cell("a", "score"), "9");
  // A table that no longer qualifies: the error, and the schema stays.
  raw().exec("ALTER TABLE " + table() + " ADD COLUMN req integer NOT NULL DEFAULT 0");
  raw().exec(pg() ? "ALTER TABLE " + table() + " ALTER COLUMN req DROP DEFAULT"
                  : "ALTER TABLE " + table() + " ALTER COLUMN req DROP DEFAULT");
  Status s = t->refresh_schema();
  EXPECT_EQ(s.code(), Code::kPermanent) << s.to_string();
  EXPECT_NE(s.message().find("NOT NULL columns without a default (req)"), std::string::npos)
      << s.message();
  EXPECT_NE(t->schema().find("score"), nullptr);
  EXPECT_EQ(t->schema().find("req"), nullptr);
}

TEST_P(CommitTest, TwoStoresOnOneTableKeepTheirOwnWatermarks) {
  auto a = open_table();
  StoreSettings other = store();
  other.name = table() + "_other";
  auto b = open_table(other);
  ASSERT_TRUE(a->claim(1, "p", kBudget).is_ok());
  ASSERT_TRUE(b->claim(7, "q", kBudget).is_ok());
  ASSERT_TRUE(a->commit(1, "p", 0, 4, {}, kBudget).is_ok());
  auto wb = b->read_watermark();
  ASSERT_TRUE(wb.is_ok());
  EXPECT_EQ(**wb, (Watermark{7, 0, "q"}));
  EXPECT_EQ(watermark_text(), "1/4/p");
}

DEX_SQL_TEST_SUITE(CommitTest);

}  // namespace
}  // namespace dex::attrstore::testing
