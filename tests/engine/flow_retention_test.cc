// Run retention through the whole engine (docs/flow-rules.md, "Retention"):
// the engine writes flows.retention into every start, the RETENTION timer
// fires on the engine's clock like any other, and the deleted run is gone
// for every read, also in the next process that replays the log.
// MemoryObjectStore + LogWriter + Engine with a ManualClock.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;

constexpr int64_t kRetentionMs = 10'000;

flow::FlowDeclaration one_step() {
  flow::FlowDeclaration d;
  d.set_flow_type("One");
  d.set_start_step_type("Work");
  d.add_steps()->set_step_type("Work");
  return d;
}

class FlowRetentionTest : public EngineProcessTest {
 protected:
  std::unique_ptr<EngineProcess> open(ObjectStore& store, uint64_t epoch) {
    auto p = std::make_unique<EngineProcess>();
    open_process(*p, store, epoch, dir_.sub("local"),
                 [](EngineOptions& eo) { eo.flow_retention_ms = kRetentionMs; });
    return p;
  }
  static Code describe_code(Engine& e, const std::string& flow_id) {
    return e.describe_flow(flow_ref(flow_id)).status().code();
  }
};

TEST_F(FlowRetentionTest, AClosedRunIsDeletedWhenItsRetentionPassesAndStaysDeleted) {
  MemoryObjectStore store;
  auto p = open(store, 1);
  Engine& e = *p->engine;
  auto worker = std::make_shared<FlowWorker>();
  auto w = connect_flows(e, worker, "w1", one_step());
  start(e, "kept", "in", "One");  // stays running: never deleted
  start(e, "done", "in", "One");
  for (int i = 0; i < 2; ++i) {
    auto task = worker->next();
    ASSERT_TRUE(task);
    if (task->flow_id() == "done") {
      ASSERT_TRUE(decide(e, w, *task, complete("out")).accepted());
    }
  }
  const flow::FlowDescription closed = wait_closed(e, "done");
  EXPECT_EQ(closed.status(), flow::FLOW_COMPLETED);
  auto described = e.describe_flow(flow_ref("done"));
  ASSERT_TRUE(described.is_ok());
  EXPECT_EQ(described->expire_unix_ms(), described->close_unix_ms() + kRetentionMs);
  EXPECT_EQ(e.describe_flow(flow_ref("kept"))->expire_unix_ms(), 0);

  clock_.advance(milliseconds(kRetentionMs - 1'000));
  EXPECT_EQ(status_of(e, "done"), flow::FLOW_COMPLETED) << "not yet";
  clock_.advance(seconds(2));
  ASSERT_TRUE(eventually([&] { return describe_code(e, "done") == Code::kNotFound; }));
  EXPECT_EQ(e.history(whole_history("done")).status().code(), Code::kNotFound);
  EXPECT_EQ(status_of(e, "kept"), flow::FLOW_RUNNING);
  end(p);

  // The next process replays the log (the deletion is a record like any other).
  auto p2 = open(store, 2);
  EXPECT_EQ(describe_code(*p2->engine, "done"), Code::kNotFound);
  EXPECT_EQ(status_of(*p2->engine, "kept"), flow::FLOW_RUNNING);
  // The Flow ID is free again.
  EXPECT_FALSE(start(*p2->engine, "done", "again", "One").empty());
  EXPECT_EQ(status_of(*p2->engine, "done"), flow::FLOW_RUNNING);
  end(p2);
}

}  // namespace
}  // namespace dex
