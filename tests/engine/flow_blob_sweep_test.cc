// Blob collection through the whole engine (engine/flow_blob_sweep.h): the
// active process's passes delete the blobs nothing in its state references
// (one put directly, one from a start that was refused) and keep those a
// running Flow's input references, pass after pass. MemoryObjectStore +
// LogWriter + Engine, a manual clock driving the passes.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "blob/blob_store.h"
#include "common/digest.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;

constexpr Duration kInterval = std::chrono::minutes(1);

std::string value(size_t n, char c) { return std::string(n, c); }

class FlowBlobSweepTest : public EngineProcessTest {
 protected:
  std::unique_ptr<EngineProcess> open(ObjectStore& store, Duration interval = kInterval) {
    auto p = std::make_unique<EngineProcess>();
    open_process(*p, store, 1, dir_.sub("local1"), [&](EngineOptions& eo) {
      eo.values.threshold_bytes = 1024;
      eo.values.value_bytes_max = 64 * 1024;
      eo.values.message_bytes_max = 1 << 20;
      eo.values.collect_interval = interval;
      eo.values.collect_min_age = Duration::zero();
      eo.on_blobs_collected = [this](const SweepCounts& c) {
        std::lock_guard<std::mutex> lock(mu_);
        passes_.push_back(c);
      };
    });
    return p;
  }
  size_t passes() {
    std::lock_guard<std::mutex> lock(mu_);
    return passes_.size();
  }
  // Moves the clock to the next pass and waits (real time, bounded) for its counts.
  SweepCounts next_pass() {
    const size_t seen = passes();
    clock_.advance(kInterval);
    EXPECT_TRUE(eventually([&] { return passes() > seen; })) << "no pass ran";
    std::lock_guard<std::mutex> lock(mu_);
    return passes_.empty() ? SweepCounts{} : passes_.back();
  }
  bool exists(ObjectStore& store, const std::string& key) { return store.get(key).is_ok(); }
  static std::string blob_key(const std::string& flow_id, const std::string& v) {
    MemoryObjectStore unused;
    ManualClock clock;
    return BlobStore(unused, clock, kNode, {}).flow_prefix(flow_id) + sha256_hex(v);
  }

  std::mutex mu_;
  std::vector<SweepCounts> passes_;  // guarded by mu_
};

TEST_F(FlowBlobSweepTest, AnOrphanIsCollectedAndARunningFlowsInputStays) {
  MemoryObjectStore store([this] { return wall_ms(); });
  auto p = open(store);
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  e.disconnect_worker(connect_flows(e, std::make_shared<FlowWorker>(), "w0"));
  const std::string input = value(5000, 'i');
  start(e, "order/1", input);  // queued: no Worker takes it
  const std::string input_key = blob_key("order/1", input);
  ASSERT_TRUE(exists(store, input_key));
  // A blob nothing references (a process that crashed before its record).
  const std::string orphan = value(3000, 'x');
  BlobStore other(store, clock_, kNode, {});
  auto ref = other.put("nobody", orphan);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();

  SweepCounts c = next_pass();
  EXPECT_EQ(c.listed, 2u);
  EXPECT_EQ(c.candidates, 2u);
  EXPECT_EQ(c.deleted, 1u);
  EXPECT_EQ(c.bytes_freed, orphan.size());
  EXPECT_FALSE(exists(store, ref->key()));
  EXPECT_TRUE(exists(store, input_key));

  for (int pass = 0; pass < 2; ++pass) {
    c = next_pass();
    EXPECT_EQ(c.candidates, 1u);
    EXPECT_EQ(c.referenced, 1u) << "the run's input is found in the local store";
    EXPECT_EQ(c.deleted, 0u);
    EXPECT_TRUE(exists(store, input_key));
  }
  auto described = e.describe_flow(flow_ref("order/1"));
  ASSERT_TRUE(described.is_ok()) << described.status().to_string();
  EXPECT_EQ(described->input().data(), input);
}

TEST_F(FlowBlobSweepTest, ARefusedStartsValueIsCollectedAfterItsProtectedPass) {
  MemoryObjectStore store([this] { return wall_ms(); });
  auto p = open(store);
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  e.disconnect_worker(connect_flows(e, std::make_shared<FlowWorker>(), "w0"));
  start(e, "order/1", value(5000, 'i'));
  // A second start of the running Flow ID is refused; its input was stored first.
  const std::string refused = value(6000, 'j');
  flow::StartFlowRequest again;
  again.set_flow_id("order/1");
  again.set_flow_type("Order");
  again.mutable_input()->set_data(refused);
  ASSERT_FALSE(e.start_flow(again).is_ok());
  const std::string refused_key = blob_key("order/1", refused);
  ASSERT_TRUE(exists(store, refused_key));

  SweepCounts c = next_pass();  // put since the last pass began: kept this once
  EXPECT_EQ(c.referenced, 1u);
  EXPECT_EQ(c.recently_put, 1u);
  EXPECT_EQ(c.deleted, 0u);
  EXPECT_TRUE(exists(store, refused_key));
  c = next_pass();
  EXPECT_EQ(c.referenced, 1u);
  EXPECT_EQ(c.deleted, 1u);
  EXPECT_FALSE(exists(store, refused_key));
  EXPECT_TRUE(exists(store, blob_key("order/1", value(5000, 'i'))));
}

TEST_F(FlowBlobSweepTest, NoPassRunsWhenTheIntervalIsZero) {
  MemoryObjectStore store([this] { return wall_ms(); });
  auto p = open(store, Duration::zero());
  ASSERT_TRUE(p->engine);
  BlobStore other(store, clock_, kNode, {});
  auto ref = other.put("nobody", value(3000, 'x'));
  ASSERT_TRUE(ref.is_ok());
  clock_.advance(std::chrono::hours(24));
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(passes(), 0u);
  EXPECT_TRUE(exists(store, ref->key()));
}

}  // namespace
}  // namespace dex
