// Metrics::listen: GET /metrics over real HTTP on loopback, and the errors of
// a bad or busy address (docs/metrics.md).
#include <curl/curl.h>
#include <gtest/gtest.h>

#include "metrics/metrics.h"
#include "metrics_test_util.h"

namespace dex {
namespace {

using testing::series_value;

struct HttpAnswer {
  long code = 0;
  std::string content_type;
  std::string body;
};

size_t append_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

std::optional<HttpAnswer> http_get(const std::string& url) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return std::nullopt;
  HttpAnswer answer;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10'000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.code);
    char* type = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
    if (type != nullptr) answer.content_type = type;
  }
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    ADD_FAILURE() << url << ": " << curl_easy_strerror(rc);
    return std::nullopt;
  }
  return answer;
}

TEST(MetricsHttp, ServesTheTextExpositionOnMetricsAtAFreePort) {
  Metrics m;
  EXPECT_EQ(m.port(), 0);
  Status s = m.listen("127.0.0.1:0");
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_GT(m.port(), 0);
  m.set_standby_state(StandbyState::kFollowing);
  m.set_standby_lag(milliseconds(1500));
  m.attempt_ended(flow::ATTEMPT_COMPLETED);
  const std::string url = "http://127.0.0.1:" + std::to_string(m.port()) + "/metrics";
  auto first = http_get(url);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->code, 200);
  EXPECT_EQ(first->content_type.rfind("text/plain", 0), 0u) << first->content_type;
  EXPECT_EQ(series_value(first->body, R"(dexzd_hot_standby_state{state="following"})"), 1);
  EXPECT_EQ(series_value(first->body, R"(dexzd_hot_standby_state{state="failed"})"), 0);
  EXPECT_EQ(series_value(first->body, "dexzd_hot_standby_lag_seconds"), 1.5);
  EXPECT_EQ(series_value(first->body, R"(dexzd_attempts_total{outcome="completed"})"), 1);
  // Every series render() has is served.
  for (const char* name : {"dexzd_node_epoch", "dexzd_active", "dexzd_log_records_total"}) {
    EXPECT_TRUE(series_value(first->body, name).has_value()) << name;
  }
  // A later scrape sees later events.
  m.set_standby_state(StandbyState::kRestarting);
  auto second = http_get(url);
  ASSERT_TRUE(second);
  EXPECT_EQ(series_value(second->body, R"(dexzd_hot_standby_state{state="following"})"), 0);
  EXPECT_EQ(series_value(second->body, R"(dexzd_hot_standby_state{state="restarting"})"), 1);
  // Only /metrics is served.
  auto other = http_get("http://127.0.0.1:" + std::to_string(m.port()) + "/other");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->code, 404);
  // listen() once.
  Status twice = m.listen("127.0.0.1:0");
  EXPECT_EQ(twice.code(), Code::kInvalidArgument);
  EXPECT_NE(twice.message().find("twice"), std::string::npos) << twice.message();
}

// civetweb looks at its stop flag between 2 s polls; Metrics wakes it so that
// a process exits promptly after it has been scraped.
TEST(MetricsHttp, StopsPromptlyAfterAScrape) {
  for (const char* host : {"127.0.0.1", "0.0.0.0"}) {
    auto m = std::make_unique<Metrics>();
    ASSERT_TRUE(m->listen(std::string(host) + ":0").is_ok());
    auto answer = http_get("http://127.0.0.1:" + std::to_string(m->port()) + "/metrics");
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->code, 200);
    const auto start = std::chrono::steady_clock::now();
    m.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500)) << host;
  }
}

TEST(MetricsHttp, AnAddressInUseFailsWithAMessageNamingIt) {
  Metrics first;
  ASSERT_TRUE(first.listen("127.0.0.1:0").is_ok());
  const std::string busy = "127.0.0.1:" + std::to_string(first.port());
  Metrics second;
  Status s = second.listen(busy);
  ASSERT_EQ(s.code(), Code::kPermanent) << s.to_string();
  EXPECT_NE(s.message().find("'" + busy + "'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Address already in use"), std::string::npos) << s.message();
  EXPECT_EQ(second.port(), 0);
  // The failure leaves the Metrics usable, and a later listen may succeed.
  second.flow_ended(flow::FLOW_FAILED);
  EXPECT_EQ(series_value(second.render(), R"(dexzd_flows_total{outcome="failed"})"), 1);
  Status retried = second.listen("127.0.0.1:0");
  EXPECT_TRUE(retried.is_ok()) << retried.to_string();
  // The first server still answers.
  auto answer = http_get("http://" + busy + "/metrics");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->code, 200);
}

TEST(MetricsHttp, MalformedAddressesAreRefusedNamingThem) {
  for (const char* bad : {"", "9100", ":9100", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000",
                          "127.0.0.1:123456", "127.0.0.1:1,127.0.0.1:2", "127.0.0.1 :9100"}) {
    Metrics m;
    Status s = m.listen(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << bad << "': " << s.to_string();
    EXPECT_NE(s.message().find("'" + std::string(bad) + "'"), std::string::npos) << s.message();
    EXPECT_EQ(m.port(), 0);
  }
  // Well formed but not an address of this host.
  Metrics m;
  Status s = m.listen("192.0.2.1:9100");  // TEST-NET-1
  EXPECT_EQ(s.code(), Code::kPermanent) << s.to_string();
  EXPECT_NE(s.message().find("'192.0.2.1:9100'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace dex
