#include "engine/flow_timeout_handler.h"

#include "engine/task_channel_sizes.h"
#include "flow/declaration.h"
#include "flow/flow_rules.h"

namespace dex {

std::optional<flow::FlowTask> build_handler_task(flow::KvFlowTxn& txn, const flow::Run& run,
                                                 const flow::TaskRef& ref,
                                                 const std::string& task_id) {
  const flow::MethodState& m = run.timeout_handler();
  if (ref.step_execution_id() != flow::kTimeoutHandlerId || m.method() != flow::ON_TIMEOUT ||
      m.state() == flow::TASK_STATE_UNSPECIFIED || m.attempt() != ref.attempt())
    return std::nullopt;
  auto decl = txn.declaration(run.flow_type(), run.declaration_version());
  if (!decl) return std::nullopt;
  const flow::MethodOptions options = flow::timeout_handler_options(decl->declaration());
  flow::FlowTask t;
  t.set_task_id(task_id);
  t.set_flow_id(run.flow_id());
  t.set_run_id(run.run_id());
  t.set_flow_type(run.flow_type());
  t.set_declaration_version(run.declaration_version());
  t.set_step_execution_id(std::string(flow::kTimeoutHandlerId));
  t.set_method(flow::ON_TIMEOUT);
  t.set_attempt(ref.attempt());
  t.set_first_attempt_unix_ms(m.first_attempt_ms());
  *t.mutable_input() = run.input();
  t.set_attempt_timeout_ms(options.attempt_timeout_ms());
  t.set_heartbeat_timeout_ms(options.heartbeat_timeout_ms());
  for (auto& a : flow::task_attributes(txn, ref)) *t.add_attributes() = std::move(a);
  add_channel_sizes(txn, run, t);
  return t;
}

bool handler_queued(const flow::Run& run, const flow::TaskRef& ref) {
  const flow::MethodState& m = run.timeout_handler();
  return ref.step_execution_id() == flow::kTimeoutHandlerId && m.state() == flow::TASK_QUEUED &&
         m.attempt() == ref.attempt();
}

flow::Durability handler_durability(flow::KvFlowTxn& txn, const flow::Run& run) {
  auto decl = txn.declaration(run.flow_type(), run.declaration_version());
  if (!decl) return flow::SYNC;
  return flow::timeout_handler_options(decl->declaration(), flow::default_durability(run.config()))
      .durability();
}

std::optional<flow::StepExecutionView> timeout_handler_view(const flow::Run& run) {
  const flow::MethodState& m = run.timeout_handler();
  if (run.status() != flow::FLOW_RUNNING || m.state() == flow::TASK_STATE_UNSPECIFIED)
    return std::nullopt;
  flow::StepExecutionView v;
  v.set_step_execution_id(std::string(flow::kTimeoutHandlerId));
  v.set_phase(flow::PHASE_EXECUTE);
  v.set_method(flow::ON_TIMEOUT);
  v.set_attempt(m.attempt());
  v.set_task_state(m.state());
  v.set_worker_id(m.worker_id());
  v.set_retry_unix_ms(m.retry_at_ms());
  if (m.has_last_failure()) *v.mutable_last_failure() = m.last_failure();
  return v;
}

}  // namespace dex
