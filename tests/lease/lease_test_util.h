// Helpers for driving a LeaseMachine by hand with explicit times.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "lease/lease_machine.h"
#include "objstore/memory_store.h"

namespace dex::testing {

inline const TimePoint kT0 = TimePoint(seconds(1'000'000));

inline LeaseConfig config_for(std::string process, Duration duration = seconds(10)) {
  LeaseConfig c;
  c.node_id = NodeId("n1");
  c.process_id = ProcessId(std::move(process));
  c.duration = duration;
  c.seed = 42;
  return c;
}

// Performs a machine's op against an in-memory store.
inline LeaseResult perform(ObjectStore& store, const LeaseOp& op) {
  LeaseResult r;
  r.op_id = op.id;
  if (op.kind == LeaseOpKind::kRead) {
    auto got = store.get(op.key);
    r.status = got.status();
    if (got.is_ok()) {
      r.etag = got->etag;
      r.body = got->body;
    }
  } else {
    auto put = store.put(
        op.key, op.body,
        op.kind == LeaseOpKind::kCreate ? PutCondition::create() : PutCondition::replace(op.etag));
    r.status = put.status();
    if (put.is_ok()) r.etag = put.value();
  }
  return r;
}

inline LeaseResult answer(const LeaseOp& op, Status status) {
  LeaseResult r;
  r.op_id = op.id;
  r.status = std::move(status);
  return r;
}

inline LeaseRecordValue body_of(const LeaseOp& op) {
  auto r = decode_lease_record(op.body);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? r.value() : LeaseRecordValue{};
}

// One machine, a store, and a local clock that the test moves explicitly.
class Driver {
 public:
  Driver(LeaseConfig config, ObjectStore& store, TimePoint now = kT0)
      : machine(std::move(config)), store(store), now(now) {}

  void feed(LeaseActions a) {
    for (auto& e : a.events) events.push_back(e);
    if (a.op || a.wake_at || !machine.op_outstanding()) {
      op = a.op;
      wake_at = a.wake_at;
    }
  }
  void start() { feed(machine.start(now)); }
  // Performs the pending op against the store; answers `latency` later.
  void complete(Duration latency = milliseconds(10)) {
    ASSERT_TRUE(op.has_value());
    LeaseOp o = *op;
    LeaseResult r = perform(store, o);
    now += latency;
    feed(machine.on_result(now, r));
  }
  // Answers the pending op with `status` at `at`, without touching the store.
  void fail_at(TimePoint at, Status status) {
    ASSERT_TRUE(op.has_value());
    LeaseOp o = *op;
    now = at;
    feed(machine.on_result(now, answer(o, std::move(status))));
  }
  // Cuts the pending op off at its deadline.
  void cut_off() { fail_at(op->deadline, Status::transient("cut off")); }
  void wake() {
    ASSERT_TRUE(wake_at.has_value());
    now = std::max(now, *wake_at);
    feed(machine.on_wake(now));
  }
  void wake_at_time(TimePoint at) {
    now = at;
    feed(machine.on_wake(now));
  }
  // Performs ops and wakes until `done()` (bounded by `steps_max`).
  void run_until(const std::function<bool()>& done, int steps_max = 100'000) {
    for (int i = 0; i < steps_max && !done(); ++i) {
      if (op) {
        complete();
      } else if (wake_at) {
        wake();
      } else {
        return;
      }
    }
  }
  bool has(LeaseEventKind kind) const {
    for (const auto& e : events)
      if (e.kind == kind) return true;
    return false;
  }
  void acquire() {
    start();
    run_until([&] { return machine.state() != LeaseState::kAcquiring; });
    ASSERT_EQ(machine.state(), LeaseState::kHolding);
  }

  LeaseMachine machine;
  ObjectStore& store;
  TimePoint now;
  std::optional<LeaseOp> op;
  std::optional<TimePoint> wake_at;
  std::vector<LeaseEvent> events;
};

}  // namespace dex::testing
