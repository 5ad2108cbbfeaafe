// Attributes, lock keys and RPCs in the C++ SDK: what a Flow declares, what a
// Step or an RPC handler reads from its task and writes in its result (through
// run_flow_task and through a Worker on the fake WorkerTaskService), and the
// Client calls against the fake dex.FlowService.
#include <gtest/gtest.h>

#include <future>

#include "fake_server.h"
#include "sdk/client.h"
#include "sdk/grpc_status.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;
using testing::FakeAdminService;
using testing::FakeFlowService;
using testing::FakeServer;
using testing::FakeWorkerTaskService;

using namespace std::string_literals;

constexpr Duration kWait = seconds(5);

const Attribute<std::string> kStatus{"status"};
const Attribute<int64_t> kCount{"count"};
const Attribute<double> kRatio{"ratio"};
const Attribute<bool> kFlag{"flag"};
const Attribute<DateTime> kDue{"due"};
const Attribute<JsonObject> kDoc{"doc"};
const Attribute<Bytes> kBlob{"blob"};
const AttributeMap<int64_t> kStock{"stock"};

using Method = std::function<StepDecision(Context&)>;

class FnStep final : public Step {
 public:
  FnStep(std::string type, Method execute, AttributeReads reads = {}, StepOptions options = {})
      : type_(std::move(type)),
        execute_(std::move(execute)),
        reads_(std::move(reads)),
        options_(std::move(options)) {}
  std::string type() const override { return type_; }
  StepDecision execute(Context& context) override { return execute_(context); }
  AttributeReads attribute_reads() const override { return reads_; }
  StepOptions options() const override { return options_; }

 private:
  std::string type_;
  Method execute_;
  AttributeReads reads_;
  StepOptions options_;
};

// A Step whose wait_for writes an Attribute.
class WaitingWriter final : public WaitingStep {
 public:
  std::string type() const override { return "Waiter"; }
  Wait wait_for(Context& ctx) override {
    kStatus.set(ctx, "waiting");
    return Wait::skip();
  }
  StepDecision execute(Context&) override { return StepDecision::dead_end(); }
};

// Flow type "Attrs": every Attribute above, Steps and RPCs given by the test.
class AttrFlow final : public Flow {
 public:
  std::vector<std::shared_ptr<Step>> step_list;
  std::vector<Rpc> rpc_list;
  std::vector<AttributeDef> schema{kStatus, kCount, kRatio, kFlag, kDue, kDoc, kBlob, kStock};
  std::string store;  // attribute_store()

  std::string type() const override { return "Attrs"; }
  std::string attribute_store() const override { return store; }
  std::string start_step() const override {
    return step_list.empty() ? "" : step_list.front()->type();
  }
  std::vector<std::shared_ptr<Step>> steps() const override { return step_list; }
  std::vector<Channel> channels() const override { return {Channel("events")}; }
  std::vector<AttributeDef> attributes() const override { return schema; }
  std::vector<Rpc> rpcs() const override { return rpc_list; }
};

flow::Attribute attr(const std::string& key, const std::string& instance,
                     flow::AttributeValue value) {
  flow::Attribute a;
  a.set_key(key);
  a.set_instance_key(instance);
  *a.mutable_value() = std::move(value);
  return a;
}

flow::FlowTask step_task(const std::string& step, flow::Method method = flow::EXECUTE) {
  flow::FlowTask t;
  t.set_task_id("t-" + step);
  t.set_flow_id("f-1");
  t.set_run_id("run-1");
  t.set_flow_type("Attrs");
  t.set_step_type(step);
  t.set_step_execution_id(step + "-1");
  t.set_method(method);
  t.set_attempt(1);
  t.mutable_input()->set_data(R"({"n":1})");
  return t;
}

flow::FlowTask rpc_task(const std::string& name, const json& input) {
  flow::FlowTask t;
  t.set_task_id("t-rpc-" + name);
  t.set_flow_id("f-1");
  t.set_run_id("run-1");
  t.set_flow_type("Attrs");
  t.set_step_execution_id("rpc:7.1");
  t.set_method(flow::RPC);
  t.set_rpc_name(name);
  t.set_attempt(1);
  *t.mutable_input() = to_payload(input);
  return t;
}

flow::FlowTaskResult run(Flow& flow, const flow::FlowTask& task) {
  return run_flow_task(
      flow, task, [] {}, [] { return false; });
}

std::string writes_text(const flow::FlowTaskResult& r) {
  std::string out;
  for (const auto& w : r.attribute_writes()) {
    out += w.key() + (w.instance_key().empty() ? "" : "[" + w.instance_key() + "]") + "=" +
           (w.has_value() ? w.value().ShortDebugString() : "<delete>") + ";";
  }
  return out;
}

// ---------------------------------------------------------------- declarations

