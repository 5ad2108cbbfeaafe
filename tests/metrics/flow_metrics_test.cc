// The series by Flow, Step and RPC type (docs/metrics.md, "Flows, Steps and
// RPCs by type"), fed with flow::Effects as the engine reports them.
#include "metrics/flow_metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "flow/effects.h"
#include "metrics/metrics.h"
#include "metrics_test_util.h"

namespace dex {
namespace {

using testing::series_value;

double value(const Metrics& m, const std::string& series) {
  auto v = series_value(m.render(), series);
  EXPECT_TRUE(v.has_value()) << "no series " << series << " in\n" << m.render();
  return v.value_or(-1);
}

bool has(const Metrics& m, const std::string& series) {
  return series_value(m.render(), series).has_value();
}

flow::TaskRef ref(flow::Method method, const std::string& id = "Step-1") {
  flow::TaskRef r;
  r.set_flow_id("f");
  r.set_run_id("r");
  r.set_step_execution_id(id);
  r.set_method(method);
  r.set_attempt(1);
  return r;
}

flow::Effects::Started started(const std::string& flow_type, const std::string& step_type,
                               flow::Method method, int64_t queued_ms, int64_t at_ms) {
  return {ref(method), "e1.1", "w", flow_type, step_type, queued_ms, at_ms};
}

flow::Effects::Ended ended(const std::string& flow_type, const std::string& step_type,
                           flow::Method method, flow::AttemptOutcome outcome, int64_t started_ms,
                           int64_t at_ms) {
  return {ref(method), "e1.1", "w", outcome, flow_type, step_type, started_ms, at_ms};
}

std::string attempts(const std::string& flow_type, const std::string& step_type,
                     const std::string& kind, const std::string& outcome) {
  return "dexzd_step_attempts_total{flow_type=\"" + flow_type + "\",kind=\"" + kind +
         "\",outcome=\"" + outcome + "\",step_type=\"" + step_type + "\"}";
}

TEST(FlowMetrics, StartsAndClosesByFlowTypeAndStatus) {
  Metrics m;
  flow::Effects fx;
  fx.runs_started = {"Order", "Order", "Signup"};
  fx.closed.push_back({"f", "r", flow::FLOW_COMPLETED, "Order"});
  fx.closed.push_back({"g", "r", flow::FLOW_FAILED, "Signup"});
  m.flow_effects(fx);
  m.flow_effects(fx);
  EXPECT_EQ(value(m, "dexzd_flow_starts_total{flow_type=\"Order\"}"), 4);
  EXPECT_EQ(value(m, "dexzd_flow_starts_total{flow_type=\"Signup\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_flow_closes_total{flow_type=\"Order\",status=\"completed\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_flow_closes_total{flow_type=\"Signup\",status=\"failed\"}"), 2);
  EXPECT_FALSE(has(m, "dexzd_flow_closes_total{flow_type=\"Order\",status=\"failed\"}"));
}

TEST(FlowMetrics, AttemptsByStepTypeKindAndOutcomeWithTheirDurations) {
  Metrics m;
  flow::Effects fx;
  fx.ended.push_back(
      ended("Order", "Charge", flow::EXECUTE, flow::ATTEMPT_FAILED, 1'000'000, 1'000'300));
  fx.ended.push_back(
      ended("Order", "Charge", flow::EXECUTE, flow::ATTEMPT_COMPLETED, 1'001'000, 1'003'000));
  fx.ended.push_back(
      ended("Order", "Ship", flow::WAIT_FOR, flow::ATTEMPT_TIMED_OUT, 1'000'000, 1'010'000));
  fx.ended.push_back(
      ended("Order", "", flow::ON_TIMEOUT, flow::ATTEMPT_NOT_COMPLETED, 1'000'000, 1'000'001));
  m.flow_effects(fx);
  EXPECT_EQ(value(m, attempts("Order", "Charge", "execute", "failed")), 1);
  EXPECT_EQ(value(m, attempts("Order", "Charge", "execute", "completed")), 1);
  EXPECT_EQ(value(m, attempts("Order", "Ship", "wait_for", "timed_out")), 1);
  EXPECT_EQ(value(m, attempts("Order", "", "timeout_handler", "not_completed")), 1);
  const std::string charge = "{flow_type=\"Order\",kind=\"execute\",step_type=\"Charge\"";
  EXPECT_EQ(value(m, "dexzd_step_attempt_seconds_count" + charge + "}"), 2);
  EXPECT_DOUBLE_EQ(value(m, "dexzd_step_attempt_seconds_sum" + charge + "}"), 2.3);
  // 0.3 s falls in the 0.5 s bucket, 2 s does not.
  EXPECT_EQ(value(m, "dexzd_step_attempt_seconds_bucket" + charge + ",le=\"0.5\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_step_attempt_seconds_bucket" + charge + ",le=\"2.5\"}"), 2);
}

TEST(FlowMetrics, ScheduleToStartIsFromQueuedToHandedOver) {
  Metrics m;
  flow::Effects fx;
  fx.started.push_back(started("Order", "Charge", flow::EXECUTE, 5'000, 5'000));
  fx.started.push_back(started("Order", "Charge", flow::EXECUTE, 5'000, 12'000));
  // Queued by a version that did not keep the time: not observed, not guessed.
  fx.started.push_back(started("Order", "Charge", flow::EXECUTE, 0, 12'000));
  // An RPC's attempt is not a Step's.
  fx.started.push_back(started("Order", "status", flow::RPC, 5'000, 6'000));
  m.flow_effects(fx);
  const std::string charge = "{flow_type=\"Order\",kind=\"execute\",step_type=\"Charge\"";
  EXPECT_EQ(value(m, "dexzd_step_schedule_to_start_seconds_count" + charge + "}"), 2);
  EXPECT_DOUBLE_EQ(value(m, "dexzd_step_schedule_to_start_seconds_sum" + charge + "}"), 7);
  EXPECT_EQ(value(m, "dexzd_step_schedule_to_start_seconds_bucket" + charge + ",le=\"0.005\"}"), 1);
  EXPECT_EQ(m.render().find("step_type=\"status\""), std::string::npos) << m.render();
}

TEST(FlowMetrics, RpcCallsByNameAndOutcomeAndTheirLatency) {
  Metrics m;
  flow::Effects fx;
  fx.rpcs_ended.push_back({"Order", "approve", flow::ATTEMPT_COMPLETED, 1'000, 1'250});
  fx.rpcs_ended.push_back({"Order", "approve", flow::ATTEMPT_TIMED_OUT, 1'000, 31'000});
  // The RPC's attempt ends too; it is counted as the call, not as a Step attempt.
  fx.ended.push_back(ended("Order", "approve", flow::RPC, flow::ATTEMPT_COMPLETED, 1'100, 1'250));
  m.flow_effects(fx);
  EXPECT_EQ(value(m,
                  "dexzd_rpc_calls_total{flow_type=\"Order\",outcome=\"completed\",rpc_name="
                  "\"approve\"}"),
            1);
  EXPECT_EQ(value(m,
                  "dexzd_rpc_calls_total{flow_type=\"Order\",outcome=\"timed_out\",rpc_name="
                  "\"approve\"}"),
            1);
  EXPECT_EQ(value(m, "dexzd_rpc_seconds_count{flow_type=\"Order\",rpc_name=\"approve\"}"), 2);
  EXPECT_DOUBLE_EQ(value(m, "dexzd_rpc_seconds_sum{flow_type=\"Order\",rpc_name=\"approve\"}"),
                   30.25);
  EXPECT_EQ(m.render().find("dexzd_step_attempts_total{"), std::string::npos) << m.render();
}

// metrics.typeLabelsMax: each label has its own limit; the overflow is "other".
TEST(FlowMetrics, TypesBeyondTheLimitCountUnderOtherPerLabel) {
  Metrics m(2);
  flow::Effects fx;
  fx.runs_started = {"A", "B", "C", "D", "A"};
  // Step types are limited apart from Flow types: two of each.
  fx.ended.push_back(ended("A", "s1", flow::EXECUTE, flow::ATTEMPT_COMPLETED, 1, 2));
  fx.ended.push_back(ended("A", "s2", flow::EXECUTE, flow::ATTEMPT_COMPLETED, 1, 2));
  fx.ended.push_back(ended("C", "s3", flow::EXECUTE, flow::ATTEMPT_COMPLETED, 1, 2));
  fx.rpcs_ended.push_back({"B", "r1", flow::ATTEMPT_COMPLETED, 1, 2});
  fx.rpcs_ended.push_back({"B", "r2", flow::ATTEMPT_COMPLETED, 1, 2});
  fx.rpcs_ended.push_back({"B", "r3", flow::ATTEMPT_COMPLETED, 1, 2});
  m.flow_effects(fx);
  EXPECT_EQ(value(m, "dexzd_flow_starts_total{flow_type=\"A\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_flow_starts_total{flow_type=\"B\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_flow_starts_total{flow_type=\"other\"}"), 2);
  EXPECT_FALSE(has(m, "dexzd_flow_starts_total{flow_type=\"C\"}"));
  EXPECT_EQ(value(m, attempts("A", "s1", "execute", "completed")), 1);
  EXPECT_EQ(value(m, attempts("A", "s2", "execute", "completed")), 1);
  EXPECT_EQ(value(m, attempts("other", "other", "execute", "completed")), 1);
  const std::string calls = "dexzd_rpc_calls_total{flow_type=\"B\",outcome=\"completed\",rpc_name=";
  EXPECT_EQ(value(m, calls + "\"r1\"}"), 1);
  EXPECT_EQ(value(m, calls + "\"r2\"}"), 1);
  EXPECT_EQ(value(m, calls + "\"other\"}"), 1);
  // The number of series stays bounded however many types come.
  for (int i = 0; i < 500; ++i) {
    flow::Effects more;
    more.runs_started = {"T" + std::to_string(i)};
    m.flow_effects(more);
  }
  EXPECT_EQ(value(m, "dexzd_flow_starts_total{flow_type=\"other\"}"), 502);
  size_t series = 0;
  const std::string text = m.render();
  for (size_t at = text.find("\ndexzd_flow_starts_total{"); at != std::string::npos;
       at = text.find("\ndexzd_flow_starts_total{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 3u) << "A, B and other";
}

TEST(FlowMetrics, KindLabels) {
  EXPECT_EQ(attempt_kind_label(flow::WAIT_FOR), "wait_for");
  EXPECT_EQ(attempt_kind_label(flow::EXECUTE), "execute");
  EXPECT_EQ(attempt_kind_label(flow::ON_TIMEOUT), "timeout_handler");
  EXPECT_EQ(attempt_kind_label(flow::RPC), "");
  EXPECT_EQ(attempt_kind_label(flow::METHOD_UNSPECIFIED), "");
}

}  // namespace
}  // namespace dex
