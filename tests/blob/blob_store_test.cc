// BlobStore (docs/engine.md, "Large values") on the filesystem store the dev
// server uses: content-addressed keys under the node's prefix, idempotent
// writes, checked reads (a missing or corrupt blob is Corruption naming the
// key), references that name no blob of the node, the cache, and retries of
// transient errors.
#include "blob/blob_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>

#include "blob/blob_cache.h"
#include "common/digest.h"
#include "objstore/faulty_store.h"
#include "objstore/filesystem_store.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("dex-blob-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

BlobSettings small_settings() {
  BlobSettings s;
  s.threshold_bytes = 16;
  s.value_bytes_max = 1 << 20;
  s.cache_bytes_max = 0;  // every read reaches the store
  return s;
}

class BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fs = FilesystemObjectStore::open(dir_.path(), Durability::kStrict);
    ASSERT_TRUE(fs.is_ok()) << fs.status().to_string();
    fs_ = std::move(fs).value();
  }
  TempDir dir_;
  std::unique_ptr<FilesystemObjectStore> fs_;
};

TEST_F(BlobStoreTest, PutWritesTheValueUnderTheFlowsPrefixByContentAddress) {
  BlobStore blobs(*fs_, SystemClock::instance(), NodeId("n1"), small_settings());
  const std::string value(100'000, 'v');
  auto ref = blobs.put("order/42", value);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  EXPECT_EQ(ref->sha256(), sha256_hex(value));
  EXPECT_EQ(ref->size_bytes(), value.size());
  EXPECT_EQ(ref->key(), blobs.flow_prefix("order/42") + sha256_hex(value));
  EXPECT_EQ(ref->key().rfind("nodes/n1/blobs/", 0), 0u) << ref->key();
  // The Flow ID is hashed: "/" in it makes no extra key segment.
  EXPECT_EQ(std::count(ref->key().begin(), ref->key().end(), '/'), 4) << ref->key();
  auto stored = fs_->get(ref->key());
  ASSERT_TRUE(stored.is_ok());
  EXPECT_EQ(stored->body, value);
  // Every blob of one Flow ID lists together; another Flow ID's do not.
  ASSERT_TRUE(blobs.put("order/43", "another value of the other flow").is_ok());
  auto listed = list_all(*fs_, blobs.flow_prefix("order/42"));
  ASSERT_TRUE(listed.is_ok());
  EXPECT_EQ(listed.value(), std::vector<std::string>{ref->key()});
}

TEST_F(BlobStoreTest, ARepeatedPutIsIdempotentAndReadsBackTheSameValue) {
  BlobStore first(*fs_, SystemClock::instance(), NodeId("n1"), small_settings());
  const std::string value = "a value long enough to be a blob";
  auto a = first.put("f", value);
  ASSERT_TRUE(a.is_ok());
  // Another process (a new active one) writes the same value: the object exists.
  BlobStore second(*fs_, SystemClock::instance(), NodeId("n1"), small_settings());
  auto b = second.put("f", value);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
  auto got = second.get(*a);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(**got, value);
}

TEST_F(BlobStoreTest, AMissingBlobIsCorruptionNamingItsKey) {
  BlobStore blobs(*fs_, SystemClock::instance(), NodeId("n1"), small_settings());
  auto ref = blobs.put("f", "a value that will be deleted");
  ASSERT_TRUE(ref.is_ok());
  ASSERT_TRUE(fs_->remove(ref->key()).is_ok());
  auto got = blobs.get(*ref);
  ASSERT_FALSE(got.is_ok());
  EXPECT_TRUE(got.status().is_corruption()) << got.status().to_string();
  EXPECT_THAT(got.status().message(), HasSubstr(ref->key()));
  EXPECT_THAT(got.status().message(), HasSubstr("missing"));
}

TEST_F(BlobStoreTest, ACorruptBlobIsCorruptionNamingItsKey) {
  BlobStore blobs(*fs_, SystemClock::instance(), NodeId("n1"), small_settings());
  const std::string value = "the value as it was written";
  auto ref = blobs.put("f", value);
  ASSERT_TRUE(ref.is_ok());
  // Same length, other bytes: only the SHA-256 tells.
  std::string flipped = value;
  flipped[3] ^= 1;
  ASSERT_TRUE(fs_->put(ref->key(), flipped, PutCondition::overwrite()).is_ok());
  auto got = blobs.get(*ref);
  ASSERT_FALSE(got.is_ok());
  EXPECT_TRUE(got.status().is_corruption());
  EXPECT_THAT(got.status().message(), HasSubstr("corrupt"));
  EXPECT_THAT(got.status().message(), HasSubstr(ref->key()));
  // Another length.
  ASSERT_TRUE(fs_->put(ref->key(), "short", PutCondition::overwrite()).is_ok());
  got = blobs.get(*ref);
  ASSERT_FALSE(got.is_ok());
  EXPECT_TRUE(got.status().is_corruption());
}

TEST_F(BlobStoreTest, AReferenceThatNamesNoBlobOfTheNodeIsRefusedUnread) {
  MemoryObjectStore memory;
  BlobStore blobs(memory, SystemClock::instance(), NodeId("n1"), small_settings());
  auto ref = blobs.put("f", "some value of a flow here");
  ASSERT_TRUE(ref.is_ok());
  const uint64_t gets = memory.counts().gets;
  auto refused = [&](flow::BlobRef bad) {
    auto got = blobs.get(bad);
    EXPECT_FALSE(got.is_ok());
    EXPECT_TRUE(got.status().is_corruption()) << got.status().to_string();
  };
  flow::BlobRef other_node = *ref;
  other_node.set_key("nodes/n2/" + ref->key().substr(std::string("nodes/n1/").size()));
  refused(other_node);
  flow::BlobRef lease = *ref;
  lease.set_key("nodes/n1/lease");
  refused(lease);
  flow::BlobRef wrong_sha = *ref;
  wrong_sha.set_sha256(std::string(64, 'a'));
  refused(wrong_sha);
  flow::BlobRef upper = *ref;
  for (char& c : *upper.mutable_sha256()) c = static_cast<char>(std::toupper(c));
  refused(upper);
  refused(flow::BlobRef());
  EXPECT_EQ(memory.counts().gets, gets);  // none was read
}

TEST(BlobStoreCache, AReadOrWriteIsServedFromTheCacheAfterwards) {
  MemoryObjectStore memory;
  BlobSettings s = small_settings();
  s.cache_bytes_max = 1 << 20;
  BlobStore writer(memory, SystemClock::instance(), NodeId("n1"), s);
  auto ref = writer.put("f", std::string(1000, 'x'));
  ASSERT_TRUE(ref.is_ok());
  ASSERT_TRUE(writer.get(*ref).is_ok());
  EXPECT_EQ(writer.counts().gets, 0u);  // written here: cached
  EXPECT_EQ(writer.counts().cache_hits, 1u);
  // A repeated put of a cached value writes nothing.
  ASSERT_TRUE(writer.put("f", std::string(1000, 'x')).is_ok());
  EXPECT_EQ(writer.counts().puts, 1u);

  BlobStore reader(memory, SystemClock::instance(), NodeId("n1"), s);
  ASSERT_TRUE(reader.get(*ref).is_ok());
  ASSERT_TRUE(reader.get(*ref).is_ok());
  EXPECT_EQ(reader.counts().gets, 1u);
  EXPECT_EQ(reader.counts().cache_hits, 1u);
}

TEST(BlobCacheTest, KeepsTheMostRecentWithinItsBudget) {
  BlobCache cache(1000);
  auto value = [](size_t n) { return std::make_shared<const std::string>(n, 'v'); };
  cache.insert("a", value(200));
  cache.insert("b", value(200));
  cache.insert("c", value(200));
  ASSERT_NE(cache.find("a"), nullptr);  // a is now the most recent
  cache.insert("d", value(200));
  cache.insert("e", value(200));  // 1000: all fit
  EXPECT_EQ(cache.bytes(), 1000u);
  cache.insert("f", value(200));  // b, the least recent, goes
  EXPECT_EQ(cache.find("b"), nullptr);
  EXPECT_NE(cache.find("a"), nullptr);
  EXPECT_EQ(cache.bytes(), 1000u);
  EXPECT_EQ(cache.entries(), 5u);
  // Over a quarter of the budget: not kept, nothing pushed out.
  cache.insert("huge", value(251));
  EXPECT_EQ(cache.find("huge"), nullptr);
  EXPECT_EQ(cache.entries(), 5u);
  BlobCache none(0);
  none.insert("a", value(1));
  EXPECT_EQ(none.find("a"), nullptr);
}

TEST(BlobStoreRetries, TransientErrorsAreRetriedThenReturned) {
  MemoryObjectStore memory;
  FaultyObjectStore faulty(memory, SystemClock::instance(), 7);
  BlobStore blobs(faulty, SystemClock::instance(), NodeId("n1"), small_settings());
  faulty.set_outage(Status::transient("injected outage"));
  auto ref = blobs.put("f", "a value during an outage");
  ASSERT_FALSE(ref.is_ok());
  EXPECT_TRUE(ref.status().is_transient()) << ref.status().to_string();
  EXPECT_THAT(ref.status().message(), HasSubstr("injected outage"));
  EXPECT_EQ(blobs.counts().puts, static_cast<uint64_t>(kBlobRequestAttemptsMax));
  EXPECT_EQ(faulty.injected().outages, static_cast<uint64_t>(kBlobRequestAttemptsMax));
  faulty.set_outage(std::nullopt);

  // A write that landed although its answer was lost: the object is there,
  // and a repeat (create, refused as present) counts as written.
  const std::string landed = "a value whose answer was lost";
  ASSERT_TRUE(
      memory.put(blobs.flow_prefix("f") + sha256_hex(landed), landed, PutCondition::create())
          .is_ok());
  ref = blobs.put("f", landed);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  auto got = blobs.get(*ref);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(**got, landed);

  // A permanent error is not retried.
  FaultPlan broken;
  broken.permanent_probability = 1.0;
  faulty.set_plan(broken);
  const uint64_t gets = blobs.counts().gets;
  got = blobs.get(*ref);
  EXPECT_FALSE(got.is_ok());
  EXPECT_TRUE(got.status().is_permanent()) << got.status().to_string();
  EXPECT_EQ(blobs.counts().gets, gets + 1);
}

}  // namespace
}  // namespace dex
