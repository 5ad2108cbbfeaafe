#include "log/log_writer.h"

#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace dex {
namespace {

// open() gives up after this many slots taken by older writers. An older writer
// whose lease ended writes at most one more batch before it stops (it checks its
// lease before every write), so a handful of moves is the most a real race needs.
constexpr int kOpenSlotMovesMax = 1000;

uint64_t seed_or_random(uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

std::string seconds_text(Duration d) { return fmt::format("{}", to_ms(d) / 1000.0); }

}  // namespace

LogWriter::LogWriter(ObjectStore& store, Clock& clock, LogWriterOptions options,
                     LeaseValid lease_valid, OnFatal on_fatal)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      lease_valid_(std::move(lease_valid)),
      on_fatal_(std::move(on_fatal)),
      random_(seed_or_random(options_.jitter_seed)) {
  assert(!options_.node_id.empty());
  assert(options_.epoch > Epoch(0));
  assert(options_.write_limit > Duration(0));
  assert(options_.batch_records_max > 0 && options_.batch_bytes_max > 0);
  assert(options_.queue_records_max > 0);
  assert(options_.backoff_initial > Duration(0) &&
         options_.backoff_max >= options_.backoff_initial);
  assert(lease_valid_ && on_fatal_);
}

LogWriter::~LogWriter() { (void)close(); }

proto::LogBatch LogWriter::make_batch(Slot slot) const {
  proto::LogBatch batch;
  batch.set_node_id(options_.node_id.value);
  batch.set_epoch(options_.epoch.value);
  batch.set_slot(slot.value);
  batch.set_writer_process_id(options_.process_id.value);
  // Unique per batch: a writer recognises its own batch after a lost answer
  // (docs/log.md, "Ambiguous success"), and equal bodies never share an ETag.
  batch.set_write_id(random_hex_id());
  return batch;
}

Status LogWriter::limit_status(std::string_view what, TimePoint first_attempt,
                               const Status& last) const {
  return Status::stopped(fmt::format(
      "{} was not accepted by object storage within {} s of its first attempt ({} ms ago), the "
      "log write limit; the node stops. Last error: {}",
      what, seconds_text(options_.write_limit), to_ms(clock_.now() - first_attempt),
      last.to_string()));
}

void LogWriter::backoff(Duration& delay, TimePoint deadline) {
  Duration wait;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wait = random_.between(delay / 2, delay);  // jitter: writers do not retry in step
  }
  delay = std::min(delay * 2, options_.backoff_max);
  TimePoint until = std::min(clock_.now() + wait, deadline);
  std::unique_lock<std::mutex> lock(mu_);
  clock_.wait_until(lock, cv_, until, [] { return false; });
}

StatusOr<ObjectData> LogWriter::get_with_retry(const std::string& key, TimePoint first_attempt,
                                               TimePoint deadline) {
  Duration delay = options_.backoff_initial;
  Status last = Status::ok();
  // Bounded by `deadline`: every failed attempt waits a backoff.
  while (true) {
    TimePoint now = clock_.now();
    if (now >= deadline) {
      return limit_status(fmt::format("reading back '{}'", key), first_attempt, last);
    }
    auto got = store_.get(key, RequestOptions{deadline - now});
    if (got.is_ok() || got.status().is_not_found()) return got;
    if (!got.status().is_transient()) return got.status();
    last = got.status();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.transient_retries;
    }
    backoff(delay, deadline);
  }
}

