// Collecting the blobs no run references: BlobStore's side of the sweep
// (sweep_pass.h; docs/engine.md, "Large values").
//
// Why a deleted blob is one that nothing references, now or later:
//  1. A reference enters the node's flow state only by applying a record.
//     Records of earlier epochs were applied before the engine started (and
//     a fenced writer's are never applied), so a new reference comes from a
//     record this process appends, which holds keys that put() returned here,
//     or from the rules copying a reference already in the state, within one
//     atomic apply.
//  2. The engine scans one consistent view of the state taken after
//     begin_sweep; a candidate it names is kept. A candidate put between the
//     previous begin_sweep and this one (the pass's protected set) or since
//     this one (recent_) is kept too. So a key put at time p is deleted only
//     by a pass that began after another pass that began after p: the engine
//     spaces passes a collect_interval apart, and the record that carried the
//     key was applied long before (the log gives up on a write after 10 s).
//     A blob whose object was written less than min_age ago is never a
//     candidate at all.
//  3. A put racing the delete of its own key: put's registration
//     (register_put) and the check-then-delete of that key (sweep_one)
//     exclude each other. The check and the mark "held: being deleted" are
//     made under sweep_mu_, and a registration waits while its key is held,
//     that is until the DELETE has returned. Either the registration came
//     first, and the check finds the key in recent_ and keeps it; or the
//     delete came first, and put's create (after its registration) runs after
//     the DELETE returned: the object exists again. The cache cannot mask
//     that: the end of a delete evicts the key and bumps delete_generation_,
//     and no value read or written across a delete, or while its key is held,
//     is cached (cache_insert), so put's cache shortcut never trusts a value
//     whose object is gone.
//  4. A DELETE that failed may still land later (a timeout): its key stays
//     held for kLateDeleteHold, so a put of it waits until then to write. The
//     engine deletes only while its lease is valid, one delete at a time, so
//     a process that lost its lease stops before the next holder serves.
#include <fmt/format.h>

#include <functional>
#include <utility>

#include "blob/blob_store.h"

