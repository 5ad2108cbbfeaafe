// The filesystem backend's log slots in segment files (src/objstore/slot_segments.h): S3's
// semantics for create, get, list and remove, rolling and deleting segments, torn appends,
// slot files of the earlier layout, and what each costs in flushes.
#include <fcntl.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "objstore/filesystem_store.h"
#include "test_util.h"

namespace dex::objstore_test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string slot(uint64_t n) { return fmt::format("nodes/n1/log/{:020}", n); }

std::unique_ptr<FilesystemObjectStore> open_at(const fs::path& root,
                                               Durability durability = Durability::kStrict,
                                               uint64_t segment_bytes = 16u << 20) {
  FilesystemStoreOptions options;
  options.segment_bytes_max = segment_bytes;
  auto store = FilesystemObjectStore::open(root, durability, options);
  EXPECT_TRUE(store.is_ok()) << store.status().to_string();
  return store.is_ok() ? std::move(store).value() : nullptr;
}

std::vector<fs::path> segment_files(const fs::path& root) {
  std::vector<fs::path> out;
  const fs::path dir = root / ".dex-segments/nodes/n1/log";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".seg") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string body_of(ObjectStore& store, const std::string& key) {
  auto got = store.get(key);
  EXPECT_TRUE(got.is_ok()) << key << ": " << got.status().to_string();
  return got.is_ok() ? got->body : "";
}

void append_raw(const fs::path& file, std::string_view bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out << bytes;
}

TEST(SlotSegments, SlotKeysAreAppendedToASegmentNotFilesOfTheirOwn) {
  TempDir dir;
  auto store = open_at(dir.path());
  ASSERT_NE(store, nullptr);
  auto etag = store->put(slot(0), "batch zero", PutCondition::create());
  ASSERT_TRUE(etag.is_ok()) << etag.status().to_string();
  EXPECT_EQ(etag.value(), etag_of("batch zero"));
  ASSERT_TRUE(store->put(slot(1), "batch one", PutCondition::create()).is_ok());
  EXPECT_FALSE(fs::exists(dir.path() / slot(0)));
  EXPECT_EQ(segment_files(dir.path()).size(), 1u);
  auto got = store->get(slot(1));
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->body, "batch one");
  EXPECT_EQ(got->etag, etag_of("batch one"));
  EXPECT_TRUE(store->get(slot(2)).status().is_not_found());
  // Only the log's slot keys: "log-start" and a key under another directory stay files.
  ASSERT_TRUE(store->put("nodes/n1/log-start", "gc", PutCondition::overwrite()).is_ok());
  ASSERT_TRUE(
      store->put("nodes/n1/logs/00000000000000000001", "x", PutCondition::create()).is_ok());
  EXPECT_TRUE(fs::exists(dir.path() / "nodes/n1/log-start"));
  EXPECT_TRUE(fs::exists(dir.path() / "nodes/n1/logs/00000000000000000001"));
}

TEST(SlotSegments, ACreateOfALiveSlotFailsAndKeepsTheFirstBody) {
  TempDir dir;
  auto store = open_at(dir.path());
  ASSERT_TRUE(store->put(slot(7), "first", PutCondition::create()).is_ok());
  auto again = store->put(slot(7), "second", PutCondition::create());
  EXPECT_TRUE(again.status().is_precondition_failed()) << again.status().to_string();
  EXPECT_EQ(body_of(*store, slot(7)), "first");
  // Another instance (another process) sees the same.
  auto other = open_at(dir.path());
  EXPECT_TRUE(
      other->put(slot(7), "third", PutCondition::create()).status().is_precondition_failed());
  EXPECT_EQ(body_of(*other, slot(7)), "first");
}

TEST(SlotSegments, SlotsCanOnlyBeCreatedAndRemoved) {
  TempDir dir;
  auto store = open_at(dir.path());
  ASSERT_TRUE(store->put(slot(1), "one", PutCondition::create()).is_ok());
  for (const PutCondition& c : {PutCondition::overwrite(), PutCondition::replace(etag_of("one"))}) {
    auto r = store->put(slot(1), "other", c);
    EXPECT_TRUE(r.status().is_permanent()) << r.status().to_string();
    EXPECT_THAT(r.status().message(), HasSubstr("log slot"));
  }
  EXPECT_EQ(body_of(*store, slot(1)), "one");
}

