// Collecting blobs no run references (src/blob/sweep_pass.h): begin_sweep and
// finish_sweep against the in-memory store, with a manual clock for the
// store's times and the put holds. Old unreferenced blobs go; referenced,
// young and lately put ones stay; a put racing the delete of its own key ends
// with the object present; a failed delete is counted and retried next pass;
// the cache forgets what was deleted; wrong usage is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "blob/blob_store.h"
#include "forwarding_store.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using ::testing::HasSubstr;

constexpr auto kHour = std::chrono::hours(1);
const NodeId kNode("n1");

// The memory store with a remove that a test can fail or hold.
// The memory store, built before the ForwardingStore base that wraps it.
struct HookedStoreMemory {
  explicit HookedStoreMemory(std::function<int64_t()> now_unix_ms)
      : memory(std::move(now_unix_ms)) {}
  MemoryObjectStore memory;
};

class HookedStore final : private HookedStoreMemory, public testing::ForwardingStore {
 public:
  explicit HookedStore(std::function<int64_t()> now_unix_ms)
      : HookedStoreMemory(std::move(now_unix_ms)), ForwardingStore(memory) {}
  Status remove(std::string_view key, const RequestOptions& o = {}) override {
    if (on_remove) {
      if (Status s = on_remove(key); !s.is_ok()) return s;
    }
    return inner_.remove(key, o);
  }
  std::string describe() const override { return "hooked memory"; }

  std::function<Status(std::string_view)> on_remove;  // set before the calls it affects
};

class BlobSweepTest : public ::testing::Test {
 protected:
  BlobSweepTest()
      : store_([this] { return wall_ms_.load(); }),
        blobs_(store_, clock_, kNode, settings()),
        other_(store_, clock_, kNode, settings()) {}

  static BlobSettings settings() {
    BlobSettings s;
    s.collect_interval = kHour;
    s.collect_min_age = kHour;
    return s;
  }
  // A blob written by another process (an earlier active, or a refused
  // record's): this store's puts do not protect it.
  std::string orphan(const std::string& value, const std::string& flow = "flow-1") {
    auto ref = other_.put(flow, value);
    EXPECT_TRUE(ref.is_ok()) << ref.status().to_string();
    return ref.is_ok() ? ref->key() : std::string();
  }
  bool exists(const std::string& key) { return store_.get(key).is_ok(); }
  void later(Duration d) { wall_ms_ += to_ms(d); }
  // One whole pass of blobs_.
  SweepCounts sweep(const std::unordered_set<std::string>& referenced = {},
                    Duration min_age = kHour) {
    auto pass = blobs_.begin_sweep(min_age, wall_ms_.load());
    EXPECT_TRUE(pass.is_ok()) << pass.status().to_string();
    if (!pass.is_ok()) return {};
    // Bounded by the candidates: each call decides at least one.
    while (!pass->done()) blobs_.finish_sweep(*pass, referenced, 1);
    return pass->counts();
  }

  std::atomic<int64_t> wall_ms_{1'700'000'000'000};
  ManualClock clock_;
  HookedStore store_;
  BlobStore blobs_;
  BlobStore other_;
};

TEST_F(BlobSweepTest, AnOldUnreferencedBlobIsDeleted) {
  const std::string key = orphan(std::string(100, 'a'));
  later(2 * kHour);
  const SweepCounts c = sweep();
  EXPECT_EQ(c.listed, 1u);
  EXPECT_EQ(c.candidates, 1u);
  EXPECT_EQ(c.deleted, 1u);
  EXPECT_EQ(c.bytes_freed, 100u);
  EXPECT_EQ(c.delete_errors, 0u);
  EXPECT_FALSE(exists(key));
}

TEST_F(BlobSweepTest, AReferencedBlobIsKept) {
  const std::string kept = orphan(std::string(100, 'a'));
  const std::string gone = orphan(std::string(100, 'b'));
  later(2 * kHour);
  const SweepCounts c = sweep({kept});
  EXPECT_EQ(c.candidates, 2u);
  EXPECT_EQ(c.referenced, 1u);
  EXPECT_EQ(c.deleted, 1u);
  EXPECT_TRUE(exists(kept));
  EXPECT_FALSE(exists(gone));
}

TEST_F(BlobSweepTest, ABlobYoungerThanTheMinAgeIsNoCandidate) {
  const std::string key = orphan(std::string(100, 'a'));
  later(kHour - milliseconds(1));
  SweepCounts c = sweep();
  EXPECT_EQ(c.listed, 1u);
  EXPECT_EQ(c.candidates, 0u);
  EXPECT_TRUE(exists(key));
  later(milliseconds(1));  // exactly the min age: old enough
  c = sweep();
  EXPECT_EQ(c.deleted, 1u);
  EXPECT_FALSE(exists(key));
}