TEST(AttributeDeclarations, TheFlowDeclaresItsAttributesReadsLockKeysAndRpcs) {
  AttrFlow f;
  StepOptions options;
  options.wait_for.lock_keys = {"w"};
  options.execute.lock_keys = {"balance", "ledger"};
  f.step_list = {
      std::make_shared<FnStep>("All", [](Context&) { return StepDecision::dead_end(); }),
      std::make_shared<FnStep>(
          "Narrow", [](Context&) { return StepDecision::dead_end(); },
          AttributeReads{kStatus, kStock}, options),
      std::make_shared<FnStep>(
          "None", [](Context&) { return StepDecision::dead_end(); }, AttributeReads::none())};
  f.rpc_list = {Rpc(
                    "approve", [](Context&, const json&) { return RpcResult(); },
                    RpcOptions{{"balance"}, AttributeReads{kCount}}),
                Rpc("describe", [](Context&, const json&) { return RpcResult(); })};
  ASSERT_TRUE(f.validate().is_ok()) << f.validate().message();
  const flow::FlowDeclaration d = f.declaration();

  ASSERT_EQ(d.attributes_size(), 8);
  EXPECT_EQ(d.attributes(0).key(), "status");
  EXPECT_EQ(d.attributes(0).type(), flow::ATTRIBUTE_STRING);
  EXPECT_FALSE(d.attributes(0).is_map());
  const flow::AttributeType types[] = {flow::ATTRIBUTE_STRING,   flow::ATTRIBUTE_INT64,
                                       flow::ATTRIBUTE_DOUBLE,   flow::ATTRIBUTE_BOOL,
                                       flow::ATTRIBUTE_DATETIME, flow::ATTRIBUTE_JSON,
                                       flow::ATTRIBUTE_BYTES,    flow::ATTRIBUTE_INT64};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(d.attributes(i).type(), types[i]) << i;
  EXPECT_EQ(d.attributes(7).key(), "stock");
  EXPECT_TRUE(d.attributes(7).is_map());

  // The default reads every declared key; a Step may narrow them, to none.
  ASSERT_EQ(d.steps_size(), 3);
  EXPECT_EQ(d.steps(0).attribute_reads_size(), 8);
  EXPECT_EQ(std::vector<std::string>(d.steps(1).attribute_reads().begin(),
                                     d.steps(1).attribute_reads().end()),
            (std::vector<std::string>{"status", "stock"}));
  EXPECT_EQ(d.steps(2).attribute_reads_size(), 0);
  EXPECT_EQ(std::vector<std::string>(d.steps(1).options().execute().lock_keys().begin(),
                                     d.steps(1).options().execute().lock_keys().end()),
            (std::vector<std::string>{"balance", "ledger"}));
  ASSERT_EQ(d.steps(1).options().wait_for().lock_keys_size(), 1);
  EXPECT_EQ(d.steps(1).options().wait_for().lock_keys(0), "w");
  EXPECT_EQ(d.steps(0).options().execute().lock_keys_size(), 0);

  ASSERT_EQ(d.rpcs_size(), 2);
  EXPECT_EQ(d.rpcs(0).name(), "approve");
  ASSERT_EQ(d.rpcs(0).lock_keys_size(), 1);
  EXPECT_EQ(d.rpcs(0).lock_keys(0), "balance");
  ASSERT_EQ(d.rpcs(0).attribute_reads_size(), 1);
  EXPECT_EQ(d.rpcs(0).attribute_reads(0), "count");
  EXPECT_EQ(d.rpcs(1).name(), "describe");
  EXPECT_EQ(d.rpcs(1).attribute_reads_size(), 8);
}

TEST(AttributeDeclarations, ValidateNamesARepeatedKeyAnUndeclaredReadAndARepeatedRpc) {
  AttrFlow twice;
  twice.schema.push_back(Attribute<bool>("status"));
  EXPECT_EQ(twice.validate().code(), Code::kInvalidArgument);
  EXPECT_NE(twice.validate().message().find("Attribute 'status' twice"), std::string::npos)
      << twice.validate().message();

  AttrFlow reads;
  reads.step_list = {std::make_shared<FnStep>(
      "S", [](Context&) { return StepDecision::dead_end(); },
      AttributeReads{Attribute<std::string>("nope")})};
  EXPECT_NE(reads.validate().message().find("Step 'S' reads Attribute 'nope'"), std::string::npos)
      << reads.validate().message();

  AttrFlow rpcs;
  rpcs.rpc_list = {Rpc("r", [](Context&, const json&) { return RpcResult(); }),
                   Rpc("r", [](Context&, const json&) { return RpcResult(); })};
  EXPECT_NE(rpcs.validate().message().find("RPC 'r' twice"), std::string::npos)
      << rpcs.validate().message();

  AttrFlow rpc_reads;
  rpc_reads.rpc_list = {Rpc(
      "r", [](Context&, const json&) { return RpcResult(); },
      RpcOptions{{}, AttributeReads::of_keys({"ghost"})})};
  EXPECT_NE(rpc_reads.validate().message().find("RPC 'r' reads Attribute 'ghost'"),
            std::string::npos)
      << rpc_reads.validate().message();
}

// ---------------------------------------------------------------- Steps

TEST(StepAttributes, AStepReadsEveryTypeFromItsTaskAndWritesInOrderInItsResult) {
  AttrFlow f;
  std::string seen;
  f.step_list = {std::make_shared<FnStep>("S", [&](Context& ctx) {
    seen = *kStatus.get(ctx) + "|" + std::to_string(*kCount.get(ctx)) + "|" +
           std::to_string(*kRatio.get(ctx)) + "|" + (*kFlag.get(ctx) ? "true" : "false") + "|" +
           std::to_string(kDue.get(ctx)->unix_ms) + "|" + kDoc.get(ctx)->text() + "|" +
           kBlob.get(ctx)->data + "|" + std::to_string(*kStock.get(ctx, "sku-1")) + "|" +
           (kStock.get(ctx, "sku-9") ? "?" : "none");
    kStatus.set(ctx, "charged");
    kCount.set(ctx, *kCount.get(ctx) + 1);
    kStock.set(ctx, "sku-2", 7);
    kStock.remove(ctx, "sku-1");
    kDoc.set(ctx, json{{"a", 1}});
    kDue.set(ctx, DateTime::from_unix_ms(1'700'000'000'000));
    kBlob.remove(ctx);
    return StepDecision::dead_end();
  })};
  flow::FlowTask t = step_task("S");
  *t.add_attributes() = kStatus.write("new");
  *t.add_attributes() = kCount.write(41);
  *t.add_attributes() = kRatio.write(0.5);
  *t.add_attributes() = kFlag.write(true);
  *t.add_attributes() = kDue.write(DateTime::from_unix_ms(1234));
  *t.add_attributes() = kDoc.write(json{{"k", "v"}});
  *t.add_attributes() = kBlob.write(Bytes{std::string("b\0y", 3)});
  *t.add_attributes() = kStock.write("sku-1", 3);
  auto r = run(f, t);
  ASSERT_TRUE(r.has_decision()) << r.DebugString();
  EXPECT_EQ(seen, "new|41|0.500000|true|1234|{\"k\":\"v\"}|b\0y|3|none"s);
  EXPECT_EQ(writes_text(r),
            "status=string_value: \"charged\";count=int64_value: 42;"
            "stock[sku-2]=int64_value: 7;stock[sku-1]=<delete>;"
            "doc=json_value: \"{\\\"a\\\":1}\";due=datetime_unix_ms: 1700000000000;"
            "blob=<delete>;");
}

