// An in-memory ObjectStore with S3 semantics: the fake for unit tests and
// simulation. Not a backend a server can be configured with.
#pragma once

#include <functional>
#include <map>
#include <mutex>

#include "objstore/object_store.h"

namespace dex {

class MemoryObjectStore final : public ObjectStore {
 public:
  // `now_unix_ms` stamps each write's time, which list() reports (tests of
  // blob collection move it); default: the system clock.
  explicit MemoryObjectStore(std::function<int64_t()> now_unix_ms = {});

  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override;
  Status remove(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax,
                            const RequestOptions& options = {}) override;
  std::string describe() const override { return "memory"; }

  // Total successful and failed calls, by kind: request-cost tests count PUTs.
  struct Counts {
    uint64_t gets = 0, puts = 0, removes = 0, lists = 0;
  };
  Counts counts() const;

 private:
  struct Stored {
    ObjectData data;
    int64_t modified_unix_ms = 0;
  };

  const std::function<int64_t()> now_unix_ms_;  // constant after construction
  mutable std::mutex mu_;
  std::map<std::string, Stored, std::less<>> objects_;  // guarded by mu_
  Counts counts_;                                       // guarded by mu_
};

}  // namespace dex
