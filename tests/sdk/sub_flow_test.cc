// SubFlows and Flow retries in the C++ SDK (sdk/sub_flow.h, sdk/start_options.h):
// the conditions SubFlow::start builds, what Execute reads of the children
// (Context::sub_flow), StartOptions' setters; and end to end, a Worker and a
// Client against a real ApiServer over a real Engine: a parent whose children
// (one under a Flow retry, one with an initial Attribute) it sums, and a
// Client start with a retry policy that wait_for_flow follows.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "live_stack.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

flow::FlowTaskResult run(Flow& flow, const flow::FlowTask& t) {
  return run_flow_task(
      flow, t, [] {}, [] { return false; });
}

flow::FlowTask task(const std::string& step_type, flow::Method method, const json& input = {}) {
  flow::FlowTask t;
  t.set_task_id("t-1");
  t.set_flow_id("p-1");
  t.set_run_id("run-1");
  t.set_flow_type("Parent");
  t.set_step_type(step_type);
  t.set_step_execution_id(step_type + "-1");
  t.set_method(method);
  t.set_attempt(1);
  *t.mutable_input() = to_payload(input);
  return t;
}

const Attribute<int64_t> kSeed{"seed"};

// A Step whose wait_for and execute are the test's lambdas.
class Lambda final : public WaitingStep {
 public:
  std::function<Wait(Context&)> waits = [](Context&) { return Wait::skip(); };
  std::function<StepDecision(Context&)> executes = [](Context&) {
    return StepDecision::graceful_complete();
  };
  std::string type() const override { return "Fan"; }
  Wait wait_for(Context& ctx) override { return waits(ctx); }
  StepDecision execute(Context& ctx) override { return executes(ctx); }
};

class OneStep final : public Flow {
 public:
  explicit OneStep(std::shared_ptr<Step> step, std::string type = "Parent")
      : step_(std::move(step)), type_(std::move(type)) {}
  std::string type() const override { return type_; }
  std::string start_step() const override { return step_->type(); }
  std::vector<std::shared_ptr<Step>> steps() const override { return {step_}; }

 private:
  std::shared_ptr<Step> step_;
  std::string type_;
};

// ---------------------------------------------------------------- conditions

