#include "blob/blob_store.h"

#include <fmt/format.h>

#include "common/digest.h"

namespace dex {
namespace {

constexpr size_t kShaHexDigits = 64;
constexpr size_t kScopeHexDigits = 32;
constexpr Duration kBackoffFirst = milliseconds(100);

bool is_lower_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

BlobStore::BlobStore(ObjectStore& store, Clock& clock, NodeId node_id, BlobSettings settings)
    : store_(store),
      clock_(clock),
      node_id_(std::move(node_id)),
      settings_(settings),
      prefix_(node_prefix(node_id_)),
      cache_(settings.cache_bytes_max),
      track_puts_(settings.collect_interval > Duration::zero()) {}

std::string BlobStore::node_prefix(const NodeId& node_id) {
  return fmt::format("nodes/{}/blobs/", node_id.value);
}

std::string BlobStore::flow_prefix(std::string_view flow_id) const {
  // Hashed: a Flow ID may hold characters an object key must not ("/", "..").
  return prefix_ + sha256_hex(flow_id).substr(0, kScopeHexDigits) + "/";
}

template <typename T, typename Op>
StatusOr<T> BlobStore::with_retries(Op op) {
  Duration backoff = kBackoffFirst;
  for (int attempt = 1;; ++attempt) {  // bounded by kBlobRequestAttemptsMax
    StatusOr<T> got = op();
    if (got.is_ok() || !got.status().is_transient() || attempt >= kBlobRequestAttemptsMax)
      return got;
    std::unique_lock<std::mutex> lock(mu_);
    clock_.wait_until(lock, backoff_cv_, clock_.now() + backoff, [] { return false; });
    backoff *= 4;
  }
}

StatusOr<flow::BlobRef> BlobStore::put(std::string_view flow_id, std::string_view value) {
  flow::BlobRef ref;
  ref.set_sha256(sha256_hex(value));
  ref.set_size_bytes(value.size());
  ref.set_key(flow_prefix(flow_id) + ref.sha256());
  // Before the cache check and the create: a sweep then keeps the key, or has
  // deleted it before the create below (blob_sweep.cc).
  register_put(ref.key());
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(sweep_mu_);
    generation = delete_generation_;
  }
  // Written (or read) by this process already: the object exists.
  if (cache_.find(ref.key())) return ref;
  auto put = with_retries<bool>([&]() -> StatusOr<bool> {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.puts;
    }
    auto etag = store_.put(ref.key(), value, PutCondition::create());
    // Present already: the same content address is the same value (a repeat,
    // or a write whose answer was lost).
    if (etag.is_ok() || etag.status().is_precondition_failed()) return true;
    return etag.status();
  });
  if (!put.is_ok()) {
    return Status(put.status().code(),
                  fmt::format("cannot store a value of {} bytes as blob {}: {}", value.size(),
                              ref.key(), put.status().message()));
  }
  cache_insert(ref.key(), std::make_shared<const std::string>(value), generation);
  return ref;
}

bool BlobStore::is_blob_key(std::string_view key) const {
  const size_t scope_end = prefix_.size() + kScopeHexDigits;
  return key.size() == scope_end + 1 + kShaHexDigits && key.starts_with(prefix_) &&
         is_lower_hex(key.substr(prefix_.size(), kScopeHexDigits)) && key[scope_end] == '/' &&
         is_lower_hex(key.substr(scope_end + 1));
}

Status BlobStore::validate_ref(const flow::BlobRef& ref) const {
  const std::string& key = ref.key();
  const size_t scope_end = prefix_.size() + kScopeHexDigits;
  const bool ok = ref.sha256().size() == kShaHexDigits && is_lower_hex(ref.sha256()) &&
                  is_blob_key(key) && key.compare(scope_end + 1, kShaHexDigits, ref.sha256()) == 0;
  if (ok) return Status::ok();
  return Status::corruption(
      fmt::format("blob reference {{key '{}', sha256 '{}'}} does not name a blob of node '{}'", key,
                  ref.sha256(), node_id_.value));
}

StatusOr<std::shared_ptr<const std::string>> BlobStore::get(const flow::BlobRef& ref) {
  if (Status s = validate_ref(ref); !s.is_ok()) return s;
  if (auto hit = cache_.find(ref.key())) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.cache_hits;
    return hit;
  }
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(sweep_mu_);
    generation = delete_generation_;
  }
  auto got = with_retries<ObjectData>([&]() -> StatusOr<ObjectData> {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.gets;
    }
    return store_.get(ref.key());
  });
  if (!got.is_ok()) {
    if (got.status().is_not_found()) {
      return Status::corruption(fmt::format(
          "blob {} ({} bytes), which the log references, is missing from the object store",
          ref.key(), ref.size_bytes()));
    }
    return Status(got.status().code(),
                  fmt::format("cannot read blob {}: {}", ref.key(), got.status().message()));
  }
  std::string& body = got->body;
  if (body.size() != ref.size_bytes() || sha256_hex(body) != ref.sha256()) {
    return Status::corruption(fmt::format(
        "blob {} is corrupt: it holds {} bytes with SHA-256 {}, the log references {} bytes",
        ref.key(), body.size(), sha256_hex(body), ref.size_bytes()));
  }
  auto value = std::make_shared<const std::string>(std::move(body));
  cache_insert(ref.key(), value, generation);
  return value;
}

BlobStore::Counts BlobStore::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace dex
