// EngineOptions::on_attempt_ended / on_flow_ended (the metrics hooks,
// docs/metrics.md): every attempt and flow that ends in a live apply is
// reported once, before its caller is answered; replay at open reports nothing
// of earlier epochs, but this epoch's recovery (its EpochStart) is reported.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "log/log.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;

// Tasks come within 5 s (next() without an argument).
constexpr auto kTaskWait = std::chrono::milliseconds(5000);

// What the hooks reported, by outcome / status.
struct Ended {
  std::mutex mu;
  std::map<AttemptOutcome, int> attempts;
  std::map<FlowStatus, int> flows;
  std::map<AttemptOutcome, int> attempts_snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return attempts;
  }
  std::map<FlowStatus, int> flows_snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return flows;
  }
};

// `ended` is in a base before EngineProcess: it outlives the engine whose hooks
// write to it.
struct Reported {
  Ended ended;
};
struct Process : Reported, EngineProcess {};

class EngineObserverTest : public EngineProcessTest {
 protected:
  std::unique_ptr<Process> start_process(uint64_t epoch, const std::filesystem::path& local) {
    auto p = std::make_unique<Process>();
    Process* raw = p.get();
    open_process(*p, store_, epoch, local, [raw](EngineOptions& eo) {
      eo.on_attempt_ended = [raw](AttemptOutcome outcome) {
        std::lock_guard<std::mutex> lock(raw->ended.mu);
        ++raw->ended.attempts[outcome];
      };
      eo.on_flow_ended = [raw](FlowStatus status) {
        std::lock_guard<std::mutex> lock(raw->ended.mu);
        ++raw->ended.flows[status];
      };
    });
    return p;
  }

  static void register_one_step(Engine& e) {
    RegisterFlowTypeRequest req;
    req.set_definition(
        "name: one\nsteps: [{name: a, taskQueue: q, retry: {maxAttempts: 3, initialInterval: "
        "1s}}]");
    ASSERT_TRUE(e.register_flow_type(req).is_ok());
  }
  static void start(Engine& e, const std::string& id) {
    StartFlowRequest req;
    req.set_flow_type("one");
    req.set_flow_id(id);
    req.set_input("{}");
    ASSERT_TRUE(e.start_flow(req).is_ok());
  }
  static ResultAck finish(Engine& e, Engine::WorkerHandle w, const StepTask& task, bool ok) {
    TaskResult r;
    r.set_task_id(task.task_id());
    if (ok) {
      r.set_output("1");
    } else {
      r.mutable_failure()->set_message("bad input");
      r.mutable_failure()->set_non_retryable(true);
    }
    auto f = e.complete_task(w, r);
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  }

  MemoryObjectStore store_;
};

TEST_F(EngineObserverTest, CompletedFailedAndCancelledAreReportedBeforeTheCallerHears) {
  auto p = start_process(1, dir_.sub("local"));
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  register_one_step(e);
  auto worker = std::make_shared<FakeWorker>(kTaskWait);
  auto w = connect(e, worker);
  EXPECT_TRUE(p->ended.attempts_snapshot().empty());

  start(e, "ok");
  auto t1 = worker->next();
  ASSERT_TRUE(t1);
  ASSERT_TRUE(finish(e, w, *t1, true).accepted());
  // Reported before complete_task resolved: no waiting needed.
  EXPECT_EQ(p->ended.attempts_snapshot(),
            (std::map<AttemptOutcome, int>{{ATTEMPT_OUTCOME_COMPLETED, 1}}));
  EXPECT_EQ(p->ended.flows_snapshot(), (std::map<FlowStatus, int>{{FLOW_STATUS_COMPLETED, 1}}));

  start(e, "bad");
  auto t2 = worker->next();
  ASSERT_TRUE(t2);
  ASSERT_TRUE(finish(e, w, *t2, false).accepted());

  start(e, "cancelled");
  auto t3 = worker->next();
  ASSERT_TRUE(t3);
  CancelFlowRequest cancel;
  cancel.set_flow_id("cancelled");
  ASSERT_TRUE(e.cancel_flow(cancel).is_ok());
  // A stale result changes nothing and reports nothing.
  EXPECT_FALSE(finish(e, w, *t3, true).accepted());

  EXPECT_EQ(p->ended.attempts_snapshot(), (std::map<AttemptOutcome, int>{
                                              {ATTEMPT_OUTCOME_COMPLETED, 1},
                                              {ATTEMPT_OUTCOME_FAILED, 1},
                                              {ATTEMPT_OUTCOME_NOT_COMPLETED, 1},  // the cancel
                                          }));
  EXPECT_EQ(p->ended.flows_snapshot(), (std::map<FlowStatus, int>{
                                           {FLOW_STATUS_COMPLETED, 1},
                                           {FLOW_STATUS_FAILED, 1},
                                           {FLOW_STATUS_CANCELLED, 1},
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
    register_one_step(e1);
    auto w1 = std::make_shared<FakeWorker>(kTaskWait);
    auto h1 = connect(e1, w1);
    start(e1, "done");
    auto t1 = w1->next();
    ASSERT_TRUE(t1);
    ASSERT_TRUE(finish(e1, h1, *t1, true).accepted());
    start(e1, "held");
    ASSERT_TRUE(w1->next());  // running when the process crashes
    EXPECT_EQ(p1->ended.attempts_snapshot(),
              (std::map<AttemptOutcome, int>{{ATTEMPT_OUTCOME_COMPLETED, 1}}));
    EXPECT_EQ(p1->ended.flows_snapshot(), (std::map<FlowStatus, int>{{FLOW_STATUS_COMPLETED, 1}}));

    // Crash: the engine and writer are dropped without a release.
    p1->lease = false;
    p1->engine.reset();
    p1->writer.reset();
    clock_.advance(seconds(5));

    auto p2 = start_process(2, fresh_store ? dir_.sub("local2") : dir_.sub("local1"));
    ASSERT_TRUE(p2->engine);
    // The replayed completion of "done" is not reported again; the recovery's
    // NOT_COMPLETED of "held" is (the flow retries: it did not end).
    EXPECT_EQ(p2->ended.attempts_snapshot(),
              (std::map<AttemptOutcome, int>{{ATTEMPT_OUTCOME_NOT_COMPLETED, 1}}));
    EXPECT_TRUE(p2->ended.flows_snapshot().empty());
    EXPECT_EQ(p2->engine->get_flow("done")->status(), FLOW_STATUS_COMPLETED);

    // Live applies after the open are reported as before.
    auto w2 = std::make_shared<FakeWorker>(kTaskWait);
    auto h2 = connect(*p2->engine, w2);
    // The retry waits its backoff (1 s) on the durable timer. Bounded.
    std::optional<StepTask> t2;
    for (int i = 0; i < 200 && !t2; ++i) {
      clock_.advance(milliseconds(200));
      t2 = w2->next(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(t2);
    EXPECT_EQ(t2->flow_id(), "held");
    EXPECT_EQ(t2->attempt(), 2u);
    ASSERT_TRUE(finish(*p2->engine, h2, *t2, true).accepted());
    EXPECT_EQ(p2->ended.attempts_snapshot(), (std::map<AttemptOutcome, int>{
                                                 {ATTEMPT_OUTCOME_COMPLETED, 1},
                                                 {ATTEMPT_OUTCOME_NOT_COMPLETED, 1},
                                             }));
    EXPECT_EQ(p2->ended.flows_snapshot(), (std::map<FlowStatus, int>{{FLOW_STATUS_COMPLETED, 1}}));
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