TEST(SlotSegments, ListMergesSlotsWithFilesInKeyOrderAndPages) {
  TempDir dir;
  auto store = open_at(dir.path());
  for (uint64_t n : {3, 1, 2}) {
    ASSERT_TRUE(store->put(slot(n), fmt::format("b{}", n), PutCondition::create()).is_ok());
  }
  ASSERT_TRUE(store->put("nodes/n1/log-start", "gc", PutCondition::overwrite()).is_ok());
  ASSERT_TRUE(store->put("nodes/n1/lease", "l", PutCondition::overwrite()).is_ok());
  ASSERT_TRUE(store->put("nodes/n1/snap/a", "s", PutCondition::overwrite()).is_ok());
  auto all = list_all(*store, "");
  ASSERT_TRUE(all.is_ok());
  EXPECT_THAT(all.value(), ElementsAre("nodes/n1/lease", "nodes/n1/log-start", slot(1), slot(2),
                                       slot(3), "nodes/n1/snap/a"));
  // Pages of two, from a start key inside the slots and one outside them.
  auto page = store->list("nodes/n1/", slot(1), 2);
  ASSERT_TRUE(page.is_ok());
  EXPECT_THAT(page->keys, ElementsAre(slot(2), slot(3)));
  EXPECT_TRUE(page->truncated);
  page = store->list("nodes/n1/log/", "", 2);
  ASSERT_TRUE(page.is_ok());
  EXPECT_THAT(page->keys, ElementsAre(slot(1), slot(2)));
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->objects[0].size_bytes, 2u);
  EXPECT_GT(page->objects[0].modified_unix_ms, 0);
  page = store->list("nodes/n1/log/0000000000000000000", slot(2), 10);
  ASSERT_TRUE(page.is_ok());
  EXPECT_THAT(page->keys, ElementsAre(slot(3)));
  EXPECT_FALSE(page->truncated);
}

TEST(SlotSegments, ARemovedSlotIsGoneEverywhereAndMayBeCreatedAgain) {
  TempDir dir;
  auto store = open_at(dir.path());
  auto other = open_at(dir.path());
  ASSERT_TRUE(store->put(slot(4), "four", PutCondition::create()).is_ok());
  EXPECT_EQ(body_of(*other, slot(4)), "four");
  ASSERT_TRUE(store->remove(slot(4)).is_ok());
  ASSERT_TRUE(store->remove(slot(4)).is_ok());  // S3: a delete of a missing key succeeds
  EXPECT_TRUE(store->get(slot(4)).status().is_not_found());
  auto listed = list_all(*other, "nodes/");
  ASSERT_TRUE(listed.is_ok());
  EXPECT_TRUE(listed.value().empty());
  ASSERT_TRUE(other->put(slot(4), "four again", PutCondition::create()).is_ok());
  EXPECT_EQ(body_of(*store, slot(4)), "four again");
}

TEST(SlotSegments, SegmentsRollAndThoseLeftEmptyAreDeleted) {
  TempDir dir;
  auto store = open_at(dir.path(), Durability::kStrict, 512);
  const std::string body(100, 'b');
  for (uint64_t n = 0; n < 40; ++n) {
    ASSERT_TRUE(store->put(slot(n), body + std::to_string(n), PutCondition::create()).is_ok());
  }
  const auto before = segment_files(dir.path());
  const size_t rolled = before.size();
  EXPECT_GE(rolled, 8u);
  auto fresh = open_at(dir.path(), Durability::kStrict, 512);
  for (uint64_t n = 0; n < 40; ++n) EXPECT_EQ(body_of(*fresh, slot(n)), body + std::to_string(n));
  // GC removes the lowest slots: the segments that held only them go.
  for (uint64_t n = 0; n < 30; ++n) ASSERT_TRUE(store->remove(slot(n)).is_ok());
  // The tombstones fill new segments of their own; the first six held only removed slots.
  const size_t left = segment_files(dir.path()).size();
  EXPECT_LT(left, rolled) << rolled << " segments before";
  for (size_t i = 0; i < 6; ++i) EXPECT_FALSE(fs::exists(before[i])) << before[i];
  for (uint64_t n = 30; n < 40; ++n) EXPECT_EQ(body_of(*fresh, slot(n)), body + std::to_string(n));
  for (uint64_t n = 0; n < 30; ++n) EXPECT_TRUE(fresh->get(slot(n)).status().is_not_found());
  auto listed = list_all(*fresh, "nodes/n1/log/");
  ASSERT_TRUE(listed.is_ok());
  EXPECT_EQ(listed.value().size(), 10u);
}