TEST(StepAttributes, AGetAfterASetInTheSameMethodSeesTheNewValueAndMapsListTheirInstances) {
  AttrFlow f;
  std::vector<std::string> before, after;
  std::map<std::string, int64_t> all;
  std::optional<std::string> status_after_remove;
  std::optional<std::string> status_after_set;
  f.step_list = {std::make_shared<FnStep>("S", [&](Context& ctx) {
    before = kStock.instances(ctx);
    kStock.set(ctx, "c", 30);
    kStock.remove(ctx, "a");
    after = kStock.instances(ctx);
    all = kStock.all(ctx);
    kStatus.remove(ctx);
    status_after_remove = kStatus.get(ctx);
    kStatus.set(ctx, "again");
    status_after_set = kStatus.get(ctx);
    return StepDecision::dead_end();
  })};
  flow::FlowTask t = step_task("S");
  *t.add_attributes() = kStatus.write("old");
  *t.add_attributes() = kStock.write("a", 10);
  *t.add_attributes() = kStock.write("b", 20);
  auto r = run(f, t);
  ASSERT_TRUE(r.has_decision()) << r.DebugString();
  EXPECT_EQ(before, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(after, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(all, (std::map<std::string, int64_t>{{"b", 20}, {"c", 30}}));
  EXPECT_EQ(status_after_remove, std::nullopt);
  EXPECT_EQ(status_after_set, "again");
  EXPECT_EQ(r.attribute_writes_size(), 4);
}

TEST(StepAttributes, WaitForWritesTooAlongsideItsWait) {
  AttrFlow f;
  f.step_list = {std::make_shared<WaitingWriter>()};
  auto r = run(f, step_task("Waiter", flow::WAIT_FOR));
  ASSERT_TRUE(r.has_wait()) << r.DebugString();
  EXPECT_EQ(writes_text(r), "status=string_value: \"waiting\";");
}

// The error of a Step whose body is `body`, with the task carrying status = "x".
flow::FlowTaskResult failing(const std::function<void(Context&)>& body, AttributeReads reads = {}) {
  AttrFlow f;
  f.step_list = {std::make_shared<FnStep>(
      "S",
      [&](Context& ctx) {
        body(ctx);
        return StepDecision::dead_end();
      },
      std::move(reads))};
  flow::FlowTask t = step_task("S");
  *t.add_attributes() = kStatus.write("x");
  return run(f, t);
}

void expect_error(const flow::FlowTaskResult& r, const std::string& fragment) {
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_TRUE(r.error().non_retryable()) << r.DebugString();
  EXPECT_NE(r.error().message().find(fragment), std::string::npos) << r.error().message();
  EXPECT_EQ(r.attribute_writes_size(), 0);
  EXPECT_EQ(r.publishes_size(), 0);
}

TEST(StepAttributes, MisuseFailsTheAttemptNonRetryablyNamingTheKey) {
  // A key the Step does not read, with what it does read.
  expect_error(failing([](Context& ctx) { (void)kCount.get(ctx); }, AttributeReads{kStatus}),
               "Step 'S' does not read Attribute 'count' (its attribute_reads: status)");
  expect_error(failing([](Context& ctx) { (void)kStock.instances(ctx); }, AttributeReads::none()),
               "does not read Attribute 'stock' (its attribute_reads: none)");
  // The writes made before the failure are dropped with the rest.
  expect_error(failing([](Context& ctx) {
                 kStatus.set(ctx, "y");
                 ctx.publish(Channel("events"), 1);
                 (void)Attribute<std::string>("ghost").get(ctx);
               }),
               "Attribute 'ghost' is not declared by Flow type 'Attrs'");
  expect_error(failing([](Context& ctx) { Attribute<int64_t>("ghost").set(ctx, 1); }),
               "Attribute 'ghost' is not declared");
  // A definition whose type or kind differs from the declaration.
  expect_error(failing([](Context& ctx) { (void)Attribute<int64_t>("status").get(ctx); }),
               "int64 Attribute 'status' does not match its declaration by Flow type 'Attrs': "
               "string Attribute 'status'");
  expect_error(failing([](Context& ctx) { AttributeMap<std::string>("status").set(ctx, "k", ""); }),
               "string AttributeMap 'status' does not match");
  expect_error(failing([](Context& ctx) { kStock.set(ctx, "", 1); }),
               "AttributeMap 'stock': the instance key is empty");
}

TEST(StepAttributes, AValueOfAnotherTypeInTheTaskFailsNamingTheKey) {
  AttrFlow f;
  f.step_list = {std::make_shared<FnStep>("S", [](Context& ctx) {
    (void)kCount.get(ctx);
    return StepDecision::dead_end();
  })};
  flow::FlowTask t = step_task("S");
  *t.add_attributes() = attr("count", "", attribute_value("not a number"));
  expect_error(run(f, t), "Attribute 'count' does not hold a int64 value");
}

TEST(AttributeValues, JsonObjectsAreCheckedAndDateTimesConvert) {
  EXPECT_THROW(JsonObject(json::array({1, 2})), std::invalid_argument);
  EXPECT_THROW(JsonObject(json("text")), std::invalid_argument);
  EXPECT_EQ(JsonObject(json{{"a", 1}}).text(), R"({"a":1})");
  EXPECT_FALSE(JsonObject::parse("[1]").has_value());
  EXPECT_FALSE(JsonObject::parse("{oops").has_value());
  EXPECT_EQ(JsonObject::parse(R"({"b":2})")->value()["b"], 2);
  const auto t =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1'700'000'000'123));
  DateTime d = t;
  EXPECT_EQ(d.unix_ms, 1'700'000'000'123);
  EXPECT_EQ(d.time_point(), t);
  EXPECT_EQ(attribute_value(d).datetime_unix_ms(), 1'700'000'000'123);
  EXPECT_EQ(attribute_value(true).bool_value(), true);
  EXPECT_EQ(attribute_value(Bytes{"\x01\x02"}).bytes_value(), "\x01\x02");
  // A stored JSON value that is not an object does not read as a JsonObject.
  flow::GetAttributesResponse response;
  flow::AttributeValue bad;
  bad.set_json_value("[1]");
  *response.add_attributes() = attr("doc", "", bad);
  EXPECT_THROW((void)kDoc.get(response), AttributeError);
}

