// The Node shell over a real filesystem object store, local RocksDB stores
// and the real lease keeper and engine (no API: the role is read directly).
// Spec (Step down): "If a stuck task keeps that store open, the process waits
// up to about 64 seconds after the release. If no other process has taken
// over by then, the call returns INTERNAL. Either way, the process then exits
// 1 without taking the lease." The store close is made to block through the
// test hook, and the limit is shortened to 2 s.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "dex/api.pb.h"
#include "lease/lease_record.h"
#include "node/node.h"
#include "objstore/filesystem_store.h"

namespace dex {
namespace {

namespace fs = std::filesystem;

// Blocks the store close until released, as a stuck task would.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class NodeShellTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dex-node-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto store = FilesystemObjectStore::open(dir_ / "objects", Durability::kProcessCrashSafe);
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = std::move(store).value();
  }
  void TearDown() override {
    gate_.open();
    fs::remove_all(dir_);
  }
  static NodeSettings settings() {
    NodeSettings s;
    s.node_id = "n1";
    s.lease_duration = seconds(3);
    s.step_down_hold_off = milliseconds(500);
    s.attempt_drain_timeout = seconds(1);
    return s;
  }
  NodeRuntime runtime(const std::string& name) {
    NodeRuntime r;
    r.program = "test";
    r.local_store_path = dir_ / (name + "-local");
    return r;
  }
  // A short stuck-store limit; `block_close` makes the closing of the
  // stopped serving period's store wait for gate_, as a stuck task would.
  NodeTestHooks hooks(bool block_close = false) {
    NodeTestHooks h;
    h.stuck_store_limit = seconds(2);
    if (block_close) h.before_store_close = [this] { gate_.wait(); };
    return h;
  }
  // On any exit from a test body (a failed ASSERT too) the gate opens and
  // the node is signalled, so the future running it can end instead of
  // hanging the test until CTest's timeout.
  struct StopOnExit {
    Gate& gate;
    Node& node;
    ~StopOnExit() {
      gate.open();
      node.signal();
    }
  };
  static bool wait_active(Node& node, Duration timeout = seconds(30)) {
    const TimePoint until = SystemClock::instance().now() + timeout;
    while (SystemClock::instance().now() < until) {
      if (node.state().active) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }
  LeaseRecordValue lease() {
    auto data = store_->get(lease_key(NodeId("n1")));
    EXPECT_TRUE(data.is_ok()) << data.status().to_string();
    auto record = decode_lease_record(data->body);
    EXPECT_TRUE(record.is_ok());
    return record.value();
  }
  static StepDownRequest request(const std::string& epoch) {
    StepDownRequest r;
    r.set_expected_node_id("n1");
    r.set_expected_node_epoch(epoch);
    return r;
  }

  fs::path dir_;
  std::unique_ptr<ObjectStore> store_;
  Gate gate_;
};

TEST_F(NodeShellTest, AStuckStoreWithNoTakeoverAnswersInternalAndExitsOneWithoutTheLease) {
  Node a(settings(), runtime("a"), *store_, SystemClock::instance(), hooks(true));
  auto code = std::async(std::launch::async, [&] { return a.run(); });
  StopOnExit stop_a{gate_, a};
  ASSERT_TRUE(wait_active(a));
  const TimePoint t0 = SystemClock::instance().now();
  auto answer = a.step_down(request("1"));
  const Duration took = SystemClock::instance().now() - t0;
  ASSERT_FALSE(answer.is_ok());
  EXPECT_TRUE(answer.status().is_permanent()) << answer.status().to_string();  // INTERNAL
  EXPECT_NE(answer.status().message().find("did not close"), std::string::npos);
  EXPECT_GE(took, seconds(2));
  EXPECT_LT(took, seconds(6));
  ASSERT_EQ(code.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(code.get(), 1);
  // The lease stays released at epoch 1: the process did not take it back.
  LeaseRecordValue held = lease();
  EXPECT_EQ(held.epoch, Epoch(1));
  EXPECT_TRUE(held.released);
  gate_.open();
}

TEST_F(NodeShellTest, AStuckStoreWithATakeoverAnswersTakenOverAndStillExitsOne) {
  Node a(settings(), runtime("a"), *store_, SystemClock::instance(), hooks(true));
  auto code_a = std::async(std::launch::async, [&] { return a.run(); });
  StopOnExit stop_a{gate_, a};
  ASSERT_TRUE(wait_active(a));
  Node b(settings(), runtime("b"), *store_, SystemClock::instance(), hooks());  // a cold standby
  auto code_b = std::async(std::launch::async, [&] { return b.run(); });
  StopOnExit stop_b{gate_, b};
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(b.state().active);
  auto answer = a.step_down(request("1"));
  ASSERT_TRUE(answer.is_ok()) << answer.status().to_string();
  EXPECT_EQ(answer->lease_holder_after_step_down(), TAKEN_OVER_BY_ANOTHER_PROCESS);
  EXPECT_EQ(answer->released_node_epoch(), "1");
  EXPECT_EQ(answer->active_node_epoch(), "2");
  // Still stuck at the limit: exit 1, and b keeps the lease.
  ASSERT_EQ(code_a.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(code_a.get(), 1);
  EXPECT_TRUE(wait_active(b, seconds(5)));
  EXPECT_EQ(lease().epoch, Epoch(2));
  gate_.open();
  b.signal();
  ASSERT_EQ(code_b.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_EQ(code_b.get(), 0);
  EXPECT_TRUE(lease().released);
}

TEST_F(NodeShellTest, AStoreThatClosesTakesTheLeaseBackAfterTheHoldOff) {
  Node a(settings(), runtime("a"), *store_, SystemClock::instance(), hooks());
  auto code = std::async(std::launch::async, [&] { return a.run(); });
  StopOnExit stop_a{gate_, a};
  ASSERT_TRUE(wait_active(a));
  auto answer = a.step_down(request("1"));
  ASSERT_TRUE(answer.is_ok()) << answer.status().to_string();
  EXPECT_EQ(answer->lease_holder_after_step_down(), TAKEN_BACK_BY_THIS_PROCESS);
  EXPECT_EQ(answer->active_node_epoch(), "2");
  EXPECT_TRUE(wait_active(a, seconds(10)));
  EXPECT_EQ(a.state().identity.epoch, Epoch(2));
  // A stale precondition changes nothing.
  auto stale = a.step_down(request("1"));
  EXPECT_TRUE(stale.status().is_precondition_failed()) << stale.status().to_string();
  a.signal();
  ASSERT_EQ(code.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_EQ(code.get(), 0);
}

// Node::status() (dex-web's process view): the active process names itself
// the holder with its epoch and a log head; a cold standby of the same node
// does not serve, says why, and names the holder and epoch it read.
TEST_F(NodeShellTest, StatusSaysWhatEachProcessIsAndWhoHoldsTheLease) {
  Node a(settings(), runtime("a"), *store_, SystemClock::instance(), hooks());
  auto code_a = std::async(std::launch::async, [&] { return a.run(); });
  StopOnExit stop_a{gate_, a};
  ASSERT_TRUE(wait_active(a));
  NodeStatus active = a.status();
  // The snapshot is refreshed by the role loop (every 100 ms at most).
  for (int i = 0; i < 100 && !(active.serving && active.log_head); ++i) {  // bounded by 100 tries
    std::this_thread::sleep_for(milliseconds(20));
    active = a.status();
  }
  EXPECT_EQ(active.node_id, "n1");
  EXPECT_EQ(active.role, "active");
  EXPECT_TRUE(active.serving);
  EXPECT_TRUE(active.not_serving_reason.empty()) << active.not_serving_reason;
  ASSERT_TRUE(active.epoch.has_value());
  EXPECT_EQ(*active.epoch, 1u);
  ASSERT_TRUE(active.holder_process_id.has_value());
  EXPECT_EQ(*active.holder_process_id, active.process_id);
  EXPECT_TRUE(active.log_head.has_value());
  EXPECT_FALSE(active.standby_state.has_value());

  Node b(settings(), runtime("b"), *store_, SystemClock::instance(), hooks());  // a cold standby
  auto code_b = std::async(std::launch::async, [&] { return b.run(); });
  StopOnExit stop_b{gate_, b};
  NodeStatus standby = b.status();
  for (int i = 0; i < 150 && !(standby.role == "cold-standby" && standby.holder_process_id);
       ++i) {  // bounded by 150 tries
    std::this_thread::sleep_for(milliseconds(20));
    standby = b.status();
  }
  EXPECT_EQ(standby.role, "cold-standby");
  EXPECT_FALSE(standby.serving);
  EXPECT_FALSE(standby.not_serving_reason.empty());
  EXPECT_NE(standby.process_id, active.process_id);
  ASSERT_TRUE(standby.holder_process_id.has_value());
  EXPECT_EQ(*standby.holder_process_id, active.process_id);
  ASSERT_TRUE(standby.epoch.has_value());
  EXPECT_EQ(*standby.epoch, 1u);
  EXPECT_FALSE(standby.log_head.has_value());

  b.signal();
  ASSERT_EQ(code_b.wait_for(seconds(20)), std::future_status::ready);
  a.signal();
  ASSERT_EQ(code_a.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_EQ(code_a.get(), 0);
}

}  // namespace
}  // namespace dex
