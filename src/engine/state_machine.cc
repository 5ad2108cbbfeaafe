#include "engine/state_machine.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>

#include "engine/flow_type.h"
#include "engine/rocks_kv.h"

namespace dex {
namespace {

// Keys of the local store (docs/engine.md, "What is in RocksDB"). Flow ids,
// Step names and task queues never contain '\0' (the proposer refuses control
// characters), so '\0' separates their parts.
constexpr std::string_view kLastAppliedKey = "m/last_applied";
constexpr std::string_view kReadySeqKey = "m/ready_seq";
constexpr std::string_view kFlowTypePrefix = "ft/";
constexpr std::string_view kFlowPrefix = "f/";
constexpr std::string_view kStatusPrefix = "s/";
constexpr std::string_view kReadyPrefix = "r/";
constexpr std::string_view kRunningPrefix = "run/";
constexpr std::string_view kTimerPrefix = "tm/";
constexpr char kSep = '\0';

// A sleep Step's output.
constexpr std::string_view kSleepOutput = "{}";

std::string cat(std::string_view a, std::string_view b) {
  std::string s(a);
  s += b;
  return s;
}
std::string digits20(uint64_t v) { return fmt::format("{:020}", v); }
std::string status_prefix(FlowStatus status) {
  return fmt::format("{}{:02}/", kStatusPrefix, static_cast<int>(status));
}
std::string flow_key(std::string_view id) { return cat(kFlowPrefix, id); }
std::string ready_prefix(std::string_view queue) {
  std::string s = cat(kReadyPrefix, queue);
  s += kSep;
  return s;
}
std::string flow_step_value(std::string_view flow_id, std::string_view step) {
  std::string s(flow_id);
  s += kSep;
  s += step;
  return s;
}
bool split_flow_step(std::string_view value, std::string& flow_id, std::string& step) {
  size_t at = value.find(kSep);
  if (at == std::string_view::npos) return false;
  flow_id = std::string(value.substr(0, at));
  step = std::string(value.substr(at + 1));
  return true;
}
std::string timer_key(int64_t wake_at_ms, std::string_view flow_id, std::string_view step) {
  return cat(kTimerPrefix, digits20(static_cast<uint64_t>(std::max<int64_t>(wake_at_ms, 0)))) +
         kSep + flow_step_value(flow_id, step);
}

Status db_status(const rocksdb::Status& s, std::string_view what) {
  if (s.IsCorruption()) {
    return Status::corruption(fmt::format("local store: {}: {}", what, s.ToString()));
  }
  return Status::permanent(fmt::format("local store: {}: {}", what, s.ToString()));
}

// The secondary keys of a flow: derived from the flow alone, so that an apply
// updates them by comparing a flow's keys before and after (no read of the index).
std::map<std::string, std::string> index_keys(const proto::StoredFlow& stored) {
  std::map<std::string, std::string> keys;
  const Flow& flow = stored.flow();
  keys[status_prefix(flow.status()) + flow.flow_id()] = "";
  if (flow.status() != FLOW_STATUS_RUNNING) return keys;
  for (int i = 0; i < flow.steps_size(); ++i) {
    const Step& step = flow.steps(i);
    const proto::StepRuntime& rt = stored.runtime(i);
    switch (step.status()) {
      case STEP_STATUS_READY:
        keys[ready_prefix(stored.flow_type().steps(i).task_queue()) + digits20(rt.ready_seq())] =
            flow_step_value(flow.flow_id(), step.name());
        break;
      case STEP_STATUS_RUNNING:
        keys[cat(kRunningPrefix, flow_step_value(flow.flow_id(), step.name()))] = rt.task_id();
        break;
      case STEP_STATUS_BACKOFF:
      case STEP_STATUS_SLEEPING:
        keys[timer_key(step.wake_at_ms(), flow.flow_id(), step.name())] = "";
        break;
      default:
        break;
    }
  }
  return keys;
}

int step_index(const proto::StoredFlow& stored, std::string_view name) {
  for (int i = 0; i < stored.flow().steps_size(); ++i) {
    if (stored.flow().steps(i).name() == name) return i;
  }
  return -1;
}

bool step_done(StepStatus s) {
  return s == STEP_STATUS_COMPLETED || s == STEP_STATUS_FAILED || s == STEP_STATUS_CANCELLED;
}

std::string_view step_status_name(StepStatus s) {
  switch (s) {
    case STEP_STATUS_PENDING:
      return "PENDING";
    case STEP_STATUS_READY:
      return "READY";
    case STEP_STATUS_RUNNING:
      return "RUNNING";
    case STEP_STATUS_BACKOFF:
      return "BACKOFF";
    case STEP_STATUS_SLEEPING:
      return "SLEEPING";
    case STEP_STATUS_COMPLETED:
      return "COMPLETED";
    case STEP_STATUS_FAILED:
      return "FAILED";
    case STEP_STATUS_CANCELLED:
      return "CANCELLED";
    default:
      return "UNSPECIFIED";
  }
}

// One apply: the flows and types it touched, cached so that later records of
// the same batch see earlier ones, and written with the last applied slot in
// one WriteBatch at the end.
class Txn {
 public:
  Txn(rocksdb::DB& db, ApplyEffects& effects) : db_(db), effects_(effects) {}

