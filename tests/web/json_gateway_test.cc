// dex-web's server side (docs/dex-web.md, "How it is served" and "The JSON
// gateway") over real HTTP: a WebServer on 127.0.0.1:0 in front of a real
// ApiServer over a real Engine with a Worker (LiveStackTest, tests/sdk). The
// gateway's round trip of a Flow in JSON, its refusals (unknown method, bad
// JSON, a body over the limit), the gRPC codes as HTTP statuses, the
// Authorization header as the call's credential, a standby's 503, the process
// status a standby still answers; the app's files, the SPA fallback, refused
// traversal, the page without assets.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "live_stack.h"
#include "web/http_status.h"
#include "web/process_status.h"
#include "web/request_guard.h"
#include "web/static_files.h"
#include "web/web_server.h"

namespace dex {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const Channel kGo("go");

// Greet waits for a message on "go", then completes with its input.
class Greet final : public WaitingStep {
 public:
  std::string type() const override { return "Greet"; }
  Wait wait_for(Context&) override { return Wait::any_of({kGo.for_one()}); }
  StepDecision execute(Context& ctx) override {
    return StepDecision::graceful_complete(ctx.input());
  }
};

class Greeter final : public Flow {
 public:
  std::string type() const override { return "Greeter"; }
  std::string start_step() const override { return "Greet"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Greet>()}; }
  std::vector<Channel> channels() const override { return {kGo}; }
};

std::string sha256_hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), digest, &n, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

// A scratch directory of built assets: index.html, a hashed bundle, a map.
class AssetsDir {
 public:
  AssetsDir() {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("dex-web-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "assets");
    write("index.html", "<!doctype html><title>dex</title><div id=root></div>");
    write("assets/index-Ab12.js", "console.log('dex-web')");
    write("assets/index-Ab12.css", "body{}");
    write("assets/index-Ab12.js.map", "{}");
    write("favicon.svg", "<svg/>");
    // Outside the directory: never served.
    write_outside("secret.txt", "not for the web");
  }
  ~AssetsDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::remove(outside_, ec);
  }
  const fs::path& dir() const { return dir_; }
  const fs::path& outside() const { return outside_; }
  void write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }

 private:
  void write_outside(const std::string& name, const std::string& text) {
    outside_ = dir_.parent_path() / (dir_.filename().string() + "-" + name);
    std::ofstream(outside_) << text;
  }
  fs::path dir_;
  fs::path outside_;
};

std::unique_ptr<web::WebServer> start_web(const std::string& api_address, const fs::path& assets,
                                          bool admin_auth = false,
                                          web::ProcessStatusSource process_status = {}) {
  web::WebServerOptions options;
  options.process_status = std::move(process_status);
  options.listen = "127.0.0.1:0";
  options.api_address = api_address;
  options.assets_dir = assets;
  options.version = "test-version";
  options.admin_auth = admin_auth;
  auto web = web::WebServer::start(options);
  EXPECT_TRUE(web.is_ok()) << web.status().to_string();
  return web.is_ok() ? std::move(web).value() : nullptr;
}

class WebGatewayTest : public LiveStackTest {
 protected:
  std::vector<std::shared_ptr<Flow>> flows() const override {
    return {std::make_shared<Greeter>()};
  }
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(LiveStackTest::SetUp());
    web_ = start_web(address_, assets_.dir());
    ASSERT_NE(web_, nullptr);
    http_ = std::make_unique<httplib::Client>("127.0.0.1", web_->port());
    http_->set_read_timeout(seconds(60));
  }
  void TearDown() override {
    if (web_) web_->stop();
    LiveStackTest::TearDown();
  }

  // POST /api/v1/<path> with `body`: the status and the parsed answer.
  std::pair<int, json> post(const std::string& path, const std::string& body,
                            const httplib::Headers& headers = {}) {
    auto res = http_->Post("/api/v1/" + path, headers, body, "application/json");
    EXPECT_TRUE(res) << "no answer: " << httplib::to_string(res.error());
    if (!res) return {0, json()};
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json; charset=utf-8")
        << res->body;
    return {res->status, json::parse(res->body, nullptr, false)};
  }

  AssetsDir assets_;
  std::unique_ptr<web::WebServer> web_;
  std::unique_ptr<httplib::Client> http_;
};

