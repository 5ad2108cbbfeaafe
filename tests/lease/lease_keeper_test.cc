// LeaseKeeper with real time and short leases against MemoryObjectStore, and
// the dev lock. Bounds are generous: these run on loaded CI machines.
#include "lease/lease_keeper.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "lease/dev_lock.h"
#include "lease/lease_record.h"
#include "objstore/faulty_store.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

constexpr Duration kShortLease = seconds(3);

LeaseKeeperOptions options_for(const std::string& process, Duration duration = kShortLease) {
  LeaseKeeperOptions o;
  o.node_id = NodeId("n1");
  o.process_id = ProcessId(process);
  o.duration = duration;
  return o;
}

double seconds_since(TimePoint t) {
  return std::chrono::duration<double>(SystemClock::instance().now() - t).count();
}

TEST(LeaseKeeper, AcquiresRenewsAndReleases) {
  MemoryObjectStore store;
  LeaseKeeper keeper(store, SystemClock::instance(), options_for("a"));
  ASSERT_TRUE(keeper.acquire().is_ok());
  EXPECT_TRUE(keeper.is_valid());
  EXPECT_EQ(keeper.epoch(), Epoch(1));
  std::atomic<bool> lost{false};
  keeper.start_renewing([&](const Status&) { lost = true; });
  // Three lease durations: without renewals the lease would have expired.
  std::this_thread::sleep_for(seconds(3) * 2 + milliseconds(500));
  EXPECT_TRUE(keeper.is_valid());
  EXPECT_FALSE(lost.load());
  EXPECT_GE(keeper.counters().renewal_puts_ok, 4u);
  ASSERT_TRUE(keeper.release().is_ok());
  EXPECT_FALSE(keeper.is_valid());
  auto got = store.get(lease_key(NodeId("n1")));
  ASSERT_TRUE(got.is_ok());
  auto record = decode_lease_record(got->body);
  ASSERT_TRUE(record.is_ok());
  EXPECT_TRUE(record->released);
  EXPECT_EQ(record->epoch, Epoch(1));
}

TEST(LeaseKeeper, SuccessorTakesOverAtOnceAfterRelease) {
  MemoryObjectStore store;
  LeaseKeeper first(store, SystemClock::instance(), options_for("a"));
  ASSERT_TRUE(first.acquire().is_ok());
  first.start_renewing([](const Status&) {});
  ASSERT_TRUE(first.release().is_ok());
  LeaseKeeper second(store, SystemClock::instance(), options_for("b"));
  TimePoint t = SystemClock::instance().now();
  ASSERT_TRUE(second.acquire().is_ok());
  EXPECT_LT(seconds_since(t), 1.0);
  EXPECT_EQ(second.epoch(), Epoch(2));
  ASSERT_TRUE(second.release().is_ok());
}

TEST(LeaseKeeper, SuccessorWaitsDurationPlusOneSecondAfterACrash) {
  MemoryObjectStore store;
  LeaseKeeper first(store, SystemClock::instance(), options_for("a"));
  ASSERT_TRUE(first.acquire().is_ok());
  first.start_renewing([](const Status&) {});
  first.stop();  // like a crash: no release
  LeaseKeeper second(store, SystemClock::instance(), options_for("b"));
  TimePoint t = SystemClock::instance().now();
  ASSERT_TRUE(second.acquire().is_ok());
  const double waited = seconds_since(t);
  EXPECT_GE(waited, 3.9);  // duration + 1 s, less what had passed since the last renewal
  EXPECT_LE(waited, 8.0);
  EXPECT_EQ(second.epoch(), Epoch(2));
  second.stop();
}

TEST(LeaseKeeper, FailIfHeldFailsAtOnceNamingTheHolder) {
  MemoryObjectStore store;
  LeaseKeeper first(store, SystemClock::instance(), options_for("holder-xyz"));
  ASSERT_TRUE(first.acquire().is_ok());
  LeaseKeeperOptions o = options_for("b");
  o.fail_if_held = true;
  LeaseKeeper second(store, SystemClock::instance(), o);
  Status s = second.acquire();
  EXPECT_TRUE(s.is_fenced());
  EXPECT_NE(s.message().find("holder-xyz"), std::string::npos) << s.to_string();
  first.stop();
}

TEST(LeaseKeeper, StopInterruptsAWaitingAcquire) {
  MemoryObjectStore store;
  LeaseKeeper first(store, SystemClock::instance(), options_for("a", seconds(30)));
  ASSERT_TRUE(first.acquire().is_ok());
  LeaseKeeper second(store, SystemClock::instance(), options_for("b", seconds(30)));
  Status result;
  std::thread waiter([&] { result = second.acquire(); });
  std::this_thread::sleep_for(milliseconds(300));
  TimePoint t = SystemClock::instance().now();
  second.stop();
  waiter.join();
  EXPECT_LT(seconds_since(t), 2.0);
  EXPECT_EQ(result.code(), Code::kStopped);
  first.stop();
}

