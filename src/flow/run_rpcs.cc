// RunEditor: Attribute writes and RPCs (docs/flow-rules.md, "Attributes" and
// "RPCs"): an RPC's one attempt behind its lock keys (its declaration's and
// the call's own), its deadline, its end.
#include "flow/run_editor.h"

#include <algorithm>
#include <vector>

#include "common/invariant.h"
#include "flow/declaration.h"
#include "flow/result_check.h"

namespace dex::flow {

// -------------------------------------------------------------- Attributes

void RunEditor::write_attributes(const google::protobuf::RepeatedPtrField<Attribute>& writes) {
  uint32_t count = run_.attribute_count();
  SyncEntry sync;
  for (const auto& w : writes) {  // bounded by kAttributesMax writes
    const bool was =
        txn_.attribute(run_.flow_id(), run_.run_id(), w.key(), w.instance_key()).has_value();
    if (deletes(w)) {
      if (!was) continue;  // nothing to delete
      txn_.delete_attribute(run_.flow_id(), run_.run_id(), w.key(), w.instance_key());
      --count;
    } else {
      txn_.put_attribute(run_.flow_id(), run_.run_id(), w);
      if (!was) ++count;
    }
    attributes_changed_ = true;
    if (syncs(w)) *sync.add_writes() = w;
  }
  DEX_INVARIANT(count <= kAttributesMax, "the Attribute count was checked before");
  run_.set_attribute_count(count);
  if (sync.writes_size() > 0) {
    sync.set_flow_id(run_.flow_id());
    sync.set_run_id(run_.run_id());
    sync.set_at_unix_ms(at_ms_);
    txn_.append_sync_entry(run_.attribute_store(), sync);
  }
}

bool RunEditor::syncs(const Attribute& write) const {
  if (run_.attribute_store().empty() || !write.instance_key().empty()) return false;
  const AttributeDeclaration* a = find_attribute(declaration_, write.key());
  return a != nullptr && a->sync() && !a->is_map();
}

// -------------------------------------------------------------------- RPCs

void RunEditor::invoke_rpc(const InvokeRpc& r, const RpcDeclaration& declaration) {
  RpcExecution x;
  x.set_flow_id(run_.flow_id());
  x.set_run_id(run_.run_id());
  x.set_rpc_id(r.rpc_id());
  x.set_name(r.name());
  *x.mutable_input() = r.input();
  x.set_request_id(r.request_id());
  x.set_deadline_ms(later_ms(at_ms_, r.timeout_ms()));
  x.set_created_ms(at_ms_);
  x.mutable_method()->set_method(RPC);
  x.mutable_method()->set_attempt(1);
  if (RpcExecution* old = rpc(r.rpc_id()); old != nullptr) {  // a done one runs anew
    DEX_INVARIANT(old->done(), "only a done RPC is replaced");
    auto* done = run_.mutable_rpcs_done();
    auto it = std::find(done->begin(), done->end(), r.rpc_id());
    if (it != done->end()) done->erase(it);
  }
  RpcExecution& stored = rpcs_.insert_or_assign(r.rpc_id(), std::move(x)).first->second;
  run_.add_rpcs_open(r.rpc_id());
  const TaskRef ref = rpc_ref(stored);
  txn_.put_open_rpc(ref);
  TimerKey key = timer_key(RPC_DEADLINE);
  key.set_step_execution_id(r.rpc_id());
  put_timer(key, stored.deadline_ms());
  // The declaration's keys, then the call's own that are not among them
  // (checked by the rules: names, at most kLockKeysMax in all).
  google::protobuf::RepeatedPtrField<std::string> keys = declaration.lock_keys();
  for (const auto& k : r.lock_keys()) {  // bounded by kLockKeysMax
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) *keys.Add() = k;
  }
  DEX_INVARIANT(static_cast<size_t>(keys.size()) <= kLockKeysMax, "the rules checked the keys");
  if (!take_locks(r.rpc_id(), RPC, 1, keys)) {
    stored.mutable_method()->set_state(TASK_LOCKED);
    return;
  }
  // The caller waits and a lost RPC is not retried: no need to sync first.
  enqueue(*stored.mutable_method(), ref, ASYNC);
}

void RunEditor::start_rpc_attempt(RpcExecution& rpc, const std::string& task_id,
                                  const std::string& worker_id) {
  start(*rpc.mutable_method(), rpc_ref(rpc), task_id, worker_id);
}

