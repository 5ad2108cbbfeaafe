// AttributeTable::open against real servers: which tables qualify, what the
// errors say (the store, the table, the reason) and what they never hold (the
// DSN, the password), and the watermark table.
#include <chrono>

#include "attrstore/dsn.h"
#include "sql_fixture.h"

namespace dex::attrstore::testing {
namespace {

using OpenTest = SqlTest;

// The error of an open that must fail, with the store prefix every message has.
std::string open_error(SqlTest& t, const StoreSettings& s, Code code,
                       const AttributeStoreSettings& common = {}) {
  auto opened = AttributeTable::open(s, common, kNode, kConnectTimeout);
  EXPECT_FALSE(opened.is_ok());
  if (opened.is_ok()) return "";
  EXPECT_EQ(opened.status().code(), code) << opened.status().to_string();
  EXPECT_TRUE(opened.status().message().starts_with("Attribute Store \"" + s.name + "\": "))
      << opened.status().message();
  (void)t;
  return opened.status().message();
}

TEST_P(OpenTest, AGoodTableOpensAndDescribesItsColumns) {
  create("id " + key_type() +
         " PRIMARY KEY, customer varchar(32), total double precision, note text");
  auto opened = open_table();
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->schema().key_column, "id");
  ASSERT_EQ(opened->schema().columns.size(), 4u);
  EXPECT_EQ(opened->schema().find("customer")->kind, ColumnKind::kString);
  EXPECT_EQ(opened->schema().find("customer")->max_length, 32);
  EXPECT_EQ(opened->schema().find("total")->kind, ColumnKind::kDouble);
  EXPECT_EQ(opened->schema().find("missing"), nullptr);
  EXPECT_EQ(opened->describe_target(), (pg() ? "public." : "dextest.") + table());
  EXPECT_TRUE(opened->ping().is_ok());
}

TEST_P(OpenTest, NoTableIsAPermanentErrorNamingIt) {
  raw().exec("DROP TABLE IF EXISTS " + table());
  const std::string msg = open_error(*this, store(), Code::kPermanent);
  EXPECT_NE(msg.find("table " + table() + " does not exist"), std::string::npos) << msg;
}

TEST_P(OpenTest, NoPrimaryKeyIsRefused) {
  create("id varchar(64), customer varchar(32)");
  const std::string msg = open_error(*this, store(), Code::kPermanent);
  EXPECT_NE(msg.find("has no primary key"), std::string::npos) << msg;
}

TEST_P(OpenTest, TwoPrimaryKeyColumnsAreRefusedByName) {
  create("id " + key_type() +
         ", region varchar(8), customer varchar(32), PRIMARY KEY (id, region)");
  const std::string msg = open_error(*this, store(), Code::kPermanent);
  EXPECT_NE(msg.find("has 2 primary-key columns (id, region); it needs exactly one character "
                     "column (the Flow ID)"),
            std::string::npos)
      << msg;
}

TEST_P(OpenTest, AnIntegerPrimaryKeyIsRefused) {
  create("id bigint PRIMARY KEY, customer varchar(32)");
  const std::string msg = open_error(*this, store(), Code::kPermanent);
  EXPECT_NE(msg.find("primary key id of type bigint"), std::string::npos) << msg;
}

TEST_P(OpenTest, ANotNullColumnWithoutDefaultIsRefused) {
  create("id " + key_type() +
         " PRIMARY KEY, a int NOT NULL DEFAULT 1, b int NOT NULL, c int NOT NULL");
  const std::string msg = open_error(*this, store(), Code::kPermanent);
  EXPECT_NE(msg.find("NOT NULL columns without a default (b, c)"), std::string::npos) << msg;
}

TEST_P(OpenTest, ABadTableNameIsAnInvalidArgument) {
  const std::string msg = open_error(*this, store("a..b"), Code::kInvalidArgument);
  EXPECT_NE(msg.find("an empty part"), std::string::npos) << msg;
  open_error(*this, store("a.b.c"), Code::kInvalidArgument);
}

TEST_P(OpenTest, AQualifiedAndQuotedNameWithADotOpens) {
  const std::string schema = "s_" + table();
  if (pg()) {
    raw().exec("CREATE SCHEMA IF NOT EXISTS " + schema);
    raw().exec("DROP TABLE IF EXISTS " + schema + ".\"Odd.Name\"");
    raw().exec("CREATE TABLE " + schema + ".\"Odd.Name\" (id varchar(64) PRIMARY KEY, v int)");
  } else {
    raw().exec("CREATE DATABASE IF NOT EXISTS " + schema);
    raw().exec("DROP TABLE IF EXISTS " + schema + ".`Odd.Name`");
    raw().exec("CREATE TABLE " + schema +
               ".`Odd.Name` (id varchar(64) COLLATE utf8mb4_bin PRIMARY KEY, v int)");
  }
  const std::string name = schema + (pg() ? ".\"Odd.Name\"" : ".`Odd.Name`");
  auto opened = open_table(store(name));
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->describe_target(), schema + ".Odd.Name");
  ASSERT_TRUE(opened->claim(1, "p", seconds(5)).is_ok());
  auto done = opened->commit(1, "p", 0, 1, {upsert("f", {{"v", i64(3)}})}, seconds(5));
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  // The watermark table sits beside the target, in its schema (database).
  EXPECT_EQ(raw().scalar("SELECT last_slot FROM " + schema + ".dex_attribute_sync_watermark"), "1");
}

