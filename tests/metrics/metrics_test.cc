// Metrics: the names, labels and values of the text exposition (docs/metrics.md),
// the one-hot standby state, and the spec's alert expressions against them.
#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "flow/effects.h"
#include "metrics_test_util.h"

namespace dex {
namespace {

using testing::request_series;
using testing::series_value;

double value(const Metrics& m, const std::string& series) {
  auto v = series_value(m.render(), series);
  EXPECT_TRUE(v.has_value()) << "no series " << series << " in\n" << m.render();
  return v.value_or(-1);
}

std::string state_series(std::string_view state) {
  return "dexzd_hot_standby_state{state=\"" + std::string(state) + "\"}";
}

const std::vector<std::string> kStates = {"following", "bootstrapping", "behind", "restarting",
                                          "failed"};

TEST(Metrics, EverySeriesExistsAtZeroBeforeTheFirstEvent) {
  Metrics m;
  for (const auto& s : kStates) EXPECT_EQ(value(m, state_series(s)), 0) << s;
  EXPECT_EQ(value(m, "dexzd_hot_standby_lag_seconds"), 0);
  EXPECT_EQ(value(m, "dexzd_node_epoch"), 0);
  EXPECT_EQ(value(m, "dexzd_active"), 0);
  for (const char* o : {"renewed", "adopted", "retried", "lost"}) {
    EXPECT_EQ(value(m, std::string("dexzd_lease_renewals_total{outcome=\"") + o + "\"}"), 0);
  }
  EXPECT_EQ(value(m, "dexzd_log_append_seconds_count"), 0);
  EXPECT_EQ(value(m, "dexzd_log_append_seconds_bucket{le=\"+Inf\"}"), 0);
  EXPECT_EQ(value(m, "dexzd_log_batches_total"), 0);
  EXPECT_EQ(value(m, "dexzd_log_records_total"), 0);
  for (const char* op : {"get", "put", "remove", "list"}) {
    for (const char* o : {"ok", "precondition_failed", "not_found", "transient", "permanent",
                          "corruption", "fenced", "invalid_argument", "stopped"}) {
      EXPECT_EQ(value(m, request_series(op, o)), 0);
    }
    EXPECT_EQ(
        value(m, std::string("dexzd_object_store_request_seconds_count{operation=\"") + op + "\"}"),
        0);
  }
  for (const char* o :
       {"completed", "failed", "canceled", "terminated", "timed_out", "continued_as_new"}) {
    EXPECT_EQ(value(m, std::string("dexzd_flows_total{outcome=\"") + o + "\"}"), 0);
  }
  for (const char* o : {"completed", "failed", "timed_out", "not_completed"}) {
    EXPECT_EQ(value(m, std::string("dexzd_attempts_total{outcome=\"") + o + "\"}"), 0);
  }
  // The TYPE lines Prometheus reads.
  const std::string text = m.render();
  for (const char* type_line :
       {"# TYPE dexzd_hot_standby_state gauge", "# TYPE dexzd_hot_standby_lag_seconds gauge",
        "# TYPE dexzd_node_epoch gauge", "# TYPE dexzd_active gauge",
        "# TYPE dexzd_lease_renewals_total counter", "# TYPE dexzd_log_append_seconds histogram",
        "# TYPE dexzd_log_batches_total counter", "# TYPE dexzd_log_records_total counter",
        "# TYPE dexzd_object_store_requests_total counter",
        "# TYPE dexzd_object_store_request_seconds histogram", "# TYPE dexzd_flows_total counter",
        "# TYPE dexzd_attempts_total counter"}) {
    EXPECT_NE(text.find(type_line), std::string::npos) << type_line;
  }
}

TEST(Metrics, StandbyStateIsOneHotAndNotAStandbyIsAllZero) {
  Metrics m;
  EXPECT_EQ(m.standby_state(), StandbyState::kNotStandby);
  for (StandbyState s :
       {StandbyState::kBootstrapping, StandbyState::kFollowing, StandbyState::kBehind,
        StandbyState::kFollowing, StandbyState::kRestarting, StandbyState::kFailed}) {
    m.set_standby_state(s);
    EXPECT_EQ(m.standby_state(), s);
    double sum = 0;
    for (const auto& name : kStates) {
      double v = value(m, state_series(name));
      EXPECT_EQ(v, name == standby_state_label(s) ? 1 : 0) << name;
      sum += v;
    }
    EXPECT_EQ(sum, 1);
  }
  m.set_standby_state(StandbyState::kFollowing);
  m.set_standby_lag(milliseconds(2500));
  EXPECT_DOUBLE_EQ(value(m, "dexzd_hot_standby_lag_seconds"), 2.5);
  m.set_standby_lag(milliseconds(-5));  // clocks disagree: never negative
  EXPECT_EQ(value(m, "dexzd_hot_standby_lag_seconds"), 0);
  m.set_standby_lag(seconds(7));
  // Taking over: no longer a standby, no lag.
  m.set_standby_state(StandbyState::kNotStandby);
  for (const auto& name : kStates) EXPECT_EQ(value(m, state_series(name)), 0) << name;
  EXPECT_EQ(value(m, "dexzd_hot_standby_lag_seconds"), 0);
  EXPECT_EQ(standby_state_label(StandbyState::kNotStandby), "");
}

TEST(Metrics, ConcurrentStateChangesLeaveExactlyTheLastOneSet) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 500; ++i) {
        m.set_standby_state(static_cast<StandbyState>(1 + (i + t) % 5));
      }
    });
  }
  for (auto& t : threads) t.join();
  double sum = 0;
  for (const auto& name : kStates) sum += value(m, state_series(name));
  EXPECT_EQ(sum, 1);
  EXPECT_EQ(value(m, state_series(standby_state_label(m.standby_state()))), 1);
}

