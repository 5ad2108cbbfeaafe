// The dexcli binary's Attribute, RPC and inspect commands against an
// in-process fake dex.FlowService: what each command sends (typed writes,
// keys, runs, request IDs, RPC timeouts), what it prints (JSON on stdout, a
// request error as JSON on stderr with the gRPC code and exit 1) and that a
// usage error (exit 2) sends nothing. The real server's behaviour is
// tests/server/test_cli_attributes_rpc.py's.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <deque>
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

// Answers from queues the test fills, and keeps every request it got.
class FakeFlows final : public FlowService::Service {
 public:
  std::mutex mu;
  std::vector<flow::GetAttributesRequest> gets;
  std::vector<flow::SetAttributesRequest> sets;
  std::vector<flow::InvokeRpcRequest> rpcs;
  std::vector<std::string> calls;  // method names, in order
  std::vector<std::string> runs;   // the run each call named
  flow::GetAttributesResponse attributes;
  grpc::Status set_status = grpc::Status::OK;
  std::deque<std::pair<grpc::Status, flow::InvokeRpcResponse>> rpc_answers;
  flow::FlowDescription description;
  flow::GetFlowStateResponse state;
  std::vector<flow::GetHistoryEventsResponse> history_pages;

  grpc::Status GetAttributes(grpc::ServerContext*, const flow::GetAttributesRequest* request,
                             flow::GetAttributesResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    note("GetAttributes", request->flow());
    gets.push_back(*request);
    *response = attributes;
    return grpc::Status::OK;
  }
  grpc::Status SetAttributes(grpc::ServerContext*, const flow::SetAttributesRequest* request,
                             flow::SetAttributesResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    note("SetAttributes", request->flow());
    sets.push_back(*request);
    response->set_run_id("r-1");
    return set_status;
  }
  grpc::Status InvokeRpc(grpc::ServerContext*, const flow::InvokeRpcRequest* request,
                         flow::InvokeRpcResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    note("InvokeRpc", request->flow());
    rpcs.push_back(*request);
    if (rpc_answers.empty()) return grpc::Status(grpc::StatusCode::INTERNAL, "no answer queued");
    auto [status, answer] = rpc_answers.front();
    rpc_answers.pop_front();
    *response = answer;
    return status;
  }
  grpc::Status DescribeFlow(grpc::ServerContext*, const flow::FlowRef* request,
                            flow::FlowDescription* response) override {
    std::lock_guard<std::mutex> lock(mu);
    note("DescribeFlow", *request);
    *response = description;
    return grpc::Status::OK;
  }
  grpc::Status GetFlowState(grpc::ServerContext*, const flow::FlowRef* request,
                            flow::GetFlowStateResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    note("GetFlowState", *request);
    *response = state;
    return grpc::Status::OK;
  }
  grpc::Status GetHistoryEvents(grpc::ServerContext*, const flow::GetHistoryEventsRequest* request,
                                flow::GetHistoryEventsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    note("GetHistoryEvents", request->flow());
    // The page after the request's seq.
    for (const auto& page : history_pages) {
      if (page.events().empty() || page.events(0).seq() > request->after_seq() ||
          (request->from_start() && page.events(0).seq() == 0)) {
        *response = page;
        return grpc::Status::OK;
      }
    }
    response->set_run_id(description.run_id());
    return grpc::Status::OK;
  }

 private:
  void note(const std::string& method, const flow::FlowRef& ref) {
    calls.push_back(method);
    runs.push_back(ref.run_id());
  }
};

class DexcliFake : public ::testing::Test {
 protected:
  void SetUp() override { cli_.start(fake_, "dexcli-fake"); }
  void TearDown() override { cli_.stop(); }
  Result dexcli(const std::vector<std::string>& args) { return cli_.run(args); }

  FakeFlows fake_;
  testing::DexcliAgainst cli_;
};

flow::Attribute attr(const std::string& key, const std::string& instance = "") {
  flow::Attribute a;
  a.set_key(key);
  a.set_instance_key(instance);
  return a;
}