TEST(SubFlowCondition, CarriesTheChildsTypeInputStartOptionsAndReusePolicy) {
  SubFlowOptions o;
  o.reuse = SubFlowReuse::kAttach;
  o.start.timeout(std::chrono::seconds(30), flow::TIMEOUT_CANCEL)
      .start_delay(milliseconds(250))
      .retry({.initial_interval = milliseconds(100), .maximum_attempts = 4})
      .initial(kSeed, int64_t{7});
  const flow::Condition c = SubFlow::start("Child", {{"n", 1}}, o).id("a").proto();
  EXPECT_EQ(c.condition_id(), "a");
  ASSERT_TRUE(c.has_sub_flow());
  const auto& s = c.sub_flow();
  EXPECT_EQ(s.flow_type(), "Child");
  EXPECT_EQ(from_payload(s.input()), (json{{"n", 1}}));
  EXPECT_EQ(s.reuse_policy(), flow::SUB_FLOW_ATTACH);
  EXPECT_EQ(s.options().timeout_ms(), 30'000);
  EXPECT_EQ(s.options().timeout_policy(), flow::TIMEOUT_CANCEL);
  EXPECT_EQ(s.options().start_delay_ms(), 250);
  ASSERT_TRUE(s.options().has_retry_policy());
  EXPECT_EQ(s.options().retry_policy().initial_interval_ms(), 100);
  EXPECT_EQ(s.options().retry_policy().maximum_attempts(), 4u);
  ASSERT_EQ(s.options().initial_attributes_size(), 1);
  EXPECT_EQ(s.options().initial_attributes(0).key(), "seed");
  EXPECT_EQ(s.options().initial_attributes(0).value().int64_value(), 7);
  EXPECT_TRUE(s.options().request_id().empty());
}

TEST(SubFlowCondition, DefaultsToRestartIfPreviousExitsAbnormallyAndNoOptions) {
  const flow::Condition c = SubFlow::start("Child").proto();
  EXPECT_EQ(c.sub_flow().reuse_policy(), flow::SUB_FLOW_RESTART_IF_PREVIOUS_EXITS_ABNORMALLY);
  EXPECT_FALSE(c.sub_flow().options().has_retry_policy());
  EXPECT_TRUE(c.sub_flow().input().data().empty()) << "null input: an empty payload";
  EXPECT_EQ(SubFlow::start("C", nullptr, {.reuse = SubFlowReuse::kAlwaysRestart})
                .proto()
                .sub_flow()
                .reuse_policy(),
            flow::SUB_FLOW_ALWAYS_RESTART);
}

TEST(SubFlowCondition, MixesWithOtherConditionsInEveryKindOfWait) {
  const Wait w = Wait::any_combination_of(
      {{"a", "b"}, {"t"}}, {SubFlow::start("Child", 1).id("a"), SubFlow::start("Child", 2).id("b"),
                            Timer::after(std::chrono::minutes(5)).id("t")});
  EXPECT_EQ(w.proto().kind(), flow::ANY_COMBINATION_OF);
  ASSERT_EQ(w.proto().conditions_size(), 3);
  EXPECT_TRUE(w.proto().conditions(1).has_sub_flow());
  EXPECT_TRUE(w.proto().conditions(2).has_timer());
  ASSERT_EQ(w.proto().combinations_size(), 2);
  EXPECT_EQ(w.proto().combinations(0).condition_ids(1), "b");
  EXPECT_EQ(Wait::any_of({SubFlow::start("Child"), Channel("c").for_one()}).proto().kind(),
            flow::ANY_OF);
}

TEST(SubFlowCondition, ARequestIdOrIdReusePolicyFailsTheWaitForNonRetryablyNamingIt) {
  for (int which = 0; which < 2; ++which) {
    auto step = std::make_shared<Lambda>();
    step->waits = [which](Context&) {
      SubFlowOptions o;
      if (which == 0)
        o.start.request_id("mine");
      else
        o.start.id_reuse(flow::DISALLOW);
      return Wait::all_of({SubFlow::start("Child", nullptr, o)});
    };
    OneStep flow(step);
    const auto r = run(flow, task("Fan", flow::WAIT_FOR));
    ASSERT_TRUE(r.has_error()) << r.DebugString();
    EXPECT_TRUE(r.error().non_retryable());
    EXPECT_NE(r.error().message().find(which == 0 ? "request ID" : "ID reuse policy"),
              std::string::npos)
        << r.error().message();
    EXPECT_NE(r.error().message().find("'Child'"), std::string::npos) << r.error().message();
  }
}

// ---------------------------------------------------------------- results

// Condition `index` of the Execute task: a SubFlow's child `flow_id` in `status`.
void child_result(flow::FlowTask& t, uint32_t index, const std::string& id, flow::FlowStatus status,
                  const std::vector<std::string>& outputs, bool fired,
                  const std::string& reason = "") {
  auto* c = t.add_conditions();
  c->set_index(index);
  c->set_condition_id(id);
  c->set_fired(fired);
  c->mutable_condition()->mutable_sub_flow()->set_flow_type("Child");
  auto* r = c->mutable_sub_flow();
  r->set_flow_id("p-1/Fan-1/" + std::to_string(index));
  r->set_run_id("run-1");
  r->set_status(status);
  r->set_close_reason(reason);
  for (const auto& o : outputs) {
    auto* out = r->add_outputs();
    out->set_step_type("Work");
    out->set_step_execution_id("Work-1");
    out->mutable_output()->set_data(o);
  }
}

TEST(SubFlowResults, ExecuteReadsEachChildByIndexOrIdTyped) {
  flow::FlowTask t = task("Fan", flow::EXECUTE);
  child_result(t, 0, "a", flow::FLOW_COMPLETED, {R"({"v": 3})"}, true);
  t.add_conditions()->mutable_condition()->mutable_timer()->set_duration_ms(1);  // index 0 too
  t.mutable_conditions(1)->set_index(1);
  child_result(t, 2, "c", flow::FLOW_FAILED, {}, true, "broken");
  auto step = std::make_shared<Lambda>();
  json seen;
  step->executes = [&](Context& ctx) {
    const SubFlowResult a = ctx.sub_flow("a");
    const SubFlowResult c = ctx.sub_flow(2);
    seen = {{"a_flow", a.flow_id},          {"a_run", a.run_id},
            {"a_completed", a.completed()}, {"a_closed", a.closed()},
            {"a_output", a.output()},       {"a_step", a.outputs.at(0).step_execution_id},
            {"a_index", a.condition_index}, {"c_completed", c.completed()},
            {"c_closed", c.closed()},       {"c_reason", c.close_reason},
            {"c_output", c.output()},       {"c_id", c.condition_id},
            {"all", ctx.sub_flows().size()}};
    return StepDecision::graceful_complete();
  };
  OneStep flow(step);
  const auto r = run(flow, t);
  ASSERT_TRUE(r.has_decision()) << r.DebugString();
  EXPECT_EQ(seen, (json{{"a_flow", "p-1/Fan-1/0"},
                        {"a_run", "run-1"},
                        {"a_completed", true},
                        {"a_closed", true},
                        {"a_output", {{"v", 3}}},
                        {"a_step", "Work-1"},
                        {"a_index", 0},
                        {"c_completed", false},
                        {"c_closed", true},
                        {"c_reason", "broken"},
                        {"c_output", nullptr},
                        {"c_id", "c"},
                        {"all", 2}}));
}

TEST(SubFlowResults, AChildStillRunningAfterAnAnyOfIsNeitherClosedNorFired) {
  flow::FlowTask t = task("Fan", flow::EXECUTE);
  child_result(t, 0, "", flow::FLOW_RUNNING, {}, false);
  auto step = std::make_shared<Lambda>();
  step->executes = [](Context& ctx) {
    const SubFlowResult r = ctx.sub_flow(0);
    if (r.closed() || r.fired || r.completed()) throw FlowFailure("wrong", true);
    return StepDecision::graceful_complete(r.flow_id);
  };
  OneStep flow(step);
  const auto r = run(flow, t);
  ASSERT_TRUE(r.has_decision()) << r.DebugString();
  EXPECT_EQ(from_payload(r.decision().graceful_complete()), "p-1/Fan-1/0");
}

TEST(SubFlowResults, AConditionThatIsNotASubFlowOrAnOutputThatIsNotJsonFailsNonRetryably) {
  struct Case {
    std::function<void(Context&)> read;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](Context& ctx) { (void)ctx.sub_flow(1); }, "condition 1 of its wait is not a SubFlow"},
      {[](Context& ctx) { (void)ctx.sub_flow("zz"); }, "no SubFlow condition 'zz'"},
      {[](Context& ctx) { (void)ctx.sub_flow(0); }, "is not valid JSON"},
  };
  for (const Case& c : cases) {
    flow::FlowTask t = task("Fan", flow::EXECUTE);
    child_result(t, 0, "a", flow::FLOW_COMPLETED, {"not json"}, true);
    t.add_conditions()->set_index(1);
    t.mutable_conditions(1)->mutable_condition()->mutable_timer()->set_duration_ms(5);
    auto step = std::make_shared<Lambda>();
    step->executes = [&](Context& ctx) {
      c.read(ctx);
      return StepDecision::graceful_complete();
    };
    OneStep flow(step);
    const auto r = run(flow, t);
    ASSERT_TRUE(r.has_error()) << r.DebugString();
    EXPECT_TRUE(r.error().non_retryable());
    EXPECT_NE(r.error().message().find(c.message), std::string::npos) << r.error().message();
  }
}

