// What the flow engine reads from the flow state (docs/flow-rules.md, "Keys")
// to answer FlowService reads and to build the tasks it hands to Workers.
// Pure functions over a FlowTxn / KvStore: no lock, no clock.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "dex/flow_api.pb.h"
#include "flow/kv_txn.h"

namespace dex {

// The run `ref` names (its latest run when run_id is empty); NotFound naming it.
StatusOr<flow::Run> resolve_run(flow::KvFlowTxn& txn, const flow::FlowRef& ref);
// Whether the closed `run` is followed by a Flow retry that has not started
// yet: it has one scheduled and is still its Flow ID's latest run.
bool flow_retry_pending(flow::KvFlowTxn& txn, const flow::Run& run);
flow::FlowDescription describe_run(flow::KvFlowTxn& txn, const flow::Run& run);
// The run's effective FlowConfig as GetFlowState shows it: every default
// written out, the run's Attribute Store.
flow::FlowConfig config_view(const flow::Run& run);
// Continue-as-new chains (docs/flow-rules.md, "Continue-as-new"): the run
// `run` goes on as, following next_run_id from each run that closed
// CONTINUED_AS_NEW (at most kContinueHopsMax hops); `run` itself when it
// did not continue.
inline constexpr size_t kContinueHopsMax = 1'000;
flow::Run follow_continued(flow::KvFlowTxn& txn, flow::Run run);
// The run's active Step executions, as GetFlowState shows them.
std::vector<flow::StepExecutionView> active_steps(flow::KvFlowTxn& txn, const flow::Run& run);
// What GetFlowState shows besides the active executions (docs/api.md,
// "GetFlowState"): the Channel queues holding messages (at most
// kStateQueuesMax, each with its oldest kStateMessagesPerQueue messages), every
// Attribute, and the kStateEndedMax ended executions created last with the
// count of all. The message and Attribute values shown are at most
// `value_bytes_max` together (their length with blob values in place); the
// others are listed without their value.
inline constexpr size_t kStateQueuesMax = 1'000;
inline constexpr size_t kStateMessagesPerQueue = 5;
inline constexpr size_t kStateEndedMax = 100;
inline constexpr uint64_t kStateValueBytesMax = 8u << 20;  // the values' budget, at most
void add_state_contents(flow::KvFlowTxn& txn, const flow::Run& run, uint64_t value_bytes_max,
                        flow::GetFlowStateResponse& state);
// History pages: GetHistoryEvents' default and largest page (a long poll's page is the default).
inline constexpr uint32_t kHistoryPageDefault = 100;
inline constexpr uint32_t kHistoryPageMax = 1'000;
// Events with seq > after_seq (from the first with from_start), at most `page`.
flow::GetHistoryEventsResponse history_page(flow::KvStore& kv, const flow::Run& run,
                                            uint64_t after_seq, bool from_start, uint32_t page);
// The task of the attempt `ref` names, if the execution still waits for it
// (queued, or running as task_id).
std::optional<flow::FlowTask> build_task(flow::KvFlowTxn& txn, const flow::TaskRef& ref,
                                         const std::string& task_id);
// The durability of the method `ref` names (SYNC when unknown).
flow::Durability method_durability(flow::KvFlowTxn& txn, const flow::TaskRef& ref);
// Whether the task of the attempt `ref` goes out while the record that starts
// it is written (ASYNC), rather than once it applied. Not when it reads
// Attributes, whatever its durability: the view it would be built from (a
// scratch copy, or the store before records still in flight) may hold older
// values than those its record applies after, and its lock keys would not
// keep it from that stale read.
bool sent_before_applied(flow::KvFlowTxn& txn, const flow::TaskRef& ref,
                         flow::Durability durability);
// Whether the attempt `ref` names holds lock keys in its run. Such an attempt
// is not handed out while the record that queues it is written: that view
// may miss a record still in flight that took one of its keys first.
bool holds_lock_keys(flow::KvFlowTxn& txn, const flow::TaskRef& ref);
// Whether the attempt `ref` is still queued in the store.
bool still_queued(flow::KvFlowTxn& txn, const flow::TaskRef& ref);
// Whether a task built before its record applied (`sent`) gave its Worker
// the inputs the store holds (`stored`, built now). Left out: the task ID,
// the first attempt's time (set when the attempt starts) and the Channel
// sizes (a snapshot the Worker may read stale anyway: docs/flow-rules.md,
// "Channel sizes").
bool same_task_inputs(const flow::FlowTask& sent, const flow::FlowTask& stored);

}  // namespace dex
