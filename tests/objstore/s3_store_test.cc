// S3ObjectStore without an S3 server: options, addressing, describe(),
// credentials, and transport failures against loopback sockets that never
// answer, reset, or refuse (each must be Transient, naming the operation).
#include "objstore/s3_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "test_util.h"

namespace dex {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kSecret = "sup3r-s3cret-value";

S3Options options_for(std::string endpoint) {
  S3Options o;
  o.bucket = "bucket";
  o.prefix = "node-1";
  o.endpoint = std::move(endpoint);
  o.credentials = {"AKIDTEST", std::string(kSecret), ""};
  return o;
}

std::unique_ptr<S3ObjectStore> open_or_die(S3Options o) {
  auto store = S3ObjectStore::open(std::move(o));
  EXPECT_TRUE(store.is_ok()) << store.status().to_string();
  return store.is_ok() ? std::move(store).value() : nullptr;
}

TEST(S3Store, OpenRefusesBadOptions) {
  auto bad = [](auto mutate) {
    S3Options o = options_for("http://127.0.0.1:9000");
    mutate(o);
    return S3ObjectStore::open(std::move(o)).status();
  };
  EXPECT_TRUE(bad([](S3Options& o) { o.bucket = "Bad_Bucket"; }).is_permanent());
  EXPECT_TRUE(bad([](S3Options& o) { o.bucket = "ab"; }).is_permanent());
  EXPECT_TRUE(bad([](S3Options& o) { o.prefix = "a//b"; }).is_permanent());
  EXPECT_TRUE(bad([](S3Options& o) { o.endpoint = "ftp://host"; }).is_permanent());
  EXPECT_TRUE(bad([](S3Options& o) { o.endpoint = "http://host/path"; }).is_permanent());
  EXPECT_TRUE(bad([](S3Options& o) { o.endpoint = "http://user@host"; }).is_permanent());
  EXPECT_TRUE(bad([](S3Options& o) { o.credentials.secret_access_key.clear(); }).is_permanent());
  EXPECT_TRUE(bad([](S3Options& o) { o.request_timeout = Duration::zero(); }).is_permanent());
  EXPECT_TRUE(bad([](S3Options&) {}).is_ok());
}

// S3's bucket naming rules, checked before any request (so `serve --check`
// finds them): each refusal says which rule.
TEST(S3Store, OpenRefusesBucketNamesThatS3Refuses) {
  auto open_bucket = [](std::string bucket) {
    S3Options o = options_for("http://127.0.0.1:9000");
    o.bucket = std::move(bucket);
    return S3ObjectStore::open(std::move(o)).status();
  };
  const std::pair<std::string, std::string> refused[] = {
      {"ab", "3 to 63 characters"},
      {std::string(64, 'a'), "3 to 63 characters"},
      {"Dex-Bucket", "only lowercase letters"},
      {"dex_bucket", "only lowercase letters"},
      {"-dex", "begin and end with a letter or digit"},
      {"dex.", "begin and end with a letter or digit"},
      {"dex..bucket", "two adjacent periods"},
      {"192.168.5.4", "IP address"},
      {"xn--dex", "reserved by S3"},
      {"sthree-dex", "reserved by S3"},
      {"dex-s3alias", "reserved by S3"},
      {"dex--ol-s3", "reserved by S3"},
  };
  for (const auto& [bucket, why] : refused) {
    Status s = open_bucket(bucket);
    EXPECT_TRUE(s.is_permanent()) << bucket;
    EXPECT_THAT(s.message(), HasSubstr("'" + bucket + "'")) << bucket;
    EXPECT_THAT(s.message(), HasSubstr(why)) << bucket;
  }
  const std::string accepted[] = {"dex", "dex-bucket.v2", "1-2-3", std::string(63, 'a')};
  for (const auto& ok : accepted) {
    EXPECT_TRUE(open_bucket(ok).is_ok()) << ok;
  }
}

TEST(S3Store, PathStyleAndVirtualHostAddressingEncodeTheKeyOnce) {
  auto path = open_or_die(options_for("http://127.0.0.1:9000/"));
  ASSERT_NE(path, nullptr);
  EXPECT_EQ(path->url_of("a/b=c"), "http://127.0.0.1:9000/bucket/node-1/a/b%3Dc");
  EXPECT_EQ(path->object_key("a/b"), "node-1/a/b");
  S3Options vh = options_for("");
  vh.region = "eu-west-1";
  vh.prefix = "/p/q/";
  vh.addressing = S3Addressing::kVirtualHost;
  auto virtual_host = open_or_die(vh);
  ASSERT_NE(virtual_host, nullptr);
  EXPECT_EQ(virtual_host->url_of("x%y"), "https://bucket.s3.eu-west-1.amazonaws.com/p/q/x%25y");
  EXPECT_EQ(virtual_host->describe(), "s3://bucket/p/q at https://s3.eu-west-1.amazonaws.com");
}

TEST(S3Store, DescribeNamesBucketPrefixAndEndpointButNoCredentials) {
  auto store = open_or_die(options_for("http://127.0.0.1:9000"));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->describe(), "s3://bucket/node-1 at http://127.0.0.1:9000");
  EXPECT_THAT(store->describe(), Not(HasSubstr("AKIDTEST")));
  EXPECT_THAT(store->describe(), Not(HasSubstr(kSecret)));
}

