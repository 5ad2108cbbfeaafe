#include "conformance.h"

#include <gmock/gmock.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace dex::objstore_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

void ObjectStoreConformance::SetUp() {
  store_ = GetParam().make();
  ASSERT_NE(store_, nullptr);
  auto keys = list_all(*store_, "");
  ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
  ASSERT_THAT(keys.value(), IsEmpty()) << "the factory must return an empty store";
}

std::string backend_test_name(const ::testing::TestParamInfo<ObjectStoreBackend>& info) {
  return info.param.name;
}

namespace {

// Every key in the store, or a failed assertion.
std::vector<std::string> all_keys(ObjectStore& store) {
  auto keys = list_all(store, "");
  EXPECT_TRUE(keys.is_ok()) << keys.status().to_string();
  return keys.is_ok() ? keys.value() : std::vector<std::string>{};
}

std::string body_of(ObjectStore& store, std::string_view key) {
  auto got = store.get(key);
  EXPECT_TRUE(got.is_ok()) << key << ": " << got.status().to_string();
  return got.is_ok() ? got->body : std::string("<missing>");
}

const Status& status_of(const Status& s) { return s; }
template <typename T>
const Status& status_of(const StatusOr<T>& s) {
  return s.status();
}

#define ASSERT_OK(expr)                                                                    \
  do {                                                                                     \
    const auto& status_or_ = (expr);                                                       \
    ASSERT_TRUE(status_or_.is_ok()) << #expr << ": " << status_of(status_or_).to_string(); \
  } while (0)

TEST_P(ObjectStoreConformance, GetOfMissingKeyIsNotFound) {
  auto got = store().get("no/such/key");
  EXPECT_TRUE(got.status().is_not_found()) << got.status().to_string();
  EXPECT_FALSE(store().describe().empty());
}

TEST_P(ObjectStoreConformance, CreateOnAbsentKeyReturnsTheEtagGetReports) {
  auto etag = store().put("a/b", "hello", PutCondition::create());
  ASSERT_OK(etag);
  EXPECT_EQ(etag.value(), etag_of("hello"));
  auto got = store().get("a/b");
  ASSERT_OK(got);
  EXPECT_EQ(got->body, "hello");
  EXPECT_EQ(got->etag, etag.value());
}

TEST_P(ObjectStoreConformance, CreateOnExistingKeyFailsAndKeepsTheBody) {
  ASSERT_OK(store().put("k", "first", PutCondition::create()));
  auto again = store().put("k", "second", PutCondition::create());
  EXPECT_TRUE(again.status().is_precondition_failed()) << again.status().to_string();
  EXPECT_EQ(body_of(store(), "k"), "first");
  // Even the same body does not make a second create succeed.
  auto same = store().put("k", "first", PutCondition::create());
  EXPECT_TRUE(same.status().is_precondition_failed()) << same.status().to_string();
}

TEST_P(ObjectStoreConformance, ReplaceWithMatchingEtagSucceedsAndChainsEtags) {
  auto e1 = store().put("k", "v1", PutCondition::create());
  ASSERT_OK(e1);
  auto e2 = store().put("k", "v2", PutCondition::replace(e1.value()));
  ASSERT_OK(e2);
  EXPECT_EQ(e2.value(), etag_of("v2"));
  EXPECT_EQ(body_of(store(), "k"), "v2");
  auto e3 = store().put("k", "v3", PutCondition::replace(e2.value()));
  ASSERT_OK(e3);
  EXPECT_EQ(body_of(store(), "k"), "v3");
}

TEST_P(ObjectStoreConformance, ReplaceWithStaleEtagFailsAndKeepsTheBody) {
  auto e1 = store().put("k", "v1", PutCondition::create());
  ASSERT_OK(e1);
  ASSERT_OK(store().put("k", "v2", PutCondition::replace(e1.value())));
  auto stale = store().put("k", "v3", PutCondition::replace(e1.value()));
  EXPECT_TRUE(stale.status().is_precondition_failed()) << stale.status().to_string();
  EXPECT_EQ(body_of(store(), "k"), "v2");
  auto garbage = store().put("k", "v3", PutCondition::replace("\"not-an-etag\""));
  EXPECT_TRUE(garbage.status().is_precondition_failed()) << garbage.status().to_string();
  auto empty = store().put("k", "v3", PutCondition::replace(""));
  EXPECT_TRUE(empty.status().is_precondition_failed()) << empty.status().to_string();
  EXPECT_EQ(body_of(store(), "k"), "v2");
}

TEST_P(ObjectStoreConformance, ReplaceOfMissingKeyIsPreconditionFailedAndCreatesNothing) {
  auto r = store().put("k", "v", PutCondition::replace(etag_of("v")));
  EXPECT_TRUE(r.status().is_precondition_failed()) << r.status().to_string();
  EXPECT_TRUE(store().get("k").status().is_not_found());
  EXPECT_THAT(all_keys(store()), IsEmpty());
}

TEST_P(ObjectStoreConformance, OverwriteWritesWhetherOrNotTheKeyExists) {
  auto e1 = store().put("k", "v1", PutCondition::overwrite());
  ASSERT_OK(e1);
  EXPECT_EQ(e1.value(), etag_of("v1"));
  EXPECT_EQ(body_of(store(), "k"), "v1");
  auto e2 = store().put("k", "v2", PutCondition::overwrite());
  ASSERT_OK(e2);
  EXPECT_EQ(e2.value(), etag_of("v2"));
  EXPECT_EQ(body_of(store(), "k"), "v2");
  // The etag before the overwrite is now stale.
  auto stale = store().put("k", "v3", PutCondition::replace(e1.value()));
  EXPECT_TRUE(stale.status().is_precondition_failed());
}

TEST_P(ObjectStoreConformance, RemoveOfExistingAndMissingKeysSucceeds) {
  ASSERT_OK(store().put("dir/k", "v", PutCondition::create()));
  ASSERT_OK(store().put("dir/other", "w", PutCondition::create()));
  ASSERT_OK(store().remove("dir/k"));
  EXPECT_TRUE(store().get("dir/k").status().is_not_found());
  EXPECT_EQ(body_of(store(), "dir/other"), "w");
  ASSERT_OK(store().remove("dir/k"));  // idempotent, like S3 DELETE
  ASSERT_OK(store().remove("never/existed"));
  // A removed key can be created again.
  ASSERT_OK(store().put("dir/k", "again", PutCondition::create()));
  EXPECT_EQ(body_of(store(), "dir/k"), "again");
  EXPECT_THAT(all_keys(store()), ElementsAre("dir/k", "dir/other"));
}

TEST_P(ObjectStoreConformance, ListMatchesAStringPrefixNotADirectory) {
  for (const char* key :
       {"log/0001", "log/0002", "log/0010", "log/1000", "logx", "other/0001", "log/000/nested"}) {
    ASSERT_OK(store().put(key, key, PutCondition::create()));
  }
  auto page = store().list("log/000");
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("log/000/nested", "log/0001", "log/0002"));
  EXPECT_FALSE(page->truncated);
  page = store().list("log");
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("log/000/nested", "log/0001", "log/0002", "log/0010",
                                      "log/1000", "logx"));
  page = store().list("log/");
  ASSERT_OK(page);
  EXPECT_EQ(page->keys.size(), 5u);
  page = store().list("");
  ASSERT_OK(page);
  EXPECT_EQ(page->keys.size(), 7u);
}