TEST(SubFlowResults, FlowAttemptIsOneUnlessTheTaskSaysOtherwise) {
  flow::FlowTask t = task("Fan", flow::EXECUTE);
  std::vector<uint32_t> seen;
  auto step = std::make_shared<Lambda>();
  step->executes = [&](Context& ctx) {
    seen.push_back(ctx.flow_attempt());
    return StepDecision::graceful_complete();
  };
  OneStep flow(step);
  (void)run(flow, t);
  t.set_flow_attempt(3);
  (void)run(flow, t);
  EXPECT_EQ(seen, (std::vector<uint32_t>{1, 3}));
}

TEST(StartOptionsSetters, FillTheProtoAndRetryWithNoFieldsMeansTheDefaults) {
  StartOptions o;
  o.timeout(std::chrono::minutes(2))
      .start_delay(milliseconds(5))
      .request_id("req-1")
      .id_reuse(flow::ALLOW_IF_PREVIOUS_FAILED)
      .retry(RetryPolicy{});
  EXPECT_EQ(o.proto.timeout_ms(), 120'000);
  EXPECT_EQ(o.proto.timeout_policy(), flow::TIMEOUT_FAIL);
  EXPECT_EQ(o.proto.start_delay_ms(), 5);
  EXPECT_EQ(o.proto.request_id(), "req-1");
  EXPECT_EQ(o.proto.id_reuse_policy(), flow::ALLOW_IF_PREVIOUS_FAILED);
  ASSERT_TRUE(o.proto.has_retry_policy()) << "a retry policy of defaults is still one";
  EXPECT_EQ(o.proto.retry_policy().initial_interval_ms(), 0);
  EXPECT_FALSE(o.proto.retry_policy().has_maximum_attempts());
}

// ---------------------------------------------------------------- end to end

// Triple (the child): Times3 completes with {"v": 3 * n + seed}, Attribute
// `seed` an initial value; with {"flaky": true} its first run fails.
class Times3 final : public Step {
 public:
  std::string type() const override { return "Times3"; }
  StepDecision execute(Context& ctx) override {
    if (ctx.input().value("flaky", false) && ctx.flow_attempt() == 1)
      return StepDecision::force_fail("flaky on its first run");
    const int64_t v = 3 * ctx.input().value("n", int64_t{0}) + kSeed.get(ctx).value_or(0);
    return StepDecision::graceful_complete({{"v", v}});
  }
};

class Triple final : public Flow {
 public:
  explicit Triple(std::string type = "Triple") : type_(std::move(type)) {}
  std::string type() const override { return type_; }
  std::string start_step() const override { return "Times3"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Times3>()}; }
  std::vector<AttributeDef> attributes() const override { return {kSeed}; }

 private:
  std::string type_;
};