  Status load_seq() {
    std::string value;
    auto s = db_.Get(rocksdb::ReadOptions(), std::string(kReadySeqKey), &value);
    if (s.IsNotFound()) return Status::ok();
    if (!s.ok()) return db_status(s, "reading the ready sequence");
    seq_ = std::stoull(value);
    return Status::ok();
  }

  // The flow, or nullptr if it does not exist.
  StatusOr<proto::StoredFlow*> flow(const std::string& id) {
    if (auto it = flows_.find(id); it != flows_.end()) {
      return it->second.exists ? &it->second.now : nullptr;
    }
    std::string value;
    auto s = db_.Get(rocksdb::ReadOptions(), flow_key(id), &value);
    Loaded& loaded = flows_[id];
    if (s.IsNotFound()) return static_cast<proto::StoredFlow*>(nullptr);
    if (!s.ok()) return db_status(s, "reading flow '" + id + "'");
    if (!loaded.now.ParseFromString(value)) {
      return Status::corruption(fmt::format("local store: flow '{}' does not parse", id));
    }
    loaded.exists = true;
    loaded.old_keys = index_keys(loaded.now);
    return &loaded.now;
  }
  proto::StoredFlow* create(const std::string& id) {
    Loaded& loaded = flows_[id];
    assert(!loaded.exists);
    loaded.exists = true;
    return &loaded.now;
  }

  StatusOr<std::optional<FlowType>> flow_type(const std::string& name) {
    if (auto it = types_.find(name); it != types_.end()) return std::optional<FlowType>(it->second);
    std::string value;
    auto s = db_.Get(rocksdb::ReadOptions(), cat(kFlowTypePrefix, name), &value);
    if (s.IsNotFound()) return std::optional<FlowType>();
    if (!s.ok()) return db_status(s, "reading flow type '" + name + "'");
    FlowType type;
    if (!type.ParseFromString(value)) {
      return Status::corruption(fmt::format("local store: flow type '{}' does not parse", name));
    }
    return std::optional<FlowType>(std::move(type));
  }
  void put_flow_type(const FlowType& type) { types_[type.name()] = type; }

  // Flows with a running attempt, committed or touched by this batch, in id order.
  StatusOr<std::vector<std::string>> flows_with_running_attempts() {
    std::set<std::string> ids;
    std::unique_ptr<rocksdb::Iterator> it(db_.NewIterator(rocksdb::ReadOptions()));
    // Bounded by the number of running attempts in the store.
    for (it->Seek(std::string(kRunningPrefix));
         it->Valid() && it->key().starts_with(kRunningPrefix); it->Next()) {
      std::string flow_id, step;
      if (!split_flow_step(it->key().ToStringView().substr(kRunningPrefix.size()), flow_id, step)) {
        return Status::corruption("local store: bad running-attempt key");
      }
      ids.insert(flow_id);
    }
    if (!it->status().ok()) return db_status(it->status(), "listing running attempts");
    for (const auto& [id, loaded] : flows_) {
      if (loaded.exists) ids.insert(id);
    }
    return std::vector<std::string>(ids.begin(), ids.end());
  }

  uint64_t next_ready_seq() { return ++seq_; }

  // `flows`: the flow records' writes, in the same atomic batch.
  Status commit(Slot slot, const RocksKv& flows) {
    rocksdb::WriteBatch batch;
    flows.write_into(batch);
    for (const auto& [name, type] : types_) {
      batch.Put(cat(kFlowTypePrefix, name), type.SerializeAsString());
    }
    for (const auto& [id, loaded] : flows_) {
      if (!loaded.exists) continue;
      auto new_keys = index_keys(loaded.now);
      for (const auto& [key, value] : loaded.old_keys) {
        if (!new_keys.contains(key)) batch.Delete(key);
      }
      for (const auto& [key, value] : new_keys) {
        auto old = loaded.old_keys.find(key);
        if (old == loaded.old_keys.end() || old->second != value) {
          batch.Put(key, value);
          if (key.starts_with(kReadyPrefix) || key.starts_with(kTimerPrefix))
            inserted_.push_back(key);
        }
      }
      batch.Put(flow_key(id), loaded.now.SerializeAsString());
    }
    batch.Put(std::string(kReadySeqKey), std::to_string(seq_));
    batch.Put(std::string(kLastAppliedKey), std::to_string(slot.value));
    // Not synced: the log is the durable copy; a store that lost its tail
    // replays it (docs/engine.md, "What is in RocksDB").
    auto s = db_.Write(rocksdb::WriteOptions(), &batch);
    if (!s.ok()) return db_status(s, fmt::format("writing the batch of slot {}", slot.value));
    return Status::ok();
  }

  ApplyEffects& effects() { return effects_; }
  // Ready-queue and timer keys this transaction put (for the scan hints).
  const std::vector<std::string>& inserted() const { return inserted_; }