TEST(Metrics, RoleEpochAndLeaseRenewals) {
  Metrics m;
  m.set_node_epoch(41);
  m.set_node_epoch(42);
  m.set_active(true);
  EXPECT_EQ(value(m, "dexzd_node_epoch"), 42);
  EXPECT_EQ(value(m, "dexzd_active"), 1);
  m.set_active(false);
  EXPECT_EQ(value(m, "dexzd_active"), 0);
  m.lease_renewal(LeaseRenewal::kRenewed);
  m.lease_renewal(LeaseRenewal::kRenewed);
  m.lease_renewal(LeaseRenewal::kRetried);
  m.lease_renewal(LeaseRenewal::kAdopted);
  m.lease_renewal(LeaseRenewal::kLost);
  EXPECT_EQ(value(m, "dexzd_lease_renewals_total{outcome=\"renewed\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_lease_renewals_total{outcome=\"retried\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_lease_renewals_total{outcome=\"adopted\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_lease_renewals_total{outcome=\"lost\"}"), 1);
}

TEST(Metrics, LogAppendFillsTheHistogramAndCountsBatchesAndRecords) {
  Metrics m;
  m.log_append(milliseconds(3), 10);
  m.log_append(milliseconds(40), 1);
  m.log_append(seconds(12), 5);  // above the last bucket: only +Inf
  EXPECT_EQ(value(m, "dexzd_log_append_seconds_count"), 3);
  EXPECT_NEAR(value(m, "dexzd_log_append_seconds_sum"), 12.043, 1e-9);
  EXPECT_EQ(value(m, "dexzd_log_append_seconds_bucket{le=\"0.001\"}"), 0);
  EXPECT_EQ(value(m, "dexzd_log_append_seconds_bucket{le=\"0.005\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_log_append_seconds_bucket{le=\"0.05\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_log_append_seconds_bucket{le=\"10\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_log_append_seconds_bucket{le=\"+Inf\"}"), 3);
  EXPECT_EQ(value(m, "dexzd_log_batches_total"), 3);
  EXPECT_EQ(value(m, "dexzd_log_records_total"), 16);
}

TEST(Metrics, FlowsAndAttemptsByOutcome) {
  Metrics m;
  m.flow_ended(flow::FLOW_COMPLETED);
  m.flow_ended(flow::FLOW_COMPLETED);
  m.flow_ended(flow::FLOW_FAILED);
  m.flow_ended(flow::FLOW_CANCELED);
  m.flow_ended(flow::FLOW_TERMINATED);
  m.flow_ended(flow::FLOW_TIMED_OUT);
  m.flow_ended(flow::FLOW_TIMED_OUT);
  m.attempt_ended(flow::ATTEMPT_COMPLETED);
  m.attempt_ended(flow::ATTEMPT_FAILED);
  m.attempt_ended(flow::ATTEMPT_TIMED_OUT);
  m.attempt_ended(flow::ATTEMPT_NOT_COMPLETED);
  m.attempt_ended(flow::ATTEMPT_NOT_COMPLETED);
  EXPECT_EQ(value(m, "dexzd_flows_total{outcome=\"completed\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_flows_total{outcome=\"failed\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_flows_total{outcome=\"canceled\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_flows_total{outcome=\"terminated\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_flows_total{outcome=\"timed_out\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_attempts_total{outcome=\"completed\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_attempts_total{outcome=\"failed\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_attempts_total{outcome=\"timed_out\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_attempts_total{outcome=\"not_completed\"}"), 2);
  // Wrong usage: a value that is not an end is counted under its own label,
  // not dropped and not mixed into the others.
  m.flow_ended(flow::FLOW_RUNNING);
  m.attempt_ended(flow::ATTEMPT_OUTCOME_UNSPECIFIED);
  EXPECT_EQ(value(m, "dexzd_flows_total{outcome=\"running\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_attempts_total{outcome=\"unspecified\"}"), 1);
  EXPECT_EQ(value(m, "dexzd_flows_total{outcome=\"completed\"}"), 2);
}

