// Flow-type definitions (docs/engine.md, "Flow types"): parsing, defaults, and
// one test per refusal, each checking that the message names the problem.
#include "engine/flow_type.h"

#include <gtest/gtest.h>

#include <string>

namespace dex {
namespace {

::testing::AssertionResult refused_with(const StatusOr<FlowType>& got, const std::string& words) {
  if (got.is_ok()) return ::testing::AssertionFailure() << "accepted, expected: " << words;
  if (got.status().code() != Code::kInvalidArgument) {
    return ::testing::AssertionFailure() << "not InvalidArgument: " << got.status().to_string();
  }
  if (got.status().message().find(words) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message '" << got.status().message() << "' does not contain '" << words << "'";
  }
  return ::testing::AssertionSuccess();
}

TEST(FlowType, ParsesYamlWithEveryFieldAndFillsDefaults) {
  auto got = parse_flow_type(R"(
name: order
steps:
  - name: reserve
    taskQueue: stock
  - name: charge
    taskQueue: payments
    after: [reserve]
    retry: {maxAttempts: 5, initialInterval: 250ms, backoffCoefficient: 1.5, maxInterval: 2s}
    startToCloseTimeout: 30s
    heartbeatTimeout: 10s
    dispatch: ASYNC
  - name: cool-down
    after: [charge]
    sleep: 5s
)");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  const FlowType& t = got.value();
  EXPECT_EQ(t.name(), "order");
  ASSERT_EQ(t.steps_size(), 3);
  const StepDef& reserve = t.steps(0);
  EXPECT_EQ(reserve.task_queue(), "stock");
  EXPECT_EQ(reserve.retry().max_attempts(), 3u);
  EXPECT_EQ(reserve.retry().initial_interval_ms(), 1000);
  EXPECT_EQ(reserve.retry().backoff_coefficient(), 2.0);
  EXPECT_EQ(reserve.retry().max_interval_ms(), 100'000);
  EXPECT_EQ(reserve.start_to_close_timeout_ms(), 60'000);
  EXPECT_EQ(reserve.heartbeat_timeout_ms(), 0);
  EXPECT_EQ(reserve.dispatch(), DISPATCH_MODE_SYNC);
  const StepDef& charge = t.steps(1);
  ASSERT_EQ(charge.after_size(), 1);
  EXPECT_EQ(charge.after(0), "reserve");
  EXPECT_EQ(charge.retry().max_attempts(), 5u);
  EXPECT_EQ(charge.retry().initial_interval_ms(), 250);
  EXPECT_EQ(charge.retry().backoff_coefficient(), 1.5);
  EXPECT_EQ(charge.retry().max_interval_ms(), 2000);
  EXPECT_EQ(charge.start_to_close_timeout_ms(), 30'000);
  EXPECT_EQ(charge.heartbeat_timeout_ms(), 10'000);
  EXPECT_EQ(charge.dispatch(), DISPATCH_MODE_ASYNC);
  const StepDef& sleep = t.steps(2);
  EXPECT_EQ(sleep.sleep_ms(), 5000);
  EXPECT_TRUE(sleep.task_queue().empty());
  EXPECT_FALSE(sleep.has_retry());
}

TEST(FlowType, ParsesJson) {
  auto got = parse_flow_type(
      R"({"name": "greet", "steps": [{"name": "a", "taskQueue": "q"},
          {"name": "b", "taskQueue": "q", "after": ["a"], "retry": {"maxAttempts": 1}}]})");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got->steps(1).retry().max_attempts(), 1u);
}

TEST(FlowType, ValidatingTheResultChangesNothing) {
  auto got = parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q}, {name: s, sleep: 1s}]");
  ASSERT_TRUE(got.is_ok());
  auto again = validate_flow_type(got.value());
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->SerializeAsString(), got->SerializeAsString());
}

TEST(FlowType, ProtoGetsTheSameDefaultsAndChecks) {
  FlowType t;
  t.set_name("p");
  auto* a = t.add_steps();
  a->set_name("a");
  a->set_task_queue("q");
  auto got = validate_flow_type(t);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->steps(0).retry().max_attempts(), 3u);
  EXPECT_EQ(got->steps(0).dispatch(), DISPATCH_MODE_SYNC);
  a->add_after("missing");
  EXPECT_TRUE(refused_with(validate_flow_type(t), "unknown step 'missing'"));
  a->clear_after();
  a->mutable_retry()->set_backoff_coefficient(0.5);
  EXPECT_TRUE(refused_with(validate_flow_type(t), "backoffCoefficient 0.5"));
  a->mutable_retry()->set_backoff_coefficient(2);
  a->set_start_to_close_timeout_ms(-5);
  EXPECT_TRUE(refused_with(validate_flow_type(t), "startToCloseTimeout of -5 ms"));
}

TEST(FlowType, RefusesUnknownKeysByPath) {
  EXPECT_TRUE(
      refused_with(parse_flow_type("name: x\nsteps: []\nversion: 2"), "unknown key 'version'"));
  EXPECT_TRUE(
      refused_with(parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, tiemout: 1s}]"),
                   "unknown key 'steps[0].tiemout'"));
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q}, {name: b, taskQueue: q, retry: "
                      "{maxAtempts: 2}}]"),
      "unknown key 'steps[1].retry.maxAtempts'"));
}

TEST(FlowType, RefusesDuplicateSteps) {
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q}, {name: a, taskQueue: q}]"),
      "duplicate step 'a'"));
}

