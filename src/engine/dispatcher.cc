#include "engine/dispatcher.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/invariant.h"
#include "common/units.h"

namespace dex {
namespace {

// One attempt of one method of one Step execution (or RPC), as a set key.
std::string ref_key(const flow::TaskRef& r) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", r.flow_id(), r.run_id(), r.step_execution_id(),
                     static_cast<int>(r.method()), r.attempt());
}

}  // namespace

Dispatcher::Dispatcher(DispatcherOptions options, uint64_t epoch)
    : options_(options), epoch_(epoch) {
  DEX_INVARIANT(options_.worker_grace >= Duration::zero(), "the Worker grace is not negative");
}

std::string Dispatcher::next_task_id() {
  // The epoch makes an ID unique across processes: a lost Worker's result
  // never matches a later attempt.
  return fmt::format("f{}.{}", epoch_, next_task_++);
}

// ------------------------------------------------------------------ Workers

void Dispatcher::worker_joined(WorkerHandle handle, const std::string& worker_id,
                               const std::set<std::string>& flow_types, uint32_t capacity) {
  DEX_INVARIANT(!workers_.contains(handle), "a Worker handle joins once");
  WorkerSlots w;
  w.worker_id = worker_id;
  w.flow_types = flow_types;
  w.capacity = std::max<uint32_t>(capacity, 1);
  // The same Worker back within the grace: it takes its attempts back.
  for (auto it = workers_.begin(); it != workers_.end();) {  // bounded by kWorkersMax
    if (!it->second.left_at || it->second.worker_id != worker_id) {
      ++it;
      continue;
    }
    for (auto& [task_id, r] : running_)  // bounded by the attempts held
      if (r.worker == it->first) r.worker = handle;
    w.in_use += it->second.in_use;
    it = workers_.erase(it);
  }
  workers_.emplace(handle, std::move(w));
}

void Dispatcher::worker_left(WorkerHandle handle, TimePoint now) {
  auto it = workers_.find(handle);
  if (it == workers_.end()) return;
  if (it->second.in_use == 0) {
    workers_.erase(it);
    return;
  }
  it->second.left_at = now;
}

void Dispatcher::worker_broken(WorkerHandle handle) {
  if (auto it = workers_.find(handle); it != workers_.end()) it->second.broken = true;
}

std::vector<std::string> Dispatcher::workers_for(const std::string& flow_type) const {
  std::set<std::string> ids;
  for (const auto& [handle, w] : workers_)  // bounded by kWorkersMax
    if (!w.left_at && w.flow_types.contains(flow_type)) ids.insert(w.worker_id);
  return {ids.begin(), ids.end()};
}

// ------------------------------------------------------------------ attempts

void Dispatcher::queued(const std::string& flow_type, const flow::TaskRef& task) {
  queue_[flow_type].push_back(task);
}

void Dispatcher::requeue(const std::string& flow_type, const flow::TaskRef& task) {
  queue_[flow_type].push_front(task);
}

std::optional<Dispatcher::WorkerHandle> Dispatcher::least_busy(const std::string& flow_type) const {
  std::optional<WorkerHandle> chosen;
  uint32_t chosen_in_use = 0;
  for (const auto& [handle, w] : workers_) {  // bounded by kWorkersMax
    if (w.broken || w.left_at || w.in_use >= w.capacity || !w.flow_types.contains(flow_type))
      continue;
    if (!chosen || w.in_use < chosen_in_use) {
      chosen = handle;
      chosen_in_use = w.in_use;
    }
  }
  return chosen;
}

Dispatcher::Assignment Dispatcher::take_slot(WorkerHandle handle, WorkerSlots& w,
                                             const flow::TaskRef& task,
                                             const std::string& flow_type) {
  DEX_INVARIANT(w.in_use < w.capacity, "a slot is taken only when one is free");
  ++w.in_use;
  Assignment a;
  a.task_id = next_task_id();
  a.task = task;
  a.flow_type = flow_type;
  a.worker = handle;
  a.worker_id = w.worker_id;
  Running r;
  r.task = task;
  r.flow_type = flow_type;
  r.worker = handle;
  running_.emplace(a.task_id, std::move(r));
  return a;
}

std::optional<Dispatcher::Assignment> Dispatcher::reserve(const flow::TaskRef& task,
                                                          const std::string& flow_type, Gate gate) {
  // A record's new attempts are new; one already held by a live task (which
  // the rules never queue twice) is not handed out again.
  const std::string key = ref_key(task);
  for (const auto& [id, r] : running_)  // bounded by the attempts held
    if (!r.ending && ref_key(r.task) == key) return std::nullopt;
  return assign(task, flow_type, gate);
}

std::optional<Dispatcher::Assignment> Dispatcher::assign(const flow::TaskRef& task,
                                                         const std::string& flow_type, Gate gate) {
  if (!gate.open()) return std::nullopt;
  const auto handle = least_busy(flow_type);
  if (!handle) return std::nullopt;
  return take_slot(*handle, workers_.at(*handle), task, flow_type);
}