StatusOr<LogWriter::CreateOutcome> LogWriter::create_slot(const proto::LogBatch& batch,
                                                          TimePoint first_attempt,
                                                          TimePoint deadline) {
  const std::string key = slot_key(options_.node_id, Slot(batch.slot()));
  const std::string body = encode_batch(batch);
  Duration delay = options_.backoff_initial;
  Status last = Status::ok();
  // Bounded by `deadline`: every failed attempt waits a backoff.
  while (true) {
    TimePoint now = clock_.now();
    if (now >= deadline) {
      return limit_status(fmt::format("log batch '{}'", key), first_attempt, last);
    }
    // Nothing to write for a lease that is gone; the answer would be refused anyway.
#ifdef DEX_CHAOS_BREAK_NO_FENCING
    if (false) {  // BROKEN ON PURPOSE (DEX_CHAOS_BREAK=no-fencing): writes without a lease
#else
    if (!lease_valid_()) {
#endif
      return Status::stopped(
          fmt::format("the lease of epoch {} is no longer valid; log batch '{}' not acknowledged",
                      options_.epoch.value, key));
    }
    // Each request may use the time left (docs/log.md, "The 10 s write limit").
    auto put = store_.put(key, body, PutCondition::create(), RequestOptions{deadline - now});
    if (put.is_ok()) return CreateOutcome{CreateResult::kWritten, {}};
    const Status& status = put.status();
    if (status.is_transient()) {
      // The write may have landed anyway; a later create then fails and the read
      // below finds our own write_id.
      last = status;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.transient_retries;
      }
      backoff(delay, deadline);
      continue;
    }
    if (!status.is_precondition_failed()) {
      return Status(status.code(), fmt::format("log batch '{}': {}", key, status.message()));
    }
    // The slot exists. Ours (an earlier attempt landed but its answer was lost) or
    // another writer's (docs/log.md, "Ambiguous success")?
    auto got = get_with_retry(key, first_attempt, deadline);
    if (got.status().is_not_found()) {
      // Deleted between our create and our read: only the GC of a newer lease
      // holder deletes slots, so this writer was fenced.
      proto::LogBatch none;
      return CreateOutcome{CreateResult::kTaken, none};
    }
    if (!got.is_ok()) return got.status();
    auto found = decode_batch(key, got->body);
    if (!found.is_ok()) return found.status();
    if (found->write_id() == batch.write_id()) {
      return CreateOutcome{CreateResult::kAdopted, {}};
    }
    return CreateOutcome{CreateResult::kTaken, std::move(found).value()};
  }
}