TEST_P(ObjectStoreConformance, ListReturnsKeysInByteOrder) {
  // '-' (0x2d) < '/' (0x2f) < '0' (0x30) < 'B' (0x42) < 'a' (0x61): a backend that
  // walks directories must still sort "a-c" before "a/b" before "a0".
  for (const char* key : {"a0", "a/c/d", "a-c", "B", "a/b", "a/c/e"}) {
    ASSERT_OK(store().put(key, key, PutCondition::create()));
  }
  auto page = store().list("");
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("B", "a-c", "a/b", "a/c/d", "a/c/e", "a0"));
}

TEST_P(ObjectStoreConformance, ListTellsEachObjectsSizeAndWhenItWasWritten) {
  const auto unix_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t before = unix_ms();
  ASSERT_OK(store().put("t/a", "", PutCondition::create()));
  ASSERT_OK(store().put("t/b/c", "three", PutCondition::create()));
  const int64_t after = unix_ms();
  auto page = store().list("t/");
  ASSERT_OK(page);
  ASSERT_THAT(page->keys, ElementsAre("t/a", "t/b/c"));
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].size_bytes, 0u);
  EXPECT_EQ(page->objects[1].size_bytes, 5u);
  // By the store's clock: within a minute of this host's (a server's may differ a little,
  // and S3 keeps whole seconds).
  for (const auto& object : page->objects) {
    EXPECT_GE(object.modified_unix_ms, before - 60'000);
    EXPECT_LE(object.modified_unix_ms, after + 60'000);
  }
  page = store().list("t/", {}, 1);  // a truncated page too
  ASSERT_OK(page);
  EXPECT_EQ(page->keys.size(), 1u);
  EXPECT_EQ(page->objects.size(), 1u);
}

TEST_P(ObjectStoreConformance, ListStartsAfterTheGivenKey) {
  for (const char* key : {"p/1", "p/2", "p/3/x", "p/4", "q/1"}) {
    ASSERT_OK(store().put(key, key, PutCondition::create()));
  }
  auto page = store().list("p/", "p/2");
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("p/3/x", "p/4"));
  page = store().list("p/", "p/25");  // not itself a key
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("p/3/x", "p/4"));
  page = store().list("p/", "p/3");  // a prefix of a key: the key sorts after it
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("p/3/x", "p/4"));
  page = store().list("p/", "a");  // before the prefix
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("p/1", "p/2", "p/3/x", "p/4"));
  page = store().list("p/", "p/4");  // the last key
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, IsEmpty());
  EXPECT_FALSE(page->truncated);
  page = store().list("p/", "z");  // after everything
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, IsEmpty());
}