TEST_F(BlobSweepTest, ABlobWrittenInTheFutureOfTheGivenClockIsNoCandidate) {
  const std::string key = orphan(std::string(100, 'a'));
  auto pass = blobs_.begin_sweep(Duration::zero(), wall_ms_.load() - 1);  // another host's clock
  ASSERT_TRUE(pass.is_ok());
  EXPECT_TRUE(pass->done());
  EXPECT_EQ(pass->counts().candidates, 0u);
  EXPECT_TRUE(exists(key));
}

TEST_F(BlobSweepTest, AKeyPutAfterBeginSweepIsKept) {
  const std::string value(100, 'a');
  const std::string key = orphan(value);
  later(2 * kHour);
  auto pass = blobs_.begin_sweep(kHour, wall_ms_.load());
  ASSERT_TRUE(pass.is_ok());
  ASSERT_EQ(pass->candidates(), std::vector<std::string>{key});
  // The scan did not find it (its record is not applied yet), but it was put.
  ASSERT_TRUE(blobs_.put("flow-1", value).is_ok());
  while (!pass->done()) blobs_.finish_sweep(*pass, {}, 1);
  EXPECT_EQ(pass->counts().recently_put, 1u);
  EXPECT_EQ(pass->counts().deleted, 0u);
  EXPECT_TRUE(exists(key));
}

TEST_F(BlobSweepTest, AKeyPutBeforeBeginSweepIsKeptThatPassAndDeletedTheNext) {
  const std::string value(100, 'a');
  const std::string key = orphan(value);
  later(2 * kHour);
  ASSERT_TRUE(blobs_.put("flow-1", value).is_ok());  // exists already: still remembered
  SweepCounts c = sweep();
  EXPECT_EQ(c.recently_put, 1u);
  EXPECT_TRUE(exists(key));
  c = sweep();  // still unreferenced
  EXPECT_EQ(c.deleted, 1u);
  EXPECT_FALSE(exists(key));
}

TEST_F(BlobSweepTest, APutRacingTheDeleteOfItsKeyWaitsAndWritesTheObjectAgain) {
  const std::string value(100, 'a');
  const std::string key = orphan(value);
  later(2 * kHour);
  std::mutex mu;
  std::condition_variable cv;
  bool removing = false, release = false;
  store_.on_remove = [&](std::string_view) {
    std::unique_lock<std::mutex> lock(mu);
    removing = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return Status::ok();
  };
  auto pass = blobs_.begin_sweep(kHour, wall_ms_.load());
  ASSERT_TRUE(pass.is_ok());
  std::thread sweeper([&] { blobs_.finish_sweep(*pass, {}); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return removing; });
  }
  std::atomic<bool> put_returned{false};
  std::thread putter([&] {
    EXPECT_TRUE(blobs_.put("flow-1", value).is_ok());
    put_returned = true;
  });
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(put_returned.load()) << "the put must wait for the DELETE of its key";
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    cv.notify_all();
  }
  sweeper.join();
  putter.join();
  EXPECT_EQ(pass->counts().deleted, 1u);
  EXPECT_TRUE(exists(key)) << "the put after the delete must have written the object again";
}

TEST_F(BlobSweepTest, PutsRacingDeletesAlwaysLeaveTheirObjects) {
  // Many rounds of a put of an orphan's value against a pass deleting it, in
  // whichever order the threads happen to run: after the put returned, the
  // object is there.
  store_.on_remove = [](std::string_view) {
    std::this_thread::yield();
    return Status::ok();
  };
  for (int round = 0; round < 200; ++round) {
    const std::string value = "value-" + std::to_string(round) + std::string(64, 'x');
    const std::string key = orphan(value);
    later(2 * kHour);
    auto pass = blobs_.begin_sweep(kHour, wall_ms_.load());
    ASSERT_TRUE(pass.is_ok());
    std::thread putter([&] { EXPECT_TRUE(blobs_.put("flow-1", value).is_ok()); });
    while (!pass->done()) blobs_.finish_sweep(*pass, {}, 1);
    putter.join();
    ASSERT_TRUE(exists(key)) << "round " << round;
  }
}

TEST_F(BlobSweepTest, AFailedDeleteIsCountedAndTheBlobLeftForTheNextPass) {
  const std::string value(100, 'a');
  const std::string key = orphan(value);
  later(2 * kHour);
  store_.on_remove = [](std::string_view) { return Status::transient("injected: 503"); };
  SweepCounts c = sweep();
  EXPECT_EQ(c.delete_errors, 1u);
  EXPECT_EQ(c.deleted, 0u);
  EXPECT_TRUE(exists(key));
  store_.on_remove = nullptr;
  c = sweep();
  EXPECT_EQ(c.deleted, 1u);
  EXPECT_FALSE(exists(key));
}