Status LogWriter::open() {
#ifdef DEX_CHAOS_BREAK_ACK_BEFORE_DURABLE
  spdlog::warn(
      "BROKEN BUILD (DEX_CHAOS_BREAK=ack-before-durable): log writes are acknowledged "
      "before they are durable; for the chaos harness's self-test only");
#endif
#ifdef DEX_CHAOS_BREAK_NO_FENCING
  spdlog::warn(
      "BROKEN BUILD (DEX_CHAOS_BREAK=no-fencing): the log writer ignores its lease and "
      "slots taken by newer epochs; for the chaos harness's self-test only");
#endif
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (opened_) return Status::invalid_argument("LogWriter::open called twice");
    opened_ = true;
  }
  const TimePoint first_attempt = clock_.now();
  const TimePoint deadline = first_attempt + options_.write_limit;
  if (!lease_valid_()) {
    return Status::stopped(fmt::format("the lease of epoch {} is not valid; the log is not opened",
                                       options_.epoch.value));
  }
  // 1. Find the end of the log (docs/log.md, "Epoch start").
  LogBounds bounds;
  Duration delay = options_.backoff_initial;
  Status last = Status::ok();
  // Bounded by `deadline`: every failed attempt waits a backoff.
  while (true) {
    TimePoint now = clock_.now();
    if (now >= deadline) return limit_status("listing the log", first_attempt, last);
    auto found = find_log_bounds(store_, options_.node_id, RequestOptions{deadline - now},
                                 options_.end_hint);
    if (found.is_ok()) {
      bounds = found.value();
      break;
    }
    if (!found.status().is_transient()) return found.status();
    last = found.status();
    backoff(delay, deadline);
  }
  // 2. The log's last batch carries the highest epoch in it (epochs never decrease
  // along the log). A higher one than ours means a newer holder already started.
  if (!bounds.empty()) {
    Slot last(bounds.end.value - 1);
    std::string key = slot_key(options_.node_id, last);
    auto got = get_with_retry(key, first_attempt, deadline);
    if (got.is_ok()) {
      auto batch = decode_batch(key, got->body);
      if (!batch.is_ok()) return batch.status();
      if (batch->epoch() >= options_.epoch.value) {
        return Status::fenced(fmt::format(
            "log batch '{}' has epoch {} (process '{}'), not below this writer's epoch {}", key,
            batch->epoch(), batch->writer_process_id(), options_.epoch.value));
      }
    } else if (!got.status().is_not_found()) {
      return got.status();
    }
  }
  // 3. Write the EpochStart batch at the first free slot; an older writer may fill
  // slots meanwhile, so move on past those. Never skip a free slot.
  Slot slot = bounds.end;
  for (int moves = 0;; ++moves) {
    if (moves >= kOpenSlotMovesMax) {
      return Status::stopped(
          fmt::format("older writers kept filling the log: {} slots taken after slot {}", moves,
                      bounds.end.value));
    }
    proto::LogBatch batch = make_batch(slot);
    auto* start = batch.add_records()->mutable_epoch_start();
    start->set_holder_process_id(options_.process_id.value);
    start->set_previous_end_slot(bounds.end.value);
    start->set_at_unix_ms(options_.epoch_start_unix_ms);
    auto outcome = create_slot(batch, first_attempt, deadline);
    if (!outcome.is_ok()) return outcome.status();
    if (outcome->result == CreateResult::kTaken) {
      const proto::LogBatch& other = outcome->taken_by;
      if (other.epoch() >= options_.epoch.value || other.write_id().empty()) {
        return Status::fenced(fmt::format(
            "log slot '{}' holds a batch of epoch {} (process '{}'); this writer's epoch {} is "
            "fenced",
            slot_key(options_.node_id, slot), other.epoch(), other.writer_process_id(),
            options_.epoch.value));
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.open_slot_moves;
      slot = slot.next();
      continue;
    }
    if (outcome->result == CreateResult::kAdopted) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.adopted;
    }
    break;
  }
  if (!lease_valid_()) {
    return Status::stopped(fmt::format(
        "the lease of epoch {} ended while its EpochStart was written", options_.epoch.value));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch_start_slot_ = slot;
    next_slot_ = slot.next();
    started_ = true;
  }
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

std::future<StatusOr<Slot>> LogWriter::append(proto::LogRecord record) {
  Pending pending{std::move(record), {}};
  auto future = pending.promise.get_future();
  if (pending.record.ByteSizeLong() > options_.batch_bytes_max) {
    pending.promise.set_value(Status::invalid_argument(
        fmt::format("log record of {} bytes exceeds batch_bytes_max {}",
                    pending.record.ByteSizeLong(), options_.batch_bytes_max)));
    return future;
  }
  std::unique_lock<std::mutex> lock(mu_);
  // Backpressure: bounded, because the writer drains a batch or stops within the
  // write limit.
  space_cv_.wait(
      lock, [&] { return queue_.size() < options_.queue_records_max || stopped_ || closing_; });
  if (!started_ && !closing_) {
    lock.unlock();
    pending.promise.set_value(
        Status::invalid_argument("LogWriter::append before a successful open()"));
    return future;
  }
  if (stopped_ || closing_) {
    Status why = stopped_ ? *stopped_ : Status::stopped("log writer closed");
    lock.unlock();
    pending.promise.set_value(
        Status::stopped(fmt::format("log writer stopped: {}", why.to_string())));
    return future;
  }
  queue_.push_back(std::move(pending));
  cv_.notify_all();
  return future;
}

