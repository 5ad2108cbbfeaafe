// Table names, DSNs and messages, without a server: what is parsed, what is
// quoted, and that no password ever reaches a message; the transaction bound's
// arithmetic.
#include <gtest/gtest.h>

#include "attrstore/dsn.h"
#include "attrstore/server_message.h"
#include "attrstore/table_name.h"
#include "attrstore/transaction_bound.h"

namespace dex::attrstore {
namespace {

constexpr StoreType kPg = StoreType::kPostgres;
constexpr StoreType kMy = StoreType::kMysql;

TEST(TableName, PartsAreTakenAsWrittenAndQuotedPartsMayHoldDots) {
  auto plain = parse_table_name("orders", kPg);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->schema, "");
  EXPECT_EQ(plain->table, "orders");
  auto qualified = parse_table_name("Reporting.Orders", kPg);
  ASSERT_TRUE(qualified.is_ok());
  EXPECT_EQ(qualified->schema, "Reporting");  // no case folding
  EXPECT_EQ(qualified->table, "Orders");
  auto quoted = parse_table_name("\"my.schema\".\"a \"\"b\"\"\"", kPg);
  ASSERT_TRUE(quoted.is_ok()) << quoted.status().to_string();
  EXPECT_EQ(quoted->schema, "my.schema");
  EXPECT_EQ(quoted->table, "a \"b\"");
  EXPECT_EQ(quoted->display(), "my.schema.a \"b\"");
  auto mysql = parse_table_name("`db`.`t``1`", kMy);
  ASSERT_TRUE(mysql.is_ok());
  EXPECT_EQ(mysql->schema, "db");
  EXPECT_EQ(mysql->table, "t`1");
}

TEST(TableName, BadNamesSayWhatIsWrong) {
  struct Case {
    std::string text;
    StoreType type;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {"", kPg, "table name is empty"},
           {"a..b", kPg, "an empty part"},
           {".a", kPg, "an empty part"},
           {"a.", kMy, "an empty part"},
           {"a.b.c", kPg, "more than two parts (schema.table)"},
           {"a.b.c", kMy, "more than two parts (database.table)"},
           {"\"open", kPg, "an unclosed quote"},
           {"\"\"", kPg, "an empty quoted name"},
           {"\"a\"b", kPg, "text after a quoted name"},
           {"a b", kPg, "a space"},
           {"`a`", kPg, "quote"},
           {std::string(64, 'x'), kPg, "longer than PostgreSQL's 63 bytes"},
           {std::string(65, 'x'), kMy, "longer than MySQL's 64 characters"},
           {"\"a\x01\"", kPg, "a control character"},
       }) {
    auto parsed = parse_table_name(c.text, c.type);
    ASSERT_FALSE(parsed.is_ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.reason), std::string::npos)
        << parsed.status().message();
  }
  EXPECT_TRUE(parse_table_name(std::string(63, 'x'), kPg).is_ok());
  EXPECT_TRUE(parse_table_name(std::string(64, 'x'), kMy).is_ok());
}

TEST(TableName, QuotingEscapesTheQuote) {
  EXPECT_EQ(quote_identifier("a\"b", kPg), "\"a\"\"b\"");
  EXPECT_EQ(quote_identifier("a`b", kMy), "`a``b`");
  EXPECT_EQ(quoted_table(TableName{"s", "t"}, kPg), "\"s\".\"t\"");
  EXPECT_EQ(quoted_table(TableName{"", "t"}, kMy), "`t`");
  // A parsed, quoted name round-trips.
  auto back = parse_table_name(quoted_table(TableName{"x.y", "a\"b"}, kPg), kPg);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->schema, "x.y");
  EXPECT_EQ(back->table, "a\"b");
}