// ---------------------------------------------------------------- RPCs

struct Approval {
  std::string by;
  int64_t amount = 0;
};
void from_json(const json& j, Approval& a) {
  j.at("by").get_to(a.by);
  j.at("amount").get_to(a.amount);
}
void to_json(json& j, const Approval& a) { j = json{{"by", a.by}, {"amount", a.amount}}; }

TEST(Rpcs, AnRpcTaskRunsItsHandlerAndTheResultCarriesOutputWritesPublishesAndNextSteps) {
  AttrFlow f;
  std::string ctx_seen;
  f.rpc_list = {Rpc("approve", [&](Context& ctx, const json& input) {
    ctx_seen = ctx.flow_id() + "|" + ctx.run_id() + "|" + ctx.rpc_name() + "|" + ctx.rpc_id() +
               "|" + ctx.step_type() + "|" + ctx.step_execution_id() + "|" +
               (ctx.is_rpc() ? "rpc" : "step") + "|" + ctx.input().dump();
    kStatus.set(ctx, "approved by " + input["by"].get<std::string>());
    ctx.publish(Channel("events"), {{"approved", true}});
    return RpcResult({{"previous", *kStatus.get(ctx)}, {"count", *kCount.get(ctx)}},
                     {Movement{"Ship", {{"fast", true}}, std::nullopt}});
  })};
  flow::FlowTask t = rpc_task("approve", {{"by", "ann"}});
  *t.add_attributes() = kCount.write(3);
  auto r = run(f, t);
  ASSERT_TRUE(r.has_rpc()) << r.DebugString();
  EXPECT_EQ(r.task_id(), "t-rpc-approve");
  EXPECT_EQ(ctx_seen, R"(f-1|run-1|approve|rpc:7.1|||rpc|{"by":"ann"})");
  EXPECT_EQ(from_payload(r.rpc().output()), (json{{"previous", "approved by ann"}, {"count", 3}}));
  ASSERT_EQ(r.rpc().next_steps_size(), 1);
  EXPECT_EQ(r.rpc().next_steps(0).step_type(), "Ship");
  EXPECT_EQ(from_payload(r.rpc().next_steps(0).input()), (json{{"fast", true}}));
  EXPECT_EQ(writes_text(r), "status=string_value: \"approved by ann\";");
  ASSERT_EQ(r.publishes_size(), 1);
  EXPECT_EQ(r.publishes(0).channel(), "events");
  EXPECT_EQ(from_payload(r.publishes(0).messages(0)), (json{{"approved", true}}));
  EXPECT_FALSE(r.has_locals());
}

TEST(Rpcs, ATypedHandlerGetsItsInputConvertedAndItsOutputConverted) {
  AttrFlow f;
  f.rpc_list = {Rpc::typed<Approval>("typed",
                                     [](Context&, const Approval& a) {
                                       return Approval{a.by + "!", a.amount * 2};
                                     }),
                Rpc::typed<Approval>("nothing", [](Context&, const Approval&) {})};
  auto r = run(f, rpc_task("typed", {{"by", "bo"}, {"amount", 21}}));
  ASSERT_TRUE(r.has_rpc()) << r.DebugString();
  EXPECT_EQ(from_payload(r.rpc().output()), (json{{"by", "bo!"}, {"amount", 42}}));
  auto none = run(f, rpc_task("nothing", {{"by", "bo"}, {"amount", 1}}));
  ASSERT_TRUE(none.has_rpc()) << none.DebugString();
  EXPECT_TRUE(none.rpc().output().data().empty());
  // An input that does not convert fails the RPC naming it.
  auto bad = run(f, rpc_task("typed", {{"by", 5}}));
  ASSERT_TRUE(bad.has_error()) << bad.DebugString();
  EXPECT_NE(bad.error().message().find("the input of RPC 'typed' does not convert"),
            std::string::npos)
      << bad.error().message();
}

