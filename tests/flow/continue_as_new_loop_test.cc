// A Flow that loops for 1,000,000 Steps (docs/flow-rules.md,
// "Continue-as-new"): each Tick decides GoTo Tick and every 1,000th also
// continue-as-new, the runs it leaves expire after their retention. The
// local store (the flow rules' whole state, here in memory) stays bounded:
// it never holds more than a few runs' worth, however long the loop runs.
// DEX_LOOP_STEPS=<n> runs n Steps instead (the sanitizer builds run fewer).
#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <string>

#include "flow/continue_as_new.h"
#include "flow/flow_rules.h"
#include "flow/kv_txn.h"
#include "flow/state_check.h"
#include "flow_test_util.h"

namespace dex::flow::testing {
namespace {

constexpr uint32_t kEvery = 1'000;        // Steps per run
constexpr int64_t kRetentionMs = 60'000;  // a closed run is deleted a minute later
constexpr int64_t kStepMs = 10;           // each Tick takes 10 ms

uint64_t loop_steps() {
  const char* env = std::getenv("DEX_LOOP_STEPS");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 1'000'000;
}

class Loop {
 public:
  Loop() {
    FlowDeclaration d;
    d.set_flow_type("Loop");
    d.set_start_step_type("Tick");
    *d.add_steps() = step_decl("Tick");
    auto* count = d.add_attributes();
    count->set_key("count");
    count->set_type(ATTRIBUTE_INT64);
    FlowRecord declare;
    *declare.mutable_declare_flows()->add_declarations() = d;
    declare.mutable_declare_flows()->set_at_unix_ms(now_);
    apply(declare);
    FlowRecord start;
    auto* s = start.mutable_start_flow();
    s->set_flow_id("loop");
    s->set_run_id("r1");
    s->set_flow_type("Loop");
    s->set_retention_ms(kRetentionMs);
    s->set_at_unix_ms(now_);
    apply(start);
    assign(1);
  }

  // Tick-n decides (the next Tick, every kEvery-th also continue-as-new) and
  // writes count = n; the next Tick's attempt is handed out in the same record.
  void tick(uint64_t n) {
    now_ += kStepMs;
    FlowRecord r;
    auto* m = r.mutable_method_result();
    *m->mutable_task() = task(n);
    m->set_task_id("t" + std::to_string(n));
    m->set_outcome(ATTEMPT_COMPLETED);
    m->set_at_unix_ms(now_);
    *m->add_attribute_writes() = attr_int("count", static_cast<int64_t>(n));
    StepDecision d = go_to({go("Tick", "")});
    const bool rotate = n % kEvery == 0;
    d.set_continue_as_new(rotate);
    *m->mutable_decision() = d;
    r.set_at_unix_ms(now_);
    auto* a = r.add_assignments();
    *a->mutable_task() = task(n + 1);
    a->set_task_id("t" + std::to_string(n + 1));
    a->set_worker_id("w");
    const ApplyResult result = apply(r);
    ASSERT_EQ(result.kind, ApplyKind::kApplied) << result.message;
    if (rotate) {
      // The old run closed CONTINUED_AS_NEW before the assignment applied: the
      // next Tick is handed out in the new run; the old run expires later.
      expiring_.push_back({run_, now_ + kRetentionMs});
      run_ = continued_run_id("r1", ++continued_);
      assign(n + 1);
    }
    expire_due();
  }

  uint64_t store_bytes() const {
    uint64_t bytes = 0;
    for (const auto& [k, v] : kv_.data()) bytes += k.size() + v.size();  // bounded by the store
    return bytes;
  }
  MemoryKv& kv() { return kv_; }
  const std::string& run() const { return run_; }

 private:
  TaskRef task(uint64_t n) const {
    TaskRef t;
    t.set_flow_id("loop");
    t.set_run_id(run_);
    t.set_step_execution_id("Tick-" + std::to_string(n));
    t.set_method(EXECUTE);
    t.set_attempt(1);
    return t;
  }
  void assign(uint64_t n) {
    FlowRecord r;
    r.set_at_unix_ms(now_);
    auto* a = r.add_assignments();
    *a->mutable_task() = task(n);
    a->set_task_id("t" + std::to_string(n));
    a->set_worker_id("w");
    apply(r);
  }
  // The RETENTION timers that are due fire, as the proposer fires them.
  void expire_due() {
    while (!expiring_.empty() && expiring_.front().second <= now_) {  // bounded by the runs
      FlowRecord r;
      auto* f = r.mutable_timer_fired();
      f->mutable_key()->set_flow_id("loop");
      f->mutable_key()->set_run_id(expiring_.front().first);
      f->mutable_key()->set_kind(RETENTION);
      f->set_fire_at_ms(expiring_.front().second);
      f->set_at_unix_ms(now_);
      const ApplyResult result = apply(r);
      EXPECT_EQ(result.kind, ApplyKind::kApplied) << result.message;
      expiring_.pop_front();
    }
  }
  ApplyResult apply(const FlowRecord& r) {
    Effects fx;
    KvFlowTxn txn(kv_, ++slot_);
    return apply_record(txn, r, fx, SearchIndexing::kUpdate);
  }

  MemoryKv kv_;
  int64_t now_ = 1'800'000'000'000;
  uint64_t slot_ = 0;
  std::string run_ = "r1";
  uint32_t continued_ = 0;
  std::deque<std::pair<std::string, int64_t>> expiring_;
};

TEST(ContinueAsNewLoop, AMillionStepLoopKeepsTheLocalStoreBounded) {
  const uint64_t steps = loop_steps();
  ASSERT_GE(steps, 20u * kEvery) << "DEX_LOOP_STEPS must cover 20 runs";
  Loop loop;
  uint64_t settled = 0, largest = 0;
  // Bounded by DEX_LOOP_STEPS.
  for (uint64_t n = 1; n <= steps; ++n) {
    loop.tick(n);
    if (::testing::Test::HasFatalFailure()) return;
    if (n % kEvery != kEvery / 2) continue;  // measure mid-run
    const uint64_t bytes = loop.store_bytes();
    // By the tenth run the retention window (60 s = 6,000 Steps) is full.
    if (n / kEvery == 10) settled = bytes;
    largest = std::max(largest, bytes);
    if (n / kEvery % 50 == 0) {
      const Status s = check_state(loop.kv(), JournalCheck::kAll);
      ASSERT_TRUE(s.is_ok()) << "after " << n << " Steps: " << s.message();
    }
  }
  ASSERT_GT(settled, 0u);
  // The store holds the runs of one retention window plus the active one,
  // whatever the loop's length: never more than 20% over its settled size.
  EXPECT_LE(largest, settled + settled / 5)
      << "settled at " << settled << " bytes, grew to " << largest;
  // The active run holds at most one run's worth of Steps and history.
  KvFlowTxn txn(loop.kv());
  auto run = txn.run("loop", loop.run());
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status(), FLOW_RUNNING);
  EXPECT_LE(run->next_event(), kEvery + 2);
  EXPECT_LE(loop.kv().scan(keys::steps_prefix("loop", loop.run())).size(), kEvery + 1);
  EXPECT_EQ(txn.attribute("loop", loop.run(), "count", "")->int64_value(),
            static_cast<int64_t>(steps));
  EXPECT_EQ(run->continued_runs(), steps / kEvery);
  std::printf("%llu Steps in %u runs: the store settled at %llu bytes, largest %llu\n",
              static_cast<unsigned long long>(steps), run->continued_runs() + 1,
              static_cast<unsigned long long>(settled), static_cast<unsigned long long>(largest));
}

}  // namespace
}  // namespace dex::flow::testing
