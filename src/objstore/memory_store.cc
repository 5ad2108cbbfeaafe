#include "objstore/memory_store.h"

#include <fmt/format.h>

#include <chrono>

namespace dex {

MemoryObjectStore::MemoryObjectStore(std::function<int64_t()> now_unix_ms)
    : now_unix_ms_(now_unix_ms ? std::move(now_unix_ms) : [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
      }) {}

StatusOr<ObjectData> MemoryObjectStore::get(std::string_view key, const RequestOptions&) {
  if (auto s = validate_key(key); !s.is_ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.gets;
  auto it = objects_.find(key);
  if (it == objects_.end()) return Status::not_found(fmt::format("no object '{}'", key));
  return it->second.data;
}

StatusOr<std::string> MemoryObjectStore::put(std::string_view key, std::string_view body,
                                             const PutCondition& condition, const RequestOptions&) {
  if (auto s = validate_key(key); !s.is_ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.puts;
  auto it = objects_.find(key);
  switch (condition.mode) {
    case PutMode::kCreate:
      if (it != objects_.end()) return Status::precondition_failed(fmt::format("'{}' exists", key));
      break;
    case PutMode::kReplace:
      if (it == objects_.end())
        return Status::precondition_failed(fmt::format("'{}' does not exist", key));
      if (it->second.data.etag != condition.etag) {
        return Status::precondition_failed(
            fmt::format("'{}' has ETag {}, not {}", key, it->second.data.etag, condition.etag));
      }
      break;
    case PutMode::kOverwrite:
      break;
  }
  ObjectData data{std::string(body), etag_of(body)};
  std::string etag = data.etag;
  objects_.insert_or_assign(std::string(key), Stored{std::move(data), now_unix_ms_()});
  return etag;
}

Status MemoryObjectStore::remove(std::string_view key, const RequestOptions&) {
  if (auto s = validate_key(key); !s.is_ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.removes;
  auto it = objects_.find(key);
  if (it != objects_.end()) objects_.erase(it);
  return Status::ok();
}

StatusOr<ListResult> MemoryObjectStore::list(std::string_view prefix, std::string_view start_after,
                                             size_t max_keys, const RequestOptions&) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.lists;
  ListResult result;
  auto it = start_after.empty() || start_after < prefix ? objects_.lower_bound(prefix)
                                                        : objects_.upper_bound(start_after);
  for (; it != objects_.end() && it->first.starts_with(prefix); ++it) {
    if (result.keys.size() == max_keys) {
      result.truncated = true;
      break;
    }
    result.keys.push_back(it->first);
    result.objects.push_back({it->second.modified_unix_ms, it->second.data.body.size()});
  }
  return result;
}

MemoryObjectStore::Counts MemoryObjectStore::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace dex
