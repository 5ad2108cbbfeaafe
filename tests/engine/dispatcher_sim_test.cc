// Seeded simulation of the dispatcher (src/engine/dispatcher.h), the pure
// machine that decides which Worker gets which attempt and when one it handed
// out has run too long. Each schedule drives one Dispatcher against a model of
// the store and the log: Workers that join, vanish (coming back under their ID
// within the grace, or not), break, and take time; attempts the log queues,
// assignments proposed in records that apply in order (an attempt no longer
// queued when its record applies does not start), SYNC sends after the apply,
// results that race timeouts, withdrawals, heartbeats, timers, and the lease
// lapsing (the gate closes). ASYNC attempts go out early, while their record
// is written (sometimes only after it applied, when they go out built from the
// store instead); such a record may apply otherwise than the view its task was
// built from said (a record in flight met the same wait first), and the task
// is checked once it applied. Time is a number the test moves.
//
// Checked at every step:
//  - Dispatcher::check_invariants: every Worker's slots in use are the
//    attempts it holds (never negative, never leaked), and no attempt is held
//    by two live tasks;
//  - an attempt runs under at most one task ID at a time in the store, and
//    the dispatcher holds every attempt the store runs until it ends;
//  - no assignment, reservation or candidate while the gate is closed, and
//    none for a Worker that left;
//  - after due(now), nothing is due at `now` any more (next_wake > now), and
//    an attempt of a Worker gone for the grace has ended NOT_COMPLETED;
//  - an attempt whose Worker came back within the grace is not ended for it;
//  - every due timer is offered once until it settles;
//  - a result of a task sent early waits until the task is checked, and one
//    whose Worker ran on inputs the store disagrees with never counts: the
//    attempt is withdrawn and runs again.
// At the end everything ends and every Worker leaves: nothing stays held.
// A failing seed is printed; DISPATCHER_SIM_SEED=<n> replays it alone.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/random.h"
#include "engine/dispatcher.h"

namespace dex {
namespace {

constexpr int kSeeds = 1200;
constexpr int kStepsPerSchedule = 1000;
constexpr Duration kGrace = seconds(5);
const std::vector<std::string> kTypes = {"A", "B"};

struct Failure {
  std::string what;
};

std::string key_of(const flow::TaskRef& r) {
  return fmt::format("{}/{}/{}", r.flow_id(), r.step_execution_id(), r.attempt());
}

class DispatcherSim {
 public:
  explicit DispatcherSim(uint64_t seed)
      : random_(seed), d_(DispatcherOptions{kGrace}, 7), now_(TimePoint(seconds(1000))) {}

  void run() {
    for (int step = 0; step < kStepsPerSchedule; ++step) {
      act();
      d_.check_invariants();
      check_store();
    }
    wind_down();
  }

  std::map<std::string, int> stats;

 private:
  struct Pending {  // a record not applied yet: assignments, or endings
    std::vector<Dispatcher::Assignment> assignments;
    std::vector<std::pair<std::string, bool>> ends;  // task ID, queued again (withdrawn)
  };
  struct Started {  // an attempt the store has running
    std::string task_id;
    flow::TaskRef task;
    std::string type;
  };

  void fail(const std::string& what) { throw Failure{what}; }

  Dispatcher::Gate gate() const { return {lease_valid_, draining_, false}; }

  void act() {
    switch (random_.uniform(17)) {
      case 0:
        join();
        break;
      case 1:
        leave();
        break;
      case 2:
        enqueue();
        break;
      case 3:
      case 4:
        dispatch();
        break;
      case 5:
      case 6:
        apply_one();
        break;
      case 7:
        send_one();
        break;
      case 8:
        result_one();
        break;
      case 9:
        advance();
        break;
      case 10:
        due();
        break;
      case 11:
        withdraw_one();
        break;
      case 12:
        timers();
        break;
      case 13:
        lease();
        break;
      case 14:
        check_one();
        break;
      case 15:
        retry_held();
        break;
      case 16:  // ASYNC tasks make more to send
        send_one();
        break;
    }
  }