TEST(MysqlDsn, TheUriForm) {
  auto d = parse_mysql_dsn("mysql://app%40x:p%3Ass@db.example:3307/reporting?tls=true");
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->user, "app@x");
  EXPECT_EQ(d->password, "p:ss");
  EXPECT_EQ(d->host, "db.example");
  EXPECT_EQ(d->port, 3307);
  EXPECT_EQ(d->database, "reporting");
  EXPECT_EQ(d->tls, MysqlDsn::Tls::kVerify);
  auto v6 = parse_mysql_dsn("mysql://root@[::1]/db");
  ASSERT_TRUE(v6.is_ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 3306);
  auto bare = parse_mysql_dsn("mysql://h");
  ASSERT_TRUE(bare.is_ok());
  EXPECT_EQ(bare->database, "");
}

TEST(MysqlDsn, TheGoDriverForm) {
  auto d =
      parse_mysql_dsn("app:pa@ss:w/rd@tcp(10.0.0.5:3306)/orders?parseTime=true&tls=skip-verify");
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->user, "app");
  EXPECT_EQ(d->password,
            "pa@ss:w/rd");  // the last '/' and the last '@' before it split, as the Go driver does
  EXPECT_EQ(d->host, "10.0.0.5");
  EXPECT_EQ(d->database, "orders");
  EXPECT_EQ(d->tls, MysqlDsn::Tls::kSkipVerify);
  auto sock = parse_mysql_dsn("app@unix(/run/mysqld/mysqld.sock)/orders");
  ASSERT_TRUE(sock.is_ok());
  EXPECT_EQ(sock->unix_socket, "/run/mysqld/mysqld.sock");
  auto minimal = parse_mysql_dsn("/orders");
  ASSERT_TRUE(minimal.is_ok());
  EXPECT_EQ(minimal->host, "127.0.0.1");
  EXPECT_EQ(minimal->database, "orders");
}