TEST(Rpcs, AThrowingHandlerGivesATaskErrorWithItsMessageAndNothingElse) {
  AttrFlow f;
  f.rpc_list = {
      Rpc("boom",
          [](Context& ctx, const json&) -> RpcResult {
            kStatus.set(ctx, "half");
            ctx.publish(Channel("events"), 1);
            throw std::runtime_error("the ledger is closed");
          }),
      Rpc(
          "narrow", [](Context& ctx, const json&) -> RpcResult { return json(*kStatus.get(ctx)); },
          RpcOptions{{}, AttributeReads{kCount}})};
  auto r = run(f, rpc_task("boom", nullptr));
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().message(), "the ledger is closed");
  EXPECT_EQ(r.attribute_writes_size(), 0);
  EXPECT_EQ(r.publishes_size(), 0);
  // Reads are checked for RPCs as for Steps.
  auto narrow = run(f, rpc_task("narrow", nullptr));
  ASSERT_TRUE(narrow.has_error());
  EXPECT_NE(narrow.error().message().find("RPC 'narrow' does not read Attribute 'status'"),
            std::string::npos)
      << narrow.error().message();
  // An RPC this Flow does not have.
  auto unknown = run(f, rpc_task("ghost", nullptr));
  ASSERT_TRUE(unknown.has_error());
  EXPECT_NE(unknown.error().message().find("has no RPC 'ghost'"), std::string::npos)
      << unknown.error().message();
}

// ---------------------------------------------------------------- the Attribute Store

TEST(AttributeStoreDeclarations, ASyncedAttributeDeclaresSyncWithOrWithoutAnIndex) {
  const Attribute<std::string> stage{"stage", kSync};
  const Attribute<std::string> customer{"customer", flow::INDEX_KEYWORD, kSync};
  const Attribute<DateTime> placed{"placed-at", {flow::INDEX_DATETIME, "PlacedAt"}, kSync};
  const Attribute<std::vector<std::string>> tags{"tags", flow::INDEX_KEYWORD_ARRAY, kSync};
  for (const AttributeDef* a :
       std::initializer_list<const AttributeDef*>{&stage, &customer, &placed, &tags}) {
    EXPECT_TRUE(a->synced()) << a->key();
    EXPECT_TRUE(a->declaration().sync()) << a->key();
  }
  EXPECT_FALSE(stage.declaration().has_index());
  EXPECT_EQ(customer.declaration().index().type(), flow::INDEX_KEYWORD);
  EXPECT_EQ(placed.declaration().index().index_key(), "PlacedAt");
  // Not synced unless declared so.
  EXPECT_FALSE(kStatus.synced());
  EXPECT_FALSE(kStatus.declaration().sync());
  EXPECT_FALSE(kStock.declaration().sync());
  // The index checks still apply to a synced Attribute.
  EXPECT_THROW((Attribute<std::string>{"total", flow::INDEX_DOUBLE, kSync}), AttributeError);
  EXPECT_THROW((Attribute<std::vector<std::string>>{"tags", kSync}), AttributeError);
}

TEST(AttributeStoreDeclarations, ASyncedAttributeMapIsRefusedNamingIt) {
  // A typed AttributeMap has no synced constructor: a compile-time error.
  static_assert(!std::is_constructible_v<AttributeMap<int64_t>, std::string, Sync>);
  static_assert(std::is_constructible_v<Attribute<int64_t>, std::string, Sync>);
  // An untyped definition of a synced map throws when constructed, as the
  // server would refuse its declaration.
  try {
    AttributeDef map("stock", flow::ATTRIBUTE_INT64, true, kSync);
    FAIL() << "a synced AttributeMap was constructed";
  } catch (const AttributeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "int64 AttributeMap 'stock' cannot sync: only plain Attributes sync to the "
              "Attribute Store (one column each)");
  }
  EXPECT_THROW(AttributeDef("stock", flow::ATTRIBUTE_INT64, true, flow::INDEX_INT, kSync),
               AttributeError);
  EXPECT_TRUE(AttributeDef("count", flow::ATTRIBUTE_INT64, false, kSync).synced());
}

TEST(AttributeStoreDeclarations, TheFlowDeclaresItsStoreAndValidateRefusesABadName) {
  AttrFlow f;
  f.step_list = {std::make_shared<FnStep>("A", [](Context&) { return StepDecision::dead_end(); })};
  EXPECT_EQ(f.declaration().attribute_store(), "");
  f.store = "orders";
  f.schema = {Attribute<std::string>{"stage", kSync}, kCount, kStock};
  EXPECT_TRUE(f.validate().is_ok());
  const flow::FlowDeclaration d = f.declaration();
  EXPECT_EQ(d.attribute_store(), "orders");
  ASSERT_EQ(d.attributes_size(), 3);
  EXPECT_TRUE(d.attributes(0).sync());
  EXPECT_FALSE(d.attributes(1).sync());
  EXPECT_FALSE(d.attributes(2).sync());

  f.store = "orders\tdb";
  Status bad = f.validate();
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.message(), "Flow type 'Attrs': its attribute_store contains a control character");
  f.store = std::string(256, 's');
  EXPECT_EQ(f.validate().message(),
            "Flow type 'Attrs': its attribute_store is longer than 255 bytes");
}

TEST(AttributeStoreDeclarations, StartOptionsAndASubFlowsStartCarryTheStore) {
  StartOptions options;
  EXPECT_EQ(options.proto.attribute_store(), "");
  options.attribute_store("audit").initial(kStatus, std::string("new"));
  EXPECT_EQ(options.proto.attribute_store(), "audit");
  SubFlowOptions child;
  child.start.attribute_store("child-store");
  const Condition c = SubFlow::start("Child", json::object(), child);
  EXPECT_EQ(c.proto().sub_flow().options().attribute_store(), "child-store");
}

// ---------------------------------------------------------------- through a Worker

class AttributeWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FakeServer>(workers_, flows_, admin_);
    WorkerOptions options;
    options.server_address = server_->address();
    options.worker_id = "attr-worker";
    options.max_concurrent_tasks = 2;
    options.reconnect_backoff_initial = milliseconds(20);
    options.reconnect_backoff_max = milliseconds(200);
    options.shutdown_timeout = seconds(3);
    flow_ = std::make_shared<AttrFlow>();
    flow_->step_list = {std::make_shared<FnStep>("Count", [](Context& ctx) {
      kCount.set(ctx, kCount.get(ctx).value_or(0) + 1);
      return StepDecision::graceful_complete(*kCount.get(ctx));
    })};
    flow_->rpc_list = {Rpc(
        "bump",
        [](Context& ctx, const json& input) -> RpcResult {
          if (input.is_null()) throw FlowFailure("nothing to bump by");
          kStock.set(ctx, "sku", input.get<int64_t>());
          return json("bumped");
        },
        RpcOptions{{"stock-lock"}, AttributeReads{kStock}})};
    worker_ = std::make_unique<Worker>(options);
    worker_->host(flow_);
  }
  void TearDown() override {
    worker_->shutdown();
    if (run_.valid()) {
      ASSERT_EQ(run_.wait_for(seconds(10)), std::future_status::ready);
    }
  }
  void start() {
    run_ = std::async(std::launch::async, [this] { return worker_->run(); });
    ASSERT_TRUE(workers_.wait_for_streams(1, kWait));
  }

  FakeWorkerTaskService workers_;
  FakeFlowService flows_;
  FakeAdminService admin_;
  std::unique_ptr<FakeServer> server_;
  std::shared_ptr<AttrFlow> flow_;
  std::unique_ptr<Worker> worker_;
  std::future<Status> run_;
};

TEST_F(AttributeWorkerTest, TheHelloCarriesTheSchemaAndTheServerGetsStepAndRpcResults) {
  start();
  const flow::FlowDeclaration d = workers_.hellos().at(0).flows(0);
  EXPECT_EQ(d.attributes_size(), 8);
  ASSERT_EQ(d.rpcs_size(), 1);
  EXPECT_EQ(d.rpcs(0).lock_keys(0), "stock-lock");

  flow::FlowTask step = step_task("Count");
  *step.add_attributes() = kCount.write(9);
  ASSERT_TRUE(workers_.send_task(step));
  auto s = workers_.wait_for_result(step.task_id(), kWait);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(from_payload(s->result.decision().graceful_complete()), 10);
  EXPECT_EQ(writes_text(s->result), "count=int64_value: 10;");

  ASSERT_TRUE(workers_.send_task(rpc_task("bump", 5)));
  auto r = workers_.wait_for_result("t-rpc-bump", kWait);
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->result.has_rpc()) << r->result.DebugString();
  EXPECT_EQ(from_payload(r->result.rpc().output()), "bumped");
  EXPECT_EQ(writes_text(r->result), "stock[sku]=int64_value: 5;");

  flow::FlowTask failing = rpc_task("bump", nullptr);
  failing.set_task_id("t-fail");
  ASSERT_TRUE(workers_.send_task(failing));
  auto f = workers_.wait_for_result("t-fail", kWait);
  ASSERT_TRUE(f.has_value());
  ASSERT_TRUE(f->result.has_error()) << f->result.DebugString();
  EXPECT_EQ(f->result.error().message(), "nothing to bump by");
}

TEST_F(AttributeWorkerTest, TheHelloCarriesSyncedAttributesAndTheFlowsAttributeStore) {
  flow_->store = "orders";
  flow_->schema = {Attribute<std::string>{"status", kSync},
                   Attribute<int64_t>{"count", flow::INDEX_INT, kSync}, kRatio, kStock};
  start();
  const flow::FlowDeclaration d = workers_.hellos().at(0).flows(0);
  EXPECT_EQ(d.attribute_store(), "orders");
  ASSERT_EQ(d.attributes_size(), 4);
  EXPECT_TRUE(d.attributes(0).sync());
  EXPECT_TRUE(d.attributes(1).sync());
  EXPECT_EQ(d.attributes(1).index().type(), flow::INDEX_INT);
  EXPECT_FALSE(d.attributes(2).sync());
  EXPECT_FALSE(d.attributes(3).sync());
  EXPECT_TRUE(d.attributes(3).is_map());
}

TEST_F(AttributeWorkerTest, RunRefusesAFlowThatIsNotValidNamingWhy) {
  flow_->rpc_list.push_back(flow_->rpc_list.front());
  Status s = worker_->run();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("RPC 'bump' twice"), std::string::npos) << s.message();
  EXPECT_TRUE(workers_.hellos().empty());
}

// ---------------------------------------------------------------- the Client

class AttributeClientTest : public ::testing::Test {
 protected:
  AttributeClientTest() : server_(workers_, flows_, admin_) {
    options_.server_address = server_.address();
    options_.timeout = seconds(5);
  }
  FakeWorkerTaskService workers_;
  FakeFlowService flows_;
  FakeAdminService admin_;
  FakeServer server_;
  ClientOptions options_;
};

