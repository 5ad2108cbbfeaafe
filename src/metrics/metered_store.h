// MeteredObjectStore: an ObjectStore decorator that counts every request into a
// Metrics (dexzd_object_store_requests_total{operation,outcome} and
// dexzd_object_store_request_seconds{operation}, docs/metrics.md) and forwards
// it unchanged: same arguments, same answer, same describe().
//
// The outcome is the answer's status code ("ok", "precondition_failed",
// "not_found", "transient", "permanent", ...). A list() the caller pages
// through counts one request per page, as object storage bills it.
//
// Thread-safe when `inner` is; adds no lock of its own.
#pragma once

#include "common/clock.h"
#include "metrics/metrics.h"
#include "objstore/object_store.h"

namespace dex {

class MeteredObjectStore final : public ObjectStore {
 public:
  // `inner`, `metrics` and `clock` must outlive this wrapper; `clock` times
  // the requests.
  MeteredObjectStore(ObjectStore& inner, Metrics& metrics, Clock& clock = SystemClock::instance());

  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override;
  Status remove(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax,
                            const RequestOptions& options = {}) override;
  std::string describe() const override { return inner_.describe(); }

 private:
  // Constant after construction.
  ObjectStore& inner_;
  Metrics& metrics_;
  Clock& clock_;
};

}  // namespace dex