TEST_P(OpenTest, AnUnreachableServerIsTransientAndQuick) {
  // A port nothing listens on (the test server's port + 1 is as good as any).
  const std::string dsn = pg() ? "postgres://dex:hunter2-pw@127.0.0.1:1/postgres"
                               : "mysql://root:hunter2-pw@127.0.0.1:1/dextest";
  StoreSettings s = store();
  s.dsn = dsn;
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = open_error(*this, s, Code::kTransient);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kConnectTimeout + seconds(1));
  EXPECT_EQ(msg.find("hunter2"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(dsn), std::string::npos) << msg;
}

TEST_P(OpenTest, NoErrorHoldsThePassword) {
  const std::string user = "u_" + table().substr(0, 20),
                    password = "Pw-" + table().substr(0, 8) + "-s3cr3t";
  if (pg()) {
    raw().exec("DROP ROLE IF EXISTS " + user);
    raw().exec("CREATE ROLE " + user + " LOGIN PASSWORD '" + password + "'");
  } else {
    raw().exec("DROP USER IF EXISTS '" + user + "'@'%'");
    raw().exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + password + "'");
    raw().exec("GRANT ALL ON dextest.* TO '" + user + "'@'%'");
  }
  const std::string port =
      dsn().substr(dsn().rfind(':') + 1, dsn().rfind('/') - dsn().rfind(':') - 1);
  const std::string base = std::string(pg() ? "postgres://" : "mysql://") + user + ":";
  const std::string tail = "@127.0.0.1:" + port + (pg() ? "/postgres" : "/dextest");
  StoreSettings s = store();
  // A wrong password: refused by the server.
  s.dsn = base + password + "x" + tail;
  std::string msg = open_error(*this, s, pg() ? Code::kTransient : Code::kPermanent);
  EXPECT_EQ(msg.find(password), std::string::npos) << msg;
  // The right password and a table that does not exist.
  s.dsn = base + password + tail;
  raw().exec("DROP TABLE IF EXISTS " + table());
  msg = open_error(*this, s, Code::kPermanent);
  EXPECT_EQ(msg.find(password), std::string::npos) << msg;
  EXPECT_EQ(redact_dsn(s.dsn).find(password), std::string::npos);
  // The right password and a good table: it opens.
  create("id " + key_type() + " PRIMARY KEY, v int");
  if (pg()) {
    // Writing needs no CREATE: the watermark table exists already.
    raw().exec(watermark_table_ddl(type()));
    raw().exec("GRANT ALL ON " + table() + ", dex_attribute_sync_watermark TO " + user);
  }
  auto opened = open(s);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
}

