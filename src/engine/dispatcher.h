// The dispatcher: which Worker gets which attempt, and when an attempt it
// handed out has run too long (docs/engine.md, "The dispatcher"). A pure
// machine, like LeaseMachine: it reads no clock, takes no lock, starts no
// thread and reads no store. The flow engine (flow_engine.h) feeds it what
// happened — Workers that joined or left, attempts the log queued, started
// and ended, sends, heartbeats, `now` — and carries out what it answers:
// assignments to append, attempts to end (timeouts, Workers that did not come
// back), timers to fire. Single-threaded: the flow engine calls it under its
// mutex. tests/engine/dispatcher_sim_test.cc runs it under seeded schedules.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "dex/flow_records.pb.h"

namespace dex {

struct DispatcherOptions {
  // How long the attempts of a Worker whose stream ended wait for it to come
  // back under the same worker ID (re-sending its results) before they end
  // NOT_COMPLETED and are retried (engine.workerReconnectGrace).
  Duration worker_grace = seconds(5);
};

class Dispatcher {
 public:
  using WorkerHandle = uint64_t;

  // An attempt handed to a Worker: the record that starts it carries it.
  struct Assignment {
    std::string task_id;
    flow::TaskRef task;
    std::string flow_type;
    WorkerHandle worker = 0;
    std::string worker_id;
  };
  // An attempt this process must end: TIMED_OUT (its attempt or heartbeat
  // timeout passed) or NOT_COMPLETED (its Worker went away for good).
  struct Ending {
    std::string task_id;
    flow::TaskRef task;
    flow::AttemptOutcome outcome = flow::ATTEMPT_TIMED_OUT;
    std::string why;
  };
  // Whether new attempts may be handed out at all: the lease is valid, the
  // engine is neither stopping nor draining.
  struct Gate {
    bool lease_valid = false;
    bool draining = false;
    bool stopped = false;
    bool open() const { return lease_valid && !draining && !stopped; }
  };

  Dispatcher(DispatcherOptions options, uint64_t epoch);

  // ------------------------------------------------------------ Workers
  // A stream said hello. A Worker that left within the grace under the same
  // ID takes its attempts back (they keep running; their results may come).
  void worker_joined(WorkerHandle handle, const std::string& worker_id,
                     const std::set<std::string>& flow_types, uint32_t capacity);
  // The stream ended at `now`: no new attempts; its running ones wait for the
  // Worker to come back until now + worker_grace.
  void worker_left(WorkerHandle handle, TimePoint now);
  // A send to the stream failed: no new attempts for it.
  void worker_broken(WorkerHandle handle);
  // The IDs of the connected Workers hosting `flow_type`, sorted.
  std::vector<std::string> workers_for(const std::string& flow_type) const;

  // ------------------------------------------------------------ attempts
  // The log queued `task` (the store's task queue; the cache may go stale).
  void queued(const std::string& flow_type, const flow::TaskRef& task);
  // Hands `task` (queued by a record being proposed) to the least busy free
  // Worker for `flow_type`, if any and the gate is open.
  std::optional<Assignment> reserve(const flow::TaskRef& task, const std::string& flow_type,
                                    Gate gate);
  // The queued attempts free Workers could take now (at most `max`), each
  // once, taken off the cache: the caller checks them against the store and
  // then calls assign() or requeue().
  std::vector<std::pair<flow::TaskRef, std::string>> candidates(size_t max, Gate gate);
  std::optional<Assignment> assign(const flow::TaskRef& task, const std::string& flow_type,
                                   Gate gate);
  void requeue(const std::string& flow_type, const flow::TaskRef& task);

