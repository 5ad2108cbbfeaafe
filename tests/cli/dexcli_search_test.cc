// The dexcli binary's `flow search` and `flow list` against an in-process
// fake dex.FlowService: what they send (the query, written by `flow list`
// from its filters; page size, token and fields; one call per page with
// --all), what they print (a table, a JSON object per page, JSON lines with
// --all), a server's INVALID_ARGUMENT as JSON on stderr with exit 1, usage
// errors with exit 2 and nothing sent; and `flow start`'s initial Attributes
// and Attribute Store.
// The real server's behaviour is tests/server/test_dexcli_search.py's.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "dex/api.grpc.pb.h"
#include "dexcli_process.h"

namespace dex::cli {
namespace {

using testing::Result;

using json = nlohmann::ordered_json;

// Pages over `rows` (token "at:<offset>", applied slot 9); a query starting
// "Nope" is refused as the server refuses an unknown field.
class FakeSearch final : public FlowService::Service {
 public:
  std::mutex mu;
  std::vector<flow::SearchFlowsRequest> searches;
  std::vector<flow::StartFlowRequest> starts;
  std::vector<flow::ListSearchValuesRequest> value_requests;
  std::vector<flow::FlowSearchRow> rows;

  grpc::Status SearchFlows(grpc::ServerContext*, const flow::SearchFlowsRequest* request,
                           flow::SearchFlowsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    searches.push_back(*request);
    if (request->query().rfind("Nope", 0) == 0)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "query: at position 1: unknown field 'Nope'");
    const size_t offset =
        request->page_token().empty() ? 0 : std::stoul(request->page_token().substr(3));
    const size_t size = request->page_size() == 0 ? 100 : request->page_size();
    for (size_t i = offset; i < rows.size() && i < offset + size; ++i)
      *response->add_rows() = rows[i];
    if (offset + size < rows.size())
      response->set_next_page_token("at:" + std::to_string(offset + size));
    response->set_applied_slot(9);
    return grpc::Status::OK;
  }
  grpc::Status ListSearchKeys(grpc::ServerContext*, const flow::ListSearchKeysRequest*,
                              flow::ListSearchKeysResponse* response) override {
    auto* status = response->add_keys();
    status->set_name("Status");
    status->set_type(flow::INDEX_KEYWORD);
    status->set_system(true);
    status->set_sortable(true);
    auto* tags = response->add_keys();
    tags->set_name("tags");
    tags->set_type(flow::INDEX_KEYWORD_ARRAY);
    tags->add_flow_types("Invoice");
    tags->add_flow_types("OrderProcessing");
    response->set_applied_slot(9);
    return grpc::Status::OK;
  }
  grpc::Status ListSearchValues(grpc::ServerContext*, const flow::ListSearchValuesRequest* request,
                                flow::ListSearchValuesResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    value_requests.push_back(*request);
    if (request->key() == "total")
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "key 'total' is DOUBLE");
    response->add_values(request->prefix() + "me");
    response->add_values(request->prefix() + "me-eu");
    response->set_truncated(true);
    response->set_applied_slot(9);
    return grpc::Status::OK;
  }
  grpc::Status StartFlow(grpc::ServerContext*, const flow::StartFlowRequest* request,
                         flow::StartFlowResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    starts.push_back(*request);
    response->set_run_id("r-1");
    return grpc::Status::OK;
  }
};

flow::FlowSearchRow row(int i) {
  flow::FlowSearchRow r;
  r.set_flow_id("o-" + std::to_string(i));
  r.set_run_id("r-" + std::to_string(i));
  r.set_flow_type("OrderProcessing");
  r.set_status(flow::FLOW_RUNNING);
  r.set_start_unix_ms(1'800'000'000'000 - i * 1000);
  auto* f = r.add_fields();
  f->set_key("customer");
  f->set_type(flow::INDEX_KEYWORD);
  f->set_text(i % 2 == 1 ? "acme" : "bolt");
  return r;
}

class DexcliSearch : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 1; i <= 5; ++i) fake_.rows.push_back(row(i));
    cli_.start(fake_, "dexcli-search");
  }
  void TearDown() override { cli_.stop(); }
  Result dexcli(const std::vector<std::string>& args) { return cli_.run(args); }
  std::vector<flow::SearchFlowsRequest> searches() {
    std::lock_guard<std::mutex> lock(fake_.mu);
    return fake_.searches;
  }

  FakeSearch fake_;
  testing::DexcliAgainst cli_;
};

