// Rules of the filesystem backend beyond the conformance suite: atomicity across
// real processes, no torn reads, durability modes, layout and its limits.
#include "objstore/filesystem_store.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "race_body.h"
#include "test_util.h"

extern char** environ;

namespace dex::objstore_test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::unique_ptr<FilesystemObjectStore> open_store(const fs::path& root, Durability durability) {
  auto store = FilesystemObjectStore::open(root, durability);
  EXPECT_TRUE(store.is_ok()) << store.status().to_string();
  return store.is_ok() ? std::move(store).value() : nullptr;
}

size_t count_entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++n;
  return n;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Spawns objstore_race_helper processes that all start when the go file appears.
class HelperProcesses {
 public:
  explicit HelperProcesses(fs::path go_file) : go_file_(std::move(go_file)) {}
  ~HelperProcesses() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  // `out`: a file for the process's stdout (empty: this process's stdout).
  void spawn(const fs::path& root, std::string_view durability, std::string_view mode,
             std::string_view key, std::string id, int count, const fs::path& out = {}) {
    std::vector<std::string> args = {
        DEX_OBJSTORE_RACE_HELPER, root.string(), std::string(durability), std::string(mode),
        std::string(key),         std::move(id), std::to_string(count),   go_file_.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!out.empty()) {
      posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
    }
    int err = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_EQ(err, 0) << "posix_spawn " << argv[0] << ": " << std::strerror(err);
    pids_.push_back(pid);
  }
  void go() { std::ofstream(go_file_) << "go"; }
  // Exit codes in spawn order; a process killed by a signal counts as -signal.
  std::vector<int> wait_all() {
    std::vector<int> codes;
    for (pid_t pid : pids_) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
    }
    pids_.clear();
    return codes;
  }

 private:
  fs::path go_file_;
  std::vector<pid_t> pids_;
};

constexpr int kProcesses = 8;

TEST(FilesystemStoreProcesses, ExactlyOneOfManyRacingProcessesCreatesAKey) {
  TempDir dir;
  const fs::path root = dir.path() / "objects";
  for (int round = 0; round < 3; ++round) {
    HelperProcesses procs(dir.path() / fmt::format("go-{}", round));
    const std::string key = fmt::format("race/create/{}", round);
    for (int p = 0; p < kProcesses; ++p) {
      procs.spawn(root, round == 0 ? "strict" : "processCrashSafe", "create", key,
                  std::to_string(p), 1);
    }
    procs.go();
    std::vector<int> codes = procs.wait_all();
    int winners = 0, losers = 0;
    for (int code : codes) {
      if (code == 0) ++winners;
      if (code == 3) ++losers;
    }
    EXPECT_EQ(winners, 1) << ::testing::PrintToString(codes);
    EXPECT_EQ(losers, kProcesses - 1) << ::testing::PrintToString(codes);
    auto store = open_store(root, Durability::kStrict);
    ASSERT_NE(store, nullptr);
    auto got = store->get(key);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_THAT(got->body, HasSubstr("winner "));
  }
}

// The log's slots (kept in segment files, slot_segments.h) raced by real processes, each
// creating every slot in order while segments of 2 KiB roll under them: every slot has
// exactly one winner, the one whose body it holds, and every process reads them all back.
TEST(FilesystemStoreProcesses, RacingProcessesEachWinALogSlotExactlyOnce) {
  TempDir dir;
  const fs::path root = dir.path() / "objects";
  constexpr int kSlots = 300;
  for (std::string_view durability : {"strict", "processCrashSafe"}) {
    SCOPED_TRACE(durability);
    HelperProcesses procs(dir.path() / fmt::format("go-{}", durability));
    const std::string node = fmt::format("nodes/{}", durability);
    for (int p = 0; p < kProcesses; ++p) {
      procs.spawn(root, durability, "slots", node, std::to_string(p), kSlots,
                  dir.path() / fmt::format("won-{}-{}", durability, p));
    }
    procs.go();
    EXPECT_THAT(procs.wait_all(), ::testing::Each(0)) << "exit 2: a slot held a loser's body";
    std::vector<int> winner(kSlots, -1);
    for (int p = 0; p < kProcesses; ++p) {
      std::ifstream in(dir.path() / fmt::format("won-{}-{}", durability, p));
      for (int slot; in >> slot;) {
        ASSERT_TRUE(slot >= 0 && slot < kSlots);
        EXPECT_EQ(winner[slot], -1)
            << "slot " << slot << " won by " << winner[slot] << " and " << p;
        winner[slot] = p;
      }
    }
    auto store = open_store(root, Durability::kStrict);
    ASSERT_NE(store, nullptr);
    for (int slot = 0; slot < kSlots; ++slot) {
      ASSERT_NE(winner[slot], -1) << "nobody won slot " << slot;
      auto got = store->get(fmt::format("{}/log/{:020}", node, slot));
      ASSERT_TRUE(got.is_ok()) << got.status().to_string();
      EXPECT_THAT(got->body,
                  ::testing::StartsWith(fmt::format("slot {} winner {} ", slot, winner[slot])));
    }
    auto listed = list_all(*store, node + "/log/");
    ASSERT_TRUE(listed.is_ok()) << listed.status().to_string();
    EXPECT_EQ(listed.value().size(), static_cast<size_t>(kSlots));
  }
}

