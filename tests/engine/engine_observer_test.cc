// EngineOptions::on_attempt_ended / on_flow_ended / on_applied (the metrics hooks,
// docs/metrics.md): every method attempt and run that ends in a live apply is
// reported once, before its caller is answered; replay at open reports nothing
// of earlier epochs, but this epoch's recovery (its EpochStart) is reported.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "flow/effects.h"
#include "log/log.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;

// What the hooks reported, by outcome / status.
struct Ended {
  std::mutex mu;
  std::map<flow::AttemptOutcome, int> attempts;
  std::map<flow::FlowStatus, int> flows;
  std::map<flow::AttemptOutcome, int> attempts_snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return attempts;
  }
  std::map<flow::FlowStatus, int> flows_snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return flows;
  }
};

// What EngineOptions::on_applied reported, as "<flow type>/<type>/<method>".
struct Typed {
  std::mutex mu;
  std::vector<std::string> runs_started, started, ended, closed, rpcs;
  std::vector<int64_t> waits_ms, durations_ms;  // schedule to start; attempt
};

// `ended` is in a base before EngineProcess: it outlives the engine whose hooks
// write to it.
struct Reported {
  Ended ended;
  Typed typed;
};
struct Process : Reported, EngineProcess {};

// One: a single Step, tried up to 3 times, 1 s apart.
flow::FlowDeclaration one_step() {
  flow::FlowDeclaration d;
  d.set_flow_type("One");
  d.set_start_step_type("Start");
  d.add_steps()->set_step_type("Start");
  auto& retry = *execute_options(d, "Start").mutable_retry();
  retry.set_maximum_attempts(3);
  retry.set_initial_interval_ms(1'000);
  return d;
}

class EngineObserverTest : public EngineProcessTest {
 protected:
  std::unique_ptr<Process> start_process(uint64_t epoch, const std::filesystem::path& local) {
    auto p = std::make_unique<Process>();
    Process* raw = p.get();
    open_process(*p, store_, epoch, local, [raw](EngineOptions& eo) {
      eo.on_attempt_ended = [raw](flow::AttemptOutcome outcome) {
        std::lock_guard<std::mutex> lock(raw->ended.mu);
        ++raw->ended.attempts[outcome];
      };
      eo.on_flow_ended = [raw](flow::FlowStatus status) {
        std::lock_guard<std::mutex> lock(raw->ended.mu);
        ++raw->ended.flows[status];
      };
      eo.on_applied = [raw](const flow::Effects& fx) {
        Typed& t = raw->typed;
        std::lock_guard<std::mutex> lock(t.mu);
        for (const auto& type : fx.runs_started) t.runs_started.push_back(type);
        for (const auto& s : fx.started) {
          t.started.push_back(s.flow_type + "/" + s.type + "/" +
                              flow::Method_Name(s.task.method()));
          t.waits_ms.push_back(s.at_ms - s.queued_ms);
        }
        for (const auto& e : fx.ended) {
          t.ended.push_back(e.flow_type + "/" + e.type + "/" + flow::Method_Name(e.task.method()));
          t.durations_ms.push_back(e.at_ms - e.started_ms);
        }
        for (const auto& c : fx.closed) t.closed.push_back(c.flow_type);
        for (const auto& r : fx.rpcs_ended) t.rpcs.push_back(r.flow_type + "/" + r.name);
      };
    });
    return p;
  }

  static void start_one(Engine& e, const std::string& id) {
    EXPECT_FALSE(start(e, id, "in", "One").empty());
  }
  static ResultAck finish(Engine& e, Engine::WorkerHandle w, const flow::FlowTask& task, bool ok) {
    return ok ? decide(e, w, task, complete("1")) : fail_task(e, w, task, "bad input", true);
  }

  MemoryObjectStore store_;
};

using Attempts = std::map<flow::AttemptOutcome, int>;
using Flows = std::map<flow::FlowStatus, int>;
using Names = std::vector<std::string>;

// on_applied (metrics by type, docs/metrics.md): the effects name the Flow and
// Step types, and their record times give the schedule-to-start wait and the
// attempt's duration.
TEST_F(EngineObserverTest, AppliedEffectsNameTheTypesAndCarryRecordTimes) {
  auto p = start_process(1, dir_.sub("local"));
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  auto worker = std::make_shared<FlowWorker>();
  auto w = connect_flows(e, worker, "w1", one_step());
  start_one(e, "typed");
  auto t = worker->next();
  ASSERT_TRUE(t);
  ASSERT_TRUE(finish(e, w, *t, true).accepted());
  std::lock_guard<std::mutex> lock(p->typed.mu);
  EXPECT_EQ(p->typed.runs_started, (Names{"One"}));
  EXPECT_EQ(p->typed.started, (Names{"One/Start/EXECUTE"}));
  EXPECT_EQ(p->typed.ended, (Names{"One/Start/EXECUTE"}));
  EXPECT_EQ(p->typed.closed, (Names{"One"}));
  EXPECT_TRUE(p->typed.rpcs.empty());
  ASSERT_EQ(p->typed.waits_ms.size(), 1u);
  EXPECT_GE(p->typed.waits_ms[0], 0) << "queued and handed over in one record: no wait";
  EXPECT_LT(p->typed.waits_ms[0], 60'000);
  ASSERT_EQ(p->typed.durations_ms.size(), 1u);
  EXPECT_GE(p->typed.durations_ms[0], 0);
}

TEST_F(EngineObserverTest, CompletedFailedAndCancelledAreReportedBeforeTheCallerHears) {
  auto p = start_process(1, dir_.sub("local"));
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  auto worker = std::make_shared<FlowWorker>();
  auto w = connect_flows(e, worker, "w1", one_step());
  EXPECT_TRUE(p->ended.attempts_snapshot().empty());

  start_one(e, "ok");
  auto t1 = worker->next();
  ASSERT_TRUE(t1);
  ASSERT_TRUE(finish(e, w, *t1, true).accepted());
  // Reported before complete_task resolved: no waiting needed.
  EXPECT_EQ(p->ended.attempts_snapshot(), (Attempts{{flow::ATTEMPT_COMPLETED, 1}}));
  EXPECT_EQ(p->ended.flows_snapshot(), (Flows{{flow::FLOW_COMPLETED, 1}}));

  start_one(e, "bad");
  auto t2 = worker->next();
  ASSERT_TRUE(t2);
  ASSERT_TRUE(finish(e, w, *t2, false).accepted());

  start_one(e, "cancelled");
  auto t3 = worker->next();
  ASSERT_TRUE(t3);
  flow::StopFlowRequest stop;
  stop.set_flow_id("cancelled");
  ASSERT_TRUE(e.stop_flow(stop).is_ok());
  // A stale result changes nothing and reports nothing.
  EXPECT_FALSE(finish(e, w, *t3, true).accepted());

  EXPECT_EQ(p->ended.attempts_snapshot(), (Attempts{
                                              {flow::ATTEMPT_COMPLETED, 1},
                                              {flow::ATTEMPT_FAILED, 1},
                                              {flow::ATTEMPT_NOT_COMPLETED, 1},  // the stop
                                          }));
  EXPECT_EQ(p->ended.flows_snapshot(), (Flows{
                                           {flow::FLOW_COMPLETED, 1},
                                           {flow::FLOW_FAILED, 1},
                                           {flow::FLOW_CANCELED, 1},
                                       }));
}

// Replay at open does not report again what the earlier epoch's process
// reported; this epoch's recovery (the attempt its EpochStart ends
// NOT_COMPLETED) is reported once, by the process that wrote it.
class EngineObserverReplayTest : public EngineObserverTest {
 protected:
  void run(bool fresh_store) {
    auto p1 = start_process(1, dir_.sub("local1"));
    ASSERT_TRUE(p1->engine);
    Engine& e1 = *p1->engine;
    auto w1 = std::make_shared<FlowWorker>();
    auto h1 = connect_flows(e1, w1, "w1", one_step());
    start_one(e1, "done");
    auto t1 = w1->next();
    ASSERT_TRUE(t1);
    ASSERT_TRUE(finish(e1, h1, *t1, true).accepted());
    start_one(e1, "held");
    ASSERT_TRUE(w1->next());  // running when the process crashes
    EXPECT_EQ(p1->ended.attempts_snapshot(), (Attempts{{flow::ATTEMPT_COMPLETED, 1}}));
    EXPECT_EQ(p1->ended.flows_snapshot(), (Flows{{flow::FLOW_COMPLETED, 1}}));

    // Crash: the engine and writer are dropped without a release.
    p1->lease = false;
    p1->engine.reset();
    p1->writer.reset();
    clock_.advance(seconds(5));

    auto p2 = start_process(2, fresh_store ? dir_.sub("local2") : dir_.sub("local1"));
    ASSERT_TRUE(p2->engine);
    // The replayed completion of "done" is not reported again; the recovery's
    // NOT_COMPLETED of "held" is (the run retries: it did not close).
    EXPECT_EQ(p2->ended.attempts_snapshot(), (Attempts{{flow::ATTEMPT_NOT_COMPLETED, 1}}));
    EXPECT_TRUE(p2->ended.flows_snapshot().empty());
    {
      // The replayed starts are not counted again; the recovery's end is.
      std::lock_guard<std::mutex> lock(p2->typed.mu);
      EXPECT_TRUE(p2->typed.runs_started.empty());
      EXPECT_EQ(p2->typed.ended, (Names{"One/Start/EXECUTE"}));
    }
    EXPECT_EQ(status_of(*p2->engine, "done"), flow::FLOW_COMPLETED);

    // Live applies after the open are reported as before.
    auto w2 = std::make_shared<FlowWorker>();
    auto h2 = connect_flows(*p2->engine, w2, "w1", one_step());
    // The retry waits its backoff (1 s) on the durable timer. Bounded.
    std::optional<flow::FlowTask> t2;
    for (int i = 0; i < 200 && !t2; ++i) {
      clock_.advance(milliseconds(200));
      t2 = w2->next(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(t2);
    EXPECT_EQ(t2->flow_id(), "held");
    EXPECT_EQ(t2->attempt(), 2u);
    ASSERT_TRUE(finish(*p2->engine, h2, *t2, true).accepted());
    EXPECT_EQ(p2->ended.attempts_snapshot(), (Attempts{
                                                 {flow::ATTEMPT_COMPLETED, 1},
                                                 {flow::ATTEMPT_NOT_COMPLETED, 1},
                                             }));
    EXPECT_EQ(p2->ended.flows_snapshot(), (Flows{{flow::FLOW_COMPLETED, 1}}));
  }
};

TEST_F(EngineObserverReplayTest, ReplayOnTheSameLocalStoreReportsOnlyThisEpochsRecovery) {
  run(false);
}

TEST_F(EngineObserverReplayTest, ReplayIntoAFreshLocalStoreReportsOnlyThisEpochsRecovery) {
  run(true);
}

}  // namespace
}  // namespace dex
