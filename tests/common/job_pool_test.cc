// JobPool (src/common/job_pool.h): jobs run, oldest first, on the pool's
// threads; a job that blocks holds up no other thread's; stop() drops the jobs
// not started, waits for the running ones, and refuses later posts.
#include "common/job_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <vector>

namespace dex {
namespace {

using namespace std::chrono_literals;

TEST(JobPool, OneThreadRunsJobsOldestFirstOffTheCallersThread) {
  JobPool pool(1);
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> last;
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  for (int i = 0; i < 100; ++i) {  // bounded: 100 jobs
    ASSERT_TRUE(pool.post([&, i] {
      if (std::this_thread::get_id() == caller) on_caller = true;
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      if (i == 99) last.set_value();
    }));
  }
  ASSERT_EQ(last.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(on_caller);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(JobPool, ABlockedJobHoldsUpNoOtherThread) {
  JobPool pool(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> second;
  ASSERT_TRUE(pool.post([released] { released.wait(); }));
  ASSERT_TRUE(pool.post([&] { second.set_value(); }));
  EXPECT_EQ(second.get_future().wait_for(10s), std::future_status::ready)
      << "the second thread runs the next job while the first is blocked";
  release.set_value();
}

TEST(JobPool, StopDropsQueuedJobsWaitsForRunningOnesAndRefusesLaterPosts) {
  JobPool pool(1);
  std::promise<void> started;
  std::atomic<bool> finished{false};
  std::atomic<int> dropped_ran{0};
  ASSERT_TRUE(pool.post([&] {
    started.set_value();
    std::this_thread::sleep_for(100ms);
    finished = true;
  }));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool.post([&] { ++dropped_ran; }));
  started.get_future().wait();
  EXPECT_EQ(pool.queued(), 10u);
  pool.stop();
  EXPECT_TRUE(finished) << "stop() waited for the running job";
  EXPECT_EQ(dropped_ran, 0) << "queued jobs were dropped";
  EXPECT_EQ(pool.queued(), 0u);
  EXPECT_FALSE(pool.post([&] { ++dropped_ran; }));
  pool.stop();  // idempotent
  EXPECT_EQ(dropped_ran, 0);
}

}  // namespace
}  // namespace dex