void run_increments(std::string_view durability, int increments) {
  TempDir dir;
  const fs::path root = dir.path() / "objects";
  auto store = open_store(root, Durability::kStrict);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("counter", "0", PutCondition::create()).is_ok());
  HelperProcesses procs(dir.path() / "go");
  for (int p = 0; p < kProcesses; ++p) {
    procs.spawn(root, durability, "increment", "counter", std::to_string(p), increments);
  }
  procs.go();
  std::vector<int> codes = procs.wait_all();
  EXPECT_THAT(codes, ::testing::Each(0)) << "exit 2: a stale-ETag replace succeeded";
  auto got = store->get("counter");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(std::stol(got->body.substr(0, got->body.find(' '))), kProcesses * increments)
      << got->body;
  EXPECT_EQ(count_entries(root / ".dex-tmp"), 0u) << "temp files lingered";
}

TEST(FilesystemStoreProcesses, CompareAndReplaceAcrossProcessesLosesNoIncrement) {
  run_increments("processCrashSafe", 100);
}

TEST(FilesystemStoreProcesses, CompareAndReplaceAcrossProcessesLosesNoIncrementStrict) {
  run_increments("strict", 15);
}

TEST(FilesystemStoreProcesses, ReadersInOtherProcessesNeverSeeATornObject) {
  TempDir dir;
  const fs::path root = dir.path() / "objects";
  HelperProcesses procs(dir.path() / "go");
  for (int p = 0; p < 3; ++p)
    procs.spawn(root, "processCrashSafe", "write", "torn/k", std::to_string(p + 1), 150);
  for (int p = 0; p < 3; ++p) procs.spawn(root, "processCrashSafe", "read", "torn/k", "r", 300);
  procs.go();
  EXPECT_THAT(procs.wait_all(), ::testing::Each(0)) << "exit 2: a reader saw a torn object";
}