 private:
  std::vector<std::string> inserted_;
  struct Loaded {
    bool exists = false;
    proto::StoredFlow now;
    std::map<std::string, std::string> old_keys;  // index keys as stored
  };
  rocksdb::DB& db_;
  ApplyEffects& effects_;
  std::map<std::string, Loaded> flows_;
  std::map<std::string, FlowType> types_;
  uint64_t seq_ = 0;
};

// ------------------------------------------------------------ apply rules

void end_flow(Txn& txn, proto::StoredFlow& stored, FlowStatus status, const std::string& error,
              int64_t at) {
  Flow& flow = *stored.mutable_flow();
  assert(flow.status() == FLOW_STATUS_RUNNING);
  flow.set_status(status);
  flow.set_error(error);
  flow.set_ended_at_ms(at);
  // Every Step still open ends with the flow; a running attempt ends NOT_COMPLETED
  // (its Worker learns it on the next heartbeat ack; its result is then stale).
  for (int i = 0; i < flow.steps_size(); ++i) {
    Step& step = *flow.mutable_steps(i);
    if (step_done(step.status())) continue;
    if (step.status() == STEP_STATUS_RUNNING) {
      Attempt& attempt = *step.mutable_attempts(step.attempts_size() - 1);
      attempt.set_outcome(ATTEMPT_OUTCOME_NOT_COMPLETED);
      attempt.set_ended_at_ms(at);
      attempt.set_error(status == FLOW_STATUS_CANCELLED ? "the flow was cancelled"
                                                        : "the flow failed");
      txn.effects().attempts_ended.push_back({flow.flow_id(), step.name(),
                                              stored.runtime(i).task_id(),
                                              ATTEMPT_OUTCOME_NOT_COMPLETED});
      stored.mutable_runtime(i)->clear_task_id();
    }
    step.set_status(STEP_STATUS_CANCELLED);
    step.set_wake_at_ms(0);
    stored.mutable_runtime(i)->set_ready_seq(0);
  }
  txn.effects().flows_ended.push_back(flow.flow_id());
}

// Makes every PENDING Step whose dependencies all completed READY (or SLEEPING),
// and completes the flow when every Step completed.
void advance(Txn& txn, proto::StoredFlow& stored, int64_t at) {
  Flow& flow = *stored.mutable_flow();
  if (flow.status() != FLOW_STATUS_RUNNING) return;
  // Bounded: each pass completes at least one sleep Step of zero length or stops;
  // sleeps are positive, so one pass suffices, but stay safe with a step bound.
  for (int pass = 0; pass <= flow.steps_size(); ++pass) {
    bool changed = false;
    for (int i = 0; i < flow.steps_size(); ++i) {
      Step& step = *flow.mutable_steps(i);
      if (step.status() != STEP_STATUS_PENDING) continue;
      const StepDef& def = stored.flow_type().steps(i);
      bool deps_done = true;
      for (const auto& dep : def.after()) {
        int d = step_index(stored, dep);
        assert(d >= 0);
        if (flow.steps(d).status() != STEP_STATUS_COMPLETED) deps_done = false;
      }
      if (!deps_done) continue;
      if (def.sleep_ms() > 0) {
        step.set_status(STEP_STATUS_SLEEPING);
        step.set_wake_at_ms(at + def.sleep_ms());
        txn.effects().timers_set.push_back(step.wake_at_ms());
      } else {
        step.set_status(STEP_STATUS_READY);
        stored.mutable_runtime(i)->set_ready_seq(txn.next_ready_seq());
        txn.effects().ready.push_back({flow.flow_id(), step.name()});
      }
      changed = true;
    }
    if (!changed) break;
  }
  bool all_completed = true;
  for (const auto& step : flow.steps()) {
    if (step.status() != STEP_STATUS_COMPLETED) all_completed = false;
  }
  if (all_completed) {
    flow.set_status(FLOW_STATUS_COMPLETED);
    flow.set_ended_at_ms(at);
    txn.effects().flows_ended.push_back(flow.flow_id());
  }
}

// Ends the running attempt of Step `i` (docs/engine.md, "Retries").
void end_attempt(Txn& txn, proto::StoredFlow& stored, int i, AttemptOutcome outcome,
                 const std::string& output, const std::string& error, bool non_retryable,
                 int64_t at) {
  Flow& flow = *stored.mutable_flow();
  Step& step = *flow.mutable_steps(i);
  assert(step.status() == STEP_STATUS_RUNNING && step.attempts_size() > 0);
  Attempt& attempt = *step.mutable_attempts(step.attempts_size() - 1);
  attempt.set_outcome(outcome);
  attempt.set_ended_at_ms(at);
  txn.effects().attempts_ended.push_back(
      {flow.flow_id(), step.name(), stored.runtime(i).task_id(), outcome});
  stored.mutable_runtime(i)->clear_task_id();
  if (outcome == ATTEMPT_OUTCOME_COMPLETED) {
    step.set_status(STEP_STATUS_COMPLETED);
    step.set_output(output);
    advance(txn, stored, at);
    return;
  }
  attempt.set_error(error);
  // Every attempt that ended without COMPLETED consumed a retry; attempts in
  // the list are numbered 1..n without gaps.
  const StepDef& def = stored.flow_type().steps(i);
  const uint32_t used = static_cast<uint32_t>(step.attempts_size());
  const bool give_up =
      (non_retryable && outcome == ATTEMPT_OUTCOME_FAILED) || used >= def.retry().max_attempts();
  if (give_up) {
    step.set_status(STEP_STATUS_FAILED);
    step.set_error(error);
    end_flow(txn, stored, FLOW_STATUS_FAILED,
             fmt::format("step '{}' failed{} after {} attempt{}: {}", step.name(),
                         non_retryable && outcome == ATTEMPT_OUTCOME_FAILED ? " non-retryably" : "",
                         used, used == 1 ? "" : "s", error),
             at);
    return;
  }
  step.set_status(STEP_STATUS_BACKOFF);
  step.set_wake_at_ms(at + retry_backoff_ms(def.retry(), attempt.number()));
  txn.effects().timers_set.push_back(step.wake_at_ms());
}

using Result = std::pair<ApplyKind, std::string>;

StatusOr<Result> apply_register(Txn& txn, const proto::RegisterFlowType& rec) {
  auto valid = validate_flow_type(rec.flow_type());
  if (!valid.is_ok()) return Result{ApplyKind::kRejected, valid.status().message()};
  auto existing = txn.flow_type(valid->name());
  if (!existing.is_ok()) return existing.status();
  if (existing->has_value() &&
      existing->value().SerializeAsString() == valid->SerializeAsString()) {
    return Result{ApplyKind::kUnchanged, "an identical definition was already registered"};
  }
  txn.put_flow_type(valid.value());
  return Result{ApplyKind::kApplied, existing->has_value() ? "replaced" : "registered"};
}

StatusOr<Result> apply_start(Txn& txn, const proto::StartFlow& rec) {
  if (rec.flow_id().empty()) return Result{ApplyKind::kRejected, "flow_id is empty"};
  auto existing = txn.flow(rec.flow_id());
  if (!existing.is_ok()) return existing.status();
  if (existing.value() != nullptr) {
    return Result{ApplyKind::kUnchanged, fmt::format("flow '{}' already existed", rec.flow_id())};
  }
  auto type = txn.flow_type(rec.flow_type());
  if (!type.is_ok()) return type.status();
  if (!type->has_value()) {
    return Result{ApplyKind::kRejected, fmt::format("unknown flow type '{}'", rec.flow_type())};
  }
  proto::StoredFlow& stored = *txn.create(rec.flow_id());
  *stored.mutable_flow_type() = type->value();
  Flow& flow = *stored.mutable_flow();
  flow.set_flow_id(rec.flow_id());
  flow.set_flow_type(rec.flow_type());
  flow.set_status(FLOW_STATUS_RUNNING);
  flow.set_input(rec.input());
  flow.set_created_at_ms(rec.at_unix_ms());
  for (const auto& def : stored.flow_type().steps()) {
    Step* step = flow.add_steps();
    step->set_name(def.name());
    step->set_status(STEP_STATUS_PENDING);
    stored.add_runtime();
  }
  advance(txn, stored, rec.at_unix_ms());
  return Result{ApplyKind::kApplied, "flow created"};
}

// The Step named by a record about an attempt, or why the record is stale.
struct Target {
  proto::StoredFlow* stored = nullptr;
  int index = -1;
  std::optional<Result> refusal;
};
StatusOr<Target> find_target(Txn& txn, const std::string& flow_id, const std::string& step_name) {
  Target t;
  auto stored = txn.flow(flow_id);
  if (!stored.is_ok()) return stored.status();
  if (stored.value() == nullptr) {
    t.refusal = Result{ApplyKind::kStale, fmt::format("no flow '{}'", flow_id)};
    return t;
  }
  t.stored = stored.value();
  t.index = step_index(*t.stored, step_name);
  if (t.index < 0) {
    t.refusal =
        Result{ApplyKind::kRejected, fmt::format("flow '{}' has no step '{}'", flow_id, step_name)};
    return t;
  }
  if (t.stored->flow().status() != FLOW_STATUS_RUNNING) {
    t.refusal = Result{ApplyKind::kStale, fmt::format("flow '{}' has ended", flow_id)};
  }
  return t;
}

std::optional<Result> check_running(const Target& t, const std::string& task_id) {
  const Step& step = t.stored->flow().steps(t.index);
  if (step.status() != STEP_STATUS_RUNNING || t.stored->runtime(t.index).task_id() != task_id) {
    return Result{ApplyKind::kStale,
                  fmt::format("task '{}' is not the running attempt of step '{}' (the attempt "
                              "already ended; the step is {})",
                              task_id, step.name(), step_status_name(step.status()))};
  }
  return std::nullopt;
}

StatusOr<Result> apply_started(Txn& txn, const proto::AttemptStarted& rec) {
  auto t = find_target(txn, rec.flow_id(), rec.step());
  if (!t.is_ok()) return t.status();
  if (t->refusal) return *t->refusal;
  proto::StoredFlow& stored = *t->stored;
  Step& step = *stored.mutable_flow()->mutable_steps(t->index);
  if (step.status() != STEP_STATUS_READY) {
    return Result{ApplyKind::kStale, fmt::format("step '{}' is {}, not READY", step.name(),
                                                 step_status_name(step.status()))};
  }
  const uint32_t next = static_cast<uint32_t>(step.attempts_size()) + 1;
  if (rec.attempt() != next) {
    return Result{ApplyKind::kStale, fmt::format("attempt {} of step '{}' is not the next one ({})",
                                                 rec.attempt(), step.name(), next)};
  }
  step.set_status(STEP_STATUS_RUNNING);
  Attempt* attempt = step.add_attempts();
  attempt->set_number(rec.attempt());
  attempt->set_worker_id(rec.worker_id());
  attempt->set_started_at_ms(rec.at_unix_ms());
  proto::StepRuntime& rt = *stored.mutable_runtime(t->index);
  rt.set_task_id(rec.task_id());
  rt.set_ready_seq(0);
  txn.effects().attempts_started.push_back(rec.task_id());
  return Result{ApplyKind::kApplied, "attempt started"};
}

StatusOr<Result> apply_ended(Txn& txn, const proto::AttemptEnded& rec) {
  auto t = find_target(txn, rec.flow_id(), rec.step());
  if (!t.is_ok()) return t.status();
  if (t->refusal) {
    if (t->refusal->first == ApplyKind::kStale && t->stored != nullptr) {
      t->refusal->second =
          fmt::format("task '{}': {} (stale result)", rec.task_id(), t->refusal->second);
    }
    return *t->refusal;
  }
  if (auto stale = check_running(t.value(), rec.task_id())) return *stale;
  switch (rec.outcome()) {
    case ATTEMPT_OUTCOME_COMPLETED:
    case ATTEMPT_OUTCOME_FAILED:
    case ATTEMPT_OUTCOME_TIMED_OUT:
    case ATTEMPT_OUTCOME_NOT_COMPLETED:
      break;
    default:
      return Result{ApplyKind::kRejected, "AttemptEnded without an outcome"};
  }
  end_attempt(txn, *t->stored, t->index, rec.outcome(), rec.output(), rec.error(),
              rec.non_retryable(), rec.at_unix_ms());
  return Result{ApplyKind::kApplied, "result accepted"};
}

StatusOr<Result> apply_withdrawn(Txn& txn, const proto::AttemptWithdrawn& rec) {
  auto t = find_target(txn, rec.flow_id(), rec.step());
  if (!t.is_ok()) return t.status();
  if (t->refusal) return *t->refusal;
  if (auto stale = check_running(t.value(), rec.task_id())) return *stale;
  proto::StoredFlow& stored = *t->stored;
  Step& step = *stored.mutable_flow()->mutable_steps(t->index);
  // The Worker never received it: as if it never started (docs/engine.md,
  // "Undelivered tasks"). The next attempt reuses the number.
  step.mutable_attempts()->RemoveLast();
  step.set_status(STEP_STATUS_READY);
  proto::StepRuntime& rt = *stored.mutable_runtime(t->index);
  rt.clear_task_id();
  rt.set_ready_seq(txn.next_ready_seq());
  txn.effects().attempts_withdrawn.push_back(rec.task_id());
  txn.effects().ready.push_back({stored.flow().flow_id(), step.name()});
  return Result{ApplyKind::kApplied, "attempt withdrawn"};
}

StatusOr<Result> apply_timer(Txn& txn, const proto::TimerFired& rec) {
  auto t = find_target(txn, rec.flow_id(), rec.step());
  if (!t.is_ok()) return t.status();
  if (t->refusal) return *t->refusal;
  proto::StoredFlow& stored = *t->stored;
  Step& step = *stored.mutable_flow()->mutable_steps(t->index);
  if ((step.status() != STEP_STATUS_BACKOFF && step.status() != STEP_STATUS_SLEEPING) ||
      step.wake_at_ms() != rec.wake_at_ms()) {
    return Result{ApplyKind::kStale, fmt::format("step '{}' does not wait on a timer at {}",
                                                 step.name(), rec.wake_at_ms())};
  }
  step.set_wake_at_ms(0);
  if (step.status() == STEP_STATUS_BACKOFF) {
    step.set_status(STEP_STATUS_READY);
    stored.mutable_runtime(t->index)->set_ready_seq(txn.next_ready_seq());
    txn.effects().ready.push_back({stored.flow().flow_id(), step.name()});
  } else {
    step.set_status(STEP_STATUS_COMPLETED);
    step.set_output(std::string(kSleepOutput));
    advance(txn, stored, rec.at_unix_ms());
  }
  return Result{ApplyKind::kApplied, "timer fired"};
}

StatusOr<Result> apply_cancel(Txn& txn, const proto::CancelFlow& rec) {
  auto stored = txn.flow(rec.flow_id());
  if (!stored.is_ok()) return stored.status();
  if (stored.value() == nullptr) {
    return Result{ApplyKind::kRejected, fmt::format("no flow '{}'", rec.flow_id())};
  }
  if (stored.value()->flow().status() != FLOW_STATUS_RUNNING) {
    return Result{ApplyKind::kUnchanged, fmt::format("flow '{}' had already ended", rec.flow_id())};
  }
  end_flow(txn, *stored.value(), FLOW_STATUS_CANCELLED, "cancelled", rec.at_unix_ms());
  return Result{ApplyKind::kApplied, "flow cancelled"};
}

// Recovery (docs/engine.md, "Recovery"; spec, Lease): every attempt still
// running when a new holder's EpochStart is applied was lost with the old
// holder. It ends NOT_COMPLETED and consumes a retry. An ASYNC attempt whose
// AttemptStarted never became durable is not in the log, so its Step is still
// READY and runs again with the same attempt number.
Status apply_epoch_start(Txn& txn, const proto::EpochStart& rec) {
  auto ids = txn.flows_with_running_attempts();
  if (!ids.is_ok()) return ids.status();
  for (const auto& id : ids.value()) {
    auto stored = txn.flow(id);
    if (!stored.is_ok()) return stored.status();
    if (stored.value() == nullptr) continue;
    proto::StoredFlow& f = *stored.value();
    if (f.flow().status() != FLOW_STATUS_RUNNING) continue;
    for (int i = 0; i < f.flow().steps_size(); ++i) {
      if (f.flow().status() != FLOW_STATUS_RUNNING) break;  // an earlier Step failed the flow
      if (f.flow().steps(i).status() != STEP_STATUS_RUNNING) continue;
      end_attempt(txn, f, i, ATTEMPT_OUTCOME_NOT_COMPLETED, "",
                  fmt::format("not completed: the node lost the attempt (process '{}' took over)",
                              rec.holder_process_id()),
                  false, rec.at_unix_ms());
    }
  }
  return Status::ok();
}

StatusOr<Result> apply_engine(Txn& txn, const proto::EngineRecord& rec) {
  switch (rec.kind_case()) {
    case proto::EngineRecord::kRegisterFlowType:
      return apply_register(txn, rec.register_flow_type());
    case proto::EngineRecord::kStartFlow:
      return apply_start(txn, rec.start_flow());
    case proto::EngineRecord::kAttemptStarted:
      return apply_started(txn, rec.attempt_started());
    case proto::EngineRecord::kAttemptEnded:
      return apply_ended(txn, rec.attempt_ended());
    case proto::EngineRecord::kAttemptWithdrawn:
      return apply_withdrawn(txn, rec.attempt_withdrawn());
    case proto::EngineRecord::kTimerFired:
      return apply_timer(txn, rec.timer_fired());
    case proto::EngineRecord::kCancelFlow:
      return apply_cancel(txn, rec.cancel_flow());
    default:
      return Result{ApplyKind::kRejected, "an engine record of an unknown kind"};
  }
}

}  // namespace

std::string_view apply_kind_name(ApplyKind kind) {
  switch (kind) {
    case ApplyKind::kApplied:
      return "applied";
    case ApplyKind::kUnchanged:
      return "unchanged";
    case ApplyKind::kStale:
      return "stale";
    case ApplyKind::kRejected:
      return "rejected";
  }
  return "?";
}

StateMachine::StateMachine(std::unique_ptr<rocksdb::DB> db) : db_(std::move(db)) {}
StateMachine::~StateMachine() = default;

StatusOr<std::unique_ptr<StateMachine>> StateMachine::open(const std::filesystem::path& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, path.string(), &raw);
  if (!s.ok()) return db_status(s, fmt::format("opening '{}'", path.string()));
  return std::unique_ptr<StateMachine>(new StateMachine(std::unique_ptr<rocksdb::DB>(raw)));
}