TEST(Metrics, RetentionAndBlobCollection) {
  Metrics m;
  EXPECT_EQ(value(m, "dexzd_runs_deleted_total"), 0);
  EXPECT_EQ(value(m, "dexzd_blob_collections_total"), 0);
  m.runs_deleted(3);
  m.runs_deleted(2);
  m.blobs_collected(0, 0, 0);  // a pass with nothing to delete counts as a pass
  m.blobs_collected(4, 1 << 20, 1);
  EXPECT_EQ(value(m, "dexzd_runs_deleted_total"), 5);
  EXPECT_EQ(value(m, "dexzd_blob_collections_total"), 2);
  EXPECT_EQ(value(m, "dexzd_blobs_deleted_total"), 4);
  EXPECT_EQ(value(m, "dexzd_blob_bytes_freed_total"), 1 << 20);
  EXPECT_EQ(value(m, "dexzd_blob_delete_errors_total"), 1);
}

TEST(Metrics, ObjectStoreRequestsByOperationAndOutcome) {
  Metrics m;
  m.object_store_request(ObjectStoreOperation::kPut, Code::kOk, milliseconds(2));
  m.object_store_request(ObjectStoreOperation::kPut, Code::kPreconditionFailed, milliseconds(2));
  m.object_store_request(ObjectStoreOperation::kGet, Code::kNotFound, milliseconds(1));
  m.object_store_request(ObjectStoreOperation::kList, Code::kTransient, seconds(3));
  EXPECT_EQ(value(m, request_series("put", "ok")), 1);
  EXPECT_EQ(value(m, request_series("put", "precondition_failed")), 1);
  EXPECT_EQ(value(m, request_series("get", "not_found")), 1);
  EXPECT_EQ(value(m, request_series("list", "transient")), 1);
  EXPECT_EQ(value(m, request_series("get", "ok")), 0);
  EXPECT_EQ(value(m, "dexzd_object_store_request_seconds_count{operation=\"put\"}"), 2);
  EXPECT_EQ(value(m, "dexzd_object_store_request_seconds_sum{operation=\"list\"}"), 3);
  EXPECT_EQ(value(m, "dexzd_object_store_request_seconds_bucket{operation=\"list\",le=\"2.5\"}"),
            0);
}

// The spec's alerts (High availability, "Lease duration and alerts") name
// series that exist: each metric name, each label, each value a matcher admits.
TEST(Metrics, TheSpecsAlertExpressionsReferenceSeriesThatExist) {
  const std::vector<std::string> alerts = {
      R"(sum(dexzd_hot_standby_state{state="following"}) == 0)",
      R"(max_over_time(dexzd_hot_standby_state{state=~"failed|restarting"}[5m]) == 1)",
      R"(dexzd_hot_standby_lag_seconds > 5)",
  };
  Metrics m;
  m.set_standby_state(StandbyState::kFollowing);
  const std::string text = m.render();
  const std::regex selector(R"((dexzd_[a-z_]+)(\{([^}]*)\})?)");
  const std::regex matcher(R"(([a-z_]+)(=~|=)\"([^\"]*)\")");
  for (const auto& alert : alerts) {
    SCOPED_TRACE(alert);
    int selectors = 0;
    for (std::sregex_iterator it(alert.begin(), alert.end(), selector), end; it != end; ++it) {
      ++selectors;
      const std::string name = (*it)[1];
      EXPECT_NE(text.find("# TYPE " + name + " gauge"), std::string::npos) << name;
      const std::string matchers = (*it)[3];
      if (matchers.empty()) {
        EXPECT_TRUE(series_value(text, name).has_value()) << name;
        continue;
      }
      for (std::sregex_iterator mt(matchers.begin(), matchers.end(), matcher); mt != end; ++mt) {
        const std::string label = (*mt)[1], op = (*mt)[2], wanted = (*mt)[3];
        std::vector<std::string> values;
        if (op == "=") {
          values = {wanted};
        } else {
          std::stringstream alternatives(wanted);
          for (std::string v; std::getline(alternatives, v, '|');) values.push_back(v);
        }
        for (const auto& v : values) {
          const std::string series = name + "{" + label + "=\"" + v + "\"}";
          EXPECT_TRUE(series_value(text, series).has_value()) << series;
        }
      }
    }
    EXPECT_EQ(selectors, 1);
  }
  // What the first alert computes over this one process: a following standby
  // makes the sum 1, so "no hot standby" does not fire.
  EXPECT_EQ(value(m, state_series("following")), 1);
}