  void join() {
    if (handles_.size() >= 6) return;
    const std::string id = fmt::format("w{}", random_.uniform(4));
    std::set<std::string> types;
    for (const auto& t : kTypes)
      if (random_.chance(0.6)) types.insert(t);
    if (types.empty()) types.insert(kTypes[random_.uniform(kTypes.size())]);
    const uint64_t handle = next_handle_++;
    // Coming back under its ID keeps its attempts running (until the
    // dispatcher ended them for the grace): they are the new stream's now.
    for (auto it = gone_.begin(); it != gone_.end();) {
      if (it->second.id != id) {
        ++it;
        continue;
      }
      for (auto& [task_id, h] : task_worker_)
        if (h == it->first) h = handle;
      it = gone_.erase(it);
    }
    d_.worker_joined(handle, id, types, 1 + static_cast<uint32_t>(random_.uniform(3)));
    handles_[handle] = id;
    stats["workers joined"]++;
  }

  void leave() {
    if (handles_.empty()) return;
    auto it = std::next(handles_.begin(), static_cast<long>(random_.uniform(handles_.size())));
    if (random_.chance(0.2)) {
      d_.worker_broken(it->first);  // a send failed: no new attempts, still connected
      return;
    }
    d_.worker_left(it->first, now_);
    gone_[it->first] = {it->second, now_};
    handles_.erase(it);
    stats["workers left"]++;
  }

  void enqueue() {
    flow::TaskRef ref;
    ref.set_flow_id(fmt::format("f{}", next_flow_++));
    ref.set_run_id("r");
    ref.set_step_execution_id("S-1");
    ref.set_method(flow::EXECUTE);
    ref.set_attempt(1);
    const std::string type = kTypes[random_.uniform(kTypes.size())];
    store_queue_[key_of(ref)] = type;
    d_.queued(type, ref);
    // Sometimes the cache names it twice (queued again by a withdrawal).
    if (random_.chance(0.1)) d_.queued(type, ref);
  }

  void assign_checked(const flow::TaskRef& ref, const std::string& type,
                      std::vector<Dispatcher::Assignment>& out) {
    auto a = d_.assign(ref, type, gate());
    if (a && !gate().open()) fail("an attempt was assigned while the gate was closed");
    if (a)
      out.push_back(*a);
    else
      d_.requeue(type, ref);
    if (a) task_worker_[a->task_id] = a->worker;
    if (a && !handles_.contains(a->worker)) fail("an attempt was assigned to a Worker that left");
  }

  void dispatch() {
    // A record's own new attempts (speculation) or the scheduler's round.
    std::vector<Dispatcher::Assignment> out;
    if (random_.chance(0.3) && !store_queue_.empty()) {
      auto it =
          std::next(store_queue_.begin(), static_cast<long>(random_.uniform(store_queue_.size())));
      flow::TaskRef ref;
      ref.set_flow_id(it->first.substr(0, it->first.find('/')));
      ref.set_run_id("r");
      ref.set_step_execution_id("S-1");
      ref.set_method(flow::EXECUTE);
      ref.set_attempt(
          static_cast<uint32_t>(std::stoul(it->first.substr(it->first.rfind('/') + 1))));
      auto a = d_.reserve(ref, it->second, gate());
      if (a && !gate().open()) fail("a reservation while the gate was closed");
      if (a) out.push_back(*a);
      if (a) task_worker_[a->task_id] = a->worker;
      if (a && !handles_.contains(a->worker)) fail("a reservation for a Worker that left");
    } else {
      auto candidates = d_.candidates(1 + random_.uniform(8), gate());
      if (!candidates.empty() && !gate().open()) fail("candidates while the gate was closed");
      for (auto& [ref, type] : candidates) {
        if (!store_queue_.contains(key_of(ref))) continue;  // a stale cache entry
        assign_checked(ref, type, out);
      }
    }
    if (out.empty()) return;
    for (const auto& a : out) {
      unapplied_.insert(a.task_id);
      if (random_.chance(0.5)) early_.push_back(a.task_id);  // ASYNC
    }
    pending_.push_back({std::move(out), {}});
  }