TEST(SlotSegments, TornAppendsAreSkippedAndLaterSlotsStillWin) {
  TempDir dir;
  auto store = open_at(dir.path());
  ASSERT_TRUE(store->put(slot(0), "zero", PutCondition::create()).is_ok());
  const fs::path segment = segment_files(dir.path()).at(0);
  // What a killed writer leaves: a record's start with its body cut off, then garbage.
  std::string file;
  {
    std::ifstream in(segment, std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string first_record = file.substr(24);  // after the file header
  append_raw(segment, first_record.substr(0, first_record.size() - 2));
  append_raw(segment, "DXSR garbage that is no record");
  auto other = open_at(dir.path());
  ASSERT_TRUE(other->put(slot(1), "one", PutCondition::create()).is_ok());
  ASSERT_TRUE(store->put(slot(2), "two", PutCondition::create()).is_ok());
  auto fresh = open_at(dir.path());
  EXPECT_EQ(body_of(*fresh, slot(0)), "zero");
  EXPECT_EQ(body_of(*fresh, slot(1)), "one");
  EXPECT_EQ(body_of(*fresh, slot(2)), "two");
  auto listed = list_all(*fresh, "nodes/n1/log/");
  ASSERT_TRUE(listed.is_ok());
  EXPECT_THAT(listed.value(), ElementsAre(slot(0), slot(1), slot(2)));
}

TEST(SlotSegments, ARecordInsideABodyIsNeverTakenForOne) {
  // A payload that copies a whole segment (another store's records, another nonce) stays a
  // payload: its slots do not appear.
  TempDir a, b;
  auto source = open_at(a.path());
  ASSERT_TRUE(source->put(slot(5), "smuggled", PutCondition::create()).is_ok());
  std::string copy;
  {
    std::ifstream in(segment_files(a.path()).at(0), std::ios::binary);
    copy.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto store = open_at(b.path());
  ASSERT_TRUE(store->put(slot(1), copy, PutCondition::create()).is_ok());
  // Then tear the end of the segment so that a reader resynchronises through the body.
  append_raw(segment_files(b.path()).at(0), "DXSR");
  ASSERT_TRUE(store->put(slot(2), "two", PutCondition::create()).is_ok());
  auto fresh = open_at(b.path());
  EXPECT_EQ(body_of(*fresh, slot(1)), copy);
  EXPECT_TRUE(fresh->get(slot(5)).status().is_not_found());
  auto listed = list_all(*fresh, "nodes/");
  ASSERT_TRUE(listed.is_ok());
  EXPECT_THAT(listed.value(), ElementsAre(slot(1), slot(2)));
}

TEST(SlotSegments, SlotFilesOfTheEarlierLayoutAreStillTheLog) {
  TempDir dir;
  fs::create_directories(dir.path() / "nodes/n1/log");
  std::ofstream(dir.path() / slot(0)) << "old zero";
  std::ofstream(dir.path() / slot(1)) << "old one";
  auto store = open_at(dir.path());
  EXPECT_EQ(body_of(*store, slot(1)), "old one");
  EXPECT_TRUE(store->put(slot(1), "new", PutCondition::create()).status().is_precondition_failed());
  ASSERT_TRUE(store->put(slot(2), "new two", PutCondition::create()).is_ok());
  auto listed = list_all(*store, "nodes/n1/log/");
  ASSERT_TRUE(listed.is_ok());
  EXPECT_THAT(listed.value(), ElementsAre(slot(0), slot(1), slot(2)));
  ASSERT_TRUE(store->remove(slot(0)).is_ok());
  EXPECT_FALSE(fs::exists(dir.path() / slot(0)));
  EXPECT_TRUE(store->get(slot(0)).status().is_not_found());
}

TEST(SlotSegments, StrictFlushesOnceAPerCreateAndOtherModesNever) {
  for (Durability d : {Durability::kStrict, Durability::kProcessCrashSafe}) {
    TempDir dir;
    auto store = open_at(dir.path(), d);
    ASSERT_TRUE(store->put(slot(0), "first", PutCondition::create()).is_ok());  // makes the segment
    const uint64_t before = store->fsyncs();
    for (uint64_t n = 1; n <= 10; ++n) {
      ASSERT_TRUE(store->put(slot(n), "b", PutCondition::create()).is_ok());
    }
    EXPECT_EQ(store->fsyncs() - before, d == Durability::kStrict ? 10u : 0u);
  }
}

TEST(SlotSegments, ADamagedSegmentHeaderIsCorruptionNamingTheFile) {
  TempDir dir;
  auto store = open_at(dir.path());
  ASSERT_TRUE(store->put(slot(0), "zero", PutCondition::create()).is_ok());
  const fs::path segment = segment_files(dir.path()).at(0);
  {
    std::fstream f(segment, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(0);
    f << "XXXX";
  }
  auto fresh = open_at(dir.path());
  auto got = fresh->get(slot(0));
  EXPECT_TRUE(got.status().is_corruption()) << got.status().to_string();
  EXPECT_THAT(got.status().message(), HasSubstr(segment.string()));
}

TEST(SlotSegments, ThreadsOfTwoInstancesEachWinASlotOnce) {
  TempDir dir;
  auto a = open_at(dir.path(), Durability::kProcessCrashSafe, 1024);
  auto b = open_at(dir.path(), Durability::kProcessCrashSafe, 1024);
  constexpr int kSlots = 200;
  std::vector<int> won_by(kSlots, 0);
  std::vector<std::thread> threads;
  std::vector<std::vector<int>> wins(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ObjectStore& s = t % 2 == 0 ? *a : *b;
      for (int n = 0; n < kSlots; ++n) {
        auto r = s.put(slot(n), fmt::format("by {} {}", t, std::string(60, 'p')),
                       PutCondition::create());
        if (r.is_ok())
          wins[t].push_back(n);
        else
          EXPECT_TRUE(r.status().is_precondition_failed()) << r.status().to_string();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    for (int n : wins[t]) {
      EXPECT_EQ(won_by[n], 0) << "slot " << n << " won twice";
      won_by[n] = t + 1;
      EXPECT_THAT(body_of(*a, slot(n)), ::testing::StartsWith(fmt::format("by {} ", t)));
    }
  }
  for (int n = 0; n < kSlots; ++n) EXPECT_NE(won_by[n], 0) << "nobody won slot " << n;
}

}  // namespace
}  // namespace dex::objstore_test
