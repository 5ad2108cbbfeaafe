#include "common/job_pool.h"

#include <algorithm>

#include "common/invariant.h"

namespace dex {

JobPool::JobPool(size_t threads) {
  threads = std::max<size_t>(threads, 1);
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

JobPool::~JobPool() { stop(); }

bool JobPool::post(Job job) {
  DEX_INVARIANT(job != nullptr, "a posted job is callable");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void JobPool::stop() {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped.swap(jobs_);
  }
  cv_.notify_all();
  for (auto& t : threads_) {  // bounded by the threads started
    DEX_INVARIANT(t.get_id() != std::this_thread::get_id(), "stop() is not called from a job");
    if (t.joinable()) t.join();
  }
  // Destroyed outside mu_: a job's captures may take other locks.
  dropped.clear();
}

size_t JobPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

void JobPool::run() {
  // Bounded by stop(): every wait ends with a job or stopping_.
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace dex