Status LogWriter::write_batch(Slot slot, std::vector<Pending>& batch_records,
                              proto::LogBatch& batch, Duration& latency) {
  batch = make_batch(slot);
  for (auto& pending : batch_records) *batch.add_records() = pending.record;
  const TimePoint first_attempt = clock_.now();
  auto outcome = create_slot(batch, first_attempt, first_attempt + options_.write_limit);
  if (!outcome.is_ok()) return outcome.status();
#ifdef DEX_CHAOS_BREAK_NO_FENCING
  // BROKEN ON PURPOSE (DEX_CHAOS_BREAK=no-fencing, src/log/CMakeLists.txt): a slot taken by
  // another writer, even of a newer epoch, does not fence this writer; it writes at the end
  // of the log instead. Only for the chaos harness's self-test.
  for (int moves = 0; outcome->result == CreateResult::kTaken && moves < 100; ++moves) {
    auto bounds = find_log_bounds(store_, options_.node_id, RequestOptions{seconds(5)});
    if (!bounds.is_ok()) return bounds.status();
    batch = make_batch(bounds->end);
    for (auto& pending : batch_records) *batch.add_records() = pending.record;
    outcome = create_slot(batch, first_attempt, first_attempt + options_.write_limit);
    if (!outcome.is_ok()) return outcome.status();
  }
  slot = Slot(batch.slot());
#endif
  if (outcome->result == CreateResult::kTaken) {
    const proto::LogBatch& other = outcome->taken_by;
    return Status::fenced(fmt::format(
        "log slot '{}' holds a batch of epoch {} (process '{}'); this writer of epoch {} is fenced",
        slot_key(options_.node_id, slot), other.epoch(), other.writer_process_id(),
        options_.epoch.value));
  }
  // Acknowledge only while the lease is valid (docs/log.md, "Acknowledge only under
  // a valid lease"): a newer holder may collect slots once our period has ended.
#ifdef DEX_CHAOS_BREAK_NO_FENCING
  if (false) {  // BROKEN ON PURPOSE (DEX_CHAOS_BREAK=no-fencing): acknowledges without a lease
#else
  if (!lease_valid_()) {
#endif
    return Status::stopped(fmt::format(
        "log batch at slot {} was written but the lease of epoch {} is no longer valid: not "
        "acknowledged, outcome unknown",
        slot.value, options_.epoch.value));
  }
  if (outcome->result == CreateResult::kAdopted) {
    spdlog::info(
        "log batch at slot {} adopted: an earlier attempt had landed (its answer was lost)",
        slot.value);
  }
  latency = clock_.now() - first_attempt;
  std::lock_guard<std::mutex> lock(mu_);
  if (outcome->result == CreateResult::kAdopted) ++stats_.adopted;
  ++stats_.batches;
  stats_.records += batch_records.size();
  return Status::ok();
}

void LogWriter::run() {
  // Bounded: every iteration writes one batch or exits.
  while (true) {
    std::vector<Pending> batch;
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || closing_ || stopped_; });
      if (stopped_ || queue_.empty()) return;  // stopped, or closing with nothing left
      // Group commit: everything appended while the previous write was in flight,
      // up to the batch limits (at least one record).
      size_t bytes = 0;
      take_queued(batch, bytes);
      linger(lock, batch, bytes);
      if (stopped_) {  // stopped while it lingered: these records were out of the queue
        const Status why =
            Status::stopped(fmt::format("log writer stopped: {}", stopped_->to_string()));
        lock.unlock();
        for (auto& pending : batch) pending.promise.set_value(why);
        return;
      }
      last_batch_records_ = batch.size();
      slot = next_slot_;
      space_cv_.notify_all();
    }
#ifdef DEX_CHAOS_BREAK_ACK_BEFORE_DURABLE
    // BROKEN ON PURPOSE (DEX_CHAOS_BREAK=ack-before-durable, src/log/CMakeLists.txt): the
    // callers are answered and the engine applies the batch before its PUT is even sent. Only
    // for the chaos harness's self-test, which must report this build's lost acknowledgements.
    {
      proto::LogBatch early = make_batch(slot);
      std::vector<Pending> copies;
      for (auto& pending : batch) {
        *early.add_records() = pending.record;
        copies.push_back(Pending{pending.record, {}});
      }
      if (options_.on_durable) options_.on_durable(slot, early);
      for (auto& pending : batch) pending.promise.set_value(slot);
      batch.swap(copies);  // the write below answers nobody
    }