namespace dex {
namespace {

constexpr TimePoint kBeingDeleted = TimePoint::max();
// A put waiting for a held key re-checks at least this often.
constexpr Duration kHeldWaitSlice = seconds(1);

uint64_t key_hash(std::string_view key) { return std::hash<std::string_view>{}(key); }

}  // namespace

// ------------------------------------------------------------- SweepPass

SweepPass::SweepPass(SweepPass&& other) noexcept { *this = std::move(other); }

SweepPass& SweepPass::operator=(SweepPass&& other) noexcept {
  if (this == &other) return *this;
  if (owner_ != nullptr) owner_->end_pass();
  owner_ = std::exchange(other.owner_, nullptr);
  candidates_ = std::move(other.candidates_);
  sizes_ = std::move(other.sizes_);
  protected_ = std::move(other.protected_);
  protected_overflow_ = other.protected_overflow_;
  started_after_ = std::move(other.started_after_);
  next_ = other.next_;
  counts_ = other.counts_;
  return *this;
}

SweepPass::~SweepPass() {
  if (owner_ != nullptr) owner_->end_pass();
}

// ------------------------------------------------------------- BlobStore

void BlobStore::end_pass() {
  std::lock_guard<std::mutex> lock(sweep_mu_);
  pass_open_ = false;
}

void BlobStore::register_put(const std::string& key) {
  if (!track_puts_) return;
  const uint64_t h = key_hash(key);
  std::unique_lock<std::mutex> lock(sweep_mu_);
  // Bounded: a delete in progress ends (its request has a timeout), a hold
  // ends at its deadline.
  while (true) {
    auto it = held_.find(h);
    if (it == held_.end()) break;
    const TimePoint now = clock_.now();
    if (it->second != kBeingDeleted && now >= it->second) {
      held_.erase(it);
      break;
    }
    const TimePoint until = std::min(it->second, now + kHeldWaitSlice);
    clock_.wait_until(lock, held_cv_, until, [&] { return !held_.contains(h); });
  }
  if (recent_.size() < kRecentPutsMax) {
    recent_.insert(h);
  } else if (!recent_.contains(h)) {
    recent_overflow_ = true;
  }
}

void BlobStore::cache_insert(const std::string& key, std::shared_ptr<const std::string> value,
                             uint64_t generation) {
  std::lock_guard<std::mutex> lock(sweep_mu_);
  if (generation != delete_generation_ || held_.contains(key_hash(key))) return;
  cache_.insert(key, std::move(value));
}

StatusOr<SweepPass> BlobStore::begin_sweep(Duration min_age, int64_t now_unix_ms) {
  if (!track_puts_) {
    return Status::invalid_argument(
        "blob collection is off (values.blobCollectInterval is 0): puts are not tracked");
  }
  if (min_age < Duration::zero()) {
    return Status::invalid_argument(
        fmt::format("blob collection: min age {} ms is negative", to_ms(min_age)));
  }
  SweepPass pass;
  {
    std::lock_guard<std::mutex> lock(sweep_mu_);
    if (pass_open_) return Status::precondition_failed("a blob collection pass is open already");
    pass_open_ = true;
    pass.owner_ = this;  // from here on, the pass's end closes it
    pass.protected_.swap(recent_);
    pass.protected_overflow_ = std::exchange(recent_overflow_, false);
    pass.started_after_ = sweep_cursor_;
    const TimePoint now = clock_.now();
    std::erase_if(held_,
                  [&](const auto& h) { return h.second != kBeingDeleted && now >= h.second; });
  }
  const int64_t written_before_ms = now_unix_ms - to_ms(min_age);
  std::string after = pass.started_after_;
  bool more = false;
  // Bounded by kSweepListedMax: each page adds at least one key or ends.
  while (true) {
    auto page = store_.list(prefix_, after, kListKeysMax);
    if (!page.is_ok()) {
      return Status(page.status().code(), fmt::format("blob collection: listing {}: {}", prefix_,
                                                      page.status().message()));
    }
    if (page->objects.size() != page->keys.size()) {
      return Status::permanent(fmt::format(
          "blob collection: the object store ({}) listed {} keys but told of {} objects",
          store_.describe(), page->keys.size(), page->objects.size()));
    }
    for (size_t i = 0; i < page->keys.size(); ++i) {
      ++pass.counts_.listed;
      const ListedObject& object = page->objects[i];
      // Anything else under the prefix was not written by put(); an object
      // whose time is unknown or later than now is never old enough.
      if (!is_blob_key(page->keys[i]) || object.modified_unix_ms < 0 ||
          object.modified_unix_ms > written_before_ms)
        continue;
      pass.candidates_.push_back(page->keys[i]);
      pass.sizes_.push_back(object.size_bytes);
    }
    if (!page->keys.empty()) after = page->keys.back();
    if (!page->truncated || page->keys.empty()) break;
    if (pass.counts_.listed >= kSweepListedMax) {
      more = true;
      break;
    }
  }
  pass.counts_.candidates = pass.candidates_.size();
  pass.counts_.capped = more;
  std::lock_guard<std::mutex> lock(sweep_mu_);
  sweep_cursor_ = more ? after : std::string();
  if (pass.candidates_.empty()) {
    pass_open_ = false;
    pass.owner_ = nullptr;
  }
  return pass;
}

SweepCounts BlobStore::finish_sweep(SweepPass& pass,
                                    const std::unordered_set<std::string>& referenced,
                                    size_t deletes_max) {
  if (pass.owner_ != this) return pass.counts_;  // ended already
  size_t tried = 0;
  // Bounded by the candidates, and by deletes_max deletes.
  for (; pass.next_ < pass.candidates_.size(); ++pass.next_) {
    const size_t i = pass.next_;
    if (referenced.contains(pass.candidates_[i])) {
      ++pass.counts_.referenced;
      continue;
    }
    SweepCounts& c = pass.counts_;
    if (c.deleted + c.delete_errors >= kSweepDeletesMax) {
      // The rest of this range waits for the next pass, which lists it again.
      c.capped = true;
      pass.next_ = pass.candidates_.size();
      std::lock_guard<std::mutex> lock(sweep_mu_);
      sweep_cursor_ = pass.started_after_;
      break;
    }
    if (tried == deletes_max) break;
    const uint64_t before = c.deleted + c.delete_errors;
    sweep_one(pass, i);
    if (c.deleted + c.delete_errors > before) ++tried;
  }
  if (pass.done()) {
    pass.owner_ = nullptr;
    end_pass();
  }
  return pass.counts_;
}

void BlobStore::sweep_one(SweepPass& pass, size_t i) {
  const std::string& key = pass.candidates_[i];
  const uint64_t h = key_hash(key);
  {
    std::lock_guard<std::mutex> lock(sweep_mu_);
    // Put lately (or too many puts to tell): kept this pass. The mark below is
    // made under the same lock as the check, so a put's registration comes
    // wholly before it (and is seen here) or waits for the DELETE to return.
    if (pass.protected_overflow_ || recent_overflow_ || pass.protected_.contains(h) ||
        recent_.contains(h)) {
      ++pass.counts_.recently_put;
      return;
    }
    held_[h] = kBeingDeleted;
  }
  const Status removed = store_.remove(key, RequestOptions{kSweepDeleteTimeout});
  std::lock_guard<std::mutex> lock(sweep_mu_);
  ++delete_generation_;
  cache_.erase(key);
  if (removed.is_ok()) {
    held_.erase(h);
    ++pass.counts_.deleted;
    pass.counts_.bytes_freed += pass.sizes_[i];
  } else {
    // It may still land: a put of this key waits out the hold.
    held_[h] = clock_.now() + kLateDeleteHold;
    ++pass.counts_.delete_errors;
  }
  held_cv_.notify_all();
}

}  // namespace dex
