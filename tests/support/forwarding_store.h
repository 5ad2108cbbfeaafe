// A test store that forwards every call to another: a test's store derives
// from it and overrides only the calls it intercepts (to count, hold, slow or
// fail them). Test code only.
#pragma once

#include <string>
#include <string_view>

#include "objstore/object_store.h"

namespace dex::testing {

class ForwardingStore : public ObjectStore {
 public:
  explicit ForwardingStore(ObjectStore& inner) : inner_(inner) {}
  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& o = {}) override {
    return inner_.get(key, o);
  }
  StatusOr<std::string> put(std::string_view key, std::string_view body, const PutCondition& c,
                            const RequestOptions& o = {}) override {
    return inner_.put(key, body, c, o);
  }
  Status remove(std::string_view key, const RequestOptions& o = {}) override {
    return inner_.remove(key, o);
  }
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax, const RequestOptions& o = {}) override {
    return inner_.list(prefix, start_after, max_keys, o);
  }
  std::string describe() const override { return inner_.describe(); }

 protected:
  ObjectStore& inner_;
};

}  // namespace dex::testing
