#include "sql_fixture.h"

#include <cctype>

namespace dex::attrstore::testing {

RowWrite upsert(std::string flow_id, std::vector<Field> fields) {
  return RowWrite{std::move(flow_id), std::move(fields), false};
}

void SqlTest::SetUp() {
  dsn_ = test_dsn(type());
  ASSERT_FALSE(dsn_.empty());
  raw_ = RawSql::connect(type(), dsn_);
  ASSERT_NE(raw_, nullptr);
  // t_<suite>_<test>, lowercased: one table (and store) per test and database.
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "t_" + std::string(info->name());
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
  table_ = name.substr(0, 60);
}

std::string SqlTest::key_type() const {
  return pg() ? "varchar(64)" : "varchar(64) COLLATE utf8mb4_bin";
}

void SqlTest::create(const std::string& columns, const std::string& name) {
  const std::string t = name.empty() ? table_ : name;
  raw().exec("DROP TABLE IF EXISTS " + t);
  raw().exec("CREATE TABLE " + t + " (" + columns + ")" +
             (pg() ? "" : " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"));
}

StoreSettings SqlTest::store(const std::string& table_name) const {
  StoreSettings s;
  s.name = table_;
  s.type = type();
  s.dsn = dsn_;
  s.table_name = table_name.empty() ? table_ : table_name;
  return s;
}

StatusOr<std::unique_ptr<AttributeTable>> SqlTest::open(const StoreSettings& s,
                                                        const AttributeStoreSettings& common) {
  return AttributeTable::open(s, common, kNode, kConnectTimeout);
}

std::unique_ptr<AttributeTable> SqlTest::open_table(const StoreSettings& s) {
  auto t = open(s);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

std::optional<std::string> SqlTest::cell(const std::string& flow_id, const std::string& expr) {
  return raw().scalar("SELECT " + expr + " FROM " + table_ + " WHERE id = '" + flow_id + "'");
}

int64_t SqlTest::row_count() {
  return std::stoll(raw().scalar("SELECT COUNT(*) FROM " + table_).value_or("-1"));
}

std::string SqlTest::watermark_text() {
  auto rows = raw().query(
      "SELECT epoch, last_slot, process FROM dex_attribute_sync_watermark WHERE node_id = '" +
      std::string(kNode) + "' AND store = '" + table_ + "'");
  EXPECT_TRUE(rows.is_ok()) << rows.status().message();
  if (!rows.is_ok() || rows->empty()) return "";
  const auto& r = rows->front();
  return r[0].value_or("?") + "/" + r[1].value_or("?") + "/" + r[2].value_or("?");
}

}  // namespace dex::attrstore::testing
