// The object-storage seam. dex's durable state lives behind this interface: the
// node's lease and log. Backends: filesystem (dev, local), S3 (serve, a later
// issue), in-memory (tests), and a fault-injecting wrapper (tests only).
//
// Semantics follow S3 exactly, so that every backend behaves alike:
//  - put(kCreate) succeeds only if the key is absent (If-None-Match: *);
//  - put(kReplace, etag) only if the key exists with that ETag (If-Match);
//    a missing key is a precondition failure, as S3 answers 404 there;
//  - put(kOverwrite) always writes;
//  - remove() of a missing key succeeds (S3 DELETE is idempotent); there is no
//    conditional delete, because MinIO has none;
//  - the ETag is the hex MD5 of the body, quoted like S3's ("..."). Equal bodies
//    have equal ETags, so every record dex writes carries a unique write ID;
//  - a reader never sees a torn object.
//
// Every call returns a classified status: ok, PreconditionFailed, NotFound,
// Transient (retry may help), Permanent (it will not). Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace dex {

enum class PutMode {
  kCreate,     // only if absent
  kReplace,    // only if the current ETag equals PutCondition::etag
  kOverwrite,  // unconditional
};

struct PutCondition {
  PutMode mode = PutMode::kOverwrite;
  std::string etag;  // for kReplace

  static PutCondition create() { return {PutMode::kCreate, {}}; }
  static PutCondition replace(std::string etag) { return {PutMode::kReplace, std::move(etag)}; }
  static PutCondition overwrite() { return {PutMode::kOverwrite, {}}; }
};

struct ObjectData {
  std::string body;
  std::string etag;
};

// What a list says of one object besides its key (blob collection judges a
// blob's age by it).
struct ListedObject {
  // When the object was last written, Unix ms by the store's clock (S3:
  // LastModified); -1 when the store did not say.
  int64_t modified_unix_ms = -1;
  uint64_t size_bytes = 0;
};

struct ListResult {
  std::vector<std::string> keys;      // full keys, ascending byte order
  std::vector<ListedObject> objects;  // one per key, in the same order
  bool truncated = false;             // more keys follow the last one
};

// Per request. A zero timeout means the backend's own default. When the timeout
// passes, the request answers Transient: the write may still land later.
struct RequestOptions {
  Duration timeout{0};
};

inline constexpr size_t kListKeysMax = 1000;

// Keys are '/'-separated relative paths of printable ASCII without empty,
// "." or ".." segments; a bad key is a Permanent error.
Status validate_key(std::string_view key);

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  virtual StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) = 0;
  // Returns the new object's ETag.
  virtual StatusOr<std::string> put(std::string_view key, std::string_view body,
                                    const PutCondition& condition,
                                    const RequestOptions& options = {}) = 0;
  virtual Status remove(std::string_view key, const RequestOptions& options = {}) = 0;
  // Keys that start with `prefix` and sort after `start_after`, at most `max_keys`.
  virtual StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                                    size_t max_keys = kListKeysMax,
                                    const RequestOptions& options = {}) = 0;
  // For logs and errors: "filesystem:/path", "memory", "s3://bucket/prefix".
  virtual std::string describe() const = 0;
};

// The ETag an S3-compatible store gives `body`: "\"<hex md5>\"".
std::string etag_of(std::string_view body);

// Lists every key under `prefix`, following truncation, `page_keys_max` keys per
// list call. Bounded by `keys_max` (more keys than that is a Permanent error).
StatusOr<std::vector<std::string>> list_all(ObjectStore& store, std::string_view prefix,
                                            size_t keys_max = 10'000'000,
                                            size_t page_keys_max = kListKeysMax);

}  // namespace dex