  // The store ends (or withdraws) the attempt once a record says so: at once
  // when the record that started it applied, else after it in the log.
  void end_in_log(const std::string& id, bool requeue) {
    d_.mark_ending(id);
    if (unapplied_.contains(id))
      pending_.push_back({{}, {{id, requeue}}});
    else
      end(id, requeue);
  }

  // The oldest record applies (records apply in log order), or is refused.
  void apply_one() {
    if (pending_.empty()) return;
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    for (const auto& [id, requeue] : p.ends) end(id, requeue);
    if (p.assignments.empty()) return;
    std::vector<std::string> ids;
    const bool refused = random_.chance(0.05);
    for (const auto& a : p.assignments) {
      ids.push_back(a.task_id);
      unapplied_.erase(a.task_id);
      if (refused) continue;
      const std::string key = key_of(a.task);
      if (!store_queue_.contains(key)) continue;  // no longer queued: not started
      for (const auto& [id, s] : started_)
        if (key_of(s.task) == key) fail("attempt " + key + " started under two task IDs");
      store_queue_.erase(key);
      started_[a.task_id] = {a.task_id, a.task, a.flow_type};
      switch (d_.confirmed(a.task_id)) {
        case Dispatcher::Confirmation::kSend:
          to_send_.push_back(a.task_id);
          break;
        case Dispatcher::Confirmation::kCheck:
          if (!begun_.contains(a.task_id)) fail("a check of task " + a.task_id + ", never sent");
          // The record applied otherwise than the view the task was built from.
          if (random_.chance(0.3)) wrong_inputs_.insert(a.task_id);
          to_check_.push_back(a.task_id);
          break;
        case Dispatcher::Confirmation::kNone:
          break;
      }
      stats["attempts started"]++;
    }
    d_.settle(ids);
    // Sent early by a record that did not start it: forgotten, its Worker's
    // results are stale.
    for (const auto& id : ids)
      if (!d_.knows(id)) sent_.erase(id);
  }

  void send_one() {
    const bool early = !early_.empty() && (to_send_.empty() || random_.chance(0.5));
    if (!early && to_send_.empty()) return;
    std::deque<std::string>& from = early ? early_ : to_send_;
    const std::string id = from.front();
    from.pop_front();
    uint64_t worker = 0;
    if (!d_.begin_send(id, now_, 1000 * (1 + static_cast<int64_t>(random_.uniform(30))),
                       random_.chance(0.3) ? 2000 : 0, &worker, early)) {
      // Its record applied first: it goes out built from the store.
      if (early && d_.unsent(id) && !std::count(to_send_.begin(), to_send_.end(), id))
        fail("task " + id + " refused early and not to be sent from the store");
      return;
    }
    if (early && !unapplied_.contains(id) && started_.contains(id))
      fail("task " + id + " went out early after its record applied");
    begun_.insert(id);
    if (worker == 0) {
      // No stream: withdrawn, queued again with the same number.
      end_in_log(id, /*requeue=*/true);
      return;
    }
    sent_.insert(id);
    if (early) stats["attempts sent early"]++;
    stats["attempts sent"]++;
  }

  // The engine compares the early task with the store's once its record applied.
  void check_one() {
    if (to_check_.empty()) return;
    const std::string id = to_check_.front();
    to_check_.pop_front();
    const bool same = !wrong_inputs_.contains(id);
    if (!d_.checked(id, same)) return;  // ending: its results wait for the end
    if (d_.result_waits(id)) fail("task " + id + " checked, and its results still wait");
    if (same) return;
    if (!d_.refused(id) || d_.live(id)) fail("task " + id + " on wrong inputs is not refused");
    end_in_log(id, /*requeue=*/true);  // withdrawn: it runs again
    stats["early tasks refused"]++;
  }

  // A Worker's result of a sent task: it waits for the check, is stale, or counts.
  void result_of(const std::string& id) {
    if (d_.result_waits(id)) {
      held_.insert(id);
      stats["results held"]++;
      return;
    }
    held_.erase(id);
    if (d_.refused(id) || !started_.contains(id)) {
      stats["results stale"]++;
      return;  // the store ended it, or never started it
    }
    if (wrong_inputs_.contains(id))
      fail("the result of task " + id + ", run on inputs the store disagrees with, counted");
    end(id, false);
    stats["results"]++;
  }

