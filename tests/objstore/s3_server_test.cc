// The S3 backend against real servers: the object-store conformance suite on
// MinIO (atomic conditional writes, checks signatures) and on moto (checks no
// signatures; its conditional check is not atomic, so the suite's race tests
// are filtered out for moto in main() below), plus MinIO-only races and
// server-side checks (signatures, missing bucket). Servers: s3_test_server.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "conformance.h"
#include "objstore/s3_store.h"
#include "s3_test_server.h"

namespace dex::objstore_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A missing server binary is a failure, not a skip: the conformance SetUp then
// fails on the null store, after this failure that says how to install it.
std::unique_ptr<ObjectStore> make_store(S3ServerKind kind) {
  std::string error;
  S3TestServer* server = S3TestServer::shared(kind, &error);
  if (server == nullptr) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  return server->fresh_store();
}

DEX_INSTANTIATE_OBJECT_STORE_CONFORMANCE(
    MinioS3, ObjectStoreBackend{"minio", [] { return make_store(S3ServerKind::kMinio); }});
DEX_INSTANTIATE_OBJECT_STORE_CONFORMANCE(
    MotoS3, ObjectStoreBackend{"moto", [] { return make_store(S3ServerKind::kMoto); }});

// MinIO-only tests: a fixture that fails if MinIO is not installed.
class MinioS3 : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    server_ = S3TestServer::shared(S3ServerKind::kMinio, &error);
    ASSERT_NE(server_, nullptr) << error;
  }
  S3TestServer* server_ = nullptr;
};

// Separate store objects (own curl handles and connections), like separate
// processes, race create-if-absent on one key: exactly one wins per round.
TEST_F(MinioS3, RacingCreatesOnOneKeyHaveExactlyOneWinner) {
  constexpr int kWriters = 12;
  constexpr int kRounds = 10;
  const std::string prefix = server_->fresh_prefix();
  std::vector<std::unique_ptr<S3ObjectStore>> writers;
  for (int w = 0; w < kWriters; ++w) {
    auto store = S3ObjectStore::open(server_->options(prefix));
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    writers.push_back(std::move(store).value());
  }
  S3ObjectStore* first = writers.front().get();
  for (int round = 0; round < kRounds; ++round) {
    const std::string key = fmt::format("lease/{}", round);
    std::atomic<int> wins{0}, losses{0}, errors{0}, winner{-1};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) {
      threads.emplace_back([&, w] {
        while (!go.load()) std::this_thread::yield();
        auto r = writers[w]->put(key, fmt::format("writer {} round {}", w, round),
                                 PutCondition::create());
        if (r.is_ok()) {
          ++wins;
          winner = w;
        } else if (r.status().is_precondition_failed()) {
          ++losses;
        } else {
          ++errors;
          ADD_FAILURE() << r.status().to_string();
        }
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    ASSERT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(losses.load(), kWriters - 1);
    EXPECT_EQ(errors.load(), 0);
    auto got = first->get(key);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_EQ(got->body, fmt::format("writer {} round {}", winner.load(), round));
  }
}

// Compare-and-replace from one ETag: exactly one racer wins; afterwards the
// stale ETag fails every time, from every writer, and changes nothing.
TEST_F(MinioS3, RacingReplacesFromOneEtagHaveOneWinnerAndStaleIfMatchAlwaysFails) {
  constexpr int kWriters = 8;
  auto store = server_->fresh_store();
  ASSERT_NE(store, nullptr);
  auto etag = store->put("epoch", "epoch 0", PutCondition::create());
  ASSERT_TRUE(etag.is_ok()) << etag.status().to_string();
  std::atomic<int> wins{0}, losses{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      while (!go.load()) std::this_thread::yield();
      auto r =
          store->put("epoch", fmt::format("epoch 1 by {}", w), PutCondition::replace(etag.value()));
      if (r.is_ok()) {
        ++wins;
      } else if (r.status().is_precondition_failed()) {
        ++losses;
      } else {
        ADD_FAILURE() << r.status().to_string();
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(losses.load(), kWriters - 1);
  auto now = store->get("epoch");
  ASSERT_TRUE(now.is_ok());
  for (int i = 0; i < 20; ++i) {
    auto stale = store->put("epoch", "stale write", PutCondition::replace(etag.value()));
    EXPECT_TRUE(stale.status().is_precondition_failed()) << stale.status().to_string();
    EXPECT_THAT(stale.status().message(), HasSubstr("HTTP 412"));
  }
  auto after = store->get("epoch");
  ASSERT_TRUE(after.is_ok());
  EXPECT_EQ(after->body, now->body);
  EXPECT_EQ(after->etag, now->etag);
}

TEST_F(MinioS3, AWrongSecretIsPermanentAndNamesTheCode) {
  S3Options o = server_->options("wrong-secret");
  o.credentials.secret_access_key = "not-the-secret";
  auto store = S3ObjectStore::open(o);
  ASSERT_TRUE(store.is_ok());
  auto put = store.value()->put("k", "v", PutCondition::create());
  EXPECT_TRUE(put.status().is_permanent()) << put.status().to_string();
  EXPECT_THAT(put.status().message(), HasSubstr("HTTP 403 SignatureDoesNotMatch"));
  EXPECT_THAT(put.status().message(), Not(HasSubstr("not-the-secret")));
}

TEST_F(MinioS3, AMissingBucketIsPermanent) {
  S3Options o = server_->options("p");
  o.bucket = "no-such-bucket";
  auto store = S3ObjectStore::open(o);
  ASSERT_TRUE(store.is_ok());
  auto got = store.value()->get("k");
  EXPECT_TRUE(got.status().is_permanent()) << got.status().to_string();
  EXPECT_THAT(got.status().message(), HasSubstr("NoSuchBucket"));
  EXPECT_TRUE(store.value()->put("k", "v", PutCondition::create()).status().is_permanent());
  EXPECT_TRUE(store.value()->list("").status().is_permanent());
}

TEST_F(MinioS3, KeysLiveUnderThePrefixAndPrefixesDoNotSeeEachOther) {
  auto a = server_->fresh_store();
  auto b = server_->fresh_store();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->put("k", "in a", PutCondition::create()).is_ok());
  EXPECT_TRUE(b->get("k").status().is_not_found());
  ASSERT_TRUE(b->put("k", "in b", PutCondition::create()).is_ok());
  auto listed = a->list("");
  ASSERT_TRUE(listed.is_ok());
  EXPECT_THAT(listed->keys, ::testing::ElementsAre("k"));
  // The root view (no prefix) sees both under their full keys.
  auto root = S3ObjectStore::open(server_->options(""));
  ASSERT_TRUE(root.is_ok());
  EXPECT_EQ(root.value()->get(a->object_key("k"))->body, "in a");
  EXPECT_EQ(root.value()->get(b->object_key("k"))->body, "in b");
}

class StopServers : public ::testing::Environment {
 public:
  void TearDown() override { S3TestServer::stop_shared(); }
};

}  // namespace
}  // namespace dex::objstore_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // moto's conditional check is not atomic: the suite's race tests run against MinIO only.
  std::string filter = GTEST_FLAG_GET(filter);
  constexpr const char* kMotoRaces = "MotoS3/ObjectStoreConformance.Concurrent*";
  filter += filter.find('-') == std::string::npos ? std::string("-") + kMotoRaces
                                                  : std::string(":") + kMotoRaces;
  GTEST_FLAG_SET(filter, filter);
  ::testing::AddGlobalTestEnvironment(new dex::objstore_test::StopServers);
  return RUN_ALL_TESTS();
}
