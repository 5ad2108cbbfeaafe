#include "engine/flow_proposer.h"

#include <fmt/format.h>

#include <algorithm>

#include "flow/record_time.h"
#include "log/log_writer.h"

namespace dex {

void FlowProposer::propose(flow::FlowRecord record, Done done) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) {
      done(stopped_why_);
      return;
    }
    id = next_id_++;
    pending_[id] = std::move(done);
  }
  record.set_proposal_id(id);
  proto::LogRecord log_record;
  *log_record.mutable_flow() = std::move(record);
  std::future<StatusOr<Slot>> appended;
  {
    // Never with mu_ held: append may block on a full queue while the writer
    // thread waits for mu_ in applied(). order_mu_ is never taken by that
    // thread, and holding it makes the stamps' order the log's.
    std::lock_guard<std::mutex> order(order_mu_);
    last_stamp_ms_ = stamp_no_earlier(*log_record.mutable_flow(), last_stamp_ms_);
    appended = log_.append(std::move(log_record));
  }
  if (appended.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  auto slot = appended.get();
  if (slot.is_ok()) return;
  Done cb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = pending_.find(id); it != pending_.end()) {
      cb = std::move(it->second);
      pending_.erase(it);
    }
  }
  if (cb) {
    cb(slot.status().code() == Code::kInvalidArgument
           ? slot.status()
           : Status::stopped(fmt::format("the log writer stopped: {}", slot.status().message())));
  }
}

void FlowProposer::raise_floor(int64_t ms) {
  std::lock_guard<std::mutex> order(order_mu_);
  last_stamp_ms_ = std::max(last_stamp_ms_, ms);
}

void FlowProposer::applied(std::vector<FlowRecordResult>& results) {
  std::vector<std::pair<Done, flow::ApplyResult>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : results) {  // bounded by the batch's records
      if (r.proposal_id == 0) continue;
      auto it = pending_.find(r.proposal_id);
      if (it == pending_.end()) continue;
      done.emplace_back(std::move(it->second), std::move(r.result));
      pending_.erase(it);
    }
  }
  for (auto& [cb, result] : done) cb(std::move(result));
}

void FlowProposer::stop(const Status& why) {
  std::unordered_map<uint64_t, Done> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) {
      stopped_ = true;
      stopped_why_ = why;
    }
    failed.swap(pending_);
  }
  for (auto& [id, cb] : failed) cb(why);
}

}  // namespace dex