TEST_F(WebGatewayTest, AFlowStartsIsFoundDescribedAndCompletesInJson) {
  // {"name":"ann"} as the bytes of its Payload: base64 in proto3 JSON.
  auto [code, started] = post("dex.FlowService/StartFlow",
                              R"({"flowId":"g-1","flowType":"Greeter",
                                  "input":{"data":"eyJuYW1lIjoiYW5uIn0="}})");
  ASSERT_EQ(code, 200) << started.dump();
  EXPECT_FALSE(started.value("runId", "").empty());
  // Defaults are printed (emitDefaults), lowerCamelCase.
  ASSERT_TRUE(started.contains("alreadyStarted")) << started.dump();
  EXPECT_EQ(started["alreadyStarted"], false);

  auto [dcode, described] = post("dex.FlowService/DescribeFlow", R"({"flowId":"g-1"})");
  ASSERT_EQ(dcode, 200) << described.dump();
  EXPECT_EQ(described["flowId"], "g-1");
  EXPECT_EQ(described["flowType"], "Greeter");
  EXPECT_EQ(described["status"], "FLOW_RUNNING") << "enums by name";
  EXPECT_EQ(described["closeUnixMs"], "0") << "64-bit integers as strings, defaults printed";
  EXPECT_EQ(described["runId"], started["runId"]);

  auto [scode, state] = post("dex.FlowService/GetFlowState", R"({"flowId":"g-1"})");
  ASSERT_EQ(scode, 200) << state.dump();
  EXPECT_EQ(state["flow"]["flowId"], "g-1");
  EXPECT_TRUE(state["active"].is_array());

  // The search index follows the log: bounded retries (5 s of 50 ms).
  json found;
  for (int i = 0; i < 100; ++i) {
    auto [fcode, page] = post("dex.FlowService/SearchFlows", R"({"query":"FlowType = 'Greeter'"})");
    ASSERT_EQ(fcode, 200) << page.dump();
    found = page;
    if (!page["rows"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(found["rows"].size(), 1u) << found.dump();
  EXPECT_EQ(found["rows"][0]["flowId"], "g-1");

  auto [pcode, published] = post("dex.FlowService/PublishToChannel",
                                 R"({"flowId":"g-1","channel":"go","messages":[{"data":"e30="}]})");
  ASSERT_EQ(pcode, 200) << published.dump();
  EXPECT_EQ(published, json::object());
  // A long poll passes through with its own timeout.
  auto [wcode, waited] =
      post("dex.FlowService/WaitForFlow", R"({"flow":{"flowId":"g-1"},"timeoutMs":"20000"})");
  ASSERT_EQ(wcode, 200) << waited.dump();
  EXPECT_EQ(waited["closed"], true) << waited.dump();
}

TEST_F(WebGatewayTest, ALongPollWaitsForItsOwnTimeoutAndStopDoesNotWaitForIt) {
  auto [code, started] =
      post("dex.FlowService/StartFlow", R"({"flowId":"g-2","flowType":"Greeter"})");
  ASSERT_EQ(code, 200) << started.dump();
  // Its own timeout (1 s) answers, well inside the gateway's deadline (1 s + 10 s).
  auto t0 = std::chrono::steady_clock::now();
  auto [wcode, waited] =
      post("dex.FlowService/WaitForFlow", R"({"flow":{"flowId":"g-2"},"timeoutMs":"1000"})");
  ASSERT_EQ(wcode, 200) << waited.dump();
  EXPECT_EQ(waited["closed"], false);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(8));

  // A 60 s poll in flight: stop() cancels it (503) instead of waiting it out.
  auto poll = std::async(std::launch::async, [this] {
    return post("dex.FlowService/WaitForFlow", R"({"flow":{"flowId":"g-2"},"timeoutMs":"60000"})");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  t0 = std::chrono::steady_clock::now();
  web_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(10));
  ASSERT_EQ(poll.wait_for(seconds(10)), std::future_status::ready);
  auto [pcode, body] = poll.get();
  EXPECT_EQ(pcode, 503) << body.dump();
  EXPECT_EQ(body["code"], "UNAVAILABLE");
}

TEST_F(WebGatewayTest, AnEmptyBodyIsTheEmptyRequest) {
  auto [code, page] = post("dex.FlowService/SearchFlows", "");
  ASSERT_EQ(code, 200) << page.dump();
  EXPECT_TRUE(page["rows"].is_array());
  EXPECT_EQ(page["nextPageToken"], "");
}

TEST_F(WebGatewayTest, AMethodOutsideTheAllowListIsNotFound) {
  for (const char* path :
       {"dex.FlowService/NoSuchMethod", "dex.WorkerTaskService/PollWorkerTask",
        "dex.HotStandbyService/Follow", "grpc.health.v1.Health/Check", "no.Such/Thing"}) {
    auto [code, body] = post(path, "{}");
    EXPECT_EQ(code, 404) << path;
    EXPECT_EQ(body["code"], "NOT_FOUND") << path;
    EXPECT_NE(body["message"].get<std::string>().find("JSON gateway"), std::string::npos)
        << body.dump();
  }
}

TEST_F(WebGatewayTest, ABodyThatIsNotTheRequestIsRefused400NamingTheProblem) {
  auto [code, body] = post("dex.FlowService/DescribeFlow", R"({"flowIdd":"g-1"})");
  EXPECT_EQ(code, 400);
  EXPECT_EQ(body["code"], "INVALID_ARGUMENT");
  EXPECT_NE(body["message"].get<std::string>().find("flowIdd"), std::string::npos) << body.dump();
  EXPECT_NE(body["message"].get<std::string>().find("dex.flow.FlowRef"), std::string::npos);

  auto [code2, body2] = post("dex.FlowService/DescribeFlow", "not json");
  EXPECT_EQ(code2, 400);
  EXPECT_EQ(body2["code"], "INVALID_ARGUMENT");

  auto [code3, body3] = post("dex.FlowService/StopFlow", R"({"flowId":"g-1","mode":"NO_SUCH"})");
  EXPECT_EQ(code3, 400) << body3.dump();
}

TEST_F(WebGatewayTest, TheServersCodeAndMessageAnswerAsHttpStatus) {
  auto [code, body] = post("dex.FlowService/DescribeFlow", R"({"flowId":"nope"})");
  EXPECT_EQ(code, 404);
  EXPECT_EQ(body["code"], "NOT_FOUND");
  EXPECT_NE(body["message"].get<std::string>().find("nope"), std::string::npos) << body.dump();
  // The API's INVALID_ARGUMENT: an empty Flow ID.
  auto [code2, body2] = post("dex.FlowService/StartFlow", R"({"flowType":"Greeter"})");
  EXPECT_EQ(code2, 400) << body2.dump();
  EXPECT_EQ(body2["code"], "INVALID_ARGUMENT");
}

TEST_F(WebGatewayTest, ABodyOverTheLimitAnswers413) {
  std::string big(web::kRequestBytesMax + 1, ' ');
  auto res = http_->Post("/api/v1/dex.FlowService/SearchFlows", big, "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 413);
  json body = json::parse(res->body, nullptr, false);
  EXPECT_EQ(body["code"], "RESOURCE_EXHAUSTED") << res->body;
  EXPECT_NE(res->body.find("8 MiB"), std::string::npos) << res->body;
}

TEST_F(WebGatewayTest, WebInfoNamesTheVersionTheApiAndWhetherAdminNeedsACredential) {
  auto res = http_->Get("/api/v1/web");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  json info = json::parse(res->body);
  EXPECT_EQ(info["version"], "test-version");
  EXPECT_EQ(info["apiAddress"], address_);
  EXPECT_EQ(info["adminAuth"], false);
  // Other paths under /api/ are not the app.
  auto other = http_->Get("/api/v1/nothing");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(json::parse(other->body)["code"], "NOT_FOUND");
}

TEST_F(WebGatewayTest, TheAuthorizationHeaderIsTheAdminCredential) {
  // A second API process over the same engine, with an admin token.
  ApiServerOptions options;
  options.listen = "127.0.0.1:0";
  options.admin_token_sha256 = {sha256_hex("s3cret-admin-token")};
  auto api = ApiProcess::start(options);
  ASSERT_TRUE(api.is_ok()) << api.status().to_string();
  api.value()->set_active(&node_.engine(), {"n1", Epoch(1), "p1"});
  auto web = start_web("127.0.0.1:" + std::to_string(api.value()->port()), assets_.dir(), true);
  ASSERT_NE(web, nullptr);
  httplib::Client http("127.0.0.1", web->port());
  auto describe = [&](const httplib::Headers& headers) {
    auto res = http.Post("/api/v1/dex.AdminService/Describe", headers, "{}", "application/json");
    EXPECT_TRUE(res);
    return res ? std::make_pair(res->status, json::parse(res->body, nullptr, false))
               : std::make_pair(0, json());
  };
  auto [code, body] = describe({});
  EXPECT_EQ(code, 401) << body.dump();
  EXPECT_EQ(body["code"], "UNAUTHENTICATED");
  auto [wrong, wbody] = describe({{"Authorization", "Bearer not-the-token"}});
  EXPECT_EQ(wrong, 401) << wbody.dump();
  auto [ok, obody] = describe({{"Authorization", "Bearer s3cret-admin-token"}});
  EXPECT_EQ(ok, 200) << obody.dump();
  EXPECT_EQ(obody["nodeId"], "n1");
  EXPECT_EQ(obody["nodeEpoch"], "1");
  // FlowService calls need no credential.
  auto search = http.Post("/api/v1/dex.FlowService/SearchFlows", "{}", "application/json");
  ASSERT_TRUE(search);
  EXPECT_EQ(search->status, 200);
  auto info = http.Get("/api/v1/web");
  ASSERT_TRUE(info);
  EXPECT_EQ(json::parse(info->body)["adminAuth"], true);
  web->stop();
  api.value()->shutdown(seconds(0));
}

TEST_F(WebGatewayTest, AStandbysUnavailableAnswers503) {
  ApiServerOptions options;
  options.listen = "127.0.0.1:0";
  auto api = ApiProcess::start(options);
  ASSERT_TRUE(api.is_ok()) << api.status().to_string();
  api.value()->set_inactive("a standby: node n1 is held by another process");
  auto web = start_web("127.0.0.1:" + std::to_string(api.value()->port()), assets_.dir());
  ASSERT_NE(web, nullptr);
  httplib::Client http("127.0.0.1", web->port());
  auto res = http.Post("/api/v1/dex.FlowService/SearchFlows", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_EQ(json::parse(res->body)["code"], "UNAVAILABLE");
  // The app and the info still answer.
  auto page = http.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  web->stop();
  api.value()->shutdown(seconds(0));
}

// GET /api/v1/process reads the process's own state (the source the
// server's wiring hands over), so it answers where the API does not: on a
// standby whose every public call is UNAVAILABLE.
TEST_F(WebGatewayTest, TheProcessStatusAnswersOnAStandbyWhoseApiDoesNot) {
  ApiServerOptions options;
  options.listen = "127.0.0.1:0";
  auto api = ApiProcess::start(options);
  ASSERT_TRUE(api.is_ok()) << api.status().to_string();
  const std::string why = "this process is a cold standby of node n1; the active process is p-a";
  api.value()->set_inactive(why);
  std::atomic<int> reads{0};
  auto web =
      start_web("127.0.0.1:" + std::to_string(api.value()->port()), assets_.dir(), false, [&] {
        web::ProcessStatus s;
        s.process_id = "p-b";
        s.node_id = "n1";
        s.role = "cold-standby";
        s.phase = "acquiring";
        s.standby_mode = "cold";
        s.epoch = 7;
        s.holder_process_id = "p-a";
        s.not_serving_reason = why;
        s.applied_slot = uint64_t(1) << 60;  // beyond a double's integers
        ++reads;
        return s;
      });
  ASSERT_NE(web, nullptr);
  httplib::Client http("127.0.0.1", web->port());
  auto call = http.Post("/api/v1/dex.AdminService/Describe", "{}", "application/json");
  ASSERT_TRUE(call);
  EXPECT_EQ(call->status, 503) << call->body;
  auto res = http.Get("/api/v1/process");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json; charset=utf-8");
  EXPECT_EQ(res->get_header_value("Cache-Control"), "no-store");
  json p = json::parse(res->body);
  EXPECT_EQ(p["processId"], "p-b");
  EXPECT_EQ(p["nodeId"], "n1");
  EXPECT_EQ(p["role"], "cold-standby");
  EXPECT_EQ(p["phase"], "acquiring");
  EXPECT_EQ(p["serving"], false);
  EXPECT_EQ(p["standbyMode"], "cold");
  EXPECT_TRUE(p["standbyState"].is_null());
  EXPECT_TRUE(p["lagSeconds"].is_null());
  EXPECT_EQ(p["epoch"], "7");
  EXPECT_EQ(p["holderProcessId"], "p-a");
  EXPECT_EQ(p["holderIsThisProcess"], false);
  EXPECT_EQ(p["leaseReleased"], false);
  EXPECT_TRUE(p["logHead"].is_null());
  EXPECT_EQ(p["appliedSlot"], "1152921504606846976");
  EXPECT_EQ(p["notServingReason"], why);
  EXPECT_EQ(reads.load(), 1);
  // Read afresh at every request, never cached.
  ASSERT_TRUE(http.Get("/api/v1/process"));
  EXPECT_EQ(reads.load(), 2);
  // Guarded as the rest of the API: another site's page, a rebinding name.
  auto cross = http.Get("/api/v1/process", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(cross);
  EXPECT_EQ(cross->status, 403) << cross->body;
  auto rebound = http.Get("/api/v1/process", {{"Host", "evil.example:8802"}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403) << rebound->body;
  EXPECT_EQ(json::parse(rebound->body)["code"], "PERMISSION_DENIED");
  EXPECT_EQ(reads.load(), 2);
  web->stop();
  api.value()->shutdown(seconds(0));
}

TEST_F(WebGatewayTest, WithoutAProcessStatusSourceTheProcessPathIsNotFound) {
  auto res = http_->Get("/api/v1/process");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["code"], "NOT_FOUND");
}

TEST(WebProcessStatus, AnActiveProcessHoldsTheLeaseAndNamesItsLogHead) {
  web::ProcessStatus s;
  s.process_id = "p-a";
  s.node_id = "n1";
  s.role = "active";
  s.phase = "active";
  s.serving = true;
  s.standby_mode = "hot";
  s.epoch = 3;
  s.holder_process_id = "p-a";
  s.log_head = 41;
  s.not_serving_reason = "ignored while serving";
  json p = json::parse(web::process_status_json(s));
  EXPECT_EQ(p["serving"], true);
  EXPECT_EQ(p["holderIsThisProcess"], true);
  EXPECT_EQ(p["logHead"], "41");
  EXPECT_TRUE(p["appliedSlot"].is_null());
  EXPECT_TRUE(p["notServingReason"].is_null());
  // A hot standby: its follower's state and lag.
  web::ProcessStatus h;
  h.role = "hot-standby";
  h.standby_mode = "hot";
  h.standby_state = "following";
  h.lag_seconds = 0.25;
  h.applied_slot = 40;
  json q = json::parse(web::process_status_json(h));
  EXPECT_EQ(q["standbyState"], "following");
  EXPECT_DOUBLE_EQ(q["lagSeconds"].get<double>(), 0.25);
  EXPECT_EQ(q["appliedSlot"], "40");
  EXPECT_TRUE(q["epoch"].is_null());
  EXPECT_TRUE(q["holderProcessId"].is_null());
  EXPECT_EQ(q["holderIsThisProcess"], false);
  EXPECT_EQ(q["notServingReason"], "");
}

TEST_F(WebGatewayTest, FilesAreServedWithTheirTypeAndHashedAssetsAreCachedLong) {
  auto index = http_->Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(index->get_header_value("Cache-Control"), "no-cache");
  EXPECT_NE(index->body.find("id=root"), std::string::npos);

  struct Case {
    const char* path;
    const char* type;
  };
  for (const Case& c : {Case{"/assets/index-Ab12.js", "text/javascript; charset=utf-8"},
                        Case{"/assets/index-Ab12.css", "text/css; charset=utf-8"},
                        Case{"/assets/index-Ab12.js.map", "application/json"}}) {
    auto res = http_->Get(c.path);
    ASSERT_TRUE(res) << c.path;
    EXPECT_EQ(res->status, 200) << c.path;
    EXPECT_EQ(res->get_header_value("Content-Type"), c.type) << c.path;
    EXPECT_EQ(res->get_header_value("Cache-Control"), "public, max-age=31536000, immutable");
  }
  auto icon = http_->Get("/favicon.svg");
  ASSERT_TRUE(icon);
  EXPECT_EQ(icon->get_header_value("Content-Type"), "image/svg+xml");
  EXPECT_EQ(icon->get_header_value("Cache-Control"), "no-cache") << "not hashed: revalidated";
}

TEST_F(WebGatewayTest, NothingIsCompressedOnTheFlyAtEachRequest) {
  // cpp-httplib would brotli-compress a text or JSON answer at every request
  // for a browser that accepts it (3.9 s for the app's 1.6 MB layout worker):
  // files and API answers go out as they are.
  std::string big(4u << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 97) big[i] = static_cast<char>('a' + i % 26);
  assets_.write("assets/big-Cd34.js", big);
  const httplib::Headers accept = {{"Accept-Encoding", "gzip, deflate, br"}};
  const auto t0 = std::chrono::steady_clock::now();
  auto file = http_->Get("/assets/big-Cd34.js", accept);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(file);
  EXPECT_EQ(file->status, 200);
  EXPECT_FALSE(file->has_header("Content-Encoding")) << file->get_header_value("Content-Encoding");
  EXPECT_EQ(file->body, big);
  EXPECT_LT(took, std::chrono::milliseconds(1000));
  auto api = http_->Post("/api/v1/dex.FlowService/SearchFlows", accept, "{}", "application/json");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 200);
  EXPECT_FALSE(api->has_header("Content-Encoding"));
  auto missing = http_->Post("/api/v1/dex.FlowService/DescribeFlow", accept, R"({"flowId":"none"})",
                             "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_FALSE(missing->has_header("Content-Encoding"));
  EXPECT_NE(missing->body.find("NOT_FOUND"), std::string::npos) << missing->body;
}

TEST_F(WebGatewayTest, APathThatIsNotAFileGetsIndexHtml) {
  for (const char* path : {"/flows/g-1", "/flows/g-1/history", "/node", "/assets/gone-1234.js"}) {
    auto res = http_->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_NE(res->body.find("id=root"), std::string::npos) << path;
    EXPECT_EQ(res->get_header_value("Cache-Control"), "no-cache") << path;
  }
}

TEST_F(WebGatewayTest, NothingOutsideTheAssetsDirectoryIsServed) {
  const std::string secret = assets_.outside().filename().string();
  for (const std::string& path :
       {"/../" + secret, "/assets/../../" + secret, "/%2e%2e/" + secret, "/..%2f" + secret}) {
    auto res = http_->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->body.find("not for the web"), std::string::npos) << path;
    EXPECT_EQ(res->status, 400) << path;
  }
  // A symbolic link out of the directory is not followed: the app answers.
  fs::create_symlink(assets_.outside(), assets_.dir() / "link.txt");
  auto res = http_->Get("/link.txt");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body.find("not for the web"), std::string::npos);
  EXPECT_NE(res->body.find("id=root"), std::string::npos);
}

TEST_F(WebGatewayTest, WithoutAssetsAPageSaysHowToBuildThemAndTheApiWorks) {
  auto web = start_web(address_, assets_.dir() / "no-such-dir");
  ASSERT_NE(web, nullptr);
  EXPECT_FALSE(web->assets_built());
  httplib::Client http("127.0.0.1", web->port());
  for (const char* path : {"/", "/flows/x"}) {
    auto res = http.Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_NE(res->body.find("not built"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find("scripts/build-web"), std::string::npos) << res->body;
  }
  auto search = http.Post("/api/v1/dex.FlowService/SearchFlows", "{}", "application/json");
  ASSERT_TRUE(search);
  EXPECT_EQ(search->status, 200) << search->body;
  web->stop();
}

TEST_F(WebGatewayTest, APortInUseFailsStartNamingTheAddress) {
  web::WebServerOptions options;
  options.listen = "127.0.0.1:" + std::to_string(web_->port());
  options.api_address = address_;
  auto second = web::WebServer::start(options);
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find(options.listen), std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find("in use"), std::string::npos)
      << second.status().message();
}

TEST_F(WebGatewayTest, WhatAnotherSitesPageCouldSendIsRefusedAndStartsNothing) {
  const std::string start = R"({"flowId":"csrf-1","flowType":"Greeter"})";
  // A "simple" cross-origin POST (text/plain: no preflight asked).
  auto plain = http_->Post("/api/v1/dex.FlowService/StartFlow", start, "text/plain");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 415) << plain->body;
  EXPECT_NE(plain->body.find("application/json"), std::string::npos) << plain->body;
  // JSON from another origin's page.
  auto cross = http_->Post("/api/v1/dex.FlowService/StartFlow", {{"Origin", "http://evil.example"}},
                           start, "application/json");
  ASSERT_TRUE(cross);
  EXPECT_EQ(cross->status, 403) << cross->body;
  // A DNS-rebinding page: its own name resolving to this loopback listener.
  auto rebound = http_->Post("/api/v1/dex.FlowService/StartFlow", {{"Host", "evil.example:8802"}},
                             start, "application/json");
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403) << rebound->body;
  auto info = http_->Get("/api/v1/web", {{"Host", "evil.example:8802"}});
  ASSERT_TRUE(info);
  EXPECT_EQ(info->status, 403);
  // None of them started the Flow; the app's own call (same origin) does.
  auto [code, described] = post("dex.FlowService/DescribeFlow", R"({"flowId":"csrf-1"})");
  EXPECT_EQ(code, 404) << described.dump();
  const std::string self = "http://127.0.0.1:" + std::to_string(web_->port());
  auto [ok, started] = post("dex.FlowService/StartFlow", start, {{"Origin", self}});
  EXPECT_EQ(ok, 200) << started.dump();
}

TEST(WebRequestGuard, LoopbackNamesOriginsAndBodyTypes) {
  using web::refuse_api_request;
  EXPECT_TRUE(web::loopback_host("127.0.0.1"));
  EXPECT_TRUE(web::loopback_host("127.8.9.10"));
  EXPECT_TRUE(web::loopback_host("::1"));
  EXPECT_TRUE(web::loopback_host("LocalHost"));
  EXPECT_FALSE(web::loopback_host("0.0.0.0"));
  EXPECT_FALSE(web::loopback_host("10.0.0.1"));
  const char* json_type = "application/json; charset=utf-8";
  for (const char* host : {"127.0.0.1:8802", "localhost:8802", "[::1]:8802", "localhost", ""})
    EXPECT_FALSE(refuse_api_request(true, true, host, "", json_type)) << host;
  auto r = refuse_api_request(true, true, "dex.attacker.example:8802", "", json_type);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->http_status, 403);
  EXPECT_NE(r->message.find("dex.attacker.example"), std::string::npos) << r->message;
  // A listener beyond loopback is reached by other names (a proxy, a DNS name).
  EXPECT_FALSE(refuse_api_request(false, true, "dex.internal:8802", "", json_type));
  // Origins: the page's own (http or https), else refused.
  EXPECT_FALSE(
      refuse_api_request(true, true, "127.0.0.1:8802", "http://127.0.0.1:8802", json_type));
  EXPECT_FALSE(refuse_api_request(false, true, "dex.internal", "https://dex.internal", json_type));
  EXPECT_TRUE(refuse_api_request(true, true, "127.0.0.1:8802", "http://127.0.0.1:9999", json_type));
  EXPECT_TRUE(refuse_api_request(false, true, "dex.internal", "https://evil.example", json_type));
  // Body types: JSON only, for calls; GET /api/v1/web needs none.
  for (const char* type : {"", "text/plain", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x", "application/jsonx"}) {
    auto t = refuse_api_request(true, true, "127.0.0.1:8802", "", type);
    ASSERT_TRUE(t) << type;
    EXPECT_EQ(t->http_status, 415) << type;
  }
  EXPECT_FALSE(refuse_api_request(true, true, "127.0.0.1:8802", "", "Application/JSON"));
  EXPECT_FALSE(refuse_api_request(true, false, "127.0.0.1:8802", "", ""));
}

TEST(WebDialAddress, AWildcardHostIsDialledAsLoopback) {
  EXPECT_EQ(web::dial_address("0.0.0.0:8801"), "127.0.0.1:8801");
  EXPECT_EQ(web::dial_address("[::]:8801"), "[::1]:8801");
  EXPECT_EQ(web::dial_address("127.0.0.1:8801"), "127.0.0.1:8801");
  EXPECT_EQ(web::dial_address("dex.internal:8801"), "dex.internal:8801");
}

TEST(WebHttpStatus, GrpcCodesMapAsTheContractsTable) {
  using C = grpc::StatusCode;
  EXPECT_EQ(web::http_status_for(C::OK), 200);
  EXPECT_EQ(web::http_status_for(C::INVALID_ARGUMENT), 400);
  EXPECT_EQ(web::http_status_for(C::UNAUTHENTICATED), 401);
  EXPECT_EQ(web::http_status_for(C::PERMISSION_DENIED), 403);
  EXPECT_EQ(web::http_status_for(C::NOT_FOUND), 404);
  EXPECT_EQ(web::http_status_for(C::ALREADY_EXISTS), 409);
  EXPECT_EQ(web::http_status_for(C::FAILED_PRECONDITION), 409);
  EXPECT_EQ(web::http_status_for(C::ABORTED), 409);
  EXPECT_EQ(web::http_status_for(C::RESOURCE_EXHAUSTED), 429);
  EXPECT_EQ(web::http_status_for(C::UNAVAILABLE), 503);
  EXPECT_EQ(web::http_status_for(C::DEADLINE_EXCEEDED), 504);
  for (C other :
       {C::CANCELLED, C::UNKNOWN, C::OUT_OF_RANGE, C::UNIMPLEMENTED, C::INTERNAL, C::DATA_LOSS}) {
    EXPECT_EQ(web::http_status_for(other), 500) << web::grpc_code_name(other);
  }
  EXPECT_EQ(web::grpc_code_name(C::FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_EQ(json::parse(web::error_body(C::ABORTED, "why")),
            (json{{"code", "ABORTED"}, {"message", "why"}}));
}

TEST(WebContentType, ByExtension) {
  EXPECT_EQ(web::content_type_for("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(web::content_type_for("a.png"), "image/png");
  EXPECT_EQ(web::content_type_for("f.woff2"), "font/woff2");
  EXPECT_EQ(web::content_type_for("data.json"), "application/json");
  EXPECT_EQ(web::content_type_for("x.bin"), "application/octet-stream");
}

}  // namespace
}  // namespace dex
