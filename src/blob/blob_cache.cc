#include "blob/blob_cache.h"

namespace dex {

std::shared_ptr<const std::string> BlobCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void BlobCache::insert(const std::string& key, std::shared_ptr<const std::string> value) {
  if (!value || value->size() > bytes_max_ / 4) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return;  // the same key is the same content (content-addressed)
  }
  lru_.emplace_front(key, std::move(value));
  index_[key] = lru_.begin();
  bytes_ += lru_.front().second->size();
  // Bounded by the entries: each round drops one.
  while (bytes_ > bytes_max_ && !lru_.empty()) {
    bytes_ -= lru_.back().second->size();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void BlobCache::erase(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  bytes_ -= it->second->second->size();
  lru_.erase(it->second);
  index_.erase(it);
}

size_t BlobCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t BlobCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace dex