TEST(LeaseKeeper, ManualClockDrivesRenewalAndLoss) {
  ManualClock clock;
  MemoryObjectStore store;
  LeaseKeeper keeper(store, clock, options_for("a", seconds(10)));
  ASSERT_TRUE(keeper.acquire().is_ok());
  std::atomic<int> lost{0};
  Status why;
  std::mutex mu;
  keeper.start_renewing([&](const Status& s) {
    std::lock_guard<std::mutex> g(mu);
    why = s;
    ++lost;
  });
  // Another process takes the lease behind the keeper's back.
  LeaseRecordValue r;
  r.node_id = NodeId("n1");
  r.epoch = Epoch(2);
  r.holder_process_id = ProcessId("usurper");
  r.duration = seconds(10);
  r.write_id = "w";
  ASSERT_TRUE(store.put(lease_key(NodeId("n1")), encode_lease_record(r), PutCondition::overwrite())
                  .is_ok());
  clock.advance(seconds(4));  // past the renewal time
  for (int i = 0; i < 2000 && lost.load() == 0; ++i) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_EQ(lost.load(), 1);
  EXPECT_FALSE(keeper.is_valid());
  {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_TRUE(why.is_fenced()) << why.to_string();
  }
  keeper.stop();
  EXPECT_EQ(lost.load(), 1);  // once
}

// ------------------------------------------------------------------ logs

// Captures what spdlog's default logger writes ("<level> <message>" lines)
// while it lives; restores the previous default logger afterwards.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_, /*force_flush=*/true);
    sink->set_pattern("%l %v");
    auto logger = std::make_shared<spdlog::logger>("capture", sink);
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  // The captured lines that contain `needle`.
  std::vector<std::string> lines_with(const std::string& needle) {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::string> found;
    std::istringstream in(snapshot());
    for (std::string line; std::getline(in, line);) {
      if (line.find(needle) != std::string::npos) found.push_back(line);
    }
    return found;
  }

 private:
  std::string snapshot() {
    spdlog::default_logger()->flush();
    return out_.str();
  }
  std::mutex mu_;
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Issue 13 item 7: "'lease held ... waiting' is logged when the holder
// changes, not at every renewal".
TEST(LeaseKeeperLogs, WaitingIsLoggedOncePerHolderNotAtEveryRenewal) {
  LogCapture logs;
  MemoryObjectStore store;
  LeaseKeeper holder(store, SystemClock::instance(), options_for("holder-1"));
  ASSERT_TRUE(holder.acquire().is_ok());
  holder.start_renewing([](const Status&) {});
  LeaseKeeper waiter(store, SystemClock::instance(), options_for("waiter"));
  Status result = Status::stopped("not yet");
  std::thread t([&] { result = waiter.acquire(); });
  // Four renewals (every second with a 3 s lease) while the waiter watches.
  std::this_thread::sleep_for(milliseconds(4300));
  EXPECT_GE(holder.counters().renewal_puts_ok, 4u);
  holder.stop();  // a crash: the waiter takes over after expiry
  t.join();
  ASSERT_TRUE(result.is_ok()) << result.to_string();
  std::vector<std::string> held = logs.lines_with("lease held by");
  ASSERT_EQ(held.size(), 1u) << held.size() << " lines, the first: " << held.front();
  EXPECT_NE(held[0].find("holder-1"), std::string::npos) << held[0];
  EXPECT_EQ(held[0].rfind("info ", 0), 0u) << held[0];
  EXPECT_EQ(logs.lines_with("acquired the lease for node n1 at epoch 2").size(), 1u);
  // The sparse progress line: none while the holder renewed; once it stopped,
  // a countdown (every 5 s, so one before the takeover 4 s after its last write).
  EXPECT_TRUE(logs.lines_with("still waiting").empty());
  std::vector<std::string> overdue = logs.lines_with("not renewed for");
  ASSERT_EQ(overdue.size(), 1u);
  EXPECT_NE(overdue[0].find("holder-1 (epoch 1)"), std::string::npos) << overdue[0];
  EXPECT_NE(overdue[0].find("taking it over in at most"), std::string::npos) << overdue[0];
  waiter.stop();
}

// Issue 13 item 8: an unreachable or refusing store is "a warning naming the
// store's endpoint and the error, on every failed attempt, with backoff".
TEST(LeaseKeeperLogs, EveryFailedAcquisitionAttemptIsAWarningNamingTheStore) {
  LogCapture logs;
  MemoryObjectStore inner;
  FaultyObjectStore store(inner, SystemClock::instance(), 1);
  store.set_outage(Status::transient("connect to 127.0.0.1:1 failed: Connection refused"));
  LeaseKeeper keeper(store, SystemClock::instance(), options_for("a"));
  Status result = Status::stopped("not yet");
  std::thread t([&] { result = keeper.acquire(); });
  std::this_thread::sleep_for(milliseconds(2500));
  const uint64_t refused = store.injected().outages;
  std::vector<std::string> warned = logs.lines_with("Connection refused");
  store.set_outage(std::nullopt);
  t.join();
  ASSERT_TRUE(result.is_ok()) << result.to_string();
  // One warning per failed attempt: 100 ms doubling to 1 s gives about 5 in 2.5 s.
  ASSERT_GE(warned.size(), 3u);
  EXPECT_LE(warned.size(), 10u) << "hammering the store";
  EXPECT_GE(warned.size() + 1,
            refused);  // the one failing as the sleep ended may not be logged yet
  EXPECT_LE(warned.size(), refused);
  for (const std::string& line : warned) {
    EXPECT_EQ(line.rfind("warning ", 0), 0u) << line;
    EXPECT_NE(line.find(store.describe()), std::string::npos) << line;
    EXPECT_NE(line.find("read of the lease nodes/n1/lease failed"), std::string::npos) << line;
    EXPECT_NE(line.find("retrying in"), std::string::npos) << line;
  }
  keeper.stop();
}