void RunEditor::withdraw_rpc(RpcExecution& rpc) {
  auto* state = rpc.mutable_method();
  DEX_INVARIANT(state->state() == TASK_RUNNING, "only a running RPC is withdrawn");
  txn_.delete_running(state->task_id());
  state->clear_task_id();
  state->clear_worker_id();
  enqueue(*state, rpc_ref(rpc), ASYNC);  // it keeps its lock keys
}

void RunEditor::end_rpc_attempt(RpcExecution& rpc, AttemptOutcome outcome) {
  auto* state = rpc.mutable_method();
  switch (state->state()) {
    case TASK_RUNNING:
      txn_.delete_running(state->task_id());
      effects_.ended.push_back({rpc_ref(rpc), state->task_id(), state->worker_id(), outcome,
                                run_.flow_type(), rpc.name(), state->started_ms(), at_ms_});
      release_locks(rpc.rpc_id(), RPC, 1);
      break;
    case TASK_QUEUED:
      txn_.dequeue_task(run_.flow_type(), state->queue_seq());
      release_locks(rpc.rpc_id(), RPC, 1);
      break;
    case TASK_LOCKED:
      drop_waiter(rpc.rpc_id(), RPC);
      break;
    default:
      DEX_INVARIANT(false, "an open RPC's attempt is queued, locked or running");
  }
  state->set_state(TASK_STATE_UNSPECIFIED);
  state->clear_task_id();
  state->clear_worker_id();
  state->clear_queue_seq();
  TimerKey key = timer_key(RPC_DEADLINE);
  key.set_step_execution_id(rpc.rpc_id());
  txn_.delete_timer(key, rpc.deadline_ms());
  rpc.set_done(true);
  rpc.set_outcome(outcome);
  txn_.delete_open_rpc(rpc_ref(rpc));
  auto* open = run_.mutable_rpcs_open();
  auto it = std::find(open->begin(), open->end(), rpc.rpc_id());
  DEX_INVARIANT(it != open->end(), "an open RPC is listed in its run");
  open->erase(it);
  const std::string id = rpc.rpc_id();
  effects_.rpcs_done.push_back(RunItem{{run_.flow_id(), run_.run_id()}, id});
  effects_.rpcs_ended.push_back({run_.flow_type(), rpc.name(), outcome, rpc.created_ms(), at_ms_});
  run_.add_rpcs_done(id);
  // Bounded: the oldest done RPC is forgotten (a retry of it would run anew).
  while (static_cast<size_t>(run_.rpcs_done_size()) > kRpcsDoneKept) {
    const std::string oldest = run_.rpcs_done(0);
    run_.mutable_rpcs_done()->erase(run_.mutable_rpcs_done()->begin());
    rpcs_.erase(oldest);
    txn_.delete_rpc(run_.flow_id(), run_.run_id(), oldest);
  }
}

void RunEditor::end_rpc(RpcExecution& rpc, AttemptOutcome outcome, const std::string& error) {
  DEX_INVARIANT(!rpc.done() && outcome != ATTEMPT_COMPLETED, "an open RPC ends not completed");
  rpc.set_error(error);
  HistoryEvent event;
  event.set_kind(RPC_FAILED);
  event.set_step_execution_id(rpc.rpc_id());
  event.set_rpc_name(rpc.name());
  event.set_error(error);
  event.set_method(RPC);
  event.set_attempt(1);
  add_event(std::move(event));
  end_rpc_attempt(rpc, outcome);
}

void RunEditor::complete_rpc(RpcExecution& rpc, const MethodResult& result) {
  DEX_INVARIANT(!rpc.done(), "an open RPC completes");
  const std::string name = rpc.name();
  *rpc.mutable_output() = result.rpc().output();
  HistoryEvent event;
  event.set_kind(RPC_COMPLETED);
  event.set_step_execution_id(rpc.rpc_id());
  event.set_rpc_name(name);
  event.set_method(RPC);
  event.set_attempt(1);
  *event.mutable_output() = result.rpc().output();
  *event.mutable_attribute_writes() = result.attribute_writes();
  add_event(std::move(event));
  end_rpc_attempt(rpc, ATTEMPT_COMPLETED);  // `rpc` may be gone from rpcs_ (retention) after
  write_attributes(result.attribute_writes());
  append_publishes(result.publishes());
  for (const auto& m : result.rpc().next_steps()) {  // bounded by kMovementsMax
    create_step(m.step_type(), m.input(), m.has_options() ? &m.options() : nullptr,
                rpc_parent(name), "");
  }
  match_waits();
}

}  // namespace dex::flow
