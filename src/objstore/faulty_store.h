// A fault-injecting ObjectStore wrapper: a TEST TOOL, never a backend.
// Every decision draws from one seeded Random, so a failing seed replays the
// same faults in the same order (given the same sequence of calls).
//
// Per call, in this order:
//  1. an outage (set_outage) fails the call at once with its status and draws nothing;
//  2. otherwise exactly four numbers are drawn (delay roll, delay length, fault
//     roll, late-landing roll), whatever the plan, so the n-th call always sees
//     the same numbers for a seed;
//  3. a delay waits on the injected Clock (a ManualClock works). If it exceeds a
//     nonzero RequestOptions::timeout, the call waits only the timeout and answers
//     Transient("... timed out after N ms"); a write then lands anyway with
//     late_landing_probability, applied to the inner store just before that
//     answer (so it is visible to the caller's next call); no other fault applies;
//  4. one fault roll picks at most one of: transient, permanent (both change
//     nothing), lost answer (writes only: the write is applied, then the caller
//     gets Transient("... response lost ...") whatever the inner store answered).
// Calls from several threads are safe; with threads the order of draws follows
// the order in which calls take the internal mutex.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "common/clock.h"
#include "common/random.h"
#include "objstore/object_store.h"

namespace dex {

struct FaultPlan {
  double delay_probability = 0;  // the call waits a random delay in [0, delay_max] first
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
  enum class Fault { kNone, kTransient, kPermanent, kLostAnswer };
  struct Decision {
    std::optional<Status> outage;
    Duration delay{0};  // how long to wait before answering (capped at the timeout)
    bool timed_out = false;
    bool late_landing = false;  // only with timed_out, only for writes
    Fault fault = Fault::kNone;
  };
  // Draws this call's fate and counts it. Takes mu_.
  Decision decide(const RequestOptions& options, bool is_write);
  // Waits the delay; returns the answer if the call ends before reaching `inner_`.
  std::optional<Status> before_call(const Decision& d, std::string_view op, std::string_view key);
  static Status timed_out(const Decision& d, std::string_view op, std::string_view key);

  // Constant after construction.
  ObjectStore& inner_;
  Clock& clock_;

  mutable std::mutex mu_;
  Random random_;                 // guarded by mu_
  FaultPlan plan_;                // guarded by mu_
  std::optional<Status> outage_;  // guarded by mu_
  Injected injected_;             // guarded by mu_
};

}  // namespace dex