namespace {
StatusOr<std::optional<Slot>> read_last_applied(rocksdb::DB& db) {
  std::string value;
  auto s = db.Get(rocksdb::ReadOptions(), std::string(kLastAppliedKey), &value);
  if (s.IsNotFound()) return std::optional<Slot>();
  if (!s.ok()) return db_status(s, "reading the last applied slot");
  uint64_t slot = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), slot);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    return Status::corruption(
        fmt::format("local store: the last applied slot '{}' is not a number", value));
  }
  return std::optional<Slot>(Slot(slot));
}
}  // namespace

StatusOr<std::optional<Slot>> StateMachine::last_applied() const { return read_last_applied(*db_); }

StatusOr<std::optional<Slot>> StateMachine::checkpoint(const std::filesystem::path& dir) {
  rocksdb::Checkpoint* raw = nullptr;
  auto s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  if (!s.ok()) return db_status(s, "preparing a checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // Flushes the memtable first (log_size_for_flush 0), so the files hold everything.
  s = checkpoint->CreateCheckpoint(dir.string(), /*log_size_for_flush=*/0);
  if (!s.ok()) return db_status(s, fmt::format("creating a checkpoint in '{}'", dir.string()));
  // Applies go on meanwhile: the checkpoint itself says which slot it holds.
  rocksdb::DB* ro = nullptr;
  s = rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir.string(), &ro);
  if (!s.ok()) return db_status(s, fmt::format("opening the checkpoint '{}'", dir.string()));
  std::unique_ptr<rocksdb::DB> db(ro);
  return read_last_applied(*db);
}