// ------------------------------------------------------------------ dev lock

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Spec: "a second dev process on that directory fails to start".
TEST(DevLock, SecondLockOnTheSameDirectoryFailsNamingThePath) {
  auto dir = temp_dir("devlock");
  auto first = DevLock::open(dir);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_TRUE(first.value()->held());
  auto second = DevLock::open(dir);
  ASSERT_FALSE(second.is_ok());
  EXPECT_TRUE(second.status().is_fenced());
  const std::string& msg = second.status().message();
  EXPECT_NE(msg.find((dir / "dev.lock").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("pid " + std::to_string(::getpid())), std::string::npos) << msg;
  first.value().reset();  // released with the process (here: the object)
  auto third = DevLock::open(dir);
  ASSERT_TRUE(third.is_ok());
  EXPECT_TRUE(third.value()->held());
  std::filesystem::remove_all(dir);
}

TEST(DevLock, ASecondProcessCannotTakeItWhileHeld) {
  auto dir = temp_dir("devlock-proc");
  auto held = DevLock::open(dir);
  ASSERT_TRUE(held.is_ok());
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto mine = DevLock::open(dir);
    _exit(!mine.is_ok() && mine.status().is_fenced() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child process took the lock";
  held.value().reset();
  child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto mine = DevLock::open(dir);
    _exit(mine.is_ok() && mine.value()->held() ? 0 : 1);
  }
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child could not lock a free directory";
  std::filesystem::remove_all(dir);
}

// Spec: "On a filesystem that cannot lock files, the dev node logs a warning
// and waits for the lease to expire".
TEST(DevLock, UnsupportedFilesystemIsReportedNotFatal) {
  auto dir = temp_dir("devlock-nolock");
  for (int err : {ENOLCK, EOPNOTSUPP, ENOSYS, EINVAL}) {
    auto lock = DevLock::open(dir, [err](int) { return err; });
    ASSERT_TRUE(lock.is_ok()) << lock.status().to_string();
    EXPECT_FALSE(lock.value()->held());
    EXPECT_NE(lock.value()->unsupported_reason().find("dev.lock"), std::string::npos);
  }
  auto denied = DevLock::open(dir, [](int) { return EACCES; });
  EXPECT_TRUE(denied.status().is_permanent());
  std::filesystem::remove_all(dir);
}

// The lock-less path end to end: a held lease is waited out, not taken over.
TEST(DevLock, LocklessKeeperWaitsForExpiryInsteadOfTakingOver) {
  auto dir = temp_dir("devlock-wait");
  auto lock = DevLock::open(dir, [](int) { return ENOLCK; });
  ASSERT_TRUE(lock.is_ok());
  MemoryObjectStore store;
  LeaseKeeper crashed(store, SystemClock::instance(), options_for("crashed"));
  ASSERT_TRUE(crashed.acquire().is_ok());
  crashed.stop();
  LeaseKeeperOptions o = options_for("restarted");
  o.holder_is_stopped = lock.value()->held();
  LeaseKeeper keeper(store, SystemClock::instance(), o);
  TimePoint t = SystemClock::instance().now();
  ASSERT_TRUE(keeper.acquire().is_ok());
  EXPECT_GE(seconds_since(t), 3.9);
  keeper.stop();
  std::filesystem::remove_all(dir);
}

TEST(DevLock, HeldLockTakesOverAStoppedHoldersLeaseAtOnce) {
  auto dir = temp_dir("devlock-takeover");
  auto lock = DevLock::open(dir);
  ASSERT_TRUE(lock.is_ok());
  MemoryObjectStore store;
  LeaseKeeper crashed(store, SystemClock::instance(), options_for("crashed", seconds(30)));
  ASSERT_TRUE(crashed.acquire().is_ok());
  crashed.stop();
  LeaseKeeperOptions o = options_for("restarted", seconds(30));
  o.holder_is_stopped = lock.value()->held();
  LeaseKeeper keeper(store, SystemClock::instance(), o);
  TimePoint t = SystemClock::instance().now();
  ASSERT_TRUE(keeper.acquire().is_ok());
  EXPECT_LT(seconds_since(t), 1.0);
  EXPECT_EQ(keeper.epoch(), Epoch(2));
  keeper.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dex
