// Seeded discrete-event simulation of the lease protocol (docs/lease.md §9):
// 2–3 LeaseMachines of one node against a simulated object store with latency,
// writes landing at a random time between send and answer, answers arriving
// long after their write landed (up to the attempt cut-off), lost answers,
// transient and permanent faults, cut-offs with late landing, partitions (a
// process's ops fail for a while), process crashes (restart as a new process
// ID), freezes (a process's events are delayed, sometimes past its lease),
// graceful releases, and a dev-lock mode (one live process at a time,
// holder_is_stopped).
//
// Clocks. Events are scheduled in true (simulated) time. Every process
// incarnation has its own local monotonic clock with a random offset and a
// rate that differs from true time by a seeded drift within ±drift_max_ppm()
// (often exactly at the bound); the machine only ever sees local times, and
// the checker converts each process's period end into true time.
//
// Why the protocol must tolerate this bound (docs/lease.md §3, §4). Let ρ be
// the drift bound, D the lease in seconds. A holder's period D is judged on its
// own clock, so it ends at most D / (1 − ρ) of true time after the send of the
// write that started it. A waiter counts the record's D + 1 s on its own clock
// from the arrival of a read showing that version (no earlier than the send),
// so it writes no earlier than (D + 1) / (1 + ρ) of true time after it. The
// takeover therefore lands after the old period ends whenever
//     D / (1 − ρ) ≤ (D + 1) / (1 + ρ)   ⟺   ρ ≤ 1 / (2D + 1).
// We use 90 % of that, capped at 2 %: ±2 % for leases up to 20 s (20 s:
// 0.82 s of the 1 s margin), ±1.47 % at 30 s and ±0.74 % at 60 s (0.9 s). This
// is the spec's "clock-rate differences well under 1 s per lease.duration".
// Real clocks typically drift by 10⁻⁴ or less; the bound is deliberately far larger so
// that the margin left over is small and a protocol that spends it elsewhere
// (for example starting a period at the answer instead of the send) fails.
//
// Reads stay strongly consistent, as S3's are (read-after-write for every
// PUT): a read is served at one moment between its send and its answer and
// shows the state of that moment; the simulator never serves stale reads.
//
// Checks, at every event (in true time):
//  - no two processes are valid at the same simulated time;
//  - when another process's acquisition lands, every earlier holder has
//    already stopped being valid (so a lost lease is noticed before its
//    period ends);
//  - every acquisition raises the epoch by exactly one.
// A failing seed is printed; LEASE_SIM_SEED=<n> replays it alone.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <queue>

#include <fmt/format.h>

#include "common/random.h"
#include "lease/lease_machine.h"
#include "lease/lease_record.h"