StatusOr<ApplyOutcome> StateMachine::apply(Slot slot, const proto::LogBatch& batch) {
  std::lock_guard<std::mutex> lock(apply_mu_);
  ApplyOutcome outcome;
  auto last = last_applied();
  if (!last.is_ok()) return last.status();
  if (last->has_value() && slot <= last->value()) {
    // Idempotent replay: this batch is already in the store.
    outcome.skipped = true;
    return outcome;
  }
  Txn txn(*db_, outcome.effects);
  if (auto s = txn.load_seq(); !s.is_ok()) return s;
  auto flows = RocksKv::overlay(*db_);
  flow::KvFlowTxn flow_txn(*flows);
  for (const auto& record : batch.records()) {
    if (record.has_epoch_start()) {
      if (auto s = apply_epoch_start(txn, record.epoch_start()); !s.is_ok()) return s;
      // docs/flow-rules.md, "Failures, retries and recovery".
      flow::recover_attempts(flow_txn, record.epoch_start().at_unix_ms(), outcome.flow_effects);
    } else if (record.has_flow()) {
      outcome.flow_results.push_back(
          {record.flow().proposal_id(),
           flow::apply_record(flow_txn, record.flow(), outcome.flow_effects)});
    } else if (record.has_engine()) {
      auto result = apply_engine(txn, record.engine());
      if (!result.is_ok()) return result.status();
      outcome.results.push_back(
          {record.engine().proposal_id(), result->first, std::move(result->second)});
    }
  }
  // A failed read may have misled the rules: nothing of this batch is written.
  if (!flows->status().is_ok()) return flows->status();
  if (auto s = txn.commit(slot, *flows); !s.is_ok()) return s;
  for (const std::string& key : txn.inserted()) {
    // A ready key is its queue's prefix plus 20 digits; timers share one prefix.
    hints_.inserted(
        key.starts_with(kTimerPrefix) ? std::string(kTimerPrefix) : key.substr(0, key.size() - 20),
        key);
  }
  return outcome;
}

