// Helpers shared by the log tests: records, hand-written batches, and an
// ObjectStore wrapper that counts and intercepts log writes.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "forwarding_store.h"
#include "log/log_format.h"
#include "log/log_writer.h"
#include "objstore/memory_store.h"

namespace dex::testing {

inline proto::LogRecord opaque_record(const std::string& payload) {
  proto::LogRecord record;
  record.set_opaque(payload);
  return record;
}

inline LogWriterOptions writer_options(const std::string& node, uint64_t epoch,
                                       const std::string& process) {
  LogWriterOptions options;
  options.node_id = NodeId(node);
  options.process_id = ProcessId(process);
  options.epoch = Epoch(epoch);
  options.backoff_initial = milliseconds(1);
  options.backoff_max = milliseconds(10);
  options.jitter_seed = 42;
  return options;
}

// Writes a batch object directly, as some writer would have.
inline void put_batch(ObjectStore& store, const std::string& node, uint64_t slot, uint64_t epoch,
                      bool epoch_start, const std::vector<std::string>& payloads = {}) {
  proto::LogBatch batch;
  batch.set_node_id(node);
  batch.set_epoch(epoch);
  batch.set_slot(slot);
  batch.set_writer_process_id("p" + std::to_string(epoch));
  batch.set_write_id("w" + std::to_string(slot));
  if (epoch_start) batch.add_records()->mutable_epoch_start()->set_holder_process_id("p");
  for (const auto& p : payloads) *batch.add_records() = opaque_record(p);
  auto put =
      store.put(slot_key(NodeId(node), Slot(slot)), encode_batch(batch), PutCondition::create());
  assert(put.is_ok());
  (void)put;
}

// Forwards to `inner`; counts puts and the most puts ever in flight at once, and
// lets a test intercept a put (before or after the inner call).
class InterceptStore final : public testing::ForwardingStore {
 public:
  explicit InterceptStore(ObjectStore& inner) : ForwardingStore(inner) {}

  // Called before a put; a returned status answers the put without writing.
  std::function<std::optional<Status>(std::string_view key, const RequestOptions&)> before_put;
  // Called after a put that reached the inner store; may replace its answer.
  std::function<std::optional<Status>(std::string_view key, const StatusOr<std::string>&)>
      after_put;

  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override {
    int now_in_flight = ++in_flight_;
    int seen = max_in_flight_.load();
    while (now_in_flight > seen && !max_in_flight_.compare_exchange_weak(seen, now_in_flight)) {
    }
    ++puts_;
    StatusOr<std::string> result = Status::transient("unset");
    std::optional<Status> early = before_put ? before_put(key, options) : std::nullopt;
    if (early) {
      result = *early;
    } else {
      result = inner_.put(key, body, condition, options);
      if (after_put) {
        if (auto replaced = after_put(key, result)) result = *replaced;
      }
    }
    --in_flight_;
    return result;
  }
  std::string describe() const override { return "intercept(" + inner_.describe() + ")"; }

  int puts() const { return puts_.load(); }
  int max_in_flight() const { return max_in_flight_.load(); }

 private:
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  std::atomic<int> puts_{0};
};

// Every batch in the log, in slot order, read straight from the store.
inline std::vector<proto::LogBatch> raw_batches(ObjectStore& store, const std::string& node) {
  std::vector<proto::LogBatch> out;
  auto keys = list_all(store, log_prefix(NodeId(node)));
  assert(keys.is_ok());
  for (const auto& key : keys.value()) {
    auto got = store.get(key);
    assert(got.is_ok());
    auto batch = decode_batch(key, got->body);
    assert(batch.is_ok());
    out.push_back(std::move(batch).value());
  }
  return out;
}

}  // namespace dex::testing