TEST_P(OpenTest, AViewIsRefused) {
  create("id " + key_type() + " PRIMARY KEY, v int", table() + "_base");
  raw().exec("DROP VIEW IF EXISTS " + table());
  raw().exec("CREATE VIEW " + table() + " AS SELECT * FROM " + table() + "_base");
  const std::string msg = open_error(*this, store(), Code::kPermanent);
  EXPECT_NE(msg.find("is a view"), std::string::npos) << msg;
}

TEST_P(OpenTest, TheWatermarkTableIsCreatedOrMustExist) {
  const std::string schema = "w_" + table().substr(0, 40);
  const std::string create_schema = pg() ? "CREATE SCHEMA " : "CREATE DATABASE ";
  raw().exec((pg() ? "DROP SCHEMA IF EXISTS " : "DROP DATABASE IF EXISTS ") + schema +
             (pg() ? " CASCADE" : ""));
  raw().exec(create_schema + schema);
  create("id " + key_type() + " PRIMARY KEY, v int", schema + "." + table());
  AttributeStoreSettings manual;
  manual.create_watermark_table = false;
  const std::string msg =
      open_error(*this, store(schema + "." + table()), Code::kPermanent, manual);
  EXPECT_NE(msg.find("watermark table " + schema + ".dex_attribute_sync_watermark does not exist"),
            std::string::npos)
      << msg;
  // What an operator runs by hand (the documented DDL), then open checks it.
  raw().exec(watermark_table_ddl(type(), schema));
  auto opened = AttributeTable::open(store(schema + "." + table()), manual, kNode, kConnectTimeout);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
}

TEST_P(OpenTest, AWatermarkTableWithoutDexColumnsIsRefused) {
  const std::string schema = "x_" + table().substr(0, 40);
  raw().exec((pg() ? "DROP SCHEMA IF EXISTS " : "DROP DATABASE IF EXISTS ") + schema +
             (pg() ? " CASCADE" : ""));
  raw().exec((pg() ? "CREATE SCHEMA " : "CREATE DATABASE ") + schema);
  create("id " + key_type() + " PRIMARY KEY, v int", schema + "." + table());
  create("node_id varchar(128), store varchar(128), epoch bigint, PRIMARY KEY (node_id, store)",
         schema + ".dex_attribute_sync_watermark");
  const std::string msg = open_error(*this, store(schema + "." + table()), Code::kPermanent);
  EXPECT_NE(msg.find("has no column last_slot bigint"), std::string::npos) << msg;
}

DEX_SQL_TEST_SUITE(OpenTest);

// MySQL only: rows need transactions, and Flow IDs need exact comparison.
using MysqlOpenTest = SqlTest;

TEST_P(MysqlOpenTest, AMyIsamTableIsRefused) {
  raw().exec("DROP TABLE IF EXISTS " + table());
  raw().exec("CREATE TABLE " + table() +
             " (id varchar(64) COLLATE utf8mb4_bin PRIMARY KEY, v int) ENGINE=MyISAM");
  const std::string msg = open_error(*this, store(), Code::kPermanent);
  EXPECT_NE(msg.find("uses the MyISAM engine, which has no transactions; it needs InnoDB"),
            std::string::npos)
      << msg;
}

TEST_P(MysqlOpenTest, ACaseInsensitiveKeyIsRefused) {
  create("id varchar(64) COLLATE utf8mb4_general_ci PRIMARY KEY, v int");
  const std::string msg = open_error(*this, store(), Code::kPermanent);
  EXPECT_NE(msg.find("the collation utf8mb4_general_ci"), std::string::npos) << msg;
}

TEST_P(MysqlOpenTest, TheGoDriverDsnFormOpens) {
  create("id " + key_type() + " PRIMARY KEY, v int");
  auto parsed = parse_mysql_dsn(dsn());
  ASSERT_TRUE(parsed.is_ok());
  StoreSettings s = store();
  s.dsn = parsed->user + "@tcp(" + parsed->host + ":" + std::to_string(parsed->port) + ")/" +
          parsed->database + "?parseTime=true";
  EXPECT_NE(open_table(s), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Mariadb, MysqlOpenTest, ::testing::Values(StoreType::kMysql));

}  // namespace
}  // namespace dex::attrstore::testing
