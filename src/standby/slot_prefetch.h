// Parallel reads of log slots ahead of a LogReader (issue 30): every slot is
// an object of its own, so a reader that GETs them one by one waits one
// round trip per slot (a millisecond or more on S3), and catching up on a long
// log is bound by latency, not by applying. SlotPrefetcher sits between the
// reader and the store: fill() GETs a run of slots with several requests in
// flight and keeps the bodies; the reader's get() of those keys is then
// answered from memory, once. Everything else goes to the store unchanged.
//
// It also lets a caller see that the next slot is not written yet with one
// GET and no LIST (LogReader::next lists to tell the end from a hole), which
// is what a hot standby at rest pays per poll.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "common/types.h"
#include "objstore/object_store.h"

namespace dex {

class SlotPrefetcher final : public ObjectStore {
 public:
  // `store` must outlive this. At most `parallel` GETs are in flight.
  SlotPrefetcher(ObjectStore& store, NodeId node_id, size_t parallel = 16);

  // GETs slots [from, from + count) (at most `parallel` at once) and keeps the
  // bodies of the contiguous run that exists from `from`; returns its length
  // (0: `from` is not written yet). An error reading `from` is returned; one
  // after it only ends the run there (the reader reads that slot itself).
  // Kept bodies stay until the reader takes them, so one run can be read while
  // the previous one is applied; fill() may run on another thread than get().
  StatusOr<size_t> fill(Slot from, size_t count, const RequestOptions& options = {});

  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override {
    return store_.put(key, body, condition, options);
  }
  Status remove(std::string_view key, const RequestOptions& options = {}) override {
    return store_.remove(key, options);
  }
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax,
                            const RequestOptions& options = {}) override {
    return store_.list(prefix, start_after, max_keys, options);
  }
  std::string describe() const override { return store_.describe(); }

 private:
  ObjectStore& store_;
  const NodeId node_id_;
  const size_t parallel_;
  std::mutex mu_;
  std::unordered_map<std::string, ObjectData> kept_;  // guarded by mu_
};

}  // namespace dex