StatusOr<std::optional<FlowType>> StateMachine::flow_type(std::string_view name) const {
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), cat(kFlowTypePrefix, name), &value);
  if (s.IsNotFound()) return std::optional<FlowType>();
  if (!s.ok()) return db_status(s, "reading a flow type");
  FlowType type;
  if (!type.ParseFromString(value))
    return Status::corruption("local store: a flow type does not parse");
  return std::optional<FlowType>(std::move(type));
}

StatusOr<std::vector<FlowType>> StateMachine::flow_types() const {
  std::vector<FlowType> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(std::string(kFlowTypePrefix));
       it->Valid() && it->key().starts_with(kFlowTypePrefix); it->Next()) {
    FlowType type;
    if (!type.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return Status::corruption("local store: a flow type does not parse");
    }
    out.push_back(std::move(type));
  }
  if (!it->status().ok()) return db_status(it->status(), "listing flow types");
  return out;
}

StatusOr<std::optional<proto::StoredFlow>> StateMachine::flow(std::string_view flow_id) const {
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), flow_key(flow_id), &value);
  if (s.IsNotFound()) return std::optional<proto::StoredFlow>();
  if (!s.ok()) return db_status(s, "reading a flow");
  proto::StoredFlow stored;
  if (!stored.ParseFromString(value)) {
    return Status::corruption(fmt::format("local store: flow '{}' does not parse", flow_id));
  }
  return std::optional<proto::StoredFlow>(std::move(stored));
}

