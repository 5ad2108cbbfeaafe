// The transaction bound (docs/attribute-store-types.md, "The transaction
// bound") against real servers: a lock wait fails within the budget, a client
// frozen mid-transaction is rolled back by the server within the budget (its
// row lock released, its rows not written), a frozen server cannot hold a
// call much past the budget, and a killed connection is replaced by the next
// call.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "sql_fixture.h"

namespace dex::attrstore::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The shortest budgets each database bounds exactly: PostgreSQL's timeouts are
// milliseconds; MariaDB's lock and idle timeouts are whole seconds (at least
// 1 s), so below 4 s its bound is looser (transaction_bound.h).
Duration budget_of(StoreType type) {
  return type == StoreType::kPostgres ? seconds(2) : seconds(4);
}
constexpr auto kMargin = milliseconds(600);

class BoundTest : public SqlTest {
 protected:
  void SetUp() override {
    SqlTest::SetUp();
    create("id " + key_type() + " PRIMARY KEY, customer varchar(32)");
    // A DSN whose sessions the test can find (PostgreSQL: application_name).
    StoreSettings s = store();
    if (pg()) s.dsn += "?application_name=" + table();
    table_ = open_table(s);
    ASSERT_NE(table_, nullptr);
    ASSERT_TRUE(table_->claim(1, "p", budget()).is_ok());
    ASSERT_TRUE(
        table_->commit(1, "p", 0, 1, {upsert("locked", {{"customer", str("before")}})}, budget())
            .is_ok());
  }

  Duration budget() const { return budget_of(type()); }
  std::string begin_sql() const { return pg() ? "BEGIN" : "START TRANSACTION"; }
  std::string lock_watermark_sql() const {
    return "SELECT last_slot FROM dex_attribute_sync_watermark WHERE node_id = '" +
           std::string(kNode) + "' AND store = '" + table() + "' FOR UPDATE";
  }

  std::unique_ptr<AttributeTable> table_;
};

TEST_P(BoundTest, ALockWaitFailsWithinTheBudget) {
  auto holder = RawSql::connect(type(), dsn());
  ASSERT_NE(holder, nullptr);
  holder->exec(begin_sql());
  holder->exec("SELECT customer FROM " + table() + " WHERE id = 'locked' FOR UPDATE");
  const auto start = Clock::now();
  auto done =
      table_->commit(1, "p", 1, 2, {upsert("locked", {{"customer", str("after")}})}, budget());
  const auto took = Clock::now() - start;
  ASSERT_FALSE(done.is_ok());
  EXPECT_EQ(done.status().code(), Code::kTransient) << done.status().to_string();
  EXPECT_LT(took, budget() + kMargin);
  holder->exec("ROLLBACK");
  EXPECT_EQ(watermark_text(), "1/1/p");
  EXPECT_EQ(cell("locked", "customer"), "before");
  // The table goes on from where it was.
  auto again =
      table_->commit(1, "p", 1, 2, {upsert("locked", {{"customer", str("after")}})}, budget());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(cell("locked", "customer"), "after");
}

TEST_P(BoundTest, AClientFrozenBeforeCommitIsRolledBackByTheServerWithinTheBudget) {
  const auto start = Clock::now();
  std::atomic<int64_t> lock_after_ms{-1};
  std::thread waiter;
  TableTestHooks hooks;
  hooks.before_commit = [&] {
    // The transaction holds the watermark row: a second session waits for it.
    waiter = std::thread([&] {
      auto other = RawSql::connect(type(), dsn());
      if (other == nullptr) return;
      other->exec(begin_sql());
      other->exec(lock_watermark_sql());
      lock_after_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      other->exec("ROLLBACK");
    });
    std::this_thread::sleep_for(budget() + milliseconds(500));  // frozen: sends nothing
  };
  table_->set_test_hooks(hooks);
  auto done = table_->commit(1, "p", 1, 2, {upsert("frozen", {{"customer", str("x")}})}, budget());
  waiter.join();
  table_->set_test_hooks({});
  EXPECT_FALSE(done.is_ok());
  EXPECT_EQ(done.status().code(), Code::kTransient) << done.status().to_string();
  ASSERT_GE(lock_after_ms.load(), 0);
  EXPECT_LE(std::chrono::milliseconds(lock_after_ms.load()), budget());
  EXPECT_EQ(cell("frozen", "id"), std::nullopt);
  EXPECT_EQ(watermark_text(), "1/1/p");
  // The next call reconnects.
  auto again = table_->commit(1, "p", 1, 2, {upsert("later", {})}, budget());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(watermark_text(), "1/2/p");
}

