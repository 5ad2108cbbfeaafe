// Time travel through the whole engine (docs/time-travel.md): a dry run shows
// the new run's start and changes nothing; the new run's tasks reach the
// Worker and it completes; a repeat with the request ID answers the same run.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace dex {
namespace {

using namespace dex::testing;

flow::TimeTravelRequest travel(const std::string& flow_id, const std::string& run_id,
                               const std::string& step_type, bool dry_run,
                               const std::string& request_id = "req-1") {
  flow::TimeTravelRequest r;
  r.mutable_flow()->set_flow_id(flow_id);
  r.mutable_flow()->set_run_id(run_id);
  r.mutable_point()->set_kind(flow::TIME_TRAVEL_LATEST_OF_STEP_TYPE);
  r.mutable_point()->set_step_type(step_type);
  r.set_reason("fixed Next");
  r.set_request_id(request_id);
  r.set_dry_run(dry_run);
  return r;
}

class FlowTimeTravelTest : public OneWorkerTest {};

TEST_F(FlowTimeTravelTest, ADryRunShowsTheStartThenTheNewRunRunsAndARepeatAnswersIt) {
  Engine& e = open_with_worker();
  const std::string old_run = start(e, "o1");
  auto first = worker_->next();
  ASSERT_TRUE(first);
  ASSERT_TRUE(decide(e, handle_, *first, go_to("Next")).accepted());
  auto next = worker_->next();
  ASSERT_TRUE(next);
  ASSERT_TRUE(fail_task(e, handle_, *next, "bug", /*non_retryable=*/true).accepted());
  ASSERT_EQ(wait_closed(e, "o1").status(), flow::FLOW_FAILED);

  // A dry run: the would-be start, and nothing changes.
  auto preview = e.time_travel(travel("o1", old_run, "Next", /*dry_run=*/true));
  ASSERT_TRUE(preview.is_ok()) << preview.status().to_string();
  ASSERT_EQ(preview->start().active_size(), 1);
  EXPECT_EQ(preview->start().active(0).step_execution_id(), "Next-1");
  EXPECT_EQ(preview->start().active(0).phase(), flow::PHASE_EXECUTE);
  EXPECT_EQ(preview->start().flow().traveled_from_run_id(), old_run);
  // The rest of GetFlowState's view: the effective config, every default filled in.
  ASSERT_TRUE(preview->start().has_config());
  EXPECT_NE(preview->start().config().default_durability(), flow::DURABILITY_UNSPECIFIED);
  auto still = e.describe_flow(flow_ref("o1"));
  ASSERT_TRUE(still.is_ok());
  EXPECT_EQ(still->run_id(), old_run);
  EXPECT_TRUE(still->traveled_to_run_id().empty());
  EXPECT_FALSE(worker_->next(std::chrono::milliseconds(200))) << "a dry run hands out nothing";

  auto traveled = e.time_travel(travel("o1", old_run, "Next", false));
  ASSERT_TRUE(traveled.is_ok()) << traveled.status().to_string();
  EXPECT_FALSE(traveled->already_done());
  const std::string new_run = traveled->run_id();
  ASSERT_NE(new_run, old_run);
  auto again = worker_->next();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->run_id(), new_run);
  EXPECT_EQ(again->step_execution_id(), "Next-1");
  EXPECT_EQ(again->attempt(), 1u);
  EXPECT_EQ(again->input().data(), "Next-input");
  ASSERT_TRUE(decide(e, handle_, *again, complete("fixed")).accepted());
  const flow::FlowDescription done = wait_closed(e, "o1");
  EXPECT_EQ(done.run_id(), new_run);
  EXPECT_EQ(done.status(), flow::FLOW_COMPLETED);
  EXPECT_EQ(done.traveled_from_run_id(), old_run);
  EXPECT_EQ(done.runs(), 2u);
  flow::FlowRef old_ref = flow_ref("o1");
  old_ref.set_run_id(old_run);
  EXPECT_EQ(e.describe_flow(old_ref)->traveled_to_run_id(), new_run);

  // A repeat (a lost answer) answers the run the first try made.
  auto repeat = e.time_travel(travel("o1", old_run, "Next", false));
  ASSERT_TRUE(repeat.is_ok()) << repeat.status().to_string();
  EXPECT_TRUE(repeat->already_done());
  EXPECT_EQ(repeat->run_id(), new_run);
  // Another request from the old run is refused: it is no longer the latest.
  auto stale = e.time_travel(travel("o1", old_run, "Next", false, "req-2"));
  ASSERT_FALSE(stale.is_ok());
  EXPECT_NE(stale.status().message().find("not the latest run"), std::string::npos)
      << stale.status().to_string();
}

}  // namespace
}  // namespace dex