TEST_F(AttributeClientTest, GetAttributesAsksForTheKeysAndReadsTyped) {
  flows_.set_attributes_answer(
      {kStatus.write("shipped"), kCount.write(4), kStock.write("a", 1), kStock.write("b", 2)});
  Client client(options_);
  auto all = client.get_attributes("f-1");
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  EXPECT_EQ(all->run_id(), "run-attrs");
  EXPECT_EQ(kStatus.get(*all), "shipped");
  EXPECT_EQ(kCount.get(*all), 4);
  EXPECT_EQ(kFlag.get(*all), std::nullopt);
  EXPECT_EQ(kStock.get(*all, "b"), 2);
  EXPECT_EQ(kStock.all(*all), (std::map<std::string, int64_t>{{"a", 1}, {"b", 2}}));
  EXPECT_THROW((void)Attribute<bool>("status").get(*all), AttributeError);

  auto some = client.get_attributes("f-1", "run-7", {"count"});
  ASSERT_TRUE(some.is_ok());
  EXPECT_EQ(some->attributes_size(), 1);
  const auto requests = flows_.attribute_gets();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].keys_size(), 0);
  EXPECT_EQ(requests[1].flow().flow_id(), "f-1");
  EXPECT_EQ(requests[1].flow().run_id(), "run-7");
  ASSERT_EQ(requests[1].keys_size(), 1);
  EXPECT_EQ(requests[1].keys(0), "count");

  auto missing = client.get_attributes("missing");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(missing.status().is_not_found());
  EXPECT_EQ(missing.status().message(), "NOT_FOUND: no Flow with ID 'missing'");
}

TEST_F(AttributeClientTest, SetAttributesSendsTheWritesInOrderAndMapsRefusals) {
  Client client(options_);
  ASSERT_TRUE(client
                  .set_attributes("f-1",
                                  {kStatus.write("paid"), kStock.write("sku", 3),
                                   kStock.deletion("old"), kBlob.deletion()},
                                  "run-1")
                  .is_ok());
  const auto sets = flows_.attribute_sets();
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].flow().flow_id(), "f-1");
  EXPECT_EQ(sets[0].flow().run_id(), "run-1");
  ASSERT_EQ(sets[0].writes_size(), 4);
  EXPECT_EQ(sets[0].writes(0).value().string_value(), "paid");
  EXPECT_EQ(sets[0].writes(1).instance_key(), "sku");
  EXPECT_EQ(sets[0].writes(1).value().int64_value(), 3);
  EXPECT_EQ(sets[0].writes(2).instance_key(), "old");
  EXPECT_FALSE(sets[0].writes(2).has_value());
  EXPECT_EQ(sets[0].writes(3).key(), "blob");
  EXPECT_FALSE(sets[0].writes(3).has_value());

  Status closed = client.set_attributes("f-done", {kStatus.write("late")});
  EXPECT_TRUE(closed.is_precondition_failed());
  EXPECT_EQ(sdk_internal::grpc_code_of(closed), "FAILED_PRECONDITION");
  Status undeclared =
      client.set_attributes("f-1", {Attribute<std::string>("undeclared").write("x")});
  EXPECT_EQ(undeclared.code(), Code::kInvalidArgument);
  EXPECT_EQ(undeclared.message(),
            "INVALID_ARGUMENT: Attribute 'undeclared' is not declared by Flow type 'Echo'");
}

TEST_F(AttributeClientTest, StartCarriesTypedInitialAttributes) {
  Client client(options_);
  StartOptions options;
  options.proto.set_request_id("req-1");
  options.initial(kStatus, std::string("new")).initial(kStock, "sku-1", int64_t{4});
  ASSERT_TRUE(client.start("Attrs", "f-1", json::object(), options).is_ok());
  const auto starts = flows_.starts();
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].options().request_id(), "req-1");
  ASSERT_EQ(starts[0].options().initial_attributes_size(), 2);
  EXPECT_EQ(starts[0].options().initial_attributes(0).key(), "status");
  EXPECT_EQ(starts[0].options().initial_attributes(0).value().string_value(), "new");
  EXPECT_EQ(starts[0].options().initial_attributes(1).instance_key(), "sku-1");
  EXPECT_EQ(starts[0].options().initial_attributes(1).value().int64_value(), 4);
}

TEST_F(AttributeClientTest, StartCarriesTheAttributeStore) {
  Client client(options_);
  StartOptions options;
  options.attribute_store("orders-eu");
  ASSERT_TRUE(client.start("Attrs", "f-1", json::object(), options).is_ok());
  ASSERT_TRUE(client.start("Attrs", "f-2", json::object()).is_ok());
  const auto starts = flows_.starts();
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].options().attribute_store(), "orders-eu");
  EXPECT_EQ(starts[1].options().attribute_store(), "");  // the Flow's default
}

TEST_F(AttributeClientTest, WaitForAttributeMatchesTimesOutAndEndsWithTheRun) {
  flows_.set_attributes_answer({kStatus.write("shipped"), kStock.write("a", 1)});
  Client client(options_);
  auto matched = client.wait_for_attribute("f-1", kStatus, std::string("shipped"), seconds(5));
  ASSERT_TRUE(matched.is_ok()) << matched.status().message();
  EXPECT_TRUE(matched->matched());
  auto instance = client.wait_for_attribute("f-1", kStock, "a", int64_t{1}, seconds(5), "run-2");
  ASSERT_TRUE(instance.is_ok());
  EXPECT_TRUE(instance->matched());

  auto start = std::chrono::steady_clock::now();
  auto not_yet = client.wait_for_attribute("f-1", kStatus, std::string("lost"), milliseconds(300));
  ASSERT_TRUE(not_yet.is_ok());
  EXPECT_FALSE(not_yet->matched());
  EXPECT_EQ(not_yet->current().string_value(), "shipped");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(250));

  auto closed = client.wait_for_attribute("f-done", "status", attribute_value("x"), seconds(5));
  ASSERT_TRUE(closed.is_ok());
  EXPECT_FALSE(closed->matched());
  EXPECT_EQ(closed->status(), flow::FLOW_COMPLETED);

  const auto waits = flows_.attribute_waits();
  ASSERT_GE(waits.size(), 4u);  // the short wait may ask once more for its last millisecond
  EXPECT_EQ(waits[0].key(), "status");
  EXPECT_EQ(waits[0].value().string_value(), "shipped");
  EXPECT_EQ(waits[1].instance_key(), "a");
  EXPECT_EQ(waits[1].flow().run_id(), "run-2");
  EXPECT_EQ(waits[1].value().int64_value(), 1);
  EXPECT_GT(waits[2].timeout_ms(), 0);
  EXPECT_LE(waits[2].timeout_ms(), 300);
  EXPECT_EQ(waits.back().flow().flow_id(), "f-done");

  // Not a scalar: refused before anything is sent.
  auto object = client.wait_for_attribute("f-1", kDoc, JsonObject(json{{"a", 1}}), seconds(1));
  ASSERT_FALSE(object.is_ok());
  EXPECT_EQ(object.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(flows_.attribute_waits().size(), waits.size());
}