std::vector<std::pair<flow::TaskRef, std::string>> Dispatcher::candidates(size_t max, Gate gate) {
  std::vector<std::pair<flow::TaskRef, std::string>> out;
  if (!gate.open()) return out;
  // The cache may name an attempt twice (queued by one record, queued again
  // by a withdrawal) or one this process assigned and has not seen applied:
  // each is handed out once.
  std::set<std::string> taken;
  for (const auto& [id, r] : running_)  // bounded by the attempts held
    if (!r.ending) taken.insert(ref_key(r.task));
  std::map<std::string, uint32_t> free;
  for (const auto& [handle, w] : workers_) {  // bounded by kWorkersMax
    if (w.broken || w.left_at || w.in_use >= w.capacity) continue;
    for (const auto& type : w.flow_types) free[type] += w.capacity - w.in_use;
  }
  for (auto& [type, n] : free) {  // bounded by the declared types
    auto q = queue_.find(type);
    // Bounded by `max` and the queue.
    while (q != queue_.end() && !q->second.empty() && n > 0 && out.size() < max) {
      flow::TaskRef ref = std::move(q->second.front());
      q->second.pop_front();
      if (!taken.insert(ref_key(ref)).second) continue;
      out.emplace_back(std::move(ref), type);
      --n;
    }
  }
  return out;
}

Dispatcher::Confirmation Dispatcher::confirmed(const std::string& task_id) {
  auto it = running_.find(task_id);
  if (it == running_.end()) return Confirmation::kNone;  // another process's, replayed
  it->second.confirmed = true;
  if (!it->second.sent) return Confirmation::kSend;
  return it->second.unchecked ? Confirmation::kCheck : Confirmation::kNone;
}

size_t Dispatcher::settle(const std::vector<std::string>& task_ids) {
  size_t freed = 0;
  for (const auto& task_id : task_ids) {  // bounded by the record's assignments
    auto it = running_.find(task_id);
    if (it == running_.end() || it->second.confirmed) continue;
    // Not started (the record was refused, or the attempt was no longer
    // queued when it applied): free the Worker's slot. An ASYNC task sent
    // meanwhile is answered as stale.
    free_slot(it->second);
    running_.erase(it);
    ++freed;
  }
  return freed;
}

bool Dispatcher::begin_send(const std::string& task_id, TimePoint now, int64_t attempt_timeout_ms,
                            int64_t heartbeat_timeout_ms, WorkerHandle* worker, bool early) {
  auto it = running_.find(task_id);
  if (it == running_.end()) return false;  // ended meanwhile (a cancel)
  Running& r = it->second;
  // Checked and set in one step: an ASYNC task may be offered twice and goes out once.
  if (r.sent || r.ending) return false;
  // Its record applied: confirmed() asked for the task built from the store,
  // which needs no check.
  if (early && r.confirmed) return false;
  r.sent = true;
  r.unchecked = early;
  r.attempt_timeout_ms = attempt_timeout_ms;
  r.heartbeat_timeout_ms = heartbeat_timeout_ms;
  // Timeouts run from the hand-over.
  r.deadline = now + milliseconds(attempt_timeout_ms);
  if (heartbeat_timeout_ms > 0) r.heartbeat_deadline = now + milliseconds(heartbeat_timeout_ms);
  auto w = workers_.find(r.worker);
  const bool usable = w != workers_.end() && !w->second.broken && !w->second.left_at;
  *worker = usable ? r.worker : 0;
  return true;
}

bool Dispatcher::result_waits(const std::string& task_id) const {
  auto it = running_.find(task_id);
  return it != running_.end() && it->second.unchecked;
}

bool Dispatcher::checked(const std::string& task_id, bool same) {
  auto it = running_.find(task_id);
  if (it == running_.end() || it->second.ending || !it->second.unchecked) return false;
  DEX_INVARIANT(it->second.confirmed, "an early task is checked once its record applied");
  it->second.unchecked = false;
  if (!same) {
    it->second.refused = true;
    it->second.ending = true;
  }
  return true;
}

bool Dispatcher::refused(const std::string& task_id) const {
  auto it = running_.find(task_id);
  return it != running_.end() && it->second.refused;
}

bool Dispatcher::heartbeat(const std::string& task_id, TimePoint now) {
  auto it = running_.find(task_id);
  if (it == running_.end() || it->second.ending) return false;
  if (it->second.heartbeat_timeout_ms > 0)
    it->second.heartbeat_deadline = now + milliseconds(it->second.heartbeat_timeout_ms);
  return true;
}

bool Dispatcher::mark_ending(const std::string& task_id) {
  auto it = running_.find(task_id);
  if (it == running_.end()) return false;
  it->second.ending = true;
  return true;
}

void Dispatcher::free_slot(const Running& r) {
  auto w = workers_.find(r.worker);
  if (w == workers_.end()) return;  // a Worker gone for good
  DEX_INVARIANT(w->second.in_use > 0, "a held attempt has its Worker's slot");
  --w->second.in_use;
  if (w->second.left_at && w->second.in_use == 0) workers_.erase(w);
}