TEST(FlowType, RefusesUnknownDependency) {
  EXPECT_TRUE(
      refused_with(parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, after: [ghost]}]"),
                   "step 'a' depends on unknown step 'ghost'"));
}

TEST(FlowType, RefusesACycleNamingItsSteps) {
  auto got = parse_flow_type(R"(
name: loop
steps:
  - {name: start, taskQueue: q}
  - {name: a, taskQueue: q, after: [start, c]}
  - {name: b, taskQueue: q, after: [a]}
  - {name: c, taskQueue: q, after: [b]}
)");
  EXPECT_TRUE(refused_with(got, "dependency cycle"));
  const std::string& m = got.status().message();
  // The steps of the cycle, following dependencies.
  EXPECT_NE(m.find("a -> c -> b -> a"), std::string::npos) << m;
  EXPECT_EQ(m.find("start"), std::string::npos) << m;  // not part of the cycle
  EXPECT_TRUE(refused_with(parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, after: [a]}]"),
                           "depends on itself"));
}

TEST(FlowType, RefusesBadDurationsNamingFieldAndValue) {
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, startToCloseTimeout: 10 seconds}]"),
      "steps[0].startToCloseTimeout: invalid duration '10 seconds'"));
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, retry: {initialInterval: 0s}}]"),
      "steps[0].retry.initialInterval: invalid duration '0s'"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: x\nsteps: [{name: a, sleep: 5}]"),
                           "steps[0].sleep: invalid duration '5'"));
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, heartbeatTimeout: 10000h}]"),
      "heartbeatTimeout of 36000000000 ms is outside"));
}

TEST(FlowType, SleepStepHasNoTaskQueueAndTaskStepNeedsOne) {
  EXPECT_TRUE(refused_with(parse_flow_type("name: x\nsteps: [{name: s, sleep: 1s, taskQueue: q}]"),
                           "step 's' is a sleep step and cannot have a taskQueue"));
  EXPECT_TRUE(
      refused_with(parse_flow_type("name: x\nsteps: [{name: s}]"), "step 's' needs a taskQueue"));
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: s, sleep: 1s, retry: {maxAttempts: 2}}]"),
      "sleep step: retry, timeouts and dispatch do not apply"));
}

TEST(FlowType, RefusesBadNamesAndValues) {
  EXPECT_TRUE(refused_with(parse_flow_type("steps: [{name: a, taskQueue: q}]"), "no 'name'"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: 'has space'\nsteps: [{name: a, taskQueue: q}]"),
                           "flow type name 'has space' may only contain"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: x\nsteps: [{name: 'a/b', taskQueue: q}]"),
                           "step name (steps[0]) 'a/b'"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: x\nsteps: [{taskQueue: q}]"),
                           "step name (steps[0]) is empty"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: x"), "has no steps"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: x\nsteps: {a: 1}"), "'steps' must be a list"));
  EXPECT_TRUE(
      refused_with(parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, dispatch: FAST}]"),
                   "dispatch must be SYNC or ASYNC, not 'FAST'"));
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, retry: {maxAttempts: -1}}]"),
      "maxAttempts: '-1' is not a whole number"));
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, retry: {maxAttempts: 0}}]"),
      "maxAttempts must be at least 1"));
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, retry: {backoffCoefficient: x}}]"),
      "backoffCoefficient: 'x' is not a number"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, retry: "
                                           "{initialInterval: 2s, maxInterval: 1s}}]"),
                           "maxInterval (1000 ms) is below retry.initialInterval (2000 ms)"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: [x"), "not valid JSON or YAML"));
  EXPECT_TRUE(refused_with(parse_flow_type("- a\n- b"), "must be a mapping"));
}

TEST(FlowType, RefusesOverLimits) {
  std::string many = "name: x\nsteps:\n";
  for (size_t i = 0; i <= kStepsPerFlowTypeMax; ++i) {
    many += "  - {name: s" + std::to_string(i) + ", taskQueue: q}\n";
  }
  EXPECT_TRUE(refused_with(parse_flow_type(many), "over the limit of 100"));
  EXPECT_TRUE(refused_with(parse_flow_type(std::string(kFlowTypeDefinitionBytesMax + 1, ' ')),
                           "over the limit"));
  EXPECT_TRUE(refused_with(parse_flow_type("name: " + std::string(kFlowTypeNameBytesMax + 1, 'n') +
                                           "\nsteps: [{name: a, taskQueue: q}]"),
                           "over the limit of 128"));
  EXPECT_TRUE(refused_with(
      parse_flow_type("name: x\nsteps: [{name: a, taskQueue: q, retry: {maxAttempts: 1001}}]"),
      "maxAttempts 1001 is over the limit of 1000"));
}

TEST(FlowType, RetryBackoffFollowsThePolicyExactly) {
  RetryPolicy p;
  p.set_initial_interval_ms(1000);
  p.set_backoff_coefficient(2.0);
  p.set_max_interval_ms(5000);
  EXPECT_EQ(retry_backoff_ms(p, 1), 1000);
  EXPECT_EQ(retry_backoff_ms(p, 2), 2000);
  EXPECT_EQ(retry_backoff_ms(p, 3), 4000);
  EXPECT_EQ(retry_backoff_ms(p, 4), 5000);  // capped
  EXPECT_EQ(retry_backoff_ms(p, 1000), 5000);
  p.set_backoff_coefficient(1.5);
  p.set_initial_interval_ms(100);
  EXPECT_EQ(retry_backoff_ms(p, 3), 225);
}

}  // namespace
}  // namespace dex
