// Time comes in through this seam so that lease timing, log limits and
// retries can be tested deterministically (LevelDB's Env, FoundationDB's sim).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace dex {

// Monotonic local time. Never compared across hosts: the lease protocol judges
// expiry only by local observation (docs/lease.md).
using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

using std::chrono::milliseconds;
using std::chrono::seconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
  // Waits on `cv` (with `lock` held on entry and exit) until `done()` is true or
  // now() >= deadline. Returns done(). Thread-safe.
  virtual bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          TimePoint deadline, const std::function<bool()>& done) = 0;
  // Sleeps until now() >= deadline.
  void sleep_until(TimePoint deadline);
  void sleep_for(Duration d) { sleep_until(now() + d); }
};

// The process's steady clock.
class SystemClock final : public Clock {
 public:
  TimePoint now() const override;
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  TimePoint deadline, const std::function<bool()>& done) override;
  static SystemClock& instance();
};

// A clock that moves only when a test calls advance() or set(). Waiters poll
// every millisecond of real time, so a test thread can advance time while
// worker threads wait on it.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint(seconds(1'000'000)))
      : now_ns_(start.time_since_epoch().count()) {}
  TimePoint now() const override { return TimePoint(Duration(now_ns_.load())); }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  TimePoint deadline, const std::function<bool()>& done) override;
  void advance(Duration d) { now_ns_ += d.count(); }
  void set(TimePoint t) { now_ns_ = t.time_since_epoch().count(); }

 private:
  std::atomic<int64_t> now_ns_;
};

// Milliseconds as an integer, for logs and records.
inline int64_t to_ms(Duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

}  // namespace dex