StatusOr<ListFlowsResponse> StateMachine::list_flows(FlowStatus status, size_t page_size,
                                                     std::string_view page_token) const {
  assert(page_size > 0);
  ListFlowsResponse response;
  const std::string prefix =
      status == FLOW_STATUS_UNSPECIFIED ? std::string(kFlowPrefix) : status_prefix(status);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  std::string start = prefix + std::string(page_token);
  it->Seek(start);
  if (!page_token.empty() && it->Valid() && it->key() == start) it->Next();  // after the token
  std::string last;
  // Bounded by page_size.
  for (; it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (static_cast<size_t>(response.flows_size()) == page_size) {
      response.set_next_page_token(last);
      break;
    }
    std::string id(it->key().ToStringView().substr(prefix.size()));
    auto stored = flow(id);
    if (!stored.is_ok()) return stored.status();
    if (!stored->has_value()) {
      return Status::corruption(fmt::format("local store: index names missing flow '{}'", id));
    }
    *response.add_flows() = stored->value().flow();
    last = id;
  }
  if (!it->status().ok()) return db_status(it->status(), "listing flows");
  return response;
}

std::string StateMachine::ScanHints::start(const std::string& prefix, uint64_t* generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = hints_.find(prefix);
  if (it == hints_.end()) {
    *generation = 0;
    return prefix;
  }
  *generation = it->second.generation;
  return it->second.from.empty() ? prefix : it->second.from;
}

// The first key after every key that starts with `prefix` (prefixes here are
// non-empty and end in a separator, never in 0xff).
static std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

