// A bounded in-memory cache of blob values by object key: the values a Worker
// task or a client answer needs again soon (a task retried, a run read twice)
// are not fetched from object storage again. Least recently used out first.
// Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace dex {

class BlobCache {
 public:
  // 0 keeps nothing.
  explicit BlobCache(size_t bytes_max) : bytes_max_(bytes_max) {}

  // The value under `key`, or null; a hit becomes the most recent.
  std::shared_ptr<const std::string> find(const std::string& key);
  // Keeps `value` as the most recent, dropping the least recent ones until
  // the total fits. A value larger than a quarter of the budget is not kept:
  // one huge value must not push out every other.
  void insert(const std::string& key, std::shared_ptr<const std::string> value);

  // Drops `key`'s value, if kept.
  void erase(const std::string& key);

  size_t bytes() const;
  size_t entries() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const std::string>>;

  const size_t bytes_max_;  // constant after construction
  mutable std::mutex mu_;
  size_t bytes_ = 0;      // guarded by mu_: the values' sizes, summed
  std::list<Entry> lru_;  // guarded by mu_: most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;  // guarded by mu_
};

}  // namespace dex