TEST_F(DexcliSearch, SearchPrintsOnePageAsATableByDefaultAndSaysHowToGetTheNext) {
  const Result r = dexcli({"flow", "search", "customer = 'acme'", "--page-size", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("FLOW ID  RUN ID  TYPE             STATUS   STARTED", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("customer\no-1      r-1     OrderProcessing  RUNNING  "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("acme\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 runs; more with --page-token at:2 (or --all)"), std::string::npos)
      << r.out;
  const auto sent = searches();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].query(), "customer = 'acme'");
  EXPECT_EQ(sent[0].page_size(), 2);
  EXPECT_EQ(sent[0].page_token(), "");
}

TEST_F(DexcliSearch, JsonIsOneObjectPerPageWithItsTokenAndFieldsAndTokenGoOut) {
  const Result r =
      dexcli({"flow", "search", "Status = 'RUNNING'", "--output", "json", "--page-size", "2",
              "--page-token", "at:2", "--fields", "total,PlacedAt", "--fields", "tags"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json out = r.out_json();
  EXPECT_EQ(out["query"], "Status = 'RUNNING'");
  EXPECT_EQ(out["nextPageToken"], "at:4");
  EXPECT_EQ(out["appliedSlot"], 9);
  ASSERT_EQ(out["rows"].size(), 2u);
  EXPECT_EQ(out["rows"][0], json::parse(R"({"flowId": "o-3", "runId": "r-3",
      "flowType": "OrderProcessing", "status": "RUNNING", "startUnixMs": 1799999997000,
      "fields": {"customer": "acme"}})"));
  const auto sent = searches();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].page_token(), "at:2");
  EXPECT_EQ(std::vector<std::string>(sent[0].fields().begin(), sent[0].fields().end()),
            (std::vector<std::string>{"total", "PlacedAt", "tags"}));

  // The last page: an empty token, and no hint in the table.
  const Result last = dexcli({"flow", "search", "--output", "json"});
  ASSERT_EQ(last.code, 0) << last.err;
  EXPECT_EQ(last.out_json()["nextPageToken"], "");
  EXPECT_EQ(last.out_json()["query"], "");
  EXPECT_EQ(dexcli({"flow", "search"}).out.find("--page-token"), std::string::npos);
}

TEST_F(DexcliSearch, AllWithJsonPrintsOneRowPerLineFetchingEveryPage) {
  const Result r = dexcli({"flow", "search", "", "--all", "--output", "json", "--page-size", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = r.lines();
  ASSERT_EQ(lines.size(), 5u) << r.out;
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i]["flowId"], "o-" + std::to_string(i + 1));
  const auto sent = searches();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1].page_token(), "at:2");
  EXPECT_EQ(sent[2].page_token(), "at:4");

  const Result table = dexcli({"flow", "search", "--all", "--page-size", "2"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("o-5"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("\n5 runs\n"), std::string::npos) << table.out;
}

TEST_F(DexcliSearch, ListWritesItsFiltersAsAQueryNewestFirst) {
  Result r = dexcli({"flow", "list", "--output", "json", "--status", "running,Failed", "--status",
                     "timed-out", "--type", "OrderProcessing", "--since", "2027-01-15T00:00:00Z",
                     "--until", "1800000000000"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string want =
      "FlowType = 'OrderProcessing' AND Status IN ('RUNNING', 'FAILED', 'TIMED_OUT') AND "
      "StartTime >= '2027-01-15T00:00:00.000Z' AND StartTime < '2027-01-15T08:00:00.000Z' "
      "ORDER BY StartTime DESC";
  EXPECT_EQ(r.out_json()["query"], want);
  ASSERT_EQ(searches().size(), 1u);
  EXPECT_EQ(searches()[0].query(), want);

  r = dexcli({"flow", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(searches().back().query(), "ORDER BY StartTime DESC");
  EXPECT_NE(r.out.find("o-5"), std::string::npos);

  // A duration: that long before now.
  r = dexcli({"flow", "list", "--since", "1h", "--output", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string q = searches().back().query();
  EXPECT_EQ(q.rfind("StartTime >= '", 0), 0u) << q;
  EXPECT_NE(q.find("' ORDER BY StartTime DESC"), std::string::npos) << q;

  r = dexcli({"flow", "list", "--all", "--output", "json", "--page-size", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.lines().size(), 5u);
}

TEST_F(DexcliSearch, ABadQueryIsTheServersErrorAsJsonOnStderrWithExit1) {
  const Result r = dexcli({"flow", "search", "Nope = 1", "--output", "json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.error(), json::parse(R"({"kind": "request", "operation": "flow search",
      "message": "query: at position 1: unknown field 'Nope'", "grpcCode": "INVALID_ARGUMENT"})"))
      << r.err;
  const Result all = dexcli({"flow", "search", "Nope", "--all", "--output", "json"});
  EXPECT_EQ(all.code, 1);
  EXPECT_EQ(all.error()["grpcCode"], "INVALID_ARGUMENT");
}

TEST_F(DexcliSearch, UsageErrorsNameTheFlagAndItsValueAndSendNothing) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"flow", "list", "--status", "done"}, "--status: 'done' is not a run status"},
           {{"flow", "list", "--since", "yesterday"}, "--since: 'yesterday' is neither"},
           {{"flow", "list", "--until", "1x"}, "--until: '1x' is neither"},
           {{"flow", "list", "--since", "1h", "--until", "2h"},
            "--since 1h is not before --until 2h"},
           {{"flow", "list", "--type", ""}, "--type: a Flow type is empty"},
           {{"flow", "search", "x", "--output", "xml"}, "--output must be table or json"},
           {{"flow", "search", "x", "--page-size", "0"}, "--page-size"},
           {{"flow", "search", "x", "--page-size", "1001"}, "--page-size"},
           {{"flow", "list", "--page-size", "many"}, "--page-size"},
       }) {
    const Result r = dexcli(args);
    EXPECT_EQ(r.code, 2) << args.back() << ": " << r.err;
    const json e = r.error();
    EXPECT_EQ(e["kind"], "usage");
    EXPECT_EQ(e["operation"], "flow " + args[1]);
    EXPECT_NE(e["message"].get<std::string>().find(message), std::string::npos) << r.err;
  }
  EXPECT_EQ(searches().size(), 0u);
}

TEST_F(DexcliSearch, SearchKeysListsTheFieldsAndAKeywordKeysValuesAsATableOrJson) {
  const Result table = dexcli({"flow", "search-keys"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_EQ(table.out,
            "NAME    TYPE           ORDER BY  FLOW TYPES\n"
            "Status  KEYWORD        yes       (system field)\n"
            "tags    KEYWORD_ARRAY  no        Invoice, OrderProcessing\n");
  const Result keys = dexcli({"flow", "search-keys", "--output", "json"});
  ASSERT_EQ(keys.code, 0) << keys.err;
  EXPECT_EQ(keys.out_json()["keys"][1], json::parse(R"({"name": "tags", "type": "KEYWORD_ARRAY",
      "flowTypes": ["Invoice", "OrderProcessing"]})"));

  const Result values =
      dexcli({"flow", "search-keys", "--values", "customer", "--prefix", "ac", "--limit", "2"});
  ASSERT_EQ(values.code, 0) << values.err;
  EXPECT_EQ(values.out,
            "acme\nacme-eu\n\n(more values follow: a longer --prefix, or --limit up to 100)\n");
  {
    std::lock_guard<std::mutex> lock(fake_.mu);
    ASSERT_EQ(fake_.value_requests.size(), 1u);
    EXPECT_EQ(fake_.value_requests[0].key(), "customer");
    EXPECT_EQ(fake_.value_requests[0].prefix(), "ac");
    EXPECT_EQ(fake_.value_requests[0].limit(), 2);
  }
  const Result json_values =
      dexcli({"flow", "search-keys", "--values", "customer", "--output", "json"});
  ASSERT_EQ(json_values.code, 0) << json_values.err;
  EXPECT_EQ(json_values.out_json(), json::parse(R"({"values": ["me", "me-eu"], "truncated": true,
      "appliedSlot": 9})"));

  const Result refused = dexcli({"flow", "search-keys", "--values", "total", "--output", "json"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(refused.error()["message"], "key 'total' is DOUBLE");
  EXPECT_EQ(refused.error()["operation"], "flow search-keys");
  const Result usage = dexcli({"flow", "search-keys", "--prefix", "ac"});
  EXPECT_EQ(usage.code, 2);
  EXPECT_NE(usage.err.find("--prefix needs --values KEY"), std::string::npos) << usage.err;
}

TEST_F(DexcliSearch, HelpExplainsTheQueryAndGivesExamples) {
  const Result search = dexcli({"flow", "search", "--help"});
  EXPECT_EQ(search.code, 0);
  for (const char* part :
       {"ORDER BY", "ActiveStepTypes", "Examples:", "--all --output json", "nextPageToken"})
    EXPECT_NE(search.out.find(part), std::string::npos) << part;
  const Result list = dexcli({"flow", "list", "--help"});
  EXPECT_EQ(list.code, 0);
  for (const char* part : {"--status", "timed-out", "--since", "Examples:", "newest first"})
    EXPECT_NE(list.out.find(part), std::string::npos) << part;
}

TEST_F(DexcliSearch, StartTakesTypedInitialAttributes) {
  const Result r =
      dexcli({"flow", "start", "OrderProcessing", "--flow-id", "o-9", "--string", "customer=acme",
              "--int", "items=3", "--double", "total=99.5", "--datetime",
              "placed-at=2027-01-15T10:00:00Z", "--json", R"(tags=["eu","gift"])"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::lock_guard<std::mutex> lock(fake_.mu);
  ASSERT_EQ(fake_.starts.size(), 1u);
  const auto& initial = fake_.starts[0].options().initial_attributes();
  ASSERT_EQ(initial.size(), 5);
  EXPECT_EQ(initial[0].key(), "customer");
  EXPECT_EQ(initial[0].value().string_value(), "acme");
  EXPECT_EQ(initial[1].value().int64_value(), 3);
  EXPECT_EQ(initial[2].value().double_value(), 99.5);
  EXPECT_EQ(initial[3].value().datetime_unix_ms(), 1'800'007'200'000);
  EXPECT_EQ(initial[4].key(), "tags");
  EXPECT_EQ(initial[4].value().json_value(), R"(["eu","gift"])");
}

TEST_F(DexcliSearch, StartTakesAnAttributeStore) {
  const Result help = dexcli({"flow", "start", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--attribute-store"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("attributeStore.stores.NAME"), std::string::npos) << help.out;
  const Result r = dexcli({"flow", "start", "OrderProcessing", "--flow-id", "o-9",
                           "--attribute-store", "orders-eu", "--string", "customer=acme"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Result plain = dexcli({"flow", "start", "OrderProcessing", "--flow-id", "o-10"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  const Result empty =
      dexcli({"flow", "start", "OrderProcessing", "--flow-id", "o-11", "--attribute-store", ""});
  EXPECT_EQ(empty.code, 2);
  EXPECT_EQ(empty.error()["message"], "--attribute-store is empty");
  std::lock_guard<std::mutex> lock(fake_.mu);
  ASSERT_EQ(fake_.starts.size(), 2u);
  EXPECT_EQ(fake_.starts[0].options().attribute_store(), "orders-eu");
  EXPECT_EQ(fake_.starts[0].options().initial_attributes_size(), 1);
  EXPECT_EQ(fake_.starts[1].options().attribute_store(), "");  // the Flow type's default
}

TEST_F(DexcliSearch, StartRefusesABadInitialAttributeNamingItAndSendsNothing) {
  const Result r =
      dexcli({"flow", "start", "OrderProcessing", "--flow-id", "o-9", "--int", "items=three"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.error()["message"], "--int items=three: 'three' is not a whole number (int64)");
  // Any JSON value is an Attribute value; text that is not JSON is refused here.
  const Result bad_json =
      dexcli({"flow", "start", "OrderProcessing", "--flow-id", "o-9", "--json", "tags=[1,"});
  EXPECT_EQ(bad_json.code, 2);
  std::lock_guard<std::mutex> lock(fake_.mu);
  EXPECT_EQ(fake_.starts.size(), 0u);
}

}  // namespace
}  // namespace dex::cli
