// A fault-injecting ObjectStore wrapper: a TEST TOOL, never a backend.
// Every decision draws from one seeded Random, so a failing seed replays the
// same faults in the same order (given the same sequence of calls).
#pragma once

#include <memory>
#include <mutex>

#include "common/clock.h"
#include "common/random.h"
#include "objstore/object_store.h"

namespace dex {

struct FaultPlan {
  double delay_probability = 0;      // the call waits a random delay in [0, delay_max] first
  Duration delay_max{0};
  double transient_probability = 0;  // the call fails Transient and changes nothing
  double permanent_probability = 0;  // the call fails Permanent and changes nothing
  // A write (put/remove) that lands but whose answer is lost: the change is
  // applied, then the caller gets Transient("response lost").
  double lost_answer_probability = 0;
  // A delay longer than the request's timeout makes the call answer Transient
  // ("timed out") at the timeout; the write then lands anyway with this
  // probability (a late-landing write).
  double late_landing_probability = 0.5;
};

class FaultyObjectStore final : public ObjectStore {
 public:
  // `inner` and `clock` must outlive this wrapper; delays wait on `clock`.
  FaultyObjectStore(ObjectStore& inner, Clock& clock, uint64_t seed, FaultPlan plan = {});

  void set_plan(const FaultPlan& plan);
  // Until cleared, every call fails at once with `status` (an outage).
  void set_outage(std::optional<Status> status);

  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override;
  Status remove(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax,
                            const RequestOptions& options = {}) override;
  std::string describe() const override;

  struct Injected {
    uint64_t delays = 0, transients = 0, permanents = 0, lost_answers = 0, timeouts = 0,
             late_landings = 0, outages = 0;
  };
  Injected injected() const;

 private:
  ObjectStore& inner_;
  Clock& clock_;
  mutable std::mutex mu_;
  Random random_;                   // guarded by mu_
  FaultPlan plan_;                  // guarded by mu_
  std::optional<Status> outage_;    // guarded by mu_
  Injected injected_;               // guarded by mu_
};

}  // namespace dex