// Sum3 (the parent): waits AllOf three Triples (b flaky under a Flow retry,
// c with seed 100) and completes with their sum and what it read of b.
std::shared_ptr<Flow> sum3() {
  auto step = std::make_shared<Lambda>();
  step->waits = [](Context&) {
    SubFlowOptions flaky;
    flaky.start.retry({.initial_interval = milliseconds(100), .maximum_attempts = 2});
    SubFlowOptions seeded;
    seeded.start.timeout(std::chrono::minutes(1)).initial(kSeed, int64_t{100});
    return Wait::all_of({SubFlow::start("Triple", {{"n", 1}}).id("a"),
                         SubFlow::start("Triple", {{"n", 2}, {"flaky", true}}, flaky).id("b"),
                         SubFlow::start("Triple", {{"n", 3}}, seeded).id("c")});
  };
  step->executes = [](Context& ctx) {
    int64_t sum = 0;
    for (const SubFlowResult& r : ctx.sub_flows()) sum += r.output().value("v", int64_t{0});
    const SubFlowResult b = ctx.sub_flow("b");
    return StepDecision::graceful_complete(
        {{"sum", sum}, {"b_flow", b.flow_id}, {"b_run", b.run_id}, {"b_fired", b.fired}});
  };
  return std::make_shared<OneStep>(step, "Sum3");
}

