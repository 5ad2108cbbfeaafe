// A few threads that run posted jobs, oldest first: for work that may block on
// I/O (reading blobs from the object store) and must not hold up the thread
// that found it (the flow engine's scheduler, the log writer's thread).
//
// Hand-written: the server links no library with a thread pool (Boost is not a
// dependency), and this needs only a queue, a condition variable and threads.
// Thread-safe. The number of queued jobs is bounded by the caller.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dex {

class JobPool {
 public:
  using Job = std::function<void()>;

  // Starts `threads` (at least 1) threads.
  explicit JobPool(size_t threads);
  // stop().
  ~JobPool();
  JobPool(const JobPool&) = delete;
  JobPool& operator=(const JobPool&) = delete;

  // Queues `job`; false (and `job` dropped) once stop() began.
  bool post(Job job);
  // Drops the jobs not started, waits for the running ones and joins the
  // threads. Idempotent; not from a job.
  void stop();
  // Jobs queued and not started.
  size_t queued() const;

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;  // a job queued, or stopping_
  std::deque<Job> jobs_;        // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace dex