TEST_P(ObjectStoreConformance, ListHonoursMaxKeysAndReportsTruncation) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(store().put(fmt::format("m/{}", i), "x", PutCondition::create()));
  }
  auto page = store().list("m/", "", 2);
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("m/0", "m/1"));
  EXPECT_TRUE(page->truncated);
  page = store().list("m/", "m/1", 2);
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("m/2", "m/3"));
  EXPECT_TRUE(page->truncated);
  page = store().list("m/", "m/3", 2);
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, ElementsAre("m/4"));
  EXPECT_FALSE(page->truncated);
  page = store().list("m/", "", 5);  // exactly the number of keys: nothing follows
  ASSERT_OK(page);
  EXPECT_EQ(page->keys.size(), 5u);
  EXPECT_FALSE(page->truncated);
}

TEST_P(ObjectStoreConformance, ListOfNothingIsEmptyAndNotTruncated) {
  auto page = store().list("");
  ASSERT_OK(page);
  EXPECT_THAT(page->keys, IsEmpty());
  EXPECT_FALSE(page->truncated);
  ASSERT_OK(store().put("x/1", "v", PutCondition::create()));
  for (const char* prefix : {"y", "x/2", "x/1/", "x/10"}) {
    page = store().list(prefix);
    ASSERT_OK(page);
    EXPECT_THAT(page->keys, IsEmpty()) << prefix;
    EXPECT_FALSE(page->truncated) << prefix;
  }
}

TEST_P(ObjectStoreConformance, ListAllFollowsEveryPage) {
  constexpr int kKeys = 37;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_OK(store().put(fmt::format("many/{:03}", i), "x", PutCondition::create()));
  }
  ASSERT_OK(store().put("manz", "x", PutCondition::create()));
  auto keys = list_all(store(), "many/", 10'000, /*page_keys_max=*/4);
  ASSERT_OK(keys);
  ASSERT_EQ(keys->size(), static_cast<size_t>(kKeys));
  for (int i = 0; i < kKeys; ++i) EXPECT_EQ(keys.value()[i], fmt::format("many/{:03}", i));
  auto bounded = list_all(store(), "many/", 10, 4);
  EXPECT_TRUE(bounded.status().is_permanent()) << bounded.status().to_string();
}

TEST_P(ObjectStoreConformance, InvalidKeysArePermanentAndChangeNothing) {
  ASSERT_OK(store().put("good", "v", PutCondition::create()));
  const std::string too_long(1025, 'k');
  for (std::string key :
       {std::string(""), std::string("/a"), std::string("a/"), std::string("a//b"),
        std::string("./a"), std::string("a/./b"), std::string("a/../b"), std::string(".."),
        std::string("a b"), std::string("a\tb"), std::string("caf\xc3\xa9"),
        std::string("nul\0key", 7), too_long}) {
    SCOPED_TRACE(key);
    EXPECT_TRUE(store().get(key).status().is_permanent());
    EXPECT_TRUE(store().put(key, "v", PutCondition::create()).status().is_permanent());
    EXPECT_TRUE(store().put(key, "v", PutCondition::overwrite()).status().is_permanent());
    EXPECT_TRUE(store().put(key, "v", PutCondition::replace(etag_of("v"))).status().is_permanent());
    EXPECT_TRUE(store().remove(key).is_permanent());
  }
  EXPECT_THAT(all_keys(store()), ElementsAre("good"));
  EXPECT_EQ(body_of(store(), "good"), "v");
}

TEST_P(ObjectStoreConformance, BinaryBodiesRoundTripExactly) {
  std::string body;
  for (int round = 0; round < 4; ++round) {
    for (int c = 0; c < 256; ++c) body.push_back(static_cast<char>(c));
  }
  body += std::string("\0\0\0", 3);
  auto etag = store().put("bin", body, PutCondition::create());
  ASSERT_OK(etag);
  auto got = store().get("bin");
  ASSERT_OK(got);
  EXPECT_EQ(got->body.size(), body.size());
  EXPECT_EQ(got->body, body);
  EXPECT_EQ(got->etag, etag_of(body));
}