namespace dex {
namespace {

constexpr int kSeeds = 1200;
constexpr Duration kSimLength = std::chrono::minutes(10);
constexpr int kEventsMax = 2'000'000;  // per seed; bounds a runaway run

// The clock-rate drift bound for a lease, in parts per million: 90 % of the
// largest bound the protocol provably tolerates, 1 / (2D + 1) with D in
// seconds (see the top of this file), capped at 2 %.
int64_t drift_max_ppm(Duration lease) {
  const int64_t d_ms = to_ms(lease);
  const int64_t tolerated = 1'000'000 * 1000 / (2 * d_ms + 1000);
  return std::min<int64_t>(20'000, tolerated * 9 / 10);
}

struct Stats {
  uint64_t seeds = 0, events = 0, acquisitions = 0, renewals = 0, adoptions = 0, losses = 0,
           releases = 0, crashes = 0, freezes = 0, transients = 0, permanents = 0, lost_answers = 0,
           cut_offs = 0, late_landings = 0, acquire_failures = 0, late_answers = 0, partitions = 0,
           partitioned_ops = 0, at_drift_bound = 0, acquire_reads = 0, dense_reads = 0;
  int64_t drift_max_ppm = 0;  // the largest |drift| drawn
  Duration held{0}, total{0};
};

// The store: one key, linearizable, with a version counter for ETags.
struct SimStore {
  bool exists = false;
  std::string body;
  std::string etag;
  uint64_t version = 0;
};

struct Proc {
  int slot = 0;
  uint64_t incarnation = 0;
  std::unique_ptr<LeaseMachine> machine;
  bool alive = false;
  TimePoint frozen_until;       // events due earlier are delivered at this time
  TimePoint partitioned_until;  // ops sent earlier fail without reaching the store
  // This incarnation's local clock: local(t) = base + e + e * ppm / 10^6 with
  // e = t - t0 (true time since the start of the run).
  TimePoint clock_base;
  int64_t ppm = 0;
  std::optional<TimePoint> wake_at;
  uint64_t wake_token = 0;  // invalidates superseded wakes
  std::optional<LeaseOp> op;
};

enum class EvKind { kWake, kLand, kAnswer, kCrash, kRestart, kFreeze, kPartition, kRelease };

// An op on its way to the store.
struct Land {
  int slot = 0;
  uint64_t incarnation = 0;
  LeaseOp op;
  bool answer = true;  // false: the caller was already cut off
  bool lost = false;   // the answer is lost (Transient)
  bool late = false;   // a write landing after its attempt was cut off
  Duration back{0};    // store -> caller latency
};

struct Ev {
  TimePoint at;
  uint64_t seq = 0;
  EvKind kind = EvKind::kWake;
  int slot = 0;
  uint64_t incarnation = 0;
  uint64_t token = 0;  // kWake: wake token; kLand: index into lands_
  LeaseResult result;  // kAnswer
  bool operator>(const Ev& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

class Sim {
 public:
  Sim(uint64_t seed, Stats& stats) : seed_(seed), rng_(seed), stats_(stats) {
    const Duration durations[] = {seconds(3),  seconds(5),  seconds(10),
                                  seconds(20), seconds(30), seconds(60)};
    duration_ = durations[rng_.uniform(std::size(durations))];
    drift_max_ppm_ = drift_max_ppm(duration_);
    dev_mode_ = rng_.chance(0.2);
    procs_.resize(dev_mode_ ? 1 : 2 + rng_.uniform(2));
    // Fault rates vary per seed so that some seeds are calm and some stormy.
    transient_p_ = rng_.chance(0.5) ? 0.02 : 0.15;
    lost_answer_p_ = rng_.chance(0.5) ? 0.01 : 0.08;
    permanent_p_ = rng_.chance(0.3) ? 0.002 : 0.0;
    slow_p_ = rng_.chance(0.5) ? 0.02 : 0.12;
    late_answer_p_ = rng_.chance(0.5) ? 0.05 : 0.25;
  }

  // Returns "" or the first violation.
  std::string run() {
    for (size_t i = 0; i < procs_.size(); ++i) {
      procs_[i].slot = static_cast<int>(i);
      restart(static_cast<int>(i), t0_ + rng_.between(Duration(0), seconds(2)));
    }
    schedule_chaos();
    TimePoint last = t0_;
    int events = 0;
    while (!queue_.empty() && failure_.empty()) {
      Ev ev = queue_.top();
      queue_.pop();
      if (ev.at > t0_ + kSimLength) break;
      if (++events > kEventsMax) return "event bound exceeded";
      account(last, ev.at);
      last = ev.at;
      dispatch(ev);
      check(ev.at);
    }
    stats_.events += static_cast<uint64_t>(events);
    stats_.total += last - t0_;
    for (Proc& p : procs_) count_reads(p);
    return failure_;
  }

 private:
  // ---------------------------------------------------------- events
  void push(Ev ev) {
    ev.seq = seq_++;
    queue_.push(std::move(ev));
  }

  // A process's event, delayed while it is frozen.
  TimePoint deliver_at(const Proc& p, TimePoint t) const { return std::max(t, p.frozen_until); }

  void restart(int slot, TimePoint at) {
    Ev ev;
    ev.kind = EvKind::kRestart;
    ev.slot = slot;
    ev.at = at;
    push(ev);
  }

  void schedule_chaos() {
    // Crashes, freezes, partitions and graceful releases, spread over the run.
    const int n = 6 + static_cast<int>(rng_.uniform(10));
    for (int i = 0; i < n; ++i) {
      Ev ev;
      ev.at = t0_ + rng_.between(seconds(5), kSimLength);
      ev.slot = static_cast<int>(rng_.uniform(procs_.size()));
      const uint64_t r = rng_.uniform(12);
      ev.kind = r < 4   ? EvKind::kCrash
                : r < 7 ? EvKind::kFreeze
                : r < 9 ? EvKind::kPartition
                        : EvKind::kRelease;
      if (dev_mode_ && ev.kind == EvKind::kFreeze) ev.kind = EvKind::kCrash;
      push(ev);
    }
  }

  // ---------------------------------------------------------- clocks
  // A process's local time at true time t (t >= t0_). Non-decreasing, since
  // |ppm| < 10^6; the machine is only ever given these.
  TimePoint local(const Proc& p, TimePoint t) const {
    const int64_t e = (t - t0_).count();
    return p.clock_base + Duration(e + e * p.ppm / 1'000'000);
  }
  // The first true time at which p's clock shows `l` or later: when a local
  // deadline, wake or period end happens in true time.
  TimePoint to_true(const Proc& p, TimePoint l) const {
    const int64_t x = (l - p.clock_base).count();
    if (x <= 0) return t0_;
    const int64_t rate = 1'000'000 + p.ppm;
    int64_t e = x / rate * 1'000'000 + x % rate * 1'000'000 / rate;
    while (local(p, t0_ + Duration(e)) < l) ++e;
    while (e > 0 && local(p, t0_ + Duration(e - 1)) >= l) --e;
    return t0_ + Duration(e);
  }
  // A new incarnation's clock: a random offset (local times of two processes
  // are never comparable) and a drift within the bound, half the time at it.
  void new_clock(Proc& p) {
    p.clock_base =
        TimePoint(seconds(2'000'000)) + rng_.between(Duration(0), std::chrono::hours(1000));
    const int64_t m = drift_max_ppm_;
    if (rng_.chance(0.5)) {
      p.ppm = rng_.chance(0.5) ? m : -m;
    } else {
      p.ppm = static_cast<int64_t>(rng_.uniform(static_cast<uint64_t>(2 * m + 1))) - m;
    }
    if (p.ppm == m || p.ppm == -m) ++stats_.at_drift_bound;
    stats_.drift_max_ppm = std::max(stats_.drift_max_ppm, p.ppm < 0 ? -p.ppm : p.ppm);
  }

  void dispatch(const Ev& ev) {
    Proc& p = procs_[static_cast<size_t>(ev.slot)];
    const TimePoint now = ev.at;
    switch (ev.kind) {
      case EvKind::kLand:
        land(ev, now);
        return;
      case EvKind::kRestart: {
        ++p.incarnation;
        LeaseConfig c;
        c.node_id = NodeId("n1");
        c.process_id = ProcessId(fmt::format("p{}.{}", ev.slot, p.incarnation));
        c.duration = duration_;
        c.holder_is_stopped = dev_mode_;
        c.seed = seed_ * 131 + static_cast<uint64_t>(ev.slot) * 17 + p.incarnation;
        p.machine = std::make_unique<LeaseMachine>(c);
        p.alive = true;
        p.frozen_until = now;
        p.partitioned_until = now;
        p.op.reset();
        p.wake_at.reset();
        new_clock(p);
        apply(p, now, p.machine->start(local(p, now)));
        return;
      }
      case EvKind::kCrash:
        if (!p.alive) return;
        ++stats_.crashes;
        close_validity(p, now);
        p.alive = false;
        count_reads(p);
        p.machine.reset();
        restart(ev.slot, now + rng_.between(milliseconds(100), duration_ * 2));
        return;
      case EvKind::kFreeze: {
        if (!p.alive) return;
        ++stats_.freezes;
        // Sometimes longer than the lease.
        Duration len = rng_.chance(0.4) ? rng_.between(duration_, duration_ * 3)
                                        : rng_.between(milliseconds(50), duration_ / 2);
        p.frozen_until = std::max(p.frozen_until, now + len);
        return;
      }
      case EvKind::kPartition: {
        if (!p.alive) return;
        ++stats_.partitions;
        // Cut off from the store: its ops fail until the partition heals.
        Duration len = rng_.chance(0.5) ? rng_.between(duration_ / 3, duration_ * 2)
                                        : rng_.between(milliseconds(100), seconds(2));
        p.partitioned_until = std::max(p.partitioned_until, now + len);
        return;
      }
      case EvKind::kRelease: {
        if (!p.alive) return;
        if (now < p.frozen_until) {  // it acts when it runs again
          Ev again = ev;
          again.at = p.frozen_until;
          push(again);
          return;
        }
        LeaseActions a = p.machine->request_release(local(p, now));
        apply(p, now, std::move(a));
        return;
      }
      case EvKind::kWake:
      case EvKind::kAnswer:
        break;
    }
    // Process events: dropped if the process died since; delayed while frozen.
    if (!p.alive || ev.incarnation != p.incarnation) return;
    if (now < p.frozen_until) {
      Ev again = ev;
      again.at = p.frozen_until;
      push(again);
      return;
    }
    if (ev.kind == EvKind::kWake) {
      if (ev.token != p.wake_token || !p.wake_at) return;
      p.wake_at.reset();
      apply(p, now, p.machine->on_wake(local(p, now)));
    } else {
      if (!p.op || p.op->id != ev.result.op_id) return;
      LeaseOp op = *p.op;
      p.op.reset();
      LeaseResult r = ev.result;
      const TimePoint lnow = local(p, now);
      if (lnow > op.deadline) {  // the driver's cut-off (LeaseKeeper does the same)
        r = LeaseResult{op.id, Status::transient("cut off"), "", ""};
      }
      apply(p, now, p.machine->on_result(lnow, r));
    }
  }

  void apply(Proc& p, TimePoint now, LeaseActions a) {
    for (const LeaseEvent& e : a.events) {
      if (trace_) {
        fmt::print("{:>9} slot {} {} {}: {}\n", to_ms(now - t0_), p.slot,
                   p.machine->config().process_id.value, lease_event_name(e.kind), e.message);
      }
      switch (e.kind) {
        case LeaseEventKind::kAcquired:
          ++stats_.acquisitions;
          break;
        case LeaseEventKind::kRenewed:
          ++stats_.renewals;
          break;
        case LeaseEventKind::kLost:
          ++stats_.losses;
          break;
        case LeaseEventKind::kAcquireFailed:
          ++stats_.acquire_failures;
          break;
        case LeaseEventKind::kReleased:
          ++stats_.releases;
          break;
        default:
          break;
      }
    }
    if (a.op) {
      p.wake_at.reset();
      ++p.wake_token;
      p.op = a.op;
      send(p, *a.op, now);
    } else if (a.wake_at) {
      p.wake_at = a.wake_at;
      Ev ev;
      ev.kind = EvKind::kWake;
      ev.slot = p.slot;
      ev.incarnation = p.incarnation;
      ev.token = ++p.wake_token;
      ev.at = std::max(now, to_true(p, *a.wake_at));
      push(ev);
    }
    update_validity(p, now);
    const LeaseState s = p.machine->state();
    if (s == LeaseState::kReleased || s == LeaseState::kLost || s == LeaseState::kFailed) {
      // The process exits and is restarted later as a new process.
      if (s == LeaseState::kLost || s == LeaseState::kFailed) {
        stats_.adoptions += p.machine->counters().adoptions;
      }
      close_validity(p, now);
      p.alive = false;
      count_reads(p);
      p.machine.reset();
      restart(p.slot, now + rng_.between(milliseconds(50), duration_));
    }
  }

  // The store serves the op at a random time between send and answer. An
  // answer later than the op's deadline is replaced by a cut-off at the
  // deadline (the driver's rule); the op may still land later. Latencies:
  // fast both ways; slow to serve (often cut off, landing late); or served at
  // once and answered long after, up to the cut-off (the write has landed,
  // but its sender learns it only seconds later).
  void send(Proc& p, const LeaseOp& op, TimePoint now) {
    const TimePoint deadline = to_true(p, op.deadline);  // the cut-off in true time
    const Duration cut = deadline - now;
    const Duration fast_lo = milliseconds(1), fast_hi = milliseconds(80);
    Duration serve = rng_.between(fast_lo, fast_hi);
    Duration back = rng_.between(fast_lo, fast_hi);
    if (rng_.chance(slow_p_)) {
      serve = rng_.between(cut / 2, cut * 2);
      back = rng_.between(Duration(0), cut);
    } else if (rng_.chance(late_answer_p_)) {
      back = rng_.between(cut / 4, cut + cut / 8 - serve);
    }
    if (now < p.partitioned_until) {  // never reaches the store
      ++stats_.partitioned_ops;
      ++stats_.transients;
      answer(p, op, std::min(deadline, now + serve + back),
             Status::transient(rng_.chance(0.5) ? "connection refused" : "cut off"));
      return;
    }
    const TimePoint answer_at = now + serve + back;
    const bool cut_off = answer_at > deadline;
    if (cut_off) {
      ++stats_.cut_offs;
      answer(p, op, deadline, Status::transient("cut off"));
    }
    if (rng_.chance(transient_p_)) {  // fails, changes nothing
      ++stats_.transients;
      if (!cut_off) answer(p, op, now + serve, Status::transient("503"));
      return;
    }
    if (rng_.chance(permanent_p_)) {
      ++stats_.permanents;
      if (!cut_off) answer(p, op, now + serve, Status::permanent("403"));
      return;
    }
    Land land;
    land.slot = p.slot;
    land.incarnation = p.incarnation;
    land.op = op;
    land.answer = !cut_off;
    land.lost = rng_.chance(lost_answer_p_);
    land.back = back;
    land.late = cut_off && op.kind != LeaseOpKind::kRead;
    Ev ev;
    ev.kind = EvKind::kLand;
    ev.slot = p.slot;
    ev.at = now + serve;
    ev.token = lands_.size();
    lands_.push_back(std::move(land));
    push(ev);
  }

  void answer(const Proc& p, const LeaseOp& op, TimePoint at, LeaseResult r) {
    Ev ev;
    ev.kind = EvKind::kAnswer;
    ev.slot = p.slot;
    ev.incarnation = p.incarnation;
    r.op_id = op.id;
    ev.result = std::move(r);
    ev.at = at;
    push(ev);
  }

  void answer(const Proc& p, const LeaseOp& op, TimePoint at, Status s) {
    LeaseResult r;
    r.status = std::move(s);
    answer(p, op, at, std::move(r));
  }

  // The op reaches the store: apply it atomically, then answer.
  void land(const Ev& ev, TimePoint now) {
    const Land& l = lands_[ev.token];
    const LeaseOp& op = l.op;
    if (l.late) ++stats_.late_landings;
    LeaseResult r;
    if (op.kind == LeaseOpKind::kRead) {
      if (!store_.exists) {
        r.status = Status::not_found("no lease");
      } else {
        r.body = store_.body;
        r.etag = store_.etag;
      }
    } else {
      bool ok = op.kind == LeaseOpKind::kCreate ? !store_.exists
                                                : store_.exists && store_.etag == op.etag;
      if (!ok) {
        r.status = Status::precondition_failed("condition failed");
      } else {
        on_write_landed(op, now);
        store_.exists = true;
        store_.body = op.body;
        store_.etag = "v" + std::to_string(++store_.version);
        r.etag = store_.etag;
      }
    }
    Proc& p = procs_[static_cast<size_t>(ev.slot)];
    if (!l.answer || !p.alive || p.incarnation != l.incarnation) return;  // nobody to answer
    if (l.back >= seconds(1)) ++stats_.late_answers;
    if (l.lost) {
      ++stats_.lost_answers;
      answer(p, op, now + l.back, Status::transient("response lost"));
      return;
    }
    answer(p, op, now + l.back, std::move(r));
  }

  // ---------------------------------------------------------- checks
  void on_write_landed(const LeaseOp& op, TimePoint now) {
    auto next = decode_lease_record(op.body);
    if (!next.is_ok()) return fail(now, "undecodable write");
    std::optional<LeaseRecordValue> prev;
    if (store_.exists) prev = decode_lease_record(store_.body).value();
    const bool acquisition = !prev || prev->epoch != next->epoch;
    if (!acquisition) return;
    const Epoch expected = prev ? prev->epoch.next() : Epoch(1);
    if (next->epoch != expected) {
      return fail(now, fmt::format("acquisition at epoch {} over epoch {}", next->epoch.value,
                                   prev ? prev->epoch.value : 0));
    }
    // Every other process has stopped being valid by the time another's
    // acquisition lands.
    for (const Proc& q : procs_) {
      if (!q.alive || !q.machine) continue;
      if (q.machine->config().process_id == next->holder_process_id) continue;
      if (q.machine->is_valid(local(q, now))) {
        return fail(now,
                    fmt::format("{} still valid (period end in {}ms) when {} acquired epoch {}",
                                q.machine->config().process_id.value,
                                to_ms(to_true(q, *q.machine->period_end()) - now),
                                next->holder_process_id.value, next->epoch.value));
      }
    }
  }

  void check(TimePoint now) {
    int valid = 0;
    for (const Proc& p : procs_) {
      if (p.alive && p.machine && p.machine->is_valid(local(p, now))) ++valid;
    }
    if (valid > 1) fail(now, "two processes valid at once");
    // Validity intervals: exact overlap check beyond event times.
    for (Proc& p : procs_) update_validity(p, now);
  }

  // Each process's validity is [from, period end) until an input changes it;
  // record the intervals and check no two processes' intervals overlap.
  struct Open {
    TimePoint from, until;
    bool open = false;
  };
  void update_validity(Proc& p, TimePoint now) {
    Open& o = open_[static_cast<size_t>(p.slot)];
    const bool valid = p.alive && p.machine && p.machine->is_valid(local(p, now));
    if (valid) {
      const TimePoint until = to_true(p, *p.machine->period_end());
      if (o.open && o.until >= now) {
        o.until = until;
      } else {
        if (o.open) add_interval(p.slot, o.from, o.until);
        o = {now, until, true};
      }
    } else if (o.open) {
      add_interval(p.slot, o.from, std::min(o.until, now));
      o.open = false;
    }
  }
  void close_validity(Proc& p, TimePoint now) {
    Open& o = open_[static_cast<size_t>(p.slot)];
    if (o.open) add_interval(p.slot, o.from, std::min(o.until, now));
    o.open = false;
  }
  void add_interval(int slot, TimePoint from, TimePoint until) {
    if (until <= from) return;
    for (const auto& [s, f, u] : intervals_) {
      if (s != slot && from < u && f < until) {
        return fail(from, fmt::format("validity of slot {} [{}, {}) overlaps slot {} [{}, {})",
                                      slot, to_ms(from - t0_), to_ms(until - t0_), s,
                                      to_ms(f - t0_), to_ms(u - t0_)));
      }
    }
    intervals_.emplace_back(slot, from, until);
    // Only recent intervals can overlap new ones (bounded memory).
    if (intervals_.size() > 64) intervals_.erase(intervals_.begin());
  }

  // Before a machine goes away: its waiting reads (docs/lease.md §3a), for the summary.
  void count_reads(const Proc& p) {
    if (!p.machine) return;
    stats_.acquire_reads += p.machine->counters().acquire_reads;
    stats_.dense_reads += p.machine->counters().acquire_reads_dense;
  }

  void account(TimePoint last, TimePoint now) {
    for (const Proc& p : procs_) {
      if (p.alive && p.machine && p.machine->is_valid(local(p, last))) {
        stats_.held += std::min(now, to_true(p, *p.machine->period_end())) - last;
        break;
      }
    }
  }

  void fail(TimePoint now, std::string what) {
    if (failure_.empty()) {
      failure_ =
          fmt::format("seed {} at t={}ms (lease {}s, drift bound ±{}ppm, {} processes{}): {}",
                      seed_, to_ms(now - t0_), to_ms(duration_) / 1000, drift_max_ppm_,
                      procs_.size(), dev_mode_ ? ", dev mode" : "", what);
    }
  }

  const uint64_t seed_;
  Random rng_;
  Stats& stats_;
  Duration duration_{0};
  bool dev_mode_ = false;
  int64_t drift_max_ppm_ = 0;
  double transient_p_ = 0, lost_answer_p_ = 0, permanent_p_ = 0, slow_p_ = 0, late_answer_p_ = 0;
  const TimePoint t0_ = TimePoint(seconds(1'000'000));
  std::vector<Proc> procs_;
  Open open_[4];
  std::vector<std::tuple<int, TimePoint, TimePoint>> intervals_;
  SimStore store_;
  std::vector<Land> lands_;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> queue_;
  uint64_t seq_ = 0;
  std::string failure_;

 public:
  bool trace_ = false;
};

TEST(LeaseSim, NoTwoValidHoldersAndLossNoticedBeforePeriodEnd) {
  Stats stats;
  uint64_t first = 1, count = kSeeds;
  if (const char* one = std::getenv("LEASE_SIM_SEED")) {
    first = std::strtoull(one, nullptr, 10);
    count = 1;
  }
  std::vector<std::pair<uint64_t, std::string>> failures;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    Sim sim(seed, stats);
    sim.trace_ = count == 1;
    std::string f = sim.run();
    ++stats.seeds;
    if (!f.empty()) {
      failures.emplace_back(seed, f);
      if (failures.size() >= 5) break;
    }
  }
  const double held = std::chrono::duration<double>(stats.held).count() /
                      std::chrono::duration<double>(stats.total).count();
  fmt::print(
      "lease sim: {} seeds, {} events, {} acquisitions, {} renewals, {} adoptions, {} losses, "
      "{} releases, {} acquire failures, {} acquisition reads ({} dense); faults: {} crashes, {} "
      "freezes, {} partitions ({} ops), "
      "{} transient, {} permanent, {} lost answers, {} cut-offs, {} late landings, {} answers "
      ">= 1s after landing; clocks: drift up to {:.2f}%, {} process clocks at the bound; held "
      "{:.1f}% of the time\n",
      stats.seeds, stats.events, stats.acquisitions, stats.renewals, stats.adoptions, stats.losses,
      stats.releases, stats.acquire_failures, stats.acquire_reads, stats.dense_reads, stats.crashes,
      stats.freezes, stats.partitions, stats.partitioned_ops, stats.transients, stats.permanents,
      stats.lost_answers, stats.cut_offs, stats.late_landings, stats.late_answers,
      static_cast<double>(stats.drift_max_ppm) / 1e4, stats.at_drift_bound, 100 * held);
  for (const auto& [seed, f] : failures) {
    ADD_FAILURE() << f << "\n  replay: LEASE_SIM_SEED=" << seed << " "
                  << ::testing::internal::GetArgvs()[0];
  }
  EXPECT_GT(stats.acquisitions, stats.seeds);
  EXPECT_GT(stats.adoptions, 0u);
  // The faults the clock and latency model exists for did happen.
  EXPECT_GT(stats.late_answers, stats.seeds);
  EXPECT_GT(stats.at_drift_bound, stats.seeds);
  EXPECT_GT(stats.partitioned_ops, 0u);
  // Waiters read densely around expected renewals (§3a) in these schedules too.
  EXPECT_GT(stats.dense_reads, stats.seeds);
  // Progress: someone holds the lease most of the time despite the chaos.
  EXPECT_GT(held, 0.5);
}

}  // namespace
}  // namespace dex