TEST(S3Store, InvalidKeysArePermanentWithoutARequest) {
  auto store = open_or_die(options_for("http://127.0.0.1:1"));
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->get("a//b").status().is_permanent());
  EXPECT_TRUE(store->put("../x", "v", PutCondition::create()).status().is_permanent());
  EXPECT_TRUE(store->remove("").is_permanent());
  EXPECT_TRUE(store->list("a b").status().is_permanent());
}

TEST(S3Store, ReplaceWithAnEtagThatCannotMatchFailsWithoutARequest) {
  auto store = open_or_die(options_for("http://127.0.0.1:1"));  // nothing listens on port 1
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->put("k", "v", PutCondition::replace("")).status().is_precondition_failed());
  EXPECT_TRUE(store->put("k", "v", PutCondition::replace("\"a\"\r\nX-Evil: 1"))
                  .status()
                  .is_precondition_failed());
}

TEST(S3Credentials, FromEnvironment) {
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
  ::setenv("AWS_SESSION_TOKEN", "token", 1);
  auto c = s3_credentials_from_environment();
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->access_key_id, "AKIDENV");
  EXPECT_EQ(c->secret_access_key, "envsecret");
  EXPECT_EQ(c->session_token, "token");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  auto missing = s3_credentials_from_environment();
  EXPECT_TRUE(missing.status().is_permanent());
  EXPECT_THAT(missing.status().message(), Not(HasSubstr("AKIDENV")));
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SESSION_TOKEN");
}

TEST(S3Credentials, FromASharedCredentialsFile) {
  objstore_test::TempDir dir;
  const auto path = dir.path() / "credentials";
  std::ofstream(path) << "# comment\n[default]\naws_access_key_id = AKIDDEF\n"
                         "aws_secret_access_key=defsecret\n\n[dex]\n"
                         "aws_access_key_id=AKIDDEX\naws_secret_access_key = dexsecret \n"
                         "aws_session_token = tok\n[partial]\naws_access_key_id=AKIDP\n";
  auto def = s3_credentials_from_file(path);
  ASSERT_TRUE(def.is_ok()) << def.status().to_string();
  EXPECT_EQ(def->access_key_id, "AKIDDEF");
  EXPECT_EQ(def->secret_access_key, "defsecret");
  auto dex = s3_credentials_from_file(path, "dex");
  ASSERT_TRUE(dex.is_ok());
  EXPECT_EQ(dex->secret_access_key, "dexsecret");
  EXPECT_EQ(dex->session_token, "tok");
  auto partial = s3_credentials_from_file(path, "partial");
  EXPECT_TRUE(partial.status().is_permanent());
  EXPECT_THAT(partial.status().message(), Not(HasSubstr("AKIDP")));
  EXPECT_TRUE(s3_credentials_from_file(path, "absent").status().is_permanent());
  EXPECT_TRUE(s3_credentials_from_file(dir.path() / "nope").status().is_permanent());
}

// A loopback listener whose port the tests point the store at.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { ::close(fd_); }
  int fd() const { return fd_; }
  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(S3Store, ARequestThatOutlivesItsTimeoutIsTransient) {
  Listener silent;  // the kernel accepts the connection; nobody ever answers
  auto store = open_or_die(options_for(silent.endpoint()));
  ASSERT_NE(store, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto put = store->put("k", "v", PutCondition::create(), RequestOptions{milliseconds(300)});
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(put.status().is_transient()) << put.status().to_string();
  EXPECT_THAT(put.status().message(), HasSubstr("timed out after 300 ms"));
  EXPECT_THAT(put.status().message(), HasSubstr("s3 put 'k'"));
  EXPECT_LT(elapsed, seconds(5));
  EXPECT_GE(elapsed, milliseconds(250));
}

TEST(S3Store, AResetConnectionIsTransient) {
  Listener rude;
  std::atomic<bool> stop{false};
  std::thread closer([&] {
    // Accepts and resets each connection at once (bounded: the test makes one or two).
    for (int i = 0; i < 8 && !stop.load(); ++i) {
      const int c = ::accept(rude.fd(), nullptr, nullptr);
      if (c < 0) return;
      linger reset{1, 0};
      ::setsockopt(c, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      ::close(c);
    }
  });
  auto store = open_or_die(options_for(rude.endpoint()));
  ASSERT_NE(store, nullptr);
  auto got = store->get("k", RequestOptions{seconds(5)});
  EXPECT_TRUE(got.status().is_transient()) << got.status().to_string();
  EXPECT_THAT(got.status().message(), HasSubstr("s3 get 'k'"));
  stop = true;
  ::shutdown(rude.fd(), SHUT_RDWR);
  closer.join();
}

TEST(S3Store, ARefusedConnectionIsTransient) {
  int port;
  {
    Listener closed;
    port = closed.port();
  }  // nothing listens there now
  auto store = open_or_die(options_for("http://127.0.0.1:" + std::to_string(port)));
  ASSERT_NE(store, nullptr);
  auto listed = store->list("", "", 10, RequestOptions{seconds(5)});
  EXPECT_TRUE(listed.status().is_transient()) << listed.status().to_string();
  EXPECT_THAT(listed.status().message(), HasSubstr("s3 list"));
}

}  // namespace
}  // namespace dex
