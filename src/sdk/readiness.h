// Internal to the SDK and dexcli: finding the active process of a node among
// its addresses without waiting on one that does not answer. A frozen process
// (SIGSTOP, a stalled host) still has its listening socket: TCP connects
// succeed but nothing answers, so every wait on an address must be bounded.
// The gRPC health service answers SERVING (for "" and for the services'
// names) only on the active process (docs: Health and probes).
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace dex::sdk_internal {

// How long a readiness probe waits for an answer. The active process answers a
// health check at once; one that has not answered by then is treated as gone
// for this round.
inline constexpr Duration kReadinessProbeTimeout = seconds(1);

enum class Readiness {
  kServing,      // answered SERVING for the service: the active process
  kNotServing,   // answered NOT_SERVING (or another status): a standby
  kAnswered,     // answered with an error (e.g. no health service): alive
  kUnreachable,  // the connection failed at once: nothing listens there
  kNoAnswer,     // no answer in time: frozen, partitioned, or still unknown
};

// Asks the gRPC health service of every channel about `service` at once.
// Returns when all have answered or at `deadline`, and with
// `until_first_serving` as soon as one answers SERVING (the others may then
// still be kNoAnswer). Never waits past `deadline`; calls still open then are
// cancelled.
std::vector<Readiness> probe_readiness(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                       const std::string& service, TimePoint deadline,
                                       bool until_first_serving = true);

// The order in which to try n addresses after a probe, each group in the
// rotation that starts at `first`: those SERVING, those that answered
// otherwise (not serving, or an error), those unreachable (they fail at
// once). Those that did not answer come last, and only when no address
// answered at all (a bounded attempt on each is then all that is left);
// otherwise they are skipped this round, so that nothing waits on a frozen
// process.
std::vector<size_t> search_order(const std::vector<Readiness>& readiness, size_t first);

// Watches the process behind `channel` while a long call runs on it (a long
// poll such as WaitForFlow): every kReadinessWatchInterval it asks gRPC health about `service`
// and cancels `context` when the process answers NOT_SERVING (it is no longer
// the active one) or misses kReadinessWatchMisses answers in a row
// (frozen, or the network dropped it). fired() then says so. Stops when
// destroyed, before the call's context goes away.
inline constexpr Duration kReadinessWatchInterval = seconds(1);
inline constexpr int kReadinessWatchMisses = 2;

class ReadinessWatch {
 public:
  ReadinessWatch(std::shared_ptr<grpc::Channel> channel, std::string service,
                 grpc::ClientContext* context);
  ~ReadinessWatch();
  ReadinessWatch(const ReadinessWatch&) = delete;
  ReadinessWatch& operator=(const ReadinessWatch&) = delete;

  // Why the watch cancelled the call; empty if it did not.
  std::string fired() const;

 private:
  void loop();

  std::shared_ptr<grpc::Channel> channel_;
  std::string service_;
  grpc::ClientContext* context_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // protected by mu_
  std::string why_;    // protected by mu_
  std::thread thread_;
};

}  // namespace dex::sdk_internal
