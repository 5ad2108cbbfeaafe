#include "standby/slot_prefetch.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "log/log_format.h"

namespace dex {

namespace {
// Bodies kept at most before a fill drops them: two runs read ahead, with room.
constexpr size_t kKeptMax = 4096;
}  // namespace

SlotPrefetcher::SlotPrefetcher(ObjectStore& store, NodeId node_id, size_t parallel)
    : store_(store), node_id_(std::move(node_id)), parallel_(std::max<size_t>(parallel, 1)) {}

StatusOr<size_t> SlotPrefetcher::fill(Slot from, size_t count, const RequestOptions& options) {
  {
    // What a reader left (it stopped early): never more than a few runs.
    std::lock_guard<std::mutex> lock(mu_);
    if (kept_.size() > kKeptMax) kept_.clear();
  }
  if (count == 0) return size_t{0};
  std::vector<std::string> keys(count);
  for (size_t i = 0; i < count; ++i) keys[i] = slot_key(node_id_, Slot(from.value + i));
  std::vector<std::optional<StatusOr<ObjectData>>> got(count);
  std::atomic<size_t> next{0};
  // Each worker takes the next index until none is left: bounded by `count`.
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) got[i].emplace(store_.get(keys[i], options));
  };
  const size_t threads = std::min(parallel_, count);
  if (threads == 1) {
    work();  // the idle poll: one GET, no thread
  } else {
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
  }
  if (!got[0]->is_ok()) {
    if (got[0]->status().is_not_found()) return size_t{0};
    return got[0]->status();
  }
  size_t run = 0;
  std::lock_guard<std::mutex> lock(mu_);
  while (run < count && got[run]->is_ok()) {
    kept_.emplace(keys[run], std::move(got[run]->value()));
    ++run;
  }
  return run;
}

StatusOr<ObjectData> SlotPrefetcher::get(std::string_view key, const RequestOptions& options) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kept_.find(std::string(key));
    if (it != kept_.end()) {
      ObjectData data = std::move(it->second);
      kept_.erase(it);
      return data;
    }
  }
  return store_.get(key, options);
}

}  // namespace dex