// The state letter of every thread of `pid` ("/proc/<pid>/task/*/stat"), e.g. "TTTS".
std::string thread_states(pid_t pid) {
  std::string states;
  std::error_code ec;
  const auto dir = std::filesystem::path("/proc") / std::to_string(pid) / "task";
  for (const auto& task : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(") ");  // the command name may hold spaces and parentheses
    if (close != std::string::npos && close + 2 < stat.size()) states += stat[close + 2];
  }
  return states;
}

// SIGSTOP of the process that serves this table's session, undone on scope exit.
// kill() only marks the stop: each thread of a multi-threaded server (mariadbd)
// stops when the kernel next schedules it, so this waits until all have.
class Frozen {
 public:
  explicit Frozen(pid_t pid) : pid_(pid) {
    EXPECT_EQ(::kill(pid_, SIGSTOP), 0) << "cannot stop " << pid_;
    std::string states;
    for (int i = 0; i < 2000; ++i) {  // bounded by 2 s
      states = thread_states(pid_);
      if (!states.empty() && states.find_first_not_of("Tt") == std::string::npos) return;
      std::this_thread::sleep_for(milliseconds(1));
    }
    std::ifstream comm("/proc/" + std::to_string(pid_) + "/comm");
    std::string name;
    std::getline(comm, name);
    ADD_FAILURE() << "process " << pid_ << " (" << name
                  << ") did not stop within 2 s; its threads' states: '" << states << "'";
  }
  ~Frozen() { thaw(); }
  void thaw() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
    pid_ = 0;
  }

 private:
  pid_t pid_;
};

TEST_P(BoundTest, AFrozenServerCannotHoldACallPastTheBudget) {
  pid_t pid = 0;
  if (pg()) {  // the backend of this table's session
    pid = std::stoi(
        raw()
            .scalar("SELECT pid FROM pg_stat_activity WHERE application_name = '" + table() + "'")
            .value_or("0"));
  } else {  // mariadbd serves every session in one process
    const char* env = std::getenv("DEX_TEST_MYSQL_PID");
    ASSERT_NE(env, nullptr)
        << "DEX_TEST_MYSQL_PID is not set: run through tests/support/sql_servers.py";
    pid = std::atoi(env);
  }
  ASSERT_GT(pid, 0);
  const auto start = Clock::now();
  {
    Frozen frozen(pid);
    auto done = table_->commit(1, "p", 1, 2, {upsert("never", {})}, budget());
    EXPECT_FALSE(done.is_ok());
    EXPECT_EQ(done.status().code(), Code::kTransient) << done.status().to_string();
    EXPECT_LT(Clock::now() - start, budget() + kMargin);
  }
  auto again = table_->commit(1, "p", 1, 2, {upsert("later", {})}, budget());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(cell("never", "id"), std::nullopt);
}

TEST_P(BoundTest, AKilledConnectionIsReplacedByTheNextCall) {
  if (pg()) {
    raw().exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '" +
               table() + "'");
  } else {
    auto ids = raw().query(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'root' AND ID <> "
        "CONNECTION_ID()");
    ASSERT_TRUE(ids.is_ok());
    // A connection listed may close before its KILL (another test's, ending):
    // "Unknown thread id" is that, and fine; any other error is not.
    for (const auto& row : *ids) {  // bounded by the server's connections
      const Status s = raw().run("KILL CONNECTION " + row[0].value_or("0"));
      EXPECT_TRUE(s.is_ok() || s.message().find("Unknown thread id") != std::string::npos)
          << s.message();
    }
  }
  std::this_thread::sleep_for(milliseconds(200));
  auto read = table_->read_watermark();
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(**read, (Watermark{1, 1, "p"}));
  ASSERT_TRUE(table_->ping().is_ok());
  auto done = table_->commit(1, "p", 1, 2, {upsert("x", {})}, budget());
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
}

DEX_SQL_TEST_SUITE(BoundTest);

}  // namespace
}  // namespace dex::attrstore::testing