void StateMachine::ScanHints::scanned(const std::string& prefix, uint64_t generation,
                                      const std::string* first_key) {
  std::lock_guard<std::mutex> lock(mu_);
  Hint& hint = hints_[prefix];
  if (hint.generation != generation) return;  // an insert raced with the scan
  // Nothing live at or after the start: the next scan starts at the prefix's
  // end (and finds nothing at once) until an insert lowers the hint. Keeping
  // the old start made every scan of an empty queue walk the same deleted
  // entries again: 35-48 % of server CPU in the peers benchmark.
  hint.from = first_key != nullptr ? *first_key : prefix_end(prefix);
}

void StateMachine::ScanHints::inserted(const std::string& prefix, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  // Always move the generation, even before the first scan: a scan that began
  // before this insert must not raise the hint past the new key.
  Hint& hint = hints_[prefix];
  ++hint.generation;
  if (!hint.from.empty() && key < hint.from) hint.from = key;
}

StatusOr<std::vector<ApplyEffects::StepRef>> StateMachine::ready_steps(
    std::string_view task_queue, size_t limit,
    const std::function<bool(const std::string&, const std::string&)>& skip) const {
  std::vector<ApplyEffects::StepRef> out;
  const std::string prefix = ready_prefix(task_queue);
  uint64_t generation = 0;
  const std::string start = hints_.start(prefix, &generation);
  // The upper bound stops the iterator at the queue's end instead of letting it
  // skip deleted entries of whatever follows the queue in key order.
  const std::string end = prefix_end(prefix);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions read_options;
  read_options.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));
  std::optional<std::string> first_key;
  // Bounded by `limit` plus the skipped entries (the in-flight dispatches).
  for (it->Seek(start); it->Valid() && it->key().starts_with(prefix) && out.size() < limit;
       it->Next()) {
    if (!first_key) first_key = it->key().ToString();
    ApplyEffects::StepRef ref;
    if (!split_flow_step(it->value().ToStringView(), ref.flow_id, ref.step)) {
      return Status::corruption("local store: bad ready-queue entry");
    }
    if (skip && skip(ref.flow_id, ref.step)) continue;
    out.push_back(std::move(ref));
  }
  if (!it->status().ok()) return db_status(it->status(), "listing a ready queue");
  hints_.scanned(prefix, generation, first_key ? &*first_key : nullptr);
  return out;
}

StatusOr<std::vector<StateMachine::Timer>> StateMachine::timers(int64_t until_ms,
                                                                size_t limit) const {
  std::vector<Timer> out;
  const std::string prefix(kTimerPrefix);
  uint64_t generation = 0;
  const std::string start = hints_.start(prefix, &generation);
  const std::string end = prefix_end(prefix);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions read_options;
  read_options.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));
  std::optional<std::string> first_key;
  for (it->Seek(start); it->Valid() && it->key().starts_with(kTimerPrefix) && out.size() < limit;
       it->Next()) {
    if (!first_key) first_key = it->key().ToString();
    std::string_view rest = it->key().ToStringView().substr(kTimerPrefix.size());
    if (rest.size() < 21 || rest[20] != kSep)
      return Status::corruption("local store: bad timer key");
    Timer timer;
    timer.wake_at_ms = static_cast<int64_t>(std::stoull(std::string(rest.substr(0, 20))));
    if (timer.wake_at_ms > until_ms) break;
    if (!split_flow_step(rest.substr(21), timer.flow_id, timer.step)) {
      return Status::corruption("local store: bad timer key");
    }
    out.push_back(std::move(timer));
  }
  if (!it->status().ok()) return db_status(it->status(), "listing timers");
  hints_.scanned(prefix, generation, first_key ? &*first_key : nullptr);
  return out;
}

StatusOr<std::optional<int64_t>> StateMachine::next_timer_ms() const {
  auto first = timers(std::numeric_limits<int64_t>::max(), 1);
  if (!first.is_ok()) return first.status();
  if (first->empty()) return std::optional<int64_t>();
  return std::optional<int64_t>(first->front().wake_at_ms);
}

StatusOr<std::vector<StateMachine::Running>> StateMachine::running_attempts() const {
  std::vector<Running> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(std::string(kRunningPrefix)); it->Valid() && it->key().starts_with(kRunningPrefix);
       it->Next()) {
    Running r;
    if (!split_flow_step(it->key().ToStringView().substr(kRunningPrefix.size()), r.flow_id,
                         r.step)) {
      return Status::corruption("local store: bad running-attempt key");
    }
    r.task_id = it->value().ToString();
    out.push_back(std::move(r));
  }
  if (!it->status().ok()) return db_status(it->status(), "listing running attempts");
  return out;
}

std::unique_ptr<RocksKv> StateMachine::flow_view() const { return RocksKv::snapshot(*db_); }
std::unique_ptr<RocksKv> StateMachine::flow_scratch() const { return RocksKv::scratch(*db_); }

StatusOr<std::map<std::string, std::string>> StateMachine::dump() const {
  std::map<std::string, std::string> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next())
    out[it->key().ToString()] = it->value().ToString();
  if (!it->status().ok()) return db_status(it->status(), "dumping");
  return out;
}

}  // namespace dex
