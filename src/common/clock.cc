#include "common/clock.h"

#include <thread>

namespace dex {

void Clock::sleep_until(TimePoint deadline) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  wait_until(lock, cv, deadline, [] { return false; });
}

TimePoint SystemClock::now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

bool SystemClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                             TimePoint deadline, const std::function<bool()>& done) {
  return cv.wait_until(lock, deadline, done);
}

SystemClock& SystemClock::instance() {
  static SystemClock clock;
  return clock;
}

bool ManualClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                             TimePoint deadline, const std::function<bool()>& done) {
  // Bounded by the test: it either advances time past `deadline` or makes `done` true.
  while (!done()) {
    if (now() >= deadline) return false;
    cv.wait_for(lock, milliseconds(1));
  }
  return true;
}

}  // namespace dex