TEST(FilesystemStore, ReaderThreadNeverSeesATornOrForeignObject) {
  TempDir dir;
  auto store = open_store(dir.path(), Durability::kProcessCrashSafe);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("k", race_body(0), PutCondition::create()).is_ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0}, errors{0};
  std::thread reader([&] {
    while (!stop.load()) {
      auto got = store->get("k");
      ++reads;
      if (!got.is_ok()) {
        ++errors;
        continue;
      }
      if (!is_race_body(got->body) || got->etag != etag_of(got->body)) ++bad;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 1; i <= 100; ++i) {
        const int n = w * 1000 + i;
        Status s;
        if (w == 0) {
          s = store->put("k", race_body(n), PutCondition::overwrite()).status();
        } else {
          auto cur = store->get("k");
          if (!cur.is_ok()) {
            ++errors;
            continue;
          }
          s = store->put("k", race_body(n), PutCondition::replace(cur->etag)).status();
          if (s.is_precondition_failed()) s = Status::ok();
        }
        if (!s.is_ok()) ++errors;
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

TEST(FilesystemStore, KeysAreFilesUnderTheRoot) {
  TempDir dir;
  auto store = open_store(dir.path(), Durability::kStrict);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("a/b/c", "body", PutCondition::create()).is_ok());
  EXPECT_EQ(read_file(dir.path() / "a" / "b" / "c"), "body");
  EXPECT_EQ(store->describe(), "filesystem:" + dir.path().string());
  // A second instance (another process, or after a restart) sees the same objects.
  auto again = open_store(dir.path(), Durability::kProcessCrashSafe);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->get("a/b/c")->body, "body");
}

TEST(FilesystemStore, StrictSyncsEveryWriteAndOtherModesNever) {
  for (Durability d : {Durability::kStrict, Durability::kProcessCrashSafe, Durability::kRelaxed}) {
    SCOPED_TRACE(durability_name(d));
    TempDir dir;
    auto store = open_store(dir.path() / "root", d);
    ASSERT_NE(store, nullptr);
    const bool strict = d == Durability::kStrict;
    uint64_t before = store->fsyncs();
    auto etag = store->put("x/y/z", "v1", PutCondition::create());
    ASSERT_TRUE(etag.is_ok());
    // Temp file, root (for x), x (for y), y (for the object's entry).
    EXPECT_EQ(store->fsyncs() - before, strict ? 4u : 0u);
    before = store->fsyncs();
    ASSERT_TRUE(store->put("x/y/z", "v2", PutCondition::replace(etag.value())).is_ok());
    EXPECT_EQ(store->fsyncs() - before, strict ? 2u : 0u);  // temp file, directory
    before = store->fsyncs();
    ASSERT_TRUE(store->put("x/y/z", "v3", PutCondition::overwrite()).is_ok());
    EXPECT_EQ(store->fsyncs() - before, strict ? 2u : 0u);
    before = store->fsyncs();
    ASSERT_TRUE(store->remove("x/y/z").is_ok());
    EXPECT_EQ(store->fsyncs() - before, strict ? 1u : 0u);  // directory
    EXPECT_EQ(count_entries(dir.path() / "root" / ".dex-tmp"), 0u);
  }
}

TEST(FilesystemStore, NoTempFileLingersAfterAnyOutcome) {
  TempDir dir;
  auto store = open_store(dir.path(), Durability::kStrict);
  ASSERT_NE(store, nullptr);
  auto etag = store->put("k", "v", PutCondition::create());
  ASSERT_TRUE(etag.is_ok());
  EXPECT_TRUE(store->put("k", "w", PutCondition::create()).status().is_precondition_failed());
  EXPECT_TRUE(
      store->put("k", "w", PutCondition::replace("\"x\"")).status().is_precondition_failed());
  EXPECT_TRUE(store->put("gone", "w", PutCondition::replace(etag.value()))
                  .status()
                  .is_precondition_failed());
  EXPECT_TRUE(store->put("k/under", "w", PutCondition::overwrite()).status().is_permanent());
  EXPECT_TRUE(store->put("k/under", "w", PutCondition::create()).status().is_permanent());
  ASSERT_TRUE(store->put("k", "w", PutCondition::replace(etag.value())).is_ok());
  ASSERT_TRUE(store->put("k", "x", PutCondition::overwrite()).is_ok());
  EXPECT_EQ(count_entries(dir.path() / ".dex-tmp"), 0u);
  auto keys = list_all(*store, "");
  ASSERT_TRUE(keys.is_ok());
  EXPECT_THAT(keys.value(), ElementsAre("k"));
}

TEST(FilesystemStore, OpenDeletesOnlyOldTempFilesOfCrashedWriters) {
  TempDir dir;
  ASSERT_NE(open_store(dir.path(), Durability::kStrict), nullptr);
  const fs::path old_temp = dir.path() / ".dex-tmp" / "1-old.tmp";
  const fs::path new_temp = dir.path() / ".dex-tmp" / "2-new.tmp";
  std::ofstream(old_temp) << "half";
  std::ofstream(new_temp) << "in progress";
  fs::last_write_time(old_temp, fs::file_time_type::clock::now() - std::chrono::hours(1));
  ASSERT_NE(open_store(dir.path(), Durability::kStrict), nullptr);
  EXPECT_FALSE(fs::exists(old_temp));
  EXPECT_TRUE(fs::exists(new_temp)) << "a live writer's temp file was deleted";
}

TEST(FilesystemStore, AKeyCannotAlsoBeADirectoryOfKeys) {
  TempDir dir;
  auto store = open_store(dir.path(), Durability::kProcessCrashSafe);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("a/b", "v", PutCondition::create()).is_ok());
  for (auto cond : {PutCondition::create(), PutCondition::overwrite()}) {
    auto r = store->put("a", "v", cond);
    EXPECT_TRUE(r.status().is_permanent()) << r.status().to_string();
    EXPECT_THAT(r.status().message(), HasSubstr("conflicts"));
    r = store->put("a/b/c", "v", cond);
    EXPECT_TRUE(r.status().is_permanent()) << r.status().to_string();
  }
  EXPECT_TRUE(store->get("a").status().is_not_found());
  EXPECT_TRUE(store->get("a/b/c").status().is_not_found());
  EXPECT_TRUE(store->remove("a").is_ok());
  EXPECT_TRUE(store->remove("a/b/c").is_ok());
  EXPECT_EQ(store->get("a/b")->body, "v");
}