TEST(MysqlDsn, ErrorsNameThePartAndNeverThePassword) {
  struct Case {
    std::string dsn;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {"", "empty"},
           {"mysql://u:Secr3tPw@host:99999/db",
            "the port \"99999\" is not a number from 1 to 65535"},
           {"mysql://u:Secr3tPw@host:x/db", "the port \"x\" is not"},
           {"mysql://u:Secr3tPw@/db", "no host"},
           {"mysql://u:Secr3t%zzPw@host/db", "a bad %-escape in the password"},
           {"mysql://u:Secr3tPw@host/db?timeout=5s", "unknown parameter \"timeout\""},
           {"mysql://u:Secr3tPw@host/db?tls=maybe", "tls must be"},
           {"u:Secr3tPw@udp(host)/db", "the network must be tcp or unix"},
           {"u:Secr3tPw@tcp(host/db", "the address must be"},
           {"u:Secr3tPw@host", "neither mysql://"},
           {"postgres://u:Secr3tPw@host/db", "the scheme must be mysql://"},
       }) {
    auto parsed = parse_mysql_dsn(c.dsn);
    ASSERT_FALSE(parsed.is_ok()) << c.dsn;
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.reason), std::string::npos)
        << parsed.status().message();
    EXPECT_EQ(parsed.status().message().find("Secr3t"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(RedactDsn, EveryFormLosesItsPassword) {
  EXPECT_EQ(redact_dsn("postgres://app:Secr3t@db:5432/x?sslmode=require"),
            "postgres://app:***@db:5432/x?sslmode=require");
  EXPECT_EQ(redact_dsn("postgresql://db/x?user=app&password=Secr3t&sslmode=require"),
            "postgresql://db/x?user=app&password=***&sslmode=require");
  EXPECT_EQ(redact_dsn("host=db user=app password=Secr3t dbname=x"),
            "host=db user=app password=*** dbname=x");
  EXPECT_EQ(redact_dsn("host=db password = 'Sec r\\'3t' dbname=x"),
            "host=db password = *** dbname=x");
  EXPECT_EQ(redact_dsn("mysql://app:Secr3t@db:3306/x"), "mysql://app:***@db:3306/x");
  EXPECT_EQ(redact_dsn("app:Secr3t@tcp(db:3306)/x"), "app:***@tcp(db:3306)/x");
  EXPECT_EQ(redact_dsn("app:pa@ss@tcp(db)/x"), "app:***@tcp(db)/x");
  EXPECT_EQ(redact_dsn("mysql://app@db/x"), "mysql://app@db/x");
  EXPECT_EQ(redact_dsn("host=db dbname=x"), "host=db dbname=x");
}

TEST(ServerMessage, QuotedValuesGoKnownNamesStay) {
  const std::vector<std::string> names = {"orders", "total"};
  EXPECT_EQ(sanitize_server_message("invalid input syntax for type integer: \"s3cret\"", names, ""),
            "invalid input syntax for type integer: \"...\"");
  EXPECT_EQ(
      sanitize_server_message(
          "Incorrect integer value: 's3cret' for column `db`.`orders`.`total` at row 1", names, ""),
      "Incorrect integer value: '...' for column `...`.`orders`.`total` at row 1");
  EXPECT_EQ(sanitize_server_message("Can't connect to server on 'h' (111)", {"h"}, ""),
            "Can't connect to server on 'h' (111)");
  EXPECT_EQ(sanitize_server_message("password is Pw123 here\nDETAIL: x", names, "Pw123"),
            "password is *** here DETAIL: x");
  EXPECT_EQ(sanitize_server_message("unbalanced \"s3cret", names, ""), "unbalanced \"...");
  EXPECT_EQ(sanitize_server_message("invalid byte sequence for encoding \"UTF8\": 0xe9 0x20",
                                    {"UTF8"}, ""),
            "invalid byte sequence for encoding \"UTF8\": 0x.. 0x..");
  EXPECT_LE(sanitize_server_message(std::string(1000, 'x'), names, "").size(), 300u);
}

TEST(TransactionBound, PostgresSplitsTheBudgetIntoQuarters) {
  const TransactionBound b = postgres_bound(milliseconds(7500));
  EXPECT_EQ(b.guard, milliseconds(3750));
  EXPECT_EQ(b.statement, milliseconds(1875));
  EXPECT_EQ(b.lock, milliseconds(1875));
  EXPECT_EQ(b.idle, milliseconds(1875));
  for (Duration budget :
       std::vector<Duration>{milliseconds(4), milliseconds(100), seconds(2), seconds(30)}) {
    const TransactionBound p = postgres_bound(budget);
    EXPECT_LE(p.guard + p.statement + p.idle, budget) << budget.count();
  }
}

TEST(TransactionBound, MysqlRoundsItsWholeSecondsDownAndKeepsTheBoundFromFourSeconds) {
  const TransactionBound b = mysql_bound(milliseconds(7500));
  EXPECT_EQ(b.idle, seconds(1));
  EXPECT_EQ(b.lock, seconds(1));
  EXPECT_EQ(b.statement, milliseconds(1875));
  EXPECT_EQ(b.guard, milliseconds(3750));
  for (Duration budget : std::vector<Duration>{seconds(4), milliseconds(5300), seconds(8),
                                               seconds(30), seconds(120)}) {
    const TransactionBound m = mysql_bound(budget);
    EXPECT_LE(m.guard + std::max(m.statement, m.lock) + m.idle, budget) << budget.count();
    EXPECT_GE(m.idle, seconds(1));
    EXPECT_EQ(m.idle.count() % seconds(1).count(), 0);
  }
  // Short budgets: the 1 s minimums win; the guard shrinks first, to budget/4.
  const TransactionBound tiny = mysql_bound(seconds(1));
  EXPECT_EQ(tiny.idle, seconds(1));
  EXPECT_EQ(tiny.guard, milliseconds(250));
  const TransactionBound three = mysql_bound(seconds(3));
  EXPECT_EQ(three.guard + three.statement + three.idle, seconds(3));
}

}  // namespace
}  // namespace dex::attrstore