TEST_F(DexcliFake, AttributesGetSendsKeysAndRunAndPrintsEachType) {
  fake_.attributes.set_run_id("r-1");
  fake_.attributes.set_status(flow::FLOW_RUNNING);
  *fake_.attributes.add_attributes() = attr("counts", "eu");
  fake_.attributes.mutable_attributes(0)->mutable_value()->set_int64_value(3);
  *fake_.attributes.add_attributes() = attr("status");
  fake_.attributes.mutable_attributes(1)->mutable_value()->set_string_value("started");
  const Result r = dexcli(
      {"flow", "attributes", "get", "f1", "--run-id", "r-1", "--key", "counts", "--key", "status"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out_json(), json::parse(R"({"flowId": "f1", "runId": "r-1", "status": "RUNNING",
      "attributes": [{"key": "counts", "instanceKey": "eu", "type": "int64", "value": 3},
                     {"key": "status", "type": "string", "value": "started"}]})"))
      << r.out;
  ASSERT_EQ(fake_.gets.size(), 1u);
  EXPECT_EQ(fake_.gets[0].flow().flow_id(), "f1");
  EXPECT_EQ(fake_.gets[0].flow().run_id(), "r-1");
  EXPECT_EQ(std::vector<std::string>(fake_.gets[0].keys().begin(), fake_.gets[0].keys().end()),
            (std::vector<std::string>{"counts", "status"}));

  const Result table = dexcli({"flow", "attributes", "get", "f1", "--output", "table"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("f1 run r-1 (RUNNING)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("counts  eu        int64   3\n"), std::string::npos) << table.out;
}

TEST_F(DexcliFake, AttributesSetSendsTypedWritesInOneRequest) {
  const Result r = dexcli({"flow",
                           "attributes",
                           "set",
                           "f1",
                           "--yes",
                           "note=a b",
                           "--int",
                           "counts[eu]=-4",
                           "--double",
                           "ratio=0.5",
                           "--bool",
                           "ok=true",
                           "--datetime",
                           "due=2026-12-02T10:00:00.250Z",
                           "--json",
                           "doc={\"a\": 1}",
                           "--bytes-base64",
                           "raw=AP8=",
                           "--delete",
                           "counts[us]"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(fake_.sets.size(), 1u);
  const auto& w = fake_.sets[0].writes();
  ASSERT_EQ(w.size(), 8);
  EXPECT_EQ(w[0].key(), "counts");
  EXPECT_EQ(w[0].instance_key(), "eu");
  EXPECT_EQ(w[0].value().int64_value(), -4);
  EXPECT_EQ(w[1].value().double_value(), 0.5);
  EXPECT_TRUE(w[2].value().bool_value());
  EXPECT_EQ(w[3].value().datetime_unix_ms(), 1'796'205'600'250);
  EXPECT_EQ(w[4].value().json_value(), R"({"a":1})");
  EXPECT_EQ(w[5].value().bytes_value(), std::string("\x00\xff", 2));
  EXPECT_EQ(w[6].instance_key(), "us");
  EXPECT_FALSE(w[6].has_value());
  EXPECT_EQ(w[7].key(), "note");
  EXPECT_EQ(w[7].value().string_value(), "a b");
  const json out = r.out_json();
  EXPECT_EQ(out["flowId"], "f1");
  EXPECT_FALSE(out.contains("runId"));
  EXPECT_EQ(out["written"][3], json::parse(R"({"key": "due", "type": "datetime",
      "value": "2026-12-02T10:00:00.250Z", "unixMs": 1796205600250})"));
  EXPECT_EQ(out["written"][6], json::parse(R"({"key": "counts", "instanceKey": "us",
      "deleted": true})"));
}

TEST_F(DexcliFake, ARefusedWriteIsJsonOnStderrWithTheGrpcCode) {
  fake_.set_status =
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Attribute 'nope' is not declared");
  const Result r = dexcli({"flow", "attributes", "set", "f1", "--yes", "nope=1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.error(), json::parse(R"({"kind": "request", "operation": "flow attributes set",
      "message": "Attribute 'nope' is not declared", "grpcCode": "INVALID_ARGUMENT"})"))
      << r.err;
}

TEST_F(DexcliFake, UsageErrorsNameTheFlagAndSendNothing) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"flow", "attributes", "set", "f1", "--yes", "--int", "n=x"}, "--int n=x: "},
           {{"flow", "attributes", "set", "f1", "n=x"}, "add --yes"},
           {{"flow", "rpc", "f1", "describe"}, "add --yes"},
           {{"flow", "rpc", "f1", "describe", "--yes", "--rpc-timeout", "0s"}, "--rpc-timeout"},
           {{"flow", "rpc", "f1", "describe", "--yes", "--input", "{", "--input-file", "x"},
            "not both"},
           {{"flow", "inspect", "f1", "--output", "yaml"}, "--output must be json or table"}}) {
    const Result r = dexcli(args);
    EXPECT_EQ(r.code, 2) << args.back() << r.err;
    const json e = r.error();
    EXPECT_EQ(e["kind"], "usage");
    EXPECT_NE(e["message"].get<std::string>().find(message), std::string::npos) << e;
  }
  EXPECT_TRUE(fake_.calls.empty());
}

TEST_F(DexcliFake, RpcPrintsItsOutputAsJsonOrBase64) {
  flow::InvokeRpcResponse answer;
  answer.set_run_id("r-2");
  answer.mutable_output()->set_data(R"({"status": "started"})");
  fake_.rpc_answers.push_back({grpc::Status::OK, answer});
  answer.mutable_output()->set_data(std::string("\xff\x00", 2));
  fake_.rpc_answers.push_back({grpc::Status::OK, answer});

  Result r = dexcli({"flow", "rpc", "f1", "describe", "--yes", "--input", R"({"x": [1]})",
                     "--rpc-timeout", "20s", "--request-id", "q-1", "--run-id", "r-2", "--lock-key",
                     "acct-7", "--lock-key", "region-eu"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out_json(), json::parse(R"({"flowId": "f1", "runId": "r-2", "rpc": "describe",
      "requestId": "q-1", "output": {"status": "started"}})"));
  ASSERT_EQ(fake_.rpcs.size(), 1u);
  EXPECT_EQ(fake_.rpcs[0].name(), "describe");
  EXPECT_EQ(fake_.rpcs[0].input().data(), R"({"x":[1]})");
  EXPECT_EQ(fake_.rpcs[0].timeout_ms(), 20'000);
  EXPECT_EQ(fake_.rpcs[0].request_id(), "q-1");
  EXPECT_EQ(fake_.rpcs[0].flow().run_id(), "r-2");
  ASSERT_EQ(fake_.rpcs[0].lock_keys_size(), 2) << "each --lock-key, in order";
  EXPECT_EQ(fake_.rpcs[0].lock_keys(0), "acct-7");
  EXPECT_EQ(fake_.rpcs[0].lock_keys(1), "region-eu");

  r = dexcli({"flow", "rpc", "f1", "dump", "--yes"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json out = r.out_json();
  EXPECT_EQ(out["outputBase64"], "/wA=");
  EXPECT_FALSE(out.contains("output"));
  ASSERT_EQ(fake_.rpcs.size(), 2u);
  EXPECT_EQ(fake_.rpcs[1].input().data(), "{}");            // the default input
  EXPECT_EQ(fake_.rpcs[1].timeout_ms(), 0);                 // the server's default
  EXPECT_FALSE(fake_.rpcs[1].request_id().empty());         // a fresh one...
  EXPECT_EQ(out["requestId"], fake_.rpcs[1].request_id());  // ...printed for a retry
}

TEST_F(DexcliFake, RpcErrorsCarryTheServersCodeAndWords) {
  fake_.rpc_answers.push_back(
      {grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "run r-1 of Flow 'f1' is closed"), {}});
  fake_.rpc_answers.push_back(
      {grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "RPC 'slow' gave no result in 1s"), {}});
  Result r = dexcli({"flow", "rpc", "f1", "describe", "--yes"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.error(), json::parse(R"({"kind": "request", "operation": "flow rpc",
      "message": "run r-1 of Flow 'f1' is closed", "grpcCode": "FAILED_PRECONDITION"})"))
      << r.err;
  r = dexcli({"flow", "rpc", "f1", "slow", "--yes", "--rpc-timeout", "1s"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.error()["grpcCode"], "DEADLINE_EXCEEDED") << r.err;
  EXPECT_EQ(r.error()["message"], "RPC 'slow' gave no result in 1s") << r.err;
}

TEST_F(DexcliFake, AnUnavailableRpcIsSentAgainWithTheSameRequestId) {
  // A process that is not (or no longer) the active one: nothing of the RPC was committed.
  fake_.rpc_answers.push_back(
      {grpc::Status(grpc::StatusCode::UNAVAILABLE, "this process is a standby"), {}});
  flow::InvokeRpcResponse answer;
  answer.set_run_id("r-1");
  answer.mutable_output()->set_data("true");
  fake_.rpc_answers.push_back({grpc::Status::OK, answer});
  const Result r = dexcli({"flow", "rpc", "f1", "poke", "--yes"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out_json()["output"], true);
  ASSERT_EQ(fake_.rpcs.size(), 2u);
  EXPECT_EQ(fake_.rpcs[0].request_id(), fake_.rpcs[1].request_id());
}

TEST_F(DexcliFake, InspectPrintsOneRunInOneDocument) {
  fake_.description.set_flow_id("f1");
  fake_.description.set_run_id("r-9");
  fake_.description.set_flow_type("AttrRpcDemo");
  fake_.description.set_status(flow::FLOW_RUNNING);
  *fake_.state.mutable_flow() = fake_.description;
  auto* active = fake_.state.add_active();
  active->set_step_execution_id("Start-1");
  active->set_phase(flow::PHASE_WAITING);
  fake_.state.add_workers("w-1");
  fake_.attributes.set_run_id("r-9");
  *fake_.attributes.add_attributes() = attr("status");
  fake_.attributes.mutable_attributes(0)->mutable_value()->set_string_value("started");
  // Two pages of history: the command reads to the end.
  flow::GetHistoryEventsResponse page;
  page.set_run_id("r-9");
  page.add_events()->set_kind(flow::FLOW_STARTED);  // seq 0
  page.set_more(true);
  fake_.history_pages.push_back(page);
  page.clear_events();
  page.set_more(false);
  auto* e = page.add_events();
  e->set_seq(1);
  e->set_kind(flow::RPC_COMPLETED);
  e->set_rpc_name("set-status");
  *e->add_attribute_writes() = attr("status");
  e->mutable_attribute_writes(0)->mutable_value()->set_string_value("started");
  fake_.history_pages.push_back(page);

  const Result r = dexcli({"flow", "inspect", "f1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out_json(), json::parse(R"({"flowId": "f1", "runId": "r-9",
      "flow": {"flowId": "f1", "runId": "r-9", "flowType": "AttrRpcDemo", "status": "RUNNING"},
      "state": {"active": [{"stepExecutionId": "Start-1", "phase": "WAITING"}],
                "workers": ["w-1"]},
      "attributes": [{"key": "status", "type": "string", "value": "started"}],
      "subFlows": {"parents": [], "children": []},
      "history": [{"seq": 0, "kind": "FLOW_STARTED"},
                  {"seq": 1, "kind": "RPC_COMPLETED",
                   "attributeWrites": [{"key": "status", "type": "string", "value": "started"}],
                   "rpcName": "set-status"}]})"))
      << r.out;
  // Describe found the latest run; every other part is of that run.
  ASSERT_GE(fake_.calls.size(), 4u);
  EXPECT_EQ(fake_.calls[0], "DescribeFlow");
  EXPECT_EQ(fake_.runs[0], "");
  for (size_t i = 1; i < fake_.runs.size(); ++i) EXPECT_EQ(fake_.runs[i], "r-9") << fake_.calls[i];

  // The table lists the Attributes once, from the state (a server fills them in).
  *fake_.state.add_attributes()->mutable_attribute() = fake_.attributes.attributes(0);
  const Result table = dexcli({"flow", "inspect", "f1", "--output", "table"});
  ASSERT_EQ(table.code, 0) << table.err;
  const size_t first = table.out.find("Attributes:");
  EXPECT_EQ(table.out.find("Attributes:", first + 1), std::string::npos) << "listed twice\n"
                                                                         << table.out;
  for (const char* text :
       {"AttrRpcDemo", "Attributes:", "status  -         string  started", "SubFlows:\n(none)",
        "Start-1", "History (newest first):", "rpc set-status"}) {
    EXPECT_NE(table.out.find(text), std::string::npos) << text << "\n" << table.out;
  }
}

}  // namespace
}  // namespace dex::cli