#endif
    proto::LogBatch written;
    Duration latency{0};
    Status status = write_batch(slot, batch, written, latency);
    if (!status.is_ok()) {
      stop(status, batch, /*fatal=*/true);
      return;
    }
#ifdef DEX_CHAOS_BREAK_NO_FENCING
    if (Slot(written.slot()) != slot) {  // moved past another writer (broken on purpose)
      std::lock_guard<std::mutex> lock(mu_);
      slot = Slot(written.slot());
      next_slot_ = slot;
    }
#endif
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Never skip a slot: the next batch goes to the slot right after this one.
      assert(next_slot_ == slot);
      next_slot_ = slot.next();
    }
    last_write_latency_ = latency;
    if (options_.on_batch_written) options_.on_batch_written(latency, batch.size());
#ifndef DEX_CHAOS_BREAK_ACK_BEFORE_DURABLE
    // Durable and acknowledged: the layer above applies it before any caller
    // hears of it (LogWriterOptions::on_durable).
    if (options_.on_durable) options_.on_durable(slot, written);
#endif
    for (auto& pending : batch) pending.promise.set_value(slot);
  }
}

void LogWriter::take_queued(std::vector<Pending>& batch, size_t& bytes) {
  // Bounded by batch_records_max.
  while (!queue_.empty() && batch.size() < options_.batch_records_max) {
    size_t record_bytes = queue_.front().record.ByteSizeLong();
    if (!batch.empty() && bytes + record_bytes > options_.batch_bytes_max) break;
    bytes += record_bytes;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

void LogWriter::linger(std::unique_lock<std::mutex>& lock, std::vector<Pending>& batch,
                       size_t& bytes) {
  // Only under load (the last batch carried several records) and only for as many as it did:
  // one caller at a time never waits.
  const size_t want = std::min(last_batch_records_, options_.batch_records_max);
  if (options_.batch_linger_max <= Duration::zero() || last_batch_records_ < 2 ||
      batch.size() >= want || closing_) {
    return;
  }
  const auto wait = std::min(options_.batch_linger_max, last_write_latency_ / 2);
  if (wait <= Duration::zero()) return;
  const auto until = std::chrono::steady_clock::now() + wait;
  // Bounded by `until`; woken by append(), close() and stop().
  while (batch.size() < want && !closing_ && !stopped_) {
    if (cv_.wait_until(lock, until) == std::cv_status::timeout) {
      take_queued(batch, bytes);
      break;
    }
    take_queued(batch, bytes);
  }
  space_cv_.notify_all();
}

void LogWriter::stop(const Status& status, std::vector<Pending>& in_flight, bool fatal) {
  std::deque<Pending> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = status;
    queued.swap(queue_);
    cv_.notify_all();
    space_cv_.notify_all();
  }
  // The node hears first, so that it refuses further work before any caller
  // learns of the failure.
  if (fatal) on_fatal_(status);
  for (auto& pending : in_flight) pending.promise.set_value(status);
  Status why = Status::stopped(fmt::format("log writer stopped: {}", status.to_string()));
  for (auto& pending : queued) pending.promise.set_value(why);
}

Status LogWriter::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    cv_.notify_all();
    space_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_ ? *stopped_ : Status::ok();
}

Slot LogWriter::epoch_start_slot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_start_slot_;
}

bool LogWriter::is_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_ && !stopped_ && !closing_;
}

Slot LogWriter::next_slot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_slot_;
}

std::optional<Status> LogWriter::stop_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

LogWriter::Stats LogWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace dex