class SubFlowEndToEnd : public LiveStackTest {
 protected:
  std::vector<std::shared_ptr<Flow>> flows() const override {
    return {sum3(), std::make_shared<Triple>(), std::make_shared<Triple>("FlakyOnce")};
  }
  void configure(WorkerOptions& wo) const override {
    wo.worker_id = "w-subflow";
    wo.max_concurrent_tasks = 4;
  }
};

TEST_F(SubFlowEndToEnd, AParentSumsItsChildrenOneOfThemRetriedAndOneSeeded) {
  auto started = client_->start("Sum3", "sum-1", json::object());
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  auto closed = client_->wait_for_flow("sum-1", kWait);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  ASSERT_TRUE(closed->closed());
  ASSERT_EQ(closed->flow().status(), flow::FLOW_COMPLETED) << closed->flow().close_reason();
  const json out = from_payload(closed->flow().outputs(0).output());
  // a: 3, b: 6 (its second run), c: 9 + the seed 100.
  EXPECT_EQ(out, (json{{"sum", 118},
                       {"b_flow", "sum-1/Fan-1/1"},
                       {"b_run", started->run_id() + ".2"},
                       {"b_fired", true}}));
  auto b = client_->describe_flow("sum-1/Fan-1/1");
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b->flow_attempt(), 2u);
  EXPECT_EQ(b->runs(), 2u);
  EXPECT_EQ(b->previous_run_id(), started->run_id());
  ASSERT_EQ(b->parents_size(), 1);
  EXPECT_EQ(b->parents(0).flow_id(), "sum-1");
  EXPECT_EQ(b->parents(0).step_execution_id(), "Fan-1");
  EXPECT_EQ(b->parents(0).condition_index(), 1u);
  auto c = client_->get_attributes("sum-1/Fan-1/2");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(kSeed.get(*c), std::optional<int64_t>(100));
  // The parent's history shows each child started and closed.
  auto h = client_->history("sum-1", 0, true);
  ASSERT_TRUE(h.is_ok());
  int started_children = 0, closed_children = 0;
  for (const auto& e : h->events()) {
    started_children += e.kind() == flow::SUB_FLOW_STARTED;
    closed_children += e.kind() == flow::SUB_FLOW_CLOSED;
  }
  EXPECT_EQ(started_children, 3);
  EXPECT_EQ(closed_children, 3);
}

TEST_F(SubFlowEndToEnd, AStartWithARetryPolicyIsFollowedByWaitForFlowToItsSecondRun) {
  StartOptions options;
  options.retry({.initial_interval = milliseconds(100), .maximum_attempts = 2});
  auto started = client_->start("FlakyOnce", "flaky-1", json{{"n", 5}, {"flaky", true}}, options);
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  auto closed = client_->wait_for_flow("flaky-1", kWait);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  ASSERT_TRUE(closed->closed());
  EXPECT_EQ(closed->flow().status(), flow::FLOW_COMPLETED) << closed->flow().close_reason();
  EXPECT_EQ(closed->flow().run_id(), started->run_id() + ".2");
  EXPECT_EQ(closed->flow().flow_attempt(), 2u);
  EXPECT_EQ(closed->flow().runs(), 2u);
  EXPECT_EQ(from_payload(closed->flow().outputs(0).output()), (json{{"v", 15}}));
  // The first run, named, ended FAILED and names its retry.
  auto first = client_->wait_for_flow("flaky-1", kWait, started->run_id());
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first->flow().status(), flow::FLOW_FAILED);
  EXPECT_EQ(first->flow().close_reason(), "flaky on its first run");
  EXPECT_EQ(first->flow().next_run_id(), started->run_id() + ".2");
  // Without a retry policy the same failure is the end.
  auto once = client_->start("FlakyOnce", "flaky-2", json{{"flaky", true}});
  ASSERT_TRUE(once.is_ok());
  auto failed = client_->wait_for_flow("flaky-2", kWait);
  ASSERT_TRUE(failed.is_ok());
  EXPECT_EQ(failed->flow().status(), flow::FLOW_FAILED);
  EXPECT_EQ(failed->flow().runs(), 1u);
}

}  // namespace
}  // namespace dex