TEST_P(ObjectStoreConformance, EmptyBodyIsAnObject) {
  auto etag = store().put("empty", "", PutCondition::create());
  ASSERT_OK(etag);
  EXPECT_EQ(etag.value(), "\"d41d8cd98f00b204e9800998ecf8427e\"");  // MD5 of nothing
  auto got = store().get("empty");
  ASSERT_OK(got);
  EXPECT_EQ(got->body, "");
  EXPECT_EQ(got->etag, etag.value());
  EXPECT_THAT(all_keys(store()), ElementsAre("empty"));
  EXPECT_TRUE(store().put("empty", "", PutCondition::create()).status().is_precondition_failed());
  ASSERT_OK(store().put("empty", "now full", PutCondition::replace(etag.value())));
}

TEST_P(ObjectStoreConformance, LargeBodyRoundTrips) {
  constexpr size_t kBytes = 5u << 20;
  std::string body(kBytes, '\0');
  uint32_t x = 12345;
  for (auto& c : body) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  auto etag = store().put("big", body, PutCondition::create());
  ASSERT_OK(etag);
  auto got = store().get("big");
  ASSERT_OK(got);
  EXPECT_TRUE(got->body == body) << "5 MiB body differs";
  EXPECT_EQ(got->etag, etag.value());
  auto replaced = store().put("big", body + "!", PutCondition::replace(etag.value()));
  ASSERT_OK(replaced);
  EXPECT_EQ(store().get("big")->body.size(), kBytes + 1);
}

TEST_P(ObjectStoreConformance, EtagIsTheQuotedMd5SoEqualBodiesHaveEqualEtags) {
  auto e1 = store().put("one", "same body", PutCondition::create());
  auto e2 = store().put("two", "same body", PutCondition::overwrite());
  auto e3 = store().put("three", "other body", PutCondition::create());
  ASSERT_OK(e1);
  ASSERT_OK(e2);
  ASSERT_OK(e3);
  EXPECT_EQ(e1.value(), e2.value());
  EXPECT_NE(e1.value(), e3.value());
  EXPECT_EQ(e1.value(), etag_of("same body"));
  EXPECT_EQ(store().get("two")->etag, e1.value());
  ASSERT_EQ(e1->size(), 34u);
  EXPECT_EQ(e1->front(), '"');
  EXPECT_EQ(e1->back(), '"');
}

TEST_P(ObjectStoreConformance, DeepKeysWorkAndVanishFromListsWhenRemoved) {
  ASSERT_OK(store().put("a/b/c/d/e", "deep", PutCondition::create()));
  ASSERT_OK(store().put("a/b/x", "shallow", PutCondition::create()));
  EXPECT_EQ(body_of(store(), "a/b/c/d/e"), "deep");
  EXPECT_TRUE(store().get("a/b/c").status().is_not_found());
  EXPECT_TRUE(store().get("a/b/c/d").status().is_not_found());
  EXPECT_THAT(all_keys(store()), ElementsAre("a/b/c/d/e", "a/b/x"));
  ASSERT_OK(store().remove("a/b/c/d/e"));
  EXPECT_THAT(all_keys(store()), ElementsAre("a/b/x"));
  ASSERT_OK(store().remove("a/b/x"));
  EXPECT_THAT(all_keys(store()), IsEmpty());
}

TEST_P(ObjectStoreConformance, ConcurrentCreatesHaveExactlyOneWinner) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 5; ++round) {
    const std::string key = fmt::format("race/{}", round);
    std::atomic<int> wins{0}, losses{0}, errors{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        auto r = store().put(key, fmt::format("writer {}", t), PutCondition::create());
        if (r.is_ok()) {
          ++wins;
        } else if (r.status().is_precondition_failed()) {
          ++losses;
        } else {
          ++errors;
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    EXPECT_EQ(wins.load(), 1);
    EXPECT_EQ(losses.load(), kThreads - 1);
    EXPECT_EQ(errors.load(), 0);
    EXPECT_THAT(body_of(store(), key), HasSubstr("writer "));
  }
}

TEST_P(ObjectStoreConformance, ConcurrentCompareAndReplaceLosesNoIncrement) {
  constexpr int kThreads = 4;
  constexpr int kIncrements = 25;
  ASSERT_OK(store().put("counter", "0", PutCondition::create()));
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIncrements; ++i) {
        for (int attempt = 0;; ++attempt) {
          if (attempt > 100'000) {
            ++errors;
            return;
          }
          auto got = store().get("counter");
          if (!got.is_ok()) {
            ++errors;
            return;
          }
          const int value = std::stoi(got->body.substr(0, got->body.find(' ')));
          auto r = store().put("counter", fmt::format("{} by {}", value + 1, t),
                               PutCondition::replace(got->etag));
          if (r.is_ok()) break;
          if (!r.status().is_precondition_failed()) {
            ++errors;
            return;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  const std::string body = body_of(store(), "counter");
  EXPECT_EQ(std::stoi(body.substr(0, body.find(' '))), kThreads * kIncrements);
}

}  // namespace

}  // namespace dex::objstore_test
