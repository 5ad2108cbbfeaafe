// The S3 backend against real servers: the object-store conformance suite on
// MinIO (atomic conditional writes, checks signatures) and on moto (checks no
// signatures; its conditional check is not atomic, so the suite's race tests
// are filtered out for moto in main() below), plus MinIO-only races,
// server-side checks (signatures, missing bucket) and a conditional PUT queued
// behind a stalled PUT of the same key. Servers: s3_test_server.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "conformance.h"
#include "objstore/s3_store.h"
#include "objstore/sigv4.h"
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

// A signed PUT of `object_key` sent over its own loopback connection by hand, of which only the
// headers and the first `body_bytes_sent` bytes of the body go out; the connection then stays
// open and silent until destruction: what MinIO sees of a process frozen (SIGSTOP) mid-PUT.
class StalledPut {
 public:
  StalledPut(const S3TestServer& server, const std::string& object_key, std::string_view body,
             const sigv4::Pairs& condition, size_t body_bytes_sent) {
    const std::string host = fmt::format("127.0.0.1:{}", server.port());
    const std::string raw_path = fmt::format("/{}/{}", S3TestServer::kBucket, object_key);
    const std::string sha = sigv4::sha256_hex(body);
    const std::string date = sigv4::amz_date(std::chrono::system_clock::now());
    sigv4::Request request{"PUT",
                           raw_path,
                           {},
                           {{"host", host}, {"x-amz-content-sha256", sha}, {"x-amz-date", date}},
                           sha};
    for (const auto& h : condition) request.headers.push_back(h);
    const sigv4::Signed signed_request = sigv4::sign(
        request, {std::string(S3TestServer::kAccessKey), std::string(S3TestServer::kSecretKey), ""},
        {"us-east-1", "s3"}, date);
    std::string wire = fmt::format("PUT {} HTTP/1.1\r\n", sigv4::encode_path(raw_path));
    for (const auto& [name, value] : request.headers)
      wire += fmt::format("{}: {}\r\n", name, value);
    wire += fmt::format("Authorization: {}\r\nContent-Length: {}\r\n\r\n",
                        signed_request.authorization, body.size());
    wire += body.substr(0, body_bytes_sent);

    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(server.port()));
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "connect: " << std::strerror(errno);
      return;
    }
    for (size_t sent = 0; sent < wire.size();) {
      const ssize_t n = ::send(fd_, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        ADD_FAILURE() << "send: " << std::strerror(errno);
        return;
      }
      sent += static_cast<size_t>(n);
    }
  }
  StalledPut(const StalledPut&) = delete;
  StalledPut& operator=(const StalledPut&) = delete;
  ~StalledPut() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

// Issue 30: MinIO takes a conditional PUT's object lock before it reads the body, so a PUT whose
// sender froze after its headers or mid-body holds the key until the connection has been silent
// for MinIO's idle timeout (30 s by default). A new active process's conditional write of the
// same key (its EpochStart in the frozen writer's slot, or the lease it takes over) waited that
// long, past the 10 s log write limit. With the timeouts the tests (and docs/operations.md) give
// MinIO (--idle-timeout 2s), the waiting write gets its answer after about 2 s; without them it
// got none within its 10 s.
struct StallCase {
  std::string name;
  bool replace;       // If-Match on an existing object (the lease) instead of If-None-Match: *
  size_t sent_of_10;  // how much of the stalled body was sent, in tenths
};

void PrintTo(const StallCase& c, std::ostream* os) { *os << c.name; }

class MinioStalledPut : public MinioS3, public ::testing::WithParamInterface<StallCase> {};

TEST_P(MinioStalledPut, ASecondConditionalPutOfTheKeyIsAnsweredWithinSeconds) {
  // Well under the 10 s log write limit, with room for the 2 s idle timeout and a loaded machine.
  constexpr auto kAnswerBound = std::chrono::milliseconds(4500);
  const StallCase& c = GetParam();
  auto store = server_->fresh_store();
  ASSERT_NE(store, nullptr);
  const std::string key = "nodes/n/log/00000000000000000042";
  sigv4::Pairs condition = {{"If-None-Match", "*"}};
  PutCondition second = PutCondition::create();
  if (c.replace) {
    auto etag = store->put(key, "lease of epoch 1", PutCondition::create());
    ASSERT_TRUE(etag.is_ok()) << etag.status().to_string();
    condition = {{"If-Match", etag.value()}};
    second = PutCondition::replace(etag.value());
  }
  const std::string stalled_body(2000, 'f');
  StalledPut stalled(*server_, store->object_key(key), stalled_body, condition,
                     stalled_body.size() * c.sent_of_10 / 10);
  // Lets MinIO start on the stalled request (and take the key's lock) before the second one.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  const auto start = std::chrono::steady_clock::now();
  auto put =
      store->put(key, "the next writer's batch", second, RequestOptions{std::chrono::seconds(10)});
  const auto took = std::chrono::steady_clock::now() - start;
  const auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  RecordProperty("answer_ms", static_cast<int>(took_ms));
  std::cout << "[ " << c.name << " ] the second PUT was answered after " << took_ms << " ms\n";
  EXPECT_TRUE(put.is_ok()) << put.status().to_string();
  EXPECT_LE(took, kAnswerBound) << "answered after " << took_ms << " ms";
  auto got = store->get(key);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got->body, "the next writer's batch") << "the stalled PUT must not land";
}

INSTANTIATE_TEST_SUITE_P(Stalls, MinioStalledPut,
                         ::testing::Values(StallCase{"CreateStalledAfterHeaders", false, 0},
                                           StallCase{"CreateStalledMidBody", false, 5},
                                           StallCase{"ReplaceStalledMidBody", true, 5}),
                         [](const ::testing::TestParamInfo<StallCase>& info) {
                           return info.param.name;
                         });

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
