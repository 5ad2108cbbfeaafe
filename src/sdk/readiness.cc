#include "sdk/readiness.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "grpc/health/v1/health.grpc.pb.h"

namespace dex::sdk_internal {

namespace {

// How long probe_readiness waits, after cancelling the calls still open, for
// their callbacks: a cancelled call completes at once, so this is only a bound.
constexpr Duration kCancelledCallbacksWaitMax = seconds(5);

// One probe round. The callbacks hold a plain pointer: the round, and with it
// every ClientContext, is destroyed by probe_readiness once every callback
// has run, never by a callback (gRPC may still use the call then).
struct ProbeRound {
  struct Call {
    std::unique_ptr<grpc::health::v1::Health::Stub> stub;
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
  };
  std::vector<std::unique_ptr<Call>> calls;  // constant once the calls started
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Readiness> results;  // protected by mu
  size_t answered = 0;             // protected by mu
  bool serving = false;            // protected by mu
};

}  // namespace

std::vector<Readiness> probe_readiness(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                       const std::string& service, TimePoint deadline,
                                       bool until_first_serving) {
  const size_t n = channels.size();
  auto round = std::make_unique<ProbeRound>();
  round->results.assign(n, Readiness::kNoAnswer);
  Duration remaining = std::max(deadline - SystemClock::instance().now(), Duration::zero());
  auto system_deadline = std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(remaining);
  for (size_t i = 0; i < n; ++i) {
    auto call = std::make_unique<ProbeRound::Call>();
    call->stub = grpc::health::v1::Health::NewStub(channels[i]);
    call->context.set_deadline(system_deadline);
    call->request.set_service(service);
    round->calls.push_back(std::move(call));
  }
  ProbeRound* r = round.get();
  for (size_t i = 0; i < n; ++i) {
    ProbeRound::Call& call = *r->calls[i];
    call.stub->async()->Check(
        &call.context, &call.request, &call.response, [r, i](grpc::Status status) {
          std::lock_guard<std::mutex> lock(r->mu);
          ProbeRound::Call& c = *r->calls[i];
          bool serving =
              status.ok() && c.response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
          // A deadline (or this probe's own cancel) is no answer; a connection
          // that failed at once is nothing listening; anything a process said
          // is an answer.
          bool silent = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                        status.error_code() == grpc::StatusCode::CANCELLED;
          bool unreachable = status.error_code() == grpc::StatusCode::UNAVAILABLE;
          r->results[i] = serving       ? Readiness::kServing
                          : status.ok() ? Readiness::kNotServing
                          : silent      ? Readiness::kNoAnswer
                          : unreachable ? Readiness::kUnreachable
                                        : Readiness::kAnswered;
          if (serving) r->serving = true;
          ++r->answered;
          r->cv.notify_all();  // under the lock: r outlives this callback's use of it
        });
  }
  std::vector<Readiness> results;
  std::unique_lock<std::mutex> lock(r->mu);
  SystemClock::instance().wait_until(lock, r->cv, deadline, [&] {
    return (until_first_serving && r->serving) || r->answered == n;
  });
  results = r->results;
  if (r->answered < n) {
    // The calls still open end now.
    lock.unlock();
    for (auto& call : r->calls) call->context.TryCancel();
    lock.lock();
    bool all = SystemClock::instance().wait_until(
        lock, r->cv, SystemClock::instance().now() + kCancelledCallbacksWaitMax,
        [&] { return r->answered == n; });
    if (!all) {
      // Never seen; leaking the round is safe where freeing it under a
      // pending callback is not.
      lock.unlock();
      (void)round.release();
      return results;
    }
  }
  lock.unlock();
  return results;
}

std::vector<size_t> search_order(const std::vector<Readiness>& readiness, size_t first) {
  const size_t n = readiness.size();
  std::vector<size_t> serving, answered, unreachable, silent;
  for (size_t k = 0; k < n; ++k) {
    size_t i = (first + k) % n;
    switch (readiness[i]) {
      case Readiness::kServing:
        serving.push_back(i);
        break;
      case Readiness::kNotServing:
      case Readiness::kAnswered:
        answered.push_back(i);
        break;
      case Readiness::kUnreachable:
        unreachable.push_back(i);
        break;
      case Readiness::kNoAnswer:
        silent.push_back(i);
        break;
    }
  }
  std::vector<size_t> order = serving;
  order.insert(order.end(), answered.begin(), answered.end());
  order.insert(order.end(), unreachable.begin(), unreachable.end());
  if (serving.empty() && answered.empty()) order.insert(order.end(), silent.begin(), silent.end());
  return order;
}

ReadinessWatch::ReadinessWatch(std::shared_ptr<grpc::Channel> channel, std::string service,
                               grpc::ClientContext* context)
    : channel_(std::move(channel)), service_(std::move(service)), context_(context) {
  thread_ = std::thread([this] { loop(); });
}

ReadinessWatch::~ReadinessWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string ReadinessWatch::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return why_;
}

void ReadinessWatch::loop() {
  int misses = 0;
  std::unique_lock<std::mutex> lock(mu_);
  // A check starts every interval (at once after one that took longer), so
  // that a process that stopped answering is given up after about
  // kReadinessWatchMisses + 1 intervals. Bounded by the call: the destructor
  // runs when it returns.
  TimePoint next = SystemClock::instance().now() + kReadinessWatchInterval;
  while (!stop_) {
    SystemClock::instance().wait_until(lock, cv_, next, [&] { return stop_; });
    if (stop_) return;
    next = std::max(next + kReadinessWatchInterval, SystemClock::instance().now());
    lock.unlock();
    Readiness r = probe_readiness({channel_}, service_,
                                  SystemClock::instance().now() + kReadinessProbeTimeout)[0];
    lock.lock();
    if (stop_) return;
    std::string why;
    if (r == Readiness::kServing || r == Readiness::kAnswered) {
      misses = 0;  // the active process, or one without a health service: alive
    } else if (r == Readiness::kNotServing) {
      why = "it answered that it is no longer serving";
    } else if (++misses >= kReadinessWatchMisses) {
      why = "it did not answer " + std::to_string(misses) + " health checks in a row";
    }
    if (!why.empty()) {
      why_ = why;
      context_->TryCancel();
      return;
    }
  }
}

}  // namespace dex::sdk_internal
