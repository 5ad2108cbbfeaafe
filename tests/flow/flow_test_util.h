// A small driver for unit tests of the flow rules: a MemoryKv state, records
// built from a few arguments, and readers of the state.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "flow/flow_rules.h"
#include "flow/kv_txn.h"
#include "flow/state_check.h"

namespace dex::flow::testing {

inline Payload payload(const std::string& s) {
  Payload p;
  p.set_data(s);
  return p;
}

inline StepDeclaration step_decl(const std::string& type, bool wait_for = false) {
  StepDeclaration s;
  s.set_step_type(type);
  s.set_has_wait_for(wait_for);
  return s;
}

inline StepMovement go(const std::string& type, const std::string& input = "") {
  StepMovement m;
  m.set_step_type(type);
  m.mutable_input()->set_data(input);
  return m;
}

inline StepDecision go_to(std::initializer_list<StepMovement> movements) {
  StepDecision d;
  for (const auto& m : movements) *d.mutable_go_to()->add_movements() = m;
  return d;
}

inline StepDecision graceful(const std::string& output) {
  StepDecision d;
  d.mutable_graceful_complete()->set_data(output);
  return d;
}

// P, a parent of SubFlows: Start (Execute only) -> Wait (WaitFor).
inline FlowDeclaration parent_declaration() {
  FlowDeclaration d;
  d.set_flow_type("P");
  d.set_start_step_type("Start");
  *d.add_steps() = step_decl("Start");
  *d.add_steps() = step_decl("Wait", true);
  return d;
}

inline StepDecision force_fail(const std::string& why) {
  StepDecision d;
  d.set_force_fail(why);
  return d;
}

// A Flow retry policy: `attempts` runs in all, the next 1 s after a failure.
inline StartOptions retrying(uint32_t attempts) {
  StartOptions o;
  o.mutable_retry_policy()->set_initial_interval_ms(1'000);
  o.mutable_retry_policy()->set_maximum_attempts(attempts);
  return o;
}

inline Condition timer_after(int64_t ms, const std::string& id = "") {
  Condition c;
  c.set_condition_id(id);
  c.mutable_timer()->set_duration_ms(ms);
  return c;
}

inline Condition channel(const std::string& name, ChannelMatch match, uint32_t min = 0,
                         uint32_t max = 0, const std::string& id = "") {
  Condition c;
  c.set_condition_id(id);
  c.mutable_channel()->set_channel(name);
  c.mutable_channel()->set_match(match);
  c.mutable_channel()->set_min(min);
  c.mutable_channel()->set_max(max);
  return c;
}

inline Wait wait_of(WaitKind kind, std::initializer_list<Condition> conditions) {
  Wait w;
  w.set_kind(kind);
  for (const auto& c : conditions) *w.add_conditions() = c;
  return w;
}

inline Attribute attr(const std::string& key, const std::string& value,
                      const std::string& instance = "") {
  Attribute a;
  a.set_key(key);
  a.set_instance_key(instance);
  a.mutable_value()->set_string_value(value);
  return a;
}

inline Attribute attr_int(const std::string& key, int64_t value) {
  Attribute a;
  a.set_key(key);
  a.mutable_value()->set_int64_value(value);
  return a;
}

inline Attribute attr_json(const std::string& key, const std::string& json) {
  Attribute a;
  a.set_key(key);
  a.mutable_value()->set_json_value(json);
  return a;
}

// A write without a value: deletes.
inline Attribute attr_delete(const std::string& key, const std::string& instance = "") {
  Attribute a;
  a.set_key(key);
  a.set_instance_key(instance);
  return a;
}

struct Harness {
  MemoryKv kv;
  int64_t now = 1'000'000;
  uint64_t tasks = 0;
  Effects effects;  // of the last apply
  size_t records = 0;

  ApplyResult apply(const FlowRecord& r) {
    effects.clear();
    KvFlowTxn txn(kv, /*slot=*/records + 1);  // one record per log slot
    ApplyResult result = apply_record(txn, r, effects);
    ++records;
    auto s = check_state(kv);
    EXPECT_TRUE(s.is_ok()) << s.message();
    return result;
  }

  ApplyResult declare(const FlowDeclaration& d) {
    FlowRecord r;
    *r.mutable_declare_flows()->add_declarations() = d;
    r.mutable_declare_flows()->set_at_unix_ms(now);
    return apply(r);
  }

  FlowRecord start_record(const std::string& flow_id, const std::string& run_id,
                          const std::string& type, const std::string& input = "in",
                          StartOptions options = {}) {
    FlowRecord r;
    auto* s = r.mutable_start_flow();
    s->set_flow_id(flow_id);
    s->set_run_id(run_id);
    s->set_flow_type(type);
    s->mutable_input()->set_data(input);
    *s->mutable_options() = options;
    s->set_at_unix_ms(now);
    return r;
  }

  ApplyResult start(const std::string& flow_id, const std::string& run_id = "r1",
                    const std::string& type = "T", StartOptions options = {}) {
    return apply(start_record(flow_id, run_id, type, "in", options));
  }

  std::optional<Run> run(const std::string& flow_id, const std::string& run_id = "r1") {
    KvFlowTxn txn(kv);
    return txn.run(flow_id, run_id);
  }
  StepExecution step(const std::string& flow_id, const std::string& exec,
                     const std::string& run_id = "r1") {
    KvFlowTxn txn(kv);
    auto s = txn.step(flow_id, run_id, exec);
    EXPECT_TRUE(s.has_value()) << exec;
    return s.value_or(StepExecution());
  }

  TaskRef ref(const std::string& flow_id, const std::string& exec,
              const std::string& run_id = "r1") {
    StepExecution s = step(flow_id, exec, run_id);
    TaskRef r;
    r.set_flow_id(flow_id);
    r.set_run_id(run_id);
    r.set_step_execution_id(exec);
    r.set_method(s.method().method());
    r.set_attempt(s.method().attempt());
    return r;
  }

  // Hands the execution's queued attempt to a Worker; returns its task id.
  std::string assign(const std::string& flow_id, const std::string& exec,
                     const std::string& run_id = "r1") {
    FlowRecord r;
    r.set_at_unix_ms(now);
    auto* a = r.add_assignments();
    *a->mutable_task() = ref(flow_id, exec, run_id);
    a->set_task_id("e1." + std::to_string(++tasks));
    a->set_worker_id("w1");
    apply(r);
    EXPECT_EQ(effects.started.size(), 1u) << exec << " was not queued";
    return a->task_id();
  }

  FlowRecord result_record(const std::string& flow_id, const std::string& exec,
                           const std::string& task_id, const std::string& run_id = "r1") {
    FlowRecord r;
    auto* m = r.mutable_method_result();
    *m->mutable_task() = ref(flow_id, exec, run_id);
    m->set_task_id(task_id);
    m->set_outcome(ATTEMPT_COMPLETED);
    m->set_at_unix_ms(now);
    return r;
  }

  ApplyResult execute(const std::string& flow_id, const std::string& exec,
                      const StepDecision& decision, const std::string& run_id = "r1") {
    const std::string task = assign(flow_id, exec, run_id);
    FlowRecord r = result_record(flow_id, exec, task, run_id);
    *r.mutable_method_result()->mutable_decision() = decision;
    return apply(r);
  }

  ApplyResult wait_for(const std::string& flow_id, const std::string& exec, const Wait& wait,
                       const std::string& run_id = "r1") {
    const std::string task = assign(flow_id, exec, run_id);
    FlowRecord r = result_record(flow_id, exec, task, run_id);
    *r.mutable_method_result()->mutable_wait() = wait;
    return apply(r);
  }

  ApplyResult fail(const std::string& flow_id, const std::string& exec, const std::string& error,
                   AttemptOutcome outcome = ATTEMPT_FAILED, const std::string& run_id = "r1") {
    const std::string task = assign(flow_id, exec, run_id);
    FlowRecord r = result_record(flow_id, exec, task, run_id);
    r.mutable_method_result()->set_outcome(outcome);
    r.mutable_method_result()->set_error(error);
    return apply(r);
  }

  ApplyResult publish(const std::string& flow_id, const std::string& channel,
                      std::initializer_list<std::string> messages,
                      const std::string& instance = "") {
    FlowRecord r;
    auto* p = r.mutable_publish();
    p->set_flow_id(flow_id);
    p->mutable_publish()->set_channel(channel);
    p->mutable_publish()->set_instance_key(instance);
    for (const auto& m : messages) *p->mutable_publish()->add_messages() = payload(m);
    p->set_at_unix_ms(now);
    return apply(r);
  }

  // Fires the earliest durable timer, moving time to it.
  ApplyResult fire_next_timer() {
    auto timers = kv.scan(keys::kTimerPrefix);
    EXPECT_FALSE(timers.empty());
    if (timers.empty()) return {};
    FlowRecord r;
    int64_t at = 0;
    EXPECT_TRUE(
        keys::parse_timer(timers.front().first, r.mutable_timer_fired()->mutable_key(), &at));
    r.mutable_timer_fired()->set_fire_at_ms(at);
    now = std::max(now, at);
    r.mutable_timer_fired()->set_at_unix_ms(now);
    return apply(r);
  }

  std::optional<int64_t> next_timer_at() {
    auto timers = kv.scan(keys::kTimerPrefix);
    if (timers.empty()) return std::nullopt;
    TimerKey key;
    int64_t at = 0;
    EXPECT_TRUE(keys::parse_timer(timers.front().first, &key, &at));
    return at;
  }

  ApplyResult set_attributes(const std::string& flow_id, std::initializer_list<Attribute> writes,
                             const std::string& run_id = "", const std::string& request_id = "") {
    FlowRecord r;
    auto* s = r.mutable_set_attributes();
    s->set_flow_id(flow_id);
    s->set_run_id(run_id);
    s->set_request_id(request_id);
    for (const auto& w : writes) *s->add_writes() = w;
    s->set_at_unix_ms(now);
    return apply(r);
  }

  std::vector<Attribute> attributes(const std::string& flow_id, const std::string& key = "",
                                    const std::string& run_id = "r1") {
    KvFlowTxn txn(kv);
    return txn.attributes(flow_id, run_id, key);
  }

  FlowRecord invoke_record(const std::string& flow_id, const std::string& rpc_id,
                           const std::string& name, int64_t timeout_ms = 10'000,
                           const std::string& input = "") {
    FlowRecord r;
    auto* i = r.mutable_invoke_rpc();
    i->set_flow_id(flow_id);
    i->set_rpc_id(rpc_id);
    i->set_name(name);
    i->mutable_input()->set_data(input);
    i->set_timeout_ms(timeout_ms);
    i->set_at_unix_ms(now);
    return r;
  }

  ApplyResult invoke(const std::string& flow_id, const std::string& rpc_id, const std::string& name,
                     int64_t timeout_ms = 10'000) {
    return apply(invoke_record(flow_id, rpc_id, name, timeout_ms));
  }

  std::optional<RpcExecution> rpc(const std::string& flow_id, const std::string& rpc_id,
                                  const std::string& run_id = "r1") {
    KvFlowTxn txn(kv);
    return txn.rpc(flow_id, run_id, rpc_id);
  }

  static TaskRef rpc_ref(const std::string& flow_id, const std::string& rpc_id,
                         const std::string& run_id = "r1") {
    TaskRef r;
    r.set_flow_id(flow_id);
    r.set_run_id(run_id);
    r.set_step_execution_id(rpc_id);
    r.set_method(RPC);
    r.set_attempt(1);
    return r;
  }

  // Hands the RPC's queued attempt to a Worker; returns its task id.
  std::string assign_rpc(const std::string& flow_id, const std::string& rpc_id,
                         const std::string& run_id = "r1") {
    FlowRecord r;
    r.set_at_unix_ms(now);
    auto* a = r.add_assignments();
    *a->mutable_task() = rpc_ref(flow_id, rpc_id, run_id);
    a->set_task_id("e1." + std::to_string(++tasks));
    a->set_worker_id("w1");
    apply(r);
    EXPECT_EQ(effects.started.size(), 1u) << rpc_id << " was not queued";
    return a->task_id();
  }

  FlowRecord rpc_result_record(const std::string& flow_id, const std::string& rpc_id,
                               const std::string& task_id, const std::string& run_id = "r1") {
    FlowRecord r;
    auto* m = r.mutable_method_result();
    *m->mutable_task() = rpc_ref(flow_id, rpc_id, run_id);
    m->set_task_id(task_id);
    m->set_outcome(ATTEMPT_COMPLETED);
    m->set_at_unix_ms(now);
    return r;
  }

  std::vector<HistoryEvent> history(const std::string& flow_id, const std::string& run_id = "r1") {
    std::vector<HistoryEvent> out;
    for (auto& [k, v] : kv.scan(keys::events_prefix(flow_id, run_id))) {
      HistoryEvent e;
      e.ParseFromString(v);
      out.push_back(e);
    }
    return out;
  }
};

}  // namespace dex::flow::testing