  void retry_held() {
    for (const auto& id : std::set<std::string>(held_))  // bounded by the results held
      if (!d_.result_waits(id)) result_of(id);
  }

  // The store ends the attempt; the dispatcher hears of it when applied.
  void end(const std::string& id, bool requeue) {
    d_.mark_ending(id);
    auto it = started_.find(id);
    if (it != started_.end()) {
      if (requeue) {
        store_queue_[key_of(it->second.task)] = it->second.type;
        d_.queued(it->second.type, it->second.task);
      }
      started_.erase(it);
    }
    sent_.erase(id);
    ended_.insert(id);
    d_.released(id);
  }

  void result_one() {
    if (sent_.empty()) return;
    auto it = std::next(sent_.begin(), static_cast<long>(random_.uniform(sent_.size())));
    const std::string id = *it;
    // A result that races an ending the dispatcher proposed is stale: the
    // store applies whichever comes first; here the result.
    if (random_.chance(0.5) && d_.heartbeat(id, now_)) return;
    result_of(id);
  }

  void withdraw_one() {
    if (to_send_.empty()) return;
    const std::string id = to_send_.back();
    to_send_.pop_back();
    if (!d_.unsent(id)) return;
    end(id, true);
    stats["withdrawn"]++;
  }

  void advance() { now_ += milliseconds(1 + random_.uniform(4000)); }

  void due() {
    auto endings = d_.due(now_);
    for (const auto& e : endings) {
      if (!sent_.contains(e.task_id)) fail("an unsent attempt ended by due(): " + e.task_id);
      if (e.outcome == flow::ATTEMPT_NOT_COMPLETED) {
        stats["ended NOT_COMPLETED (Worker gone)"]++;
        auto g = gone_.find(task_worker_[e.task_id]);
        if (g == gone_.end())
          fail("attempt " + e.task_id + " of a connected (or returned) Worker ended NOT_COMPLETED");
        else if (now_ < g->second.left_at + kGrace)
          fail("attempt " + e.task_id + " ended NOT_COMPLETED before the grace passed");
      } else {
        stats["timed out"]++;
      }
    }
    if (d_.next_wake(now_ + std::chrono::hours(1)) <= now_)
      fail("something due at now stayed unfired");
    // Every sent attempt of a Worker gone for the grace has ended.
    for (const auto& id : sent_) {
      auto g = gone_.find(task_worker_[id]);
      if (g != gone_.end() && now_ >= g->second.left_at + kGrace &&
          std::none_of(endings.begin(), endings.end(),
                       [&](const Dispatcher::Ending& e) { return e.task_id == id; }) &&
          !due_before_.contains(id))
        fail("attempt " + id + " of a Worker gone for the grace did not end");
    }
    for (const auto& e : endings) due_before_.insert(e.task_id);
    // Apply the endings (sometimes a result got there first: the ending is stale).
    for (const auto& e : endings) end_in_log(e.task_id, false);
  }

  void timers() {
    std::vector<std::string> due_keys;
    for (int i = 0; i < 3; ++i) due_keys.push_back(fmt::format("t{}", random_.uniform(5)));
    for (const auto& k : d_.timers_to_fire(due_keys)) {
      if (!firing_.insert(k).second) fail("timer " + k + " offered twice while in flight");
    }
    if (!firing_.empty() && random_.chance(0.5)) {
      const std::string k = *firing_.begin();
      firing_.erase(k);
      d_.timer_settled(k);
    }
  }

  void lease() {
    if (random_.chance(0.5))
      lease_valid_ = !lease_valid_;
    else if (random_.chance(0.1))
      draining_ = !draining_;
  }

  void check_store() {
    for (const auto& [id, s] : started_) {
      if (ended_.contains(id)) fail("an ended attempt is still started");
      // Until it ends, the dispatcher holds it: it is sent, timed out and
      // keeps its Worker's slot.
      if (!d_.knows(id)) fail("attempt " + id + " runs in the store but the dispatcher forgot it");
    }
  }