  // What the record that started the attempt applying means for it.
  enum class Confirmation {
    kNone,   // not this process's, or sent and nothing to check
    kSend,   // not sent yet: it goes out now, built from the store
    kCheck,  // sent early (begin_send's `early`): check it against the store (checked())
  };
  Confirmation confirmed(const std::string& task_id);
  // The record carrying `task_ids` applied or was refused: the ones it did
  // not start (not confirmed()) free their slots; how many did. Whether it
  // started one is all that counts, not the record's own verdict: the rules
  // apply a record's assignments even when the rest of it is stale or
  // rejected (its speculation was behind a record in flight), and an attempt
  // they started runs, to be sent and timed out like any other.
  size_t settle(const std::vector<std::string>& task_ids);
  // Marks the attempt sent at `now` and starts its timeouts. False if it is
  // unknown, already sent or ending (it goes out once). `worker` is then its
  // Worker's handle. `early`: the task was built before its record applied
  // (an ASYNC attempt, from a view that may be behind records in flight), so
  // it may disagree with what the record started; false once that record
  // applied (the task then goes out built from the store, kSend). Until
  // checked(), the attempt's results wait (result_waits).
  bool begin_send(const std::string& task_id, TimePoint now, int64_t attempt_timeout_ms,
                  int64_t heartbeat_timeout_ms, WorkerHandle* worker, bool early = false);
  // Its task went out early and is not checked yet: a result of it must not
  // be proposed (it could count before the check refuses the task).
  bool result_waits(const std::string& task_id) const;
  // The early task, compared with the one the store builds now its record
  // applied: `same`, its results count from now on; otherwise the attempt is
  // refused and ending (the caller withdraws it: it runs again, with the same
  // number, built from the store), and its results never count. False if it
  // is unknown, ending or not waiting for a check.
  bool checked(const std::string& task_id, bool same);
  // Refused by checked(): its Worker ran it on inputs the store disagrees with.
  bool refused(const std::string& task_id) const;
  // A heartbeat: false when the Worker should stop (the attempt is unknown or ending).
  bool heartbeat(const std::string& task_id, TimePoint now);
  // This process will end the attempt (a withdrawal, a failure): false if
  // it is unknown. Its slot stays taken until released().
  bool mark_ending(const std::string& task_id);
  // The attempt ended (applied) or was withdrawn: its slot is free.
  void released(const std::string& task_id);
  std::optional<flow::TaskRef> task_of(const std::string& task_id) const;
  WorkerHandle worker_of(const std::string& task_id) const;
  bool knows(const std::string& task_id) const { return running_.contains(task_id); }
  // Known and not ending: still this process's to run.
  bool live(const std::string& task_id) const;
  // Known and not handed to its Worker yet.
  bool unsent(const std::string& task_id) const;

  // ------------------------------------------------------------ time
  // Attempts to end now (each once: they are marked ending).
  std::vector<Ending> due(TimePoint now);
  // When due() next has something to say (at most `latest`).
  TimePoint next_wake(TimePoint latest) const;

  // ------------------------------------------------------------ timers
  // Of the due timers read from the store (index keys), the ones not being
  // fired yet; they are fired until timer_settled().
  std::vector<std::string> timers_to_fire(const std::vector<std::string>& due_keys);
  void timer_settled(const std::string& key);

  // ------------------------------------------------------------ reading
  size_t attempts_sent() const;
  size_t attempts_held() const { return running_.size(); }
  // For the simulation's invariants: every Worker's slots in use add up to
  // the attempts it holds, and none holds more than its capacity.
  void check_invariants() const;

 private:
  struct WorkerSlots {
    std::string worker_id;
    std::set<std::string> flow_types;
    uint32_t capacity = 1;
    uint32_t in_use = 0;
    bool broken = false;
    std::optional<TimePoint> left_at;  // gone: waiting for it to come back
  };
  struct Running {
    flow::TaskRef task;
    std::string flow_type;
    WorkerHandle worker = 0;
    bool sent = false;
    bool confirmed = false;  // the record that started it applied
    bool unchecked = false;  // sent early: its results wait for checked()
    bool refused = false;    // sent early with inputs the store disagrees with
    bool ending = false;     // a timeout, withdrawal or NOT_COMPLETED is proposed
    int64_t attempt_timeout_ms = 0;
    int64_t heartbeat_timeout_ms = 0;
    TimePoint deadline;
    std::optional<TimePoint> heartbeat_deadline;
  };

  // The least busy Worker with a free slot for `flow_type`, if any.
  std::optional<WorkerHandle> least_busy(const std::string& flow_type) const;
  Assignment take_slot(WorkerHandle handle, WorkerSlots& w, const flow::TaskRef& task,
                       const std::string& flow_type);
  void free_slot(const Running& r);
  std::string next_task_id();

  const DispatcherOptions options_;
  const uint64_t epoch_;
  uint64_t next_task_ = 1;
  std::map<WorkerHandle, WorkerSlots> workers_;             // bounded by kWorkersMax
  std::unordered_map<std::string, Running> running_;        // by task ID
  std::map<std::string, std::deque<flow::TaskRef>> queue_;  // a cache of the store's queues
  std::set<std::string> firing_;                            // timer index keys proposed
};

}  // namespace dex
