// LogWriter: the lease holder's writer of the fenced log (docs/log.md).
//
// One writer per lease holder and epoch. open() finds the end of the log and
// writes an EpochStart batch at the first free slot, which fences every older
// writer. append() queues a record; a background thread writes queued records
// as batches, one create-only slot object each, with at most one write in
// flight (group commit: records appended during a write form the next batch).
//
// The writer stops the node (calls on_fatal once, fails every pending append,
// writes nothing more) when:
//  - a slot it needs holds another writer's batch: it was fenced (Code::kFenced);
//  - object storage does not accept a batch within kLogWriteLimit (10 s) of the
//    batch's first attempt, or answers a permanent error;
//  - lease_valid() is false when a write's answer arrives: the batch may be in
//    the log, but it is not acknowledged (docs/log.md, "Acknowledge only under a
//    valid lease").
//
// Thread contract: open(), close() and the destructor from one owning thread;
// append() and the accessors from any thread. lease_valid and on_fatal are called
// from the writer's threads without any lock of the writer held.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/random.h"
#include "common/status.h"
#include "common/types.h"
#include "dex/records.pb.h"
#include "log/log_format.h"
#include "objstore/object_store.h"

namespace dex {

// The spec (Lease): "A log write that object storage does not accept within 10
// seconds also stops the node. This limit is fixed and does not depend on the
// lease duration."
inline constexpr Duration kLogWriteLimit = seconds(10);

struct LogWriterOptions {
  NodeId node_id;
  ProcessId process_id;
  Epoch epoch;  // the lease epoch this writer holds; > 0
  // Fixed by the spec; a field only so that the limit is visible where it is used.
  Duration write_limit = kLogWriteLimit;
  size_t batch_records_max = 1000;     // records per batch object
  size_t batch_bytes_max = 4u << 20;   // serialized record bytes per batch (a larger
                                       // single record is refused by append)
  size_t queue_records_max = 100'000;  // append() blocks while this many wait
  // Group commit under load: when the last batch carried more than one record, the next one
  // waits up to a quarter of the last write's latency, at most this long, for as many records
  // as the last carried. Object storage bills per request and answers in milliseconds, so a
  // short wait fills its batches; a local flush is fast, so its wait stays tiny. Zero: never
  // wait. Measured on the steady clock, not the injected one: it decides no rule.
  Duration batch_linger_max = Duration::zero();
  Duration backoff_initial = milliseconds(50);  // after a transient error; doubles
  Duration backoff_max = seconds(1);
  uint64_t jitter_seed = 0;  // backoff jitter; 0 draws a seed from the OS
  // A slot the caller believes exists (a hot standby's last applied): open()
  // lists the log from there instead of from its start (find_log_bounds).
  Slot end_hint = kFirstSlot;
  // Called on the writer thread, in slot order, for every acknowledged batch:
  // after the batch is durable and the lease check passed, before the futures of
  // its appends resolve (so a caller that sees its slot also sees the batch
  // applied). Not called for the EpochStart batch that open() writes. It must
  // not append to this writer or block for long: the next batch waits for it.
  // The engine installs its state machine here (docs/engine.md).
  std::function<void(Slot, const proto::LogBatch&)> on_durable;
  // Optional, for metrics: called on the writer thread for every acknowledged
  // batch (EpochStart excluded), just before on_durable, with the time from the
  // batch's first write attempt to its acknowledgement (on the writer's Clock)
  // and its record count. It must not block or append: the next batch waits.
  std::function<void(Duration latency, size_t records)> on_batch_written;
  // Written into the EpochStart record (EpochStart.at_unix_ms): the holder's wall
  // clock when it took over, the time the engine's recovery uses.
  int64_t epoch_start_unix_ms = 0;
};

class LogWriter {
 public:
  using LeaseValid = std::function<bool()>;
  using OnFatal = std::function<void(const Status&)>;

  // `store` and `clock` must outlive the writer. `lease_valid` answers whether the
  // lease of options.epoch is still valid now (the lease keeper's view).
  LogWriter(ObjectStore& store, Clock& clock, LogWriterOptions options, LeaseValid lease_valid,
            OnFatal on_fatal);
  // close()s if needed.
  ~LogWriter();
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  // Finds the end of the log, writes this epoch's EpochStart batch at the first
  // free slot (moving past slots that older writers fill meanwhile) and starts the
  // writer thread. Bounded by write_limit. An error here does not call on_fatal:
  // the caller has not started serving and stops by itself. Call once.
  Status open();