TEST_F(BlobSweepTest, APutAfterAFailedDeleteWaitsOutTheDeletesHold) {
  const std::string value(100, 'a');
  const std::string key = orphan(value);
  later(2 * kHour);
  // The DELETE times out after it reached the store: it may land later.
  store_.on_remove = [](std::string_view) { return Status::transient("injected: timeout"); };
  EXPECT_EQ(sweep().delete_errors, 1u);
  std::atomic<bool> put_returned{false};
  std::thread putter([&] {
    EXPECT_TRUE(blobs_.put("flow-1", value).is_ok());
    put_returned = true;
  });
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(put_returned.load());
  clock_.advance(kLateDeleteHold);
  putter.join();
  EXPECT_TRUE(put_returned.load());
  EXPECT_TRUE(exists(key));
}

TEST_F(BlobSweepTest, ADeletedBlobIsEvictedFromTheCache) {
  const std::string value(100, 'a');
  const std::string key = orphan(value);
  flow::BlobRef ref;
  ref.set_key(key);
  ref.set_sha256(key.substr(key.rfind('/') + 1));
  ref.set_size_bytes(value.size());
  ASSERT_TRUE(blobs_.get(ref).is_ok());
  ASSERT_TRUE(blobs_.get(ref).is_ok());
  EXPECT_EQ(blobs_.counts().cache_hits, 1u);
  later(2 * kHour);
  EXPECT_EQ(sweep().deleted, 1u);
  auto got = blobs_.get(ref);
  ASSERT_FALSE(got.is_ok()) << "served from the cache after its blob was deleted";
  EXPECT_TRUE(got.status().is_corruption());
  EXPECT_THAT(got.status().message(), HasSubstr("missing"));
  // A put of the same value writes it again instead of trusting a cached copy.
  ASSERT_TRUE(blobs_.put("flow-1", value).is_ok());
  EXPECT_TRUE(exists(key));
}

TEST_F(BlobSweepTest, OnlyBlobKeysAreCandidates) {
  ASSERT_TRUE(
      store_.put(BlobStore::node_prefix(kNode) + "notes/readme", "x", PutCondition::create())
          .is_ok());
  ASSERT_TRUE(store_
                  .put("nodes/n2/blobs/" + std::string(32, 'a') + "/" + std::string(64, 'b'),
                       "other node", PutCondition::create())
                  .is_ok());
  later(2 * kHour);
  const SweepCounts c = sweep();
  EXPECT_EQ(c.listed, 1u);  // the other node's prefix is not listed
  EXPECT_EQ(c.candidates, 0u);
  EXPECT_TRUE(exists(BlobStore::node_prefix(kNode) + "notes/readme"));
}

TEST_F(BlobSweepTest, APassDeletesAtMostItsLimitAndTheNextGoesOn) {
  for (size_t i = 0; i <= kSweepDeletesMax; ++i) orphan("v" + std::to_string(i), "f");
  later(2 * kHour);
  SweepCounts c = sweep();
  EXPECT_EQ(c.deleted, kSweepDeletesMax);
  EXPECT_TRUE(c.capped);
  c = sweep();
  EXPECT_EQ(c.deleted, 1u);
  EXPECT_FALSE(c.capped);
  EXPECT_EQ(sweep().listed, 0u);
}

TEST_F(BlobSweepTest, WrongUseIsRefused) {
  BlobStore off(store_, clock_, kNode, BlobSettings{});  // collect_interval 0
  auto refused = off.begin_sweep(kHour, wall_ms_.load());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_TRUE(refused.status().code() == Code::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("blobCollectInterval"));

  EXPECT_TRUE(blobs_.begin_sweep(-milliseconds(1), wall_ms_.load()).status().code() ==
              Code::kInvalidArgument);

  orphan("x");
  later(2 * kHour);
  {
    auto open = blobs_.begin_sweep(kHour, wall_ms_.load());
    ASSERT_TRUE(open.is_ok());
    ASSERT_FALSE(open->done());
    auto second = blobs_.begin_sweep(kHour, wall_ms_.load());
    ASSERT_FALSE(second.is_ok());
    EXPECT_TRUE(second.status().is_precondition_failed());
  }  // dropped unfinished: the pass ends, nothing deleted
  EXPECT_EQ(sweep().deleted, 1u);
}

}  // namespace
}  // namespace dex
