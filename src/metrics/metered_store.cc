#include "metrics/metered_store.h"

namespace dex {

MeteredObjectStore::MeteredObjectStore(ObjectStore& inner, Metrics& metrics, Clock& clock)
    : inner_(inner), metrics_(metrics), clock_(clock) {}

StatusOr<ObjectData> MeteredObjectStore::get(std::string_view key, const RequestOptions& options) {
  const TimePoint start = clock_.now();
  auto result = inner_.get(key, options);
  metrics_.object_store_request(ObjectStoreOperation::kGet, result.status().code(),
                                clock_.now() - start);
  return result;
}

StatusOr<std::string> MeteredObjectStore::put(std::string_view key, std::string_view body,
                                              const PutCondition& condition,
                                              const RequestOptions& options) {
  const TimePoint start = clock_.now();
  auto result = inner_.put(key, body, condition, options);
  metrics_.object_store_request(ObjectStoreOperation::kPut, result.status().code(),
                                clock_.now() - start);
  return result;
}

Status MeteredObjectStore::remove(std::string_view key, const RequestOptions& options) {
  const TimePoint start = clock_.now();
  Status result = inner_.remove(key, options);
  metrics_.object_store_request(ObjectStoreOperation::kRemove, result.code(), clock_.now() - start);
  return result;
}

StatusOr<ListResult> MeteredObjectStore::list(std::string_view prefix, std::string_view start_after,
                                              size_t max_keys, const RequestOptions& options) {
  const TimePoint start = clock_.now();
  auto result = inner_.list(prefix, start_after, max_keys, options);
  metrics_.object_store_request(ObjectStoreOperation::kList, result.status().code(),
                                clock_.now() - start);
  return result;
}

}  // namespace dex