  // Queues `record`. The future resolves with the slot of the record's batch once
  // that batch is durable and acknowledged, or with the error that stopped the
  // writer: Fenced, Stopped (lease lost, write limit, closed) or Permanent. An
  // error means the outcome is unknown: the batch may or may not be in the log.
  // Blocks while queue_records_max records wait. Before open() or after close()
  // the future fails at once (InvalidArgument / Stopped).
  std::future<StatusOr<Slot>> append(proto::LogRecord record);

  // Graceful: refuses new appends, writes every queued record, stops the thread.
  // Returns ok, or the status that stopped the writer earlier.
  Status close();

  // The slot of this epoch's EpochStart batch; valid after a successful open().
  Slot epoch_start_slot() const;
  // The first slot this writer has not yet filled: the log end as the writer sees it.
  Slot next_slot() const;
  // open() succeeded and the writer has neither stopped nor been closed.
  bool is_open() const;
  // The lease check the writer was given (the holder's lease, for GC).
  bool lease_valid() const { return lease_valid_(); }
  const NodeId& node_id() const { return options_.node_id; }
  // The error that stopped the writer for good, if any (close() is not an error).
  std::optional<Status> stop_status() const;

  struct Stats {
    uint64_t batches = 0;  // batches acknowledged (EpochStart excluded)
    uint64_t records = 0;  // records acknowledged
    uint64_t adopted = 0;  // batches whose create answer was lost and read back
    uint64_t transient_retries = 0;
    uint64_t open_slot_moves = 0;  // slots open() found taken by older writers
  };
  Stats stats() const;

 private:
  struct Pending {
    proto::LogRecord record;
    std::promise<StatusOr<Slot>> promise;
  };
  // The result of trying to create one slot object.
  enum class CreateResult { kWritten, kAdopted, kTaken };
  struct CreateOutcome {
    CreateResult result = CreateResult::kWritten;
    proto::LogBatch taken_by;  // for kTaken: the batch found in the slot (may be empty)
  };

  proto::LogBatch make_batch(Slot slot) const;
  // Creates `batch` at its slot, retrying transient errors with backoff until
  // `deadline`. Never returns kTaken for a slot that holds this batch (write_id).
  StatusOr<CreateOutcome> create_slot(const proto::LogBatch& batch, TimePoint first_attempt,
                                      TimePoint deadline);
  // Reads `key` with retries until `deadline`. NotFound passes through.
  StatusOr<ObjectData> get_with_retry(const std::string& key, TimePoint first_attempt,
                                      TimePoint deadline);
  Status limit_status(std::string_view what, TimePoint first_attempt, const Status& last) const;
  void backoff(Duration& delay, TimePoint deadline);
  // Writes `batch_records` as the batch at `slot`; `written` receives the batch
  // and `latency` the time from its first attempt to its acknowledgement.
  Status write_batch(Slot slot, std::vector<Pending>& batch_records, proto::LogBatch& written,
                     Duration& latency);
  void run();
  // Moves queued records into `batch` up to the batch limits. Under mu_.
  void take_queued(std::vector<Pending>& batch, size_t& bytes);
  // Group commit under load (LogWriterOptions::batch_linger_max). Under mu_, via `lock`.
  void linger(std::unique_lock<std::mutex>& lock, std::vector<Pending>& batch, size_t& bytes);
  // Stops the writer for good: fails `in_flight` with `status`, every queued append
  // with Stopped, calls on_fatal once (when `fatal`).
  void stop(const Status& status, std::vector<Pending>& in_flight, bool fatal);

  // Constant after construction.
  ObjectStore& store_;
  Clock& clock_;
  const LogWriterOptions options_;
  const LeaseValid lease_valid_;
  const OnFatal on_fatal_;

  mutable std::mutex mu_;
  std::condition_variable cv_;        // queue_ gained records, or closing_ / stopped_ set
  std::condition_variable space_cv_;  // queue_ lost records, or stopped_ set
  bool opened_ = false;               // guarded by mu_; open() was called
  bool started_ = false;              // guarded by mu_; open() succeeded
  bool closing_ = false;              // guarded by mu_
  std::optional<Status> stopped_;     // guarded by mu_; the fatal error
  std::deque<Pending> queue_;         // guarded by mu_; bounded by queue_records_max
  Slot epoch_start_slot_;             // guarded by mu_; set by open()
  Slot next_slot_;                    // guarded by mu_; written by open() and run()
  Stats stats_;                       // guarded by mu_
  Random random_;                     // guarded by mu_ (jitter)
  size_t last_batch_records_ = 0;     // written by run() only
  Duration last_write_latency_{0};    // written by run() only
  std::thread thread_;                // owned by the owning thread
};

}  // namespace dex