void Dispatcher::released(const std::string& task_id) {
  auto it = running_.find(task_id);
  if (it == running_.end()) return;
  free_slot(it->second);
  running_.erase(it);
}

std::optional<flow::TaskRef> Dispatcher::task_of(const std::string& task_id) const {
  auto it = running_.find(task_id);
  if (it == running_.end()) return std::nullopt;
  return it->second.task;
}

bool Dispatcher::live(const std::string& task_id) const {
  auto it = running_.find(task_id);
  return it != running_.end() && !it->second.ending;
}

bool Dispatcher::unsent(const std::string& task_id) const {
  auto it = running_.find(task_id);
  return it != running_.end() && !it->second.sent;
}

Dispatcher::WorkerHandle Dispatcher::worker_of(const std::string& task_id) const {
  auto it = running_.find(task_id);
  return it == running_.end() ? 0 : it->second.worker;
}

// ------------------------------------------------------------------ time

std::vector<Dispatcher::Ending> Dispatcher::due(TimePoint now) {
  std::vector<Ending> out;
  // Workers that did not come back within the grace: their attempts end
  // NOT_COMPLETED now instead of waiting out their attempt timeouts.
  // Its unsent attempts are withdrawn when their send finds no stream, and
  // its entry goes once nothing holds its slots (free_slot).
  for (const auto& [handle, w] : workers_) {  // bounded by kWorkersMax
    if (!w.left_at || now < *w.left_at + options_.worker_grace) continue;
    for (auto& [task_id, r] : running_) {  // bounded by the attempts held
      if (r.worker != handle || r.ending || !r.sent) continue;
      r.ending = true;
      out.push_back({task_id, r.task, flow::ATTEMPT_NOT_COMPLETED,
                     fmt::format("Worker '{}' went away and did not come back within {}",
                                 w.worker_id, format_duration(options_.worker_grace))});
    }
  }
  for (auto& [task_id, r] : running_) {  // bounded by the attempts held
    if (!r.sent || r.ending) continue;
    std::string why;
    if (now >= r.deadline)
      why = fmt::format("the attempt timeout of {} passed",
                        format_duration(milliseconds(r.attempt_timeout_ms)));
    else if (r.heartbeat_deadline && now >= *r.heartbeat_deadline)
      why = fmt::format("no heartbeat within the heartbeat timeout of {}",
                        format_duration(milliseconds(r.heartbeat_timeout_ms)));
    if (why.empty()) continue;
    r.ending = true;
    out.push_back({task_id, r.task, flow::ATTEMPT_TIMED_OUT, std::move(why)});
  }
  return out;
}

TimePoint Dispatcher::next_wake(TimePoint latest) const {
  TimePoint wake = latest;
  for (const auto& [task_id, r] : running_) {  // bounded by the attempts held
    if (!r.sent || r.ending) continue;
    wake = std::min(wake, r.deadline);
    if (r.heartbeat_deadline) wake = std::min(wake, *r.heartbeat_deadline);
  }
  for (const auto& [handle, w] : workers_) {  // bounded by kWorkersMax
    if (!w.left_at) continue;
    bool waits = false;
    for (const auto& [task_id, r] : running_)  // bounded by the attempts held
      waits = waits || (r.worker == handle && r.sent && !r.ending);
    if (waits) wake = std::min(wake, *w.left_at + options_.worker_grace);
  }
  return wake;
}

// ------------------------------------------------------------------ timers

std::vector<std::string> Dispatcher::timers_to_fire(const std::vector<std::string>& due_keys) {
  std::vector<std::string> out;
  for (const auto& key : due_keys)  // bounded by the keys read
    if (firing_.insert(key).second) out.push_back(key);
  return out;
}

void Dispatcher::timer_settled(const std::string& key) { firing_.erase(key); }

// ------------------------------------------------------------------ reading

size_t Dispatcher::attempts_sent() const {
  size_t n = 0;
  for (const auto& [id, r] : running_) n += r.sent ? 1 : 0;  // bounded by the attempts held
  return n;
}

void Dispatcher::check_invariants() const {
  std::map<WorkerHandle, uint32_t> held;
  std::set<std::string> live;
  for (const auto& [task_id, r] : running_) {  // bounded by the attempts held
    ++held[r.worker];
    DEX_INVARIANT(!r.unchecked || r.sent, "only a sent task waits for its check");
    DEX_INVARIANT(!r.refused || (r.ending && !r.unchecked), "a refused task is ending, checked");
    if (!r.ending)
      DEX_INVARIANT(live.insert(ref_key(r.task)).second,
                    "an attempt is held by at most one live task");
  }
  for (const auto& [handle, w] : workers_) {  // bounded by kWorkersMax
    DEX_INVARIANT(w.in_use == held[handle], "a Worker's slots in use are the attempts it holds");
    DEX_INVARIANT(!w.left_at || w.in_use > 0, "a gone Worker is kept only while it holds slots");
  }
}

}  // namespace dex
