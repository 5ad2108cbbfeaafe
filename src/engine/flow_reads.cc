#include "engine/flow_reads.h"

#include <algorithm>
#include <queue>
#include <set>
#include <tuple>

#include <google/protobuf/util/message_differencer.h>

#include "blob/blob_values.h"
#include "engine/flow_timeout_handler.h"
#include "engine/task_channel_sizes.h"
#include "flow/declaration.h"
#include "flow/flow_rules.h"
#include "flow/run_editor.h"

namespace dex {
namespace {

bool is_active(flow::Phase p) {
  return p == flow::PHASE_WAIT_FOR || p == flow::PHASE_WAITING || p == flow::PHASE_EXECUTE;
}

}  // namespace

StatusOr<flow::Run> resolve_run(flow::KvFlowTxn& txn, const flow::FlowRef& ref) {
  std::string run_id = ref.run_id();
  if (run_id.empty()) {
    auto entry = txn.flow_id(ref.flow_id());
    if (!entry) return Status::not_found("no Flow with ID '" + ref.flow_id() + "'");
    run_id = entry->run_id();
  }
  auto run = txn.run(ref.flow_id(), run_id);
  if (!run) return Status::not_found("Flow '" + ref.flow_id() + "' has no run '" + run_id + "'");
  return std::move(*run);
}

bool flow_retry_pending(flow::KvFlowTxn& txn, const flow::Run& run) {
  if (run.status() == flow::FLOW_RUNNING || run.retry_at_ms() == 0) return false;
  // Another start that took the Flow ID abandons the retry (docs/flow-rules.md, "Flow retry").
  auto entry = txn.flow_id(run.flow_id());
  return entry && entry->run_id() == run.run_id();
}

flow::FlowDescription describe_run(flow::KvFlowTxn& txn, const flow::Run& run) {
  flow::FlowDescription d;
  d.set_flow_id(run.flow_id());
  d.set_run_id(run.run_id());
  d.set_flow_type(run.flow_type());
  d.set_declaration_version(run.declaration_version());
  d.set_status(run.status());
  d.set_start_unix_ms(run.start_ms());
  d.set_close_unix_ms(run.close_ms());
  d.set_close_reason(run.close_reason());
  *d.mutable_outputs() = run.outputs();
  *d.mutable_input() = run.input();
  if (auto entry = txn.flow_id(run.flow_id())) d.set_runs(entry->runs());
  *d.mutable_parents() = run.parents();
  d.set_flow_attempt(run.flow_attempt());
  d.set_previous_run_id(run.previous_run_id());
  d.set_expire_unix_ms(run.expire_at_ms());
  d.set_traveled_from_run_id(run.traveled_from_run_id());
  d.set_traveled_to_run_id(run.traveled_to_run_id());
  d.set_continued_from_run_id(run.continued_from_run_id());
  if (flow_retry_pending(txn, run)) {
    d.set_next_run_id(run.next_run_id());
    d.set_retry_unix_ms(run.retry_at_ms());
  } else if (!run.next_run_id().empty() && txn.run(run.flow_id(), run.next_run_id())) {
    d.set_next_run_id(run.next_run_id());  // the retry started
  }
  return d;
}

flow::Run follow_continued(flow::KvFlowTxn& txn, flow::Run run) {
  for (size_t hops = 0; hops < kContinueHopsMax; ++hops) {  // bounded by kContinueHopsMax
    if (run.status() != flow::FLOW_CONTINUED_AS_NEW || run.next_run_id().empty()) break;
    auto next = txn.run(run.flow_id(), run.next_run_id());
    if (!next) break;  // deleted by retention: the chain is known up to here
    run = std::move(*next);
  }
  return run;
}

std::vector<flow::StepExecutionView> active_steps(flow::KvFlowTxn& txn, const flow::Run& run) {
  std::vector<flow::StepExecutionView> out;
  for (const auto& id : run.active()) {  // bounded by kActiveStepsMax
    auto s = txn.step(run.flow_id(), run.run_id(), id);
    if (!s || !is_active(s->phase())) continue;
    flow::StepExecutionView v;
    v.set_step_execution_id(id);
    v.set_step_type(s->step_type());
    v.set_phase(s->phase());
    v.set_scheduled_by(s->parent_execution_id());
    v.set_created_unix_ms(s->created_ms());
    if (s->phase() != flow::PHASE_WAITING) {
      v.set_method(s->method().method());
      v.set_attempt(s->method().attempt());
      v.set_task_state(s->method().state());
      v.set_worker_id(s->method().worker_id());
      v.set_retry_unix_ms(s->method().retry_at_ms());
      if (s->method().has_last_failure()) *v.mutable_last_failure() = s->method().last_failure();
    }
    for (int i = 0; i < s->wait().conditions_size() && i < s->conditions_size(); ++i) {
      auto* c = v.add_conditions();
      *c->mutable_condition() = s->wait().conditions(i);
      c->set_fired(s->conditions(i).fired());
      c->set_skipped(s->conditions(i).skipped());
      c->set_timer_unix_ms(s->conditions(i).timer_at_ms());
      c->set_child_flow_id(s->conditions(i).child_flow_id());
      c->set_child_run_id(s->conditions(i).child_run_id());
      if (s->wait().conditions(i).has_channel()) {
        const auto& ch = s->wait().conditions(i).channel();
        auto q = txn.queue({run.flow_id(), run.run_id(), ch.channel(), ch.instance_key()});
        if (q) c->set_queued(q->next_seq() - q->first_seq());
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

namespace {

// The values one state shows: at most a budget together.
class ValueBudget {
 public:
  explicit ValueBudget(uint64_t bytes) : left_(bytes) {}
  // Whether `value` still fits (then it is counted); its length in `bytes`.
  bool take(const google::protobuf::Message& value, uint64_t& bytes) {
    bytes = inlined_size(value);
    if (bytes > left_) return false;
    left_ -= bytes;
    return true;
  }

 private:
  uint64_t left_;
};

void add_queues(flow::KvFlowTxn& txn, const flow::Run& run, ValueBudget& budget,
                flow::GetFlowStateResponse& state) {
  uint64_t omitted = 0;
  for (auto& [key, q] : txn.queues(run.flow_id(), run.run_id())) {  // bounded by the run's queues
    if (q.next_seq() <= q.first_seq()) continue;
    if (static_cast<size_t>(state.queues_size()) >= kStateQueuesMax) {
      ++omitted;
      continue;
    }
    auto* v = state.add_queues();
    v->set_channel(key.channel);
    v->set_instance_key(key.instance_key);
    v->set_count(q.next_seq() - q.first_seq());
    const uint64_t last = std::min<uint64_t>(q.next_seq(), q.first_seq() + kStateMessagesPerQueue);
    for (uint64_t seq = q.first_seq(); seq < last; ++seq) {  // bounded by kStateMessagesPerQueue
      auto message = txn.message(key, seq);
      if (!message) continue;
      auto* m = v->add_messages();
      m->set_seq(seq);
      uint64_t bytes = 0;
      if (budget.take(*message, bytes)) {
        *m->mutable_message() = std::move(*message);
      } else {
        m->set_omitted_bytes(std::max<uint64_t>(bytes, 1));
      }
    }
  }
  state.set_queues_omitted(omitted);
}

void add_attributes(flow::KvFlowTxn& txn, const flow::Run& run, ValueBudget& budget,
                    flow::GetFlowStateResponse& state) {
  // Bounded by the run's Attributes (kAttributesMax).
  for (auto& a : txn.attributes(run.flow_id(), run.run_id(), "")) {
    auto* v = state.add_attributes();
    uint64_t bytes = 0;
    if (!budget.take(a.value(), bytes)) {
      a.clear_value();
      v->set_omitted_bytes(std::max<uint64_t>(bytes, 1));
    }
    *v->mutable_attribute() = std::move(a);
  }
}

flow::StepExecutionView ended_view(const flow::StepExecution& s) {
  flow::StepExecutionView v;
  v.set_step_execution_id(s.step_execution_id());
  v.set_step_type(s.step_type());
  v.set_phase(s.phase());
  v.set_scheduled_by(s.parent_execution_id());
  v.set_created_unix_ms(s.created_ms());
  v.set_method(s.method().method());  // the last method that ran
  v.set_attempt(s.method().attempt());
  if (s.method().has_last_failure()) *v.mutable_last_failure() = s.method().last_failure();
  return v;
}

void add_ended(flow::KvFlowTxn& txn, const flow::Run& run, flow::GetFlowStateResponse& state) {
  const std::set<std::string> active(run.active().begin(), run.active().end());
  uint64_t created = 0;
  for (const auto& c : run.counters()) created += c.count();  // bounded by the Step types
  state.set_ended_count(created > active.size() ? created - active.size() : 0);
  // A type's executions are numbered in creation order ("<type>-<n>"): each
  // type's newest ended one not yet shown waits in the heap, and the newest of
  // them all is taken next. Reads at most the types, the active executions
  // and kStateEndedMax executions.
  struct Next {
    int64_t created_ms;
    std::string id;
    int type;
    uint32_t n;
    flow::StepExecution step;
  };
  // Executions created by one record have one time: then the higher number
  // (within a type, the later one), then the ID.
  auto older = [](const Next& a, const Next& b) {
    return std::tie(a.created_ms, a.n, a.id) < std::tie(b.created_ms, b.n, b.id);
  };
  std::priority_queue<Next, std::vector<Next>, decltype(older)> heap(older);
  auto push_from = [&](int type, uint32_t n) {
    const std::string& step_type = run.counters(type).step_type();
    for (; n > 0; --n) {  // bounded by the type's executions; ends at its next ended one
      std::string id = flow::step_execution_id(step_type, n);
      if (active.count(id) > 0) continue;
      auto s = txn.step(run.flow_id(), run.run_id(), id);
      if (!s || is_active(s->phase())) continue;
      heap.push(Next{s->created_ms(), std::move(id), type, n, std::move(*s)});
      return;
    }
  };
  for (int t = 0; t < run.counters_size(); ++t) push_from(t, run.counters(t).count());
  while (!heap.empty() && static_cast<size_t>(state.ended_size()) < kStateEndedMax) {
    Next next = heap.top();  // bounded by kStateEndedMax
    heap.pop();
    *state.add_ended() = ended_view(next.step);
    push_from(next.type, next.n - 1);
  }
}

}  // namespace

flow::FlowConfig config_view(const flow::Run& run) {
  flow::FlowConfig config = flow::config_with_defaults(run.config());
  config.set_attribute_store(run.attribute_store());  // a run from before FlowConfig named it
  return config;
}

void add_state_contents(flow::KvFlowTxn& txn, const flow::Run& run, uint64_t value_bytes_max,
                        flow::GetFlowStateResponse& state) {
  *state.mutable_config() = config_view(run);
  ValueBudget budget(value_bytes_max);
  add_queues(txn, run, budget, state);
  add_attributes(txn, run, budget, state);
  add_ended(txn, run, state);
}

flow::GetHistoryEventsResponse history_page(flow::KvStore& kv, const flow::Run& run,
                                            uint64_t after_seq, bool from_start, uint32_t page) {
  flow::GetHistoryEventsResponse out;
  out.set_run_id(run.run_id());
  const std::string prefix = flow::keys::events_prefix(run.flow_id(), run.run_id());
  const uint64_t first = from_start ? 0 : after_seq + 1;
  auto rows = kv.scan_first(prefix, page + 1, prefix + flow::keys::digits(first));
  for (auto& [key, value] : rows) {  // bounded by page + 1
    if (static_cast<uint32_t>(out.events_size()) == page) {
      out.set_more(true);
      break;
    }
    out.add_events()->ParseFromString(value);
  }
  return out;
}

flow::Durability method_durability(flow::KvFlowTxn& txn, const flow::TaskRef& ref) {
  // An RPC's caller waits: its task goes out while its start is written (a
  // start that never becomes durable leaves nothing, and the caller gets
  // UNAVAILABLE).
  if (ref.method() == flow::RPC) return flow::ASYNC;
  if (ref.method() == flow::ON_TIMEOUT) {
    auto run = txn.run(ref.flow_id(), ref.run_id());
    return run ? handler_durability(txn, *run) : flow::SYNC;
  }
  auto s = txn.step(ref.flow_id(), ref.run_id(), ref.step_execution_id());
  if (!s) return flow::SYNC;
  return ref.method() == flow::WAIT_FOR ? s->options().wait_for().durability()
                                        : s->options().execute().durability();
}

bool sent_before_applied(flow::KvFlowTxn& txn, const flow::TaskRef& ref,
                         flow::Durability durability) {
  return durability == flow::ASYNC && flow::task_attribute_reads(txn, ref).empty();
}

bool holds_lock_keys(flow::KvFlowTxn& txn, const flow::TaskRef& ref) {
  auto run = txn.run(ref.flow_id(), ref.run_id());
  if (!run) return false;
  for (const auto& l : run->locks())  // bounded by the run's lock keys
    if (l.holder() == ref.step_execution_id() && l.method() == ref.method()) return true;
  return false;
}

bool still_queued(flow::KvFlowTxn& txn, const flow::TaskRef& ref) {
  auto run = txn.run(ref.flow_id(), ref.run_id());
  if (!run || run->status() != flow::FLOW_RUNNING) return false;
  if (ref.method() == flow::RPC) {
    auto rpc = txn.rpc(ref.flow_id(), ref.run_id(), ref.step_execution_id());
    return rpc && !rpc->done() && rpc->method().state() == flow::TASK_QUEUED &&
           rpc->method().attempt() == ref.attempt();
  }
  if (ref.method() == flow::ON_TIMEOUT) return handler_queued(*run, ref);
  auto s = txn.step(ref.flow_id(), ref.run_id(), ref.step_execution_id());
  return s && s->method().state() == flow::TASK_QUEUED && s->method().method() == ref.method() &&
         s->method().attempt() == ref.attempt();
}

bool same_task_inputs(const flow::FlowTask& sent, const flow::FlowTask& stored) {
  flow::FlowTask a = sent;
  flow::FlowTask b = stored;
  for (flow::FlowTask* t : {&a, &b}) {
    t->clear_task_id();
    t->clear_first_attempt_unix_ms();
    t->clear_channel_sizes();
    t->clear_channel_sizes_truncated();
  }
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

namespace {

std::optional<flow::FlowTask> build_rpc_task(flow::KvFlowTxn& txn, const flow::Run& run,
                                             const flow::TaskRef& ref, const std::string& task_id) {
  auto rpc = txn.rpc(ref.flow_id(), ref.run_id(), ref.step_execution_id());
  if (!rpc || rpc->done() || rpc->method().attempt() != ref.attempt()) return std::nullopt;
  flow::FlowTask t;
  t.set_task_id(task_id);
  t.set_flow_id(run.flow_id());
  t.set_run_id(run.run_id());
  t.set_flow_type(run.flow_type());
  t.set_declaration_version(run.declaration_version());
  t.set_step_execution_id(rpc->rpc_id());
  t.set_method(flow::RPC);
  t.set_attempt(ref.attempt());
  t.set_first_attempt_unix_ms(rpc->created_ms());
  t.set_rpc_name(rpc->name());
  t.set_flow_attempt(std::max<uint32_t>(run.flow_attempt(), 1));
  *t.mutable_input() = rpc->input();
  // The whole timeout: the deadline timer ends the RPC at its deadline even
  // when the attempt's own timeout, counted from the hand-over, has not passed.
  t.set_attempt_timeout_ms(std::max<int64_t>(1, rpc->deadline_ms() - rpc->created_ms()));
  for (auto& a : flow::task_attributes(txn, ref)) *t.add_attributes() = std::move(a);
  add_channel_sizes(txn, run, t);
  return t;
}

}  // namespace

std::optional<flow::FlowTask> build_task(flow::KvFlowTxn& txn, const flow::TaskRef& ref,
                                         const std::string& task_id) {
  auto run = txn.run(ref.flow_id(), ref.run_id());
  if (run && ref.method() == flow::RPC) return build_rpc_task(txn, *run, ref, task_id);
  if (run && ref.method() == flow::ON_TIMEOUT) return build_handler_task(txn, *run, ref, task_id);
  auto s = txn.step(ref.flow_id(), ref.run_id(), ref.step_execution_id());
  if (!run || !s || s->method().method() != ref.method() || s->method().attempt() != ref.attempt())
    return std::nullopt;
  flow::FlowTask t;
  t.set_task_id(task_id);
  t.set_flow_id(run->flow_id());
  t.set_run_id(run->run_id());
  t.set_flow_type(run->flow_type());
  t.set_declaration_version(run->declaration_version());
  t.set_step_type(s->step_type());
  t.set_step_execution_id(s->step_execution_id());
  t.set_method(ref.method());
  t.set_attempt(ref.attempt());
  t.set_first_attempt_unix_ms(s->method().first_attempt_ms());
  t.set_scheduled_by(s->parent_execution_id());
  t.set_flow_attempt(std::max<uint32_t>(run->flow_attempt(), 1));
  *t.mutable_input() = s->input();
  const auto& options =
      ref.method() == flow::WAIT_FOR ? s->options().wait_for() : s->options().execute();
  t.set_attempt_timeout_ms(options.attempt_timeout_ms());
  t.set_heartbeat_timeout_ms(options.heartbeat_timeout_ms());
  t.set_recovery_error(s->recovery_error());
  if (ref.method() == flow::EXECUTE) {
    *t.mutable_locals() = s->locals();
    t.set_wait_for_failed(s->wait_for_failed());
    for (int i = 0; i < s->wait().conditions_size() && i < s->conditions_size(); ++i) {
      auto* r = t.add_conditions();
      r->set_index(static_cast<uint32_t>(i));
      r->set_condition_id(s->wait().conditions(i).condition_id());
      r->set_fired(s->conditions(i).satisfied());
      r->set_skipped(s->conditions(i).skipped());
      *r->mutable_messages() = s->conditions(i).messages();
      *r->mutable_condition() = s->wait().conditions(i);
      if (s->conditions(i).has_sub_flow()) *r->mutable_sub_flow() = s->conditions(i).sub_flow();
    }
  }
  for (auto& a : flow::task_attributes(txn, ref)) *t.add_attributes() = std::move(a);
  add_channel_sizes(txn, *run, t);
  return t;
}

}  // namespace dex
