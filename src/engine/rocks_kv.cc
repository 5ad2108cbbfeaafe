#include "engine/rocks_kv.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "common/invariant.h"

namespace dex {

std::unique_ptr<RocksKv> RocksKv::overlay(rocksdb::DB& db) {
  return std::unique_ptr<RocksKv>(new RocksKv(db, nullptr, true));
}

std::unique_ptr<RocksKv> RocksKv::snapshot(rocksdb::DB& db) {
  return std::unique_ptr<RocksKv>(new RocksKv(db, db.GetSnapshot(), false));
}

std::unique_ptr<RocksKv> RocksKv::scratch(rocksdb::DB& db) {
  return std::unique_ptr<RocksKv>(new RocksKv(db, db.GetSnapshot(), true));
}

RocksKv::RocksKv(rocksdb::DB& db, const rocksdb::Snapshot* snapshot, bool writable)
    : db_(db), snapshot_(snapshot), writable_(writable) {}

RocksKv::~RocksKv() {
  if (snapshot_ != nullptr) db_.ReleaseSnapshot(snapshot_);
}

std::optional<std::string> RocksKv::get(std::string_view key) {
  if (auto it = writes_.find(key); it != writes_.end()) return it->second;
  if (!status_.is_ok()) return std::nullopt;
  rocksdb::ReadOptions options;
  options.snapshot = snapshot_;
  std::string value;
  auto s = db_.Get(options, rocksdb::Slice(key.data(), key.size()), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) {
    status_ = Status::permanent("local store: reading flow state: " + s.ToString());
    return std::nullopt;
  }
  return value;
}

void RocksKv::put(std::string_view key, std::string_view value) {
  DEX_INVARIANT(writable_, "a read-only view is not written");
  writes_.insert_or_assign(std::string(key), std::string(value));
}

void RocksKv::del(std::string_view key) {
  DEX_INVARIANT(writable_, "a read-only view is not written");
  writes_.insert_or_assign(std::string(key), std::nullopt);
}

std::vector<std::pair<std::string, std::string>> RocksKv::scan(std::string_view prefix) {
  return scan_first(prefix, SIZE_MAX, "");
}

std::vector<std::pair<std::string, std::string>> RocksKv::scan_first(std::string_view prefix,
                                                                     size_t limit,
                                                                     std::string_view from) {
  const std::string_view start = from > prefix ? from : prefix;
  std::map<std::string, std::string, std::less<>> merged;
  // The first `limit` live keys are among the first `limit` + (this overlay's
  // deletes in the range) keys of the store: each delete hides at most one.
  // Bounded by the overlay's writes under the prefix.
  size_t read_max = limit;
  for (auto w = writes_.lower_bound(start); w != writes_.end() && w->first.starts_with(prefix);
       ++w) {
    if (!w->second && read_max != SIZE_MAX) ++read_max;
  }
  if (status_.is_ok()) {
    rocksdb::ReadOptions options;
    options.snapshot = snapshot_;
    // The first key after every key under the prefix. Without this bound the
    // iterator, finding no live key under the prefix, walks every deleted key
    // that sorts after it (the task queue's and the timers' churn) before it
    // stops: a quarter of the server's CPU in a benchmark of short Flows.
    std::string upper(prefix);
    while (!upper.empty() && static_cast<unsigned char>(upper.back()) == 0xff) upper.pop_back();
    if (!upper.empty()) upper.back() = static_cast<char>(upper.back() + 1);
    const rocksdb::Slice upper_slice(upper);
    if (!upper.empty()) options.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_.NewIterator(options));
    const rocksdb::Slice pre(prefix.data(), prefix.size());
    // Bounded by the keys under the prefix, or by read_max.
    for (it->Seek(rocksdb::Slice(start.data(), start.size()));
         it->Valid() && it->key().starts_with(pre) && merged.size() < read_max; it->Next())
      merged.emplace(it->key().ToString(), it->value().ToString());
    if (!it->status().ok())
      status_ = Status::permanent("local store: scanning flow state: " + it->status().ToString());
  }
  for (auto it = writes_.lower_bound(start); it != writes_.end() && it->first.starts_with(prefix);
       ++it) {
    if (it->second)
      merged.insert_or_assign(it->first, *it->second);
    else
      merged.erase(it->first);
  }
  std::vector<std::pair<std::string, std::string>> out(merged.begin(), merged.end());
  if (out.size() > limit) out.resize(limit);
  return out;
}

void RocksKv::visit(std::string_view from, std::string_view to, bool reverse,
                    const std::function<bool(std::string_view, std::string_view)>& fn) {
  DEX_INVARIANT(writes_.empty(), "only a view without writes of its own is visited");
  if (!status_.is_ok()) return;
  if (!to.empty() && to <= from) return;  // RocksDB wants lower < upper
  rocksdb::ReadOptions options;
  options.snapshot = snapshot_;
  const rocksdb::Slice lower(from.data(), from.size()), upper(to.data(), to.size());
  options.iterate_lower_bound = &lower;
  if (!to.empty()) options.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_.NewIterator(options));
  if (reverse) {
    if (to.empty())
      it->SeekToLast();
    else
      it->SeekForPrev(upper);  // the upper bound itself is excluded by iterate_upper_bound
  } else {
    it->Seek(lower);
  }
  // Bounded by the keys in [from, to), or by the visitor.
  for (; it->Valid(); reverse ? it->Prev() : it->Next()) {
    const auto k = it->key(), v = it->value();
    if (!fn(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()))) break;
  }
  if (!it->status().ok())
    status_ = Status::permanent("local store: scanning flow state: " + it->status().ToString());
}

void RocksKv::write_into(rocksdb::WriteBatch& batch) const {
  for (const auto& [key, value] : writes_) {
    if (value)
      batch.Put(key, *value);
    else
      batch.Delete(key);
  }
}

}  // namespace dex