TEST(FilesystemStore, RemoveDeletesEmptiedDirectoriesSoTheNameIsFreeAgain) {
  TempDir dir;
  auto store = open_store(dir.path(), Durability::kStrict);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("a/b/c", "v", PutCondition::create()).is_ok());
  ASSERT_TRUE(store->put("a/x", "v", PutCondition::create()).is_ok());
  ASSERT_TRUE(store->remove("a/b/c").is_ok());
  EXPECT_FALSE(fs::exists(dir.path() / "a" / "b"));
  EXPECT_TRUE(fs::exists(dir.path() / "a" / "x"));
  ASSERT_TRUE(store->remove("a/x").is_ok());
  EXPECT_FALSE(fs::exists(dir.path() / "a"));
  EXPECT_TRUE(store->put("a", "now a key", PutCondition::create()).is_ok());
}

TEST(FilesystemStore, InternalAndForeignFilesAreNeverListedOrReachable) {
  TempDir dir;
  auto store = open_store(dir.path(), Durability::kProcessCrashSafe);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("k", "v", PutCondition::overwrite()).is_ok());  // creates a lock file
  std::ofstream(dir.path() / "has space") << "x";
  std::ofstream(dir.path() / ".dex-tmp" / "9-x.tmp") << "x";
  fs::create_directories(dir.path() / "emptydir");
  fs::create_symlink("/etc", dir.path() / "link");
  auto keys = list_all(*store, "");
  ASSERT_TRUE(keys.is_ok());
  EXPECT_THAT(keys.value(), ElementsAre("k"));
  EXPECT_THAT(store->list(".dex")->keys, IsEmpty());
  EXPECT_THAT(store->list(".dex-locks/")->keys, IsEmpty());
  for (const char* key : {".dex-locks/00", ".dex-tmp/9-x.tmp", ".dex-other"}) {
    EXPECT_TRUE(store->get(key).status().is_permanent()) << key;
    EXPECT_TRUE(store->put(key, "v", PutCondition::overwrite()).status().is_permanent()) << key;
    EXPECT_TRUE(store->remove(key).is_permanent()) << key;
  }
  EXPECT_TRUE(fs::exists(dir.path() / ".dex-tmp" / "9-x.tmp"));
}

TEST(FilesystemStore, OpenFailsPermanentlyOnAnUnusableRoot) {
  TempDir dir;
  std::ofstream(dir.path() / "file") << "x";
  auto store = FilesystemObjectStore::open(dir.path() / "file", Durability::kStrict);
  EXPECT_TRUE(store.status().is_permanent()) << store.status().to_string();
  store = FilesystemObjectStore::open(dir.path() / "file" / "below", Durability::kStrict);
  EXPECT_TRUE(store.status().is_permanent()) << store.status().to_string();
  EXPECT_THAT(store.status().message(), HasSubstr((dir.path() / "file").string()));
}

// Root passes file permission checks through CAP_DAC_OVERRIDE (and CAP_DAC_READ_SEARCH,
// CAP_FOWNER): for its scope, the calling thread drops them from its effective set, so that the
// checks apply to root too (tests run as root in containers; a skip there would test nothing).
// Capabilities are per thread on Linux; they stay permitted and come back at the end.
class WithoutPermissionOverride {
 public:
  WithoutPermissionOverride() {
    header_.version = _LINUX_CAPABILITY_VERSION_3;
    header_.pid = 0;  // this thread
    ok_ = ::syscall(SYS_capget, &header_, saved_) == 0;
    if (!ok_) return;
    __user_cap_data_struct lowered[2] = {saved_[0], saved_[1]};
    for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}) {
      lowered[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
    }
    ok_ = ::syscall(SYS_capset, &header_, lowered) == 0;
  }
  ~WithoutPermissionOverride() {
    if (ok_) ::syscall(SYS_capset, &header_, saved_);
  }
  WithoutPermissionOverride(const WithoutPermissionOverride&) = delete;
  WithoutPermissionOverride& operator=(const WithoutPermissionOverride&) = delete;
  bool ok() const { return ok_; }

 private:
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool ok_ = false;
};

TEST(FilesystemStore, PermissionDeniedIsPermanentWithPathAndReason) {
  TempDir dir;
  auto store = open_store(dir.path(), Durability::kProcessCrashSafe);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("locked/k", "v", PutCondition::create()).is_ok());
  fs::permissions(dir.path() / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  StatusOr<std::string> r = Status::permanent("not run");
  {
    WithoutPermissionOverride as_a_user;
    ASSERT_TRUE(as_a_user.ok()) << "capget/capset: " << std::strerror(errno);
    r = store->put("locked/j", "v", PutCondition::create());
  }
  fs::permissions(dir.path() / "locked", fs::perms::owner_all);
  EXPECT_TRUE(r.status().is_permanent()) << r.status().to_string();
  EXPECT_THAT(r.status().message(), HasSubstr("Permission denied"));
  EXPECT_THAT(r.status().message(), HasSubstr((dir.path() / "locked").string()));
}

}  // namespace
}  // namespace dex::objstore_test
