// Helpers shared by the objstore tests (and by later backends' conformance runs).
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "objstore/object_store.h"

namespace dex::objstore_test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/dex-objstore-XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Forwards to `store` and keeps alive what it needs (a temp dir, an inner store,
// a clock): lets a conformance factory hand out one self-contained object.
class OwningStore final : public ObjectStore {
 public:
  OwningStore(std::shared_ptr<void> resources, std::unique_ptr<ObjectStore> store)
      : resources_(std::move(resources)), store_(std::move(store)) {}

  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override {
    return store_->get(key, options);
  }
  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override {
    return store_->put(key, body, condition, options);
  }
  Status remove(std::string_view key, const RequestOptions& options = {}) override {
    return store_->remove(key, options);
  }
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax,
                            const RequestOptions& options = {}) override {
    return store_->list(prefix, start_after, max_keys, options);
  }
  std::string describe() const override { return store_->describe(); }

 private:
  std::shared_ptr<void> resources_;  // destroyed after store_
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace dex::objstore_test