// docs/metrics.md documents every family render() has, and names no other.
// The families by type have series (and so appear) once an event of each kind came.
TEST(Metrics, AttributeSyncSeriesPerStoreCountOnAcrossActivePeriods) {
  Metrics m;
  m.attribute_sync({"reporting", 2.5, 7, 40, 3, 1, 10, 2});
  m.attribute_sync({"reporting", 0, 0, 52, 5, 1, 14, 2});
  m.attribute_sync({"ops", 0, 0, 9, 1, 0, 1, 0});
  // A new active period reports totals from 0: they add to what was counted.
  m.attribute_sync({"reporting", 0, 0, 60, 1, 0, 2, 0});
  const std::string text = m.render();
  auto value = [&](const std::string& series) {
    const size_t at = text.find(series + " ");
    EXPECT_NE(at, std::string::npos) << series << "\n" << text;
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size() + 1));
  };
  EXPECT_EQ(value("dexzd_attribute_sync_transactions_total{store=\"reporting\"}"), 6);
  EXPECT_EQ(value("dexzd_attribute_sync_rows_total{store=\"reporting\"}"), 16);
  EXPECT_EQ(value("dexzd_attribute_sync_filtered_fields_total{store=\"reporting\"}"), 2);
  EXPECT_EQ(value("dexzd_attribute_sync_failures_total{store=\"reporting\"}"), 1);
  EXPECT_EQ(value("dexzd_attribute_sync_watermark_slot{store=\"reporting\"}"), 60);
  EXPECT_EQ(value("dexzd_attribute_sync_lag_slots{store=\"reporting\"}"), 0);
  EXPECT_EQ(value("dexzd_attribute_sync_watermark_slot{store=\"ops\"}"), 9);
}

TEST(Metrics, DocsDescribeEveryFamilyAndNoOther) {
  std::ifstream in(std::string(DEX_SOURCE_DIR) + "/docs/metrics.md");
  ASSERT_TRUE(in) << "docs/metrics.md";
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  std::set<std::string> rendered;
  Metrics m;
  EXPECT_EQ(m.render().find("dexzd_flow_starts_total"), std::string::npos)
      << "a family without series is left out";
  flow::Effects fx;
  flow::TaskRef execute;
  execute.set_method(flow::EXECUTE);
  fx.runs_started = {"F"};
  fx.closed.push_back({"f", "r", flow::FLOW_COMPLETED, "F"});
  fx.started.push_back({execute, "t", "w", "F", "S", 1, 2});
  fx.ended.push_back({execute, "t", "w", flow::ATTEMPT_COMPLETED, "F", "S", 2, 3});
  fx.rpcs_ended.push_back({"F", "rpc", flow::ATTEMPT_COMPLETED, 1, 2});
  m.flow_effects(fx);
  m.attribute_sync({"reporting", 1.5, 3, 40, 2, 1, 5, 1});
  const std::string exposition = m.render();
  const std::regex type_line(R"(# TYPE (dexzd_[a-z_]+) )");
  for (std::sregex_iterator it(exposition.begin(), exposition.end(), type_line), end; it != end;
       ++it) {
    rendered.insert((*it)[1]);
  }
  EXPECT_EQ(rendered.size(), 31u);
  std::set<std::string> documented;
  const std::regex name(R"(dexzd_[a-z_]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
    std::string n = (*it)[0];
    for (const char* suffix : {"_bucket", "_count", "_sum"}) {
      const std::string s(suffix);
      if (!rendered.count(n) && n.size() > s.size() &&
          n.compare(n.size() - s.size(), s.size(), s) == 0) {
        n.resize(n.size() - s.size());
      }
    }
    documented.insert(n);
  }
  for (const auto& n : rendered) EXPECT_TRUE(documented.count(n)) << n << " is not documented";
  for (const auto& n : documented) EXPECT_TRUE(rendered.count(n)) << n << " is not a metric";
}

}  // namespace
}  // namespace dex