TEST_F(AttributeClientTest, InvokeRpcSendsNameInputTimeoutAndRequestIdAndReturnsTheOutput) {
  Client client(options_);
  auto out = client.invoke_rpc("f-1", "approve", {{"by", "ann"}},
                               {.timeout = seconds(3), .request_id = "req-9", .run_id = "run-4"});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(*out, (json{{"rpc", "approve"}, {"input", {{"by", "ann"}}}}));
  auto plain = client.invoke_rpc("f-1", "describe", nullptr);
  ASSERT_TRUE(plain.is_ok());
  const auto rpcs = flows_.rpcs();
  ASSERT_EQ(rpcs.size(), 2u);
  EXPECT_EQ(rpcs[0].flow().flow_id(), "f-1");
  EXPECT_EQ(rpcs[0].flow().run_id(), "run-4");
  EXPECT_EQ(rpcs[0].name(), "approve");
  EXPECT_EQ(rpcs[0].timeout_ms(), 3000);
  EXPECT_EQ(rpcs[0].request_id(), "req-9");
  EXPECT_EQ(from_payload(rpcs[0].input()), (json{{"by", "ann"}}));
  // Defaults: the server's timeout, a fresh request ID, no input.
  EXPECT_EQ(rpcs[1].timeout_ms(), 0);
  EXPECT_FALSE(rpcs[1].request_id().empty());
  EXPECT_TRUE(rpcs[1].input().data().empty());
}

struct Echoed {
  std::string rpc;
  Approval input;
};
void from_json(const json& j, Echoed& e) {
  j.at("rpc").get_to(e.rpc);
  j.at("input").get_to(e.input);
}

TEST_F(AttributeClientTest, TypedInvokeRpcConvertsInputAndOutput) {
  Client client(options_);
  StatusOr<Echoed> out = client.invoke_rpc<Echoed>("f-1", "approve", Approval{"cy", 12});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out->rpc, "approve");
  EXPECT_EQ(out->input.by, "cy");
  EXPECT_EQ(out->input.amount, 12);
  StatusOr<Echoed> text = client.invoke_rpc<Echoed>("f-1", "text", Approval{"cy", 1});
  ASSERT_FALSE(text.is_ok());
  EXPECT_EQ(text.status().code(), Code::kInvalidArgument);
  EXPECT_NE(text.status().message().find("the output of RPC 'text' does not convert"),
            std::string::npos)
      << text.status().message();
}

TEST_F(AttributeClientTest, InvokeRpcErrorsKeepTheirGrpcCodes) {
  Client client(options_);
  auto failed = client.invoke_rpc("f-1", "fail", nullptr);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_TRUE(failed.status().is_precondition_failed());
  EXPECT_EQ(failed.status().message(),
            "FAILED_PRECONDITION: RPC 'fail' failed: the handler says no");

  auto closed = client.invoke_rpc("f-done", "approve", nullptr);
  EXPECT_EQ(sdk_internal::grpc_code_of(closed.status()), "FAILED_PRECONDITION");

  auto undeclared = client.invoke_rpc("f-1", "undeclared", nullptr);
  EXPECT_EQ(undeclared.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(undeclared.status().message(),
            "INVALID_ARGUMENT: RPC 'undeclared' is not declared by Flow type 'Echo'");

  InvokeRpcOptions short_rpc;
  short_rpc.timeout = milliseconds(200);
  auto slow = client.invoke_rpc("f-1", "slow", nullptr, short_rpc);
  ASSERT_FALSE(slow.is_ok());
  EXPECT_EQ(sdk_internal::grpc_code_of(slow.status()), "DEADLINE_EXCEEDED");
  EXPECT_NE(slow.status().message().find("RPC 'slow' of Flow 'f-1' gave no result within"),
            std::string::npos)
      << slow.status().message();

  // UNAVAILABLE (the process changed before the commit) is asked again, with
  // the same request ID, until the call's deadline.
  ClientOptions short_options = options_;
  short_options.timeout = milliseconds(600);
  Client impatient(short_options);
  const size_t before = flows_.rpcs().size();
  InvokeRpcOptions quick;
  quick.timeout = milliseconds(100);
  auto unavailable = impatient.invoke_rpc("f-1", "unavailable", nullptr, quick);
  ASSERT_FALSE(unavailable.is_ok());
  EXPECT_EQ(sdk_internal::grpc_code_of(unavailable.status()), "UNAVAILABLE");
  EXPECT_TRUE(unavailable.status().is_transient());
  const auto rpcs = flows_.rpcs();
  ASSERT_GE(rpcs.size(), before + 2);
  for (size_t i = before + 1; i < rpcs.size(); ++i)
    EXPECT_EQ(rpcs[i].request_id(), rpcs[before].request_id());
}

}  // namespace
}  // namespace dex
