#include "objstore/faulty_store.h"

#include <fmt/format.h>

#include <cassert>

namespace dex {

namespace {

// A uniform double in [0, 1) from one raw draw (53 bits, like Random::chance).
double unit(uint64_t raw) { return static_cast<double>(raw >> 11) * 0x1.0p-53; }

}  // namespace

FaultyObjectStore::FaultyObjectStore(ObjectStore& inner, Clock& clock, uint64_t seed,
                                     FaultPlan plan)
    : inner_(inner), clock_(clock), random_(seed), plan_(plan) {}

void FaultyObjectStore::set_plan(const FaultPlan& plan) {
  std::lock_guard<std::mutex> lock(mu_);
  plan_ = plan;
}

void FaultyObjectStore::set_outage(std::optional<Status> status) {
  assert(!status.has_value() || !status->is_ok());
  std::lock_guard<std::mutex> lock(mu_);
  outage_ = std::move(status);
}

FaultyObjectStore::Injected FaultyObjectStore::injected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return injected_;
}

std::string FaultyObjectStore::describe() const { return "faulty(" + inner_.describe() + ")"; }

// Every call that is not failed by an outage draws exactly four numbers, in this
// order, whatever the plan says and whatever happens next: delay roll, delay
// length, fault roll, late-landing roll. So the n-th call of a run always sees
// the same numbers for a given seed, even when a test changes the plan midway.
FaultyObjectStore::Decision FaultyObjectStore::decide(const RequestOptions& options,
                                                      bool is_write) {
  std::lock_guard<std::mutex> lock(mu_);
  Decision d;
  if (outage_.has_value()) {
    ++injected_.outages;
    d.outage = *outage_;
    return d;
  }
  const double delay_roll = unit(random_.next());
  const uint64_t delay_raw = random_.next();
  const double fault_roll = unit(random_.next());
  const double late_roll = unit(random_.next());

  if (plan_.delay_max > Duration::zero() && delay_roll < plan_.delay_probability) {
    const auto span = static_cast<uint64_t>(plan_.delay_max.count()) + 1;
    d.delay = Duration(static_cast<int64_t>(delay_raw % span));
    ++injected_.delays;
    if (options.timeout > Duration::zero() && d.delay > options.timeout) {
      // The caller gives up at its timeout; a write may land anyway.
      d.delay = options.timeout;
      d.timed_out = true;
      ++injected_.timeouts;
      if (is_write && late_roll < plan_.late_landing_probability) {
        d.late_landing = true;
        ++injected_.late_landings;
      }
      return d;
    }
  }
  // One roll picks at most one fault: the bands are [transient | permanent | lost answer].
  double band = plan_.transient_probability;
  if (fault_roll < band) {
    d.fault = Fault::kTransient;
    ++injected_.transients;
    return d;
  }
  band += plan_.permanent_probability;
  if (fault_roll < band) {
    d.fault = Fault::kPermanent;
    ++injected_.permanents;
    return d;
  }
  band += plan_.lost_answer_probability;
  if (is_write && fault_roll < band) {
    d.fault = Fault::kLostAnswer;
    ++injected_.lost_answers;
  }
  return d;
}

std::optional<Status> FaultyObjectStore::before_call(const Decision& d, std::string_view op,
                                                     std::string_view key) {
  if (d.outage.has_value()) return d.outage;
  if (d.delay > Duration::zero()) clock_.sleep_until(clock_.now() + d.delay);
  switch (d.fault) {
    case Fault::kTransient:
      return Status::transient(fmt::format("injected transient fault on {} '{}'", op, key));
    case Fault::kPermanent:
      return Status::permanent(fmt::format("injected permanent fault on {} '{}'", op, key));
    case Fault::kNone:
    case Fault::kLostAnswer:
      break;
  }
  return std::nullopt;
}

Status FaultyObjectStore::timed_out(const Decision& d, std::string_view op, std::string_view key) {
  return Status::transient(fmt::format("{} '{}' timed out after {} ms (injected){}", op, key,
                                       to_ms(d.delay),
                                       d.late_landing ? "; the write landed late" : ""));
}

StatusOr<ObjectData> FaultyObjectStore::get(std::string_view key, const RequestOptions& options) {
  const Decision d = decide(options, /*is_write=*/false);
  if (auto s = before_call(d, "get", key)) return *s;
  if (d.timed_out) return timed_out(d, "get", key);
  return inner_.get(key, options);
}

StatusOr<std::string> FaultyObjectStore::put(std::string_view key, std::string_view body,
                                             const PutCondition& condition,
                                             const RequestOptions& options) {
  const Decision d = decide(options, /*is_write=*/true);
  if (auto s = before_call(d, "put", key)) return *s;
  if (d.timed_out) {
    if (d.late_landing) (void)inner_.put(key, body, condition, options);
    return timed_out(d, "put", key);
  }
  auto result = inner_.put(key, body, condition, options);
  if (d.fault == Fault::kLostAnswer) {
    return Status::transient(fmt::format("put '{}': response lost (injected; the write {})", key,
                                         result.is_ok() ? "landed" : "failed"));
  }
  return result;
}

Status FaultyObjectStore::remove(std::string_view key, const RequestOptions& options) {
  const Decision d = decide(options, /*is_write=*/true);
  if (auto s = before_call(d, "remove", key)) return *s;
  if (d.timed_out) {
    if (d.late_landing) (void)inner_.remove(key, options);
    return timed_out(d, "remove", key);
  }
  Status result = inner_.remove(key, options);
  if (d.fault == Fault::kLostAnswer) {
    return Status::transient(fmt::format("remove '{}': response lost (injected; the write {})", key,
                                         result.is_ok() ? "landed" : "failed"));
  }
  return result;
}

StatusOr<ListResult> FaultyObjectStore::list(std::string_view prefix, std::string_view start_after,
                                             size_t max_keys, const RequestOptions& options) {
  const Decision d = decide(options, /*is_write=*/false);
  if (auto s = before_call(d, "list", prefix)) return *s;
  if (d.timed_out) return timed_out(d, "list", prefix);
  return inner_.list(prefix, start_after, max_keys, options);
}

}  // namespace dex