  void wind_down() {
    lease_valid_ = false;
    while (!pending_.empty()) apply_one();
    while (!to_check_.empty()) check_one();
    while (!pending_.empty()) apply_one();  // the withdrawals of refused tasks
    retry_held();
    if (!held_.empty()) fail(fmt::format("{} results still held", held_.size()));
    early_.clear();
    for (const auto& [h, id] : std::map<uint64_t, std::string>(handles_)) {
      d_.worker_left(h, now_);
      gone_[h] = {id, now_};
    }
    handles_.clear();
    now_ += kGrace + std::chrono::hours(2);
    due();
    while (!to_send_.empty()) send_one();
    due();
    while (!pending_.empty()) apply_one();
    for (const auto& id : std::set<std::string>(sent_)) end(id, false);
    for (const auto& [id, s] : std::map<std::string, Started>(started_)) end(id, false);
    d_.check_invariants();
    if (d_.attempts_held() != 0)
      fail(fmt::format("{} attempts still held after everything ended", d_.attempts_held()));
  }

  struct Gone {
    std::string id;
    TimePoint left_at;
  };

  Random random_;
  Dispatcher d_;
  TimePoint now_;
  bool lease_valid_ = true;
  bool draining_ = false;
  uint64_t next_handle_ = 1;
  uint64_t next_flow_ = 1;
  std::map<uint64_t, std::string> handles_;         // connected
  std::map<uint64_t, Gone> gone_;                   // left (maybe back under a new handle)
  std::map<std::string, uint64_t> task_worker_;     // the stream an attempt is held by (model)
  std::set<std::string> due_before_;                // ended by an earlier due()
  std::map<std::string, std::string> store_queue_;  // queued in the store: key -> type
  std::map<std::string, Started> started_;          // running in the store, by task ID
  std::deque<Pending> pending_;
  std::deque<std::string> to_send_;
  std::deque<std::string> early_;       // ASYNC tasks to send before their record applies
  std::set<std::string> unapplied_;     // tasks whose assignment's record is not applied yet
  std::deque<std::string> to_check_;    // sent early, their record applied
  std::set<std::string> wrong_inputs_;  // sent early with inputs the store disagrees with
  std::set<std::string> held_;          // tasks with a result waiting for the check
  std::set<std::string> begun_;         // begin_send said yes
  std::set<std::string> sent_;
  std::set<std::string> ended_;
  std::set<std::string> firing_;
};

TEST(DispatcherSim, EverySeededScheduleKeepsSlotsAttemptsAndDeadlinesStraight) {
  std::vector<uint64_t> seeds;
  if (const char* one = std::getenv("DISPATCHER_SIM_SEED")) {
    seeds.push_back(std::strtoull(one, nullptr, 10));
  } else {
    for (uint64_t s = 1; s <= kSeeds; ++s) seeds.push_back(s);
  }
  std::map<std::string, int> totals;
  for (uint64_t seed : seeds) {
    DispatcherSim sim(seed);
    try {
      sim.run();
    } catch (const Failure& f) {
      FAIL() << "seed " << seed << ": " << f.what << "\n  replay: DISPATCHER_SIM_SEED=" << seed;
    }
    for (const auto& [k, v] : sim.stats) totals[k] += v;
  }
  std::string summary;
  for (const auto& [k, v] : totals) summary += fmt::format("  {}: {}\n", k, v);
  std::cout << seeds.size() << " schedules\n" << summary;
  // The schedules reach the paths they are meant to test.
  if (seeds.size() == kSeeds) {
    EXPECT_GT(totals["attempts sent"], 10'000);
    EXPECT_GT(totals["timed out"], 100);
    EXPECT_GT(totals["ended NOT_COMPLETED (Worker gone)"], 100);
    EXPECT_GT(totals["withdrawn"], 100);
    EXPECT_GT(totals["attempts sent early"], 1'000);
    EXPECT_GT(totals["early tasks refused"], 100);
    EXPECT_GT(totals["results held"], 100);
  }
}

}  // namespace
}  // namespace dex
