// TEST TOOL: the fixture of the tests against real servers, instantiated once
// per database (Postgres/..., Mariadb/...): a raw session, a fresh table per
// test (named after the test, so tests never share rows), and AttributeTable
// settings that point at it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "attrstore/attribute_table.h"
#include "raw_sql.h"
#include "values.h"

namespace dex::attrstore::testing {

inline constexpr std::string_view kNode = "node-a";
inline constexpr Duration kConnectTimeout = seconds(5);

// A row upsert of fields given as (column, value) pairs.
RowWrite upsert(std::string flow_id, std::vector<Field> fields);

class SqlTest : public ::testing::TestWithParam<StoreType> {
 protected:
  void SetUp() override;

  StoreType type() const { return GetParam(); }
  bool pg() const { return type() == StoreType::kPostgres; }
  const std::string& dsn() const { return dsn_; }
  RawSql& raw() { return *raw_; }
  // This test's table (unquoted, unqualified; also the store's name).
  const std::string& table() const { return table_; }
  // The key column type: MySQL's needs a binary collation.
  std::string key_type() const;
  // DROP TABLE IF EXISTS + CREATE TABLE table() (columns); InnoDB/utf8mb4 on MySQL.
  void create(const std::string& columns, const std::string& name = "");

  StoreSettings store(const std::string& table_name = "") const;
  StatusOr<std::unique_ptr<AttributeTable>> open(const StoreSettings& s,
                                                 const AttributeStoreSettings& common = {});
  // open() that must succeed.
  std::unique_ptr<AttributeTable> open_table(const StoreSettings& s);
  std::unique_ptr<AttributeTable> open_table() { return open_table(store()); }

  // SELECT `expr` FROM table() WHERE id = 'flow_id' (nullopt: NULL or no row).
  std::optional<std::string> cell(const std::string& flow_id, const std::string& expr);
  int64_t row_count();
  // The watermark row of (kNode, table()) as "epoch/slot/process", or "" if none.
  std::string watermark_text();

 private:
  std::string dsn_;
  std::unique_ptr<RawSql> raw_;
  std::string table_;
};

// Instantiates a TEST_P suite on both databases.
#define DEX_SQL_TEST_SUITE(suite)                                                      \
  INSTANTIATE_TEST_SUITE_P(Postgres, suite,                                            \
                           ::testing::Values(::dex::attrstore::StoreType::kPostgres)); \
  INSTANTIATE_TEST_SUITE_P(Mariadb, suite, ::testing::Values(::dex::attrstore::StoreType::kMysql))

}  // namespace dex::attrstore::testing
