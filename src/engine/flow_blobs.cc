// Large values at the engine's edges (docs/engine.md, "Large values"): the
// history's budget, a Worker result's values stored before its record, a
// task's values read back before it is handed out.
#include "engine/flow_blobs.h"

#include <fmt/format.h>

#include "engine/flow_engine.h"

namespace dex {

StatusOr<flow::GetHistoryEventsResponse> history_out(
    BlobStore* blobs, StatusOr<flow::GetHistoryEventsResponse> page) {
  if (blobs == nullptr || !page.is_ok()) return page;
  const uint64_t budget = blobs->settings().message_bytes_max;
  uint64_t total = 0;
  int keep = 0;
  for (const auto& event : page->events()) {  // bounded by the page size
    total += inlined_size(event) + 16;        // 16: the event's own framing, at most
    if (keep > 0 && total > budget) break;
    ++keep;
  }
  if (keep < page->events_size()) {
    page->mutable_events()->DeleteSubrange(keep, page->events_size() - keep);
    page->set_more(true);
  }
  return values_out(blobs, std::move(page));
}

std::string FlowEngine::store_values(const std::string& flow_id, flow::MethodResult& m) {
  if (options_.blobs == nullptr || m.outcome() != flow::ATTEMPT_COMPLETED) return {};
  const Status s = offload_values(*options_.blobs, flow_id, m);
  if (s.is_ok()) return {};
  // A value over the maximum is the application's bug, as an invalid decision
  // is; an object store that keeps failing fails the attempt too (retried by
  // its policy) rather than leave the Worker waiting for an answer.
  const std::string why =
      s.code() == Code::kInvalidArgument
          ? s.message()
          : "the server could not store a value of the result as a blob: " + s.to_string();
  m.set_outcome(flow::ATTEMPT_FAILED);
  m.set_error(s.code() == Code::kInvalidArgument ? "invalid result: " + why : why);
  m.clear_wait();
  m.clear_decision();
  m.clear_rpc();
  m.clear_locals();
  m.clear_publishes();
  m.clear_attribute_writes();
  return why;
}

bool FlowEngine::put_values_back(const std::string& task_id, flow::FlowTask& task) {
  const Status s =
      inline_values(*options_.blobs, task, options_.blobs->settings().message_bytes_max);
  if (s.is_ok()) return true;
  // Never handed out with references in it: the attempt ends FAILED, naming
  // the blob (or the size), and is retried by its policy.
  flow::TaskRef ref;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto known = dispatcher_.task_of(task_id);
    if (!known) return false;
    dispatcher_.mark_ending(task_id);
    ref = *std::move(known);
  }
  flow::FlowRecord record;
  auto* m = record.mutable_method_result();
  *m->mutable_task() = ref;
  m->set_task_id(task_id);
  m->set_outcome(flow::ATTEMPT_FAILED);
  m->set_error("the server could not put the task's values back in place: " + s.to_string());
  m->set_at_unix_ms(now_ms());
  // Not speculative: a retry it queues goes out through the dispatcher, so a
  // blob that stays unreadable never makes send() call itself again.
  propose(std::move(record), false, [](StatusOr<flow::ApplyResult>) {});
  return false;
}

}  // namespace dex
