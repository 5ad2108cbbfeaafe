#include "log/log_writer.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "log/log_reader.h"
#include "log_test_util.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using testing::InterceptStore;
using testing::opaque_record;
using testing::raw_batches;
using testing::writer_options;

const NodeId kNode("n1");

// Records on_fatal calls.
struct FatalLog {
  std::mutex mu;
  std::vector<Status> calls;
  std::optional<TimePoint> first_at;
  LogWriter::OnFatal callback(Clock& clock) {
    return [this, &clock](const Status& s) {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(s);
      if (!first_at) first_at = clock.now();
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return calls.size();
  }
};

StatusOr<Slot> wait(std::future<StatusOr<Slot>>& f) {
  EXPECT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  return f.get();
}

// Once the writer has stopped: a further append fails kStopped without a
// write, and close() reports kStopped.
void expect_writes_nothing_more(LogWriter& writer, InterceptStore& store) {
  int puts = store.puts();
  auto g = writer.append(opaque_record("b"));
  EXPECT_EQ(wait(g).status().code(), Code::kStopped);
  EXPECT_EQ(store.puts(), puts);
  EXPECT_EQ(writer.close().code(), Code::kStopped);
}

TEST(LogWriter, OpenWritesEpochStartAtTheFirstFreeSlot) {
  MemoryObjectStore store;
  FatalLog fatal;
  LogWriter writer(
      store, SystemClock::instance(), writer_options("n1", 1, "p1"), [] { return true; },
      fatal.callback(SystemClock::instance()));
  ASSERT_TRUE(writer.open().is_ok());
  EXPECT_EQ(writer.epoch_start_slot(), Slot(0));
  EXPECT_EQ(writer.next_slot(), Slot(1));
  auto f = writer.append(opaque_record("a"));
  auto slot = wait(f);
  ASSERT_TRUE(slot.is_ok()) << slot.status().to_string();
  EXPECT_EQ(slot.value(), Slot(1));
  EXPECT_TRUE(writer.close().is_ok());
  auto batches = raw_batches(store, "n1");
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_TRUE(batches[0].records(0).has_epoch_start());
  EXPECT_EQ(batches[0].records(0).epoch_start().holder_process_id(), "p1");
  EXPECT_EQ(batches[0].epoch(), 1u);
  EXPECT_EQ(batches[1].records(0).opaque(), "a");
  EXPECT_EQ(fatal.count(), 0u);
}

TEST(LogWriter, WrongUsageFailsCleanly) {
  MemoryObjectStore store;
  FatalLog fatal;
  LogWriter writer(
      store, SystemClock::instance(), writer_options("n1", 1, "p1"), [] { return true; },
      fatal.callback(SystemClock::instance()));
  auto before = writer.append(opaque_record("early"));
  EXPECT_EQ(wait(before).status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(writer.open().is_ok());
  EXPECT_EQ(writer.open().code(), Code::kInvalidArgument);  // twice
  EXPECT_TRUE(writer.close().is_ok());
  auto after = writer.append(opaque_record("late"));
  EXPECT_EQ(wait(after).status().code(), Code::kStopped);
  EXPECT_EQ(fatal.count(), 0u);
}

TEST(LogWriter, RecordLargerThanABatchIsRefused) {
  MemoryObjectStore store;
  LogWriterOptions options = writer_options("n1", 1, "p1");
  options.batch_bytes_max = 100;
  LogWriter writer(
      store, SystemClock::instance(), options, [] { return true; }, [](const Status&) {});
  ASSERT_TRUE(writer.open().is_ok());
  auto f = writer.append(opaque_record(std::string(200, 'x')));
  EXPECT_EQ(wait(f).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(writer.close().is_ok());
}

TEST(LogWriter, GroupCommitWritesFewerBatchesThanAppendsOneAtATime) {
  MemoryObjectStore memory;
  InterceptStore store(memory);
  // Each write takes a little real time, so appends pile up behind it.
  store.before_put = [](std::string_view, const RequestOptions&) -> std::optional<Status> {
    std::this_thread::sleep_for(milliseconds(2));
    return std::nullopt;
  };
  LogWriterOptions options = writer_options("n1", 1, "p1");
  options.batch_records_max = 64;
  LogWriter writer(
      store, SystemClock::instance(), options, [] { return true; }, [](const Status&) {});
  ASSERT_TRUE(writer.open().is_ok());
  constexpr int kThreads = 8, kPerThread = 50;
  std::vector<std::vector<std::future<StatusOr<Slot>>>> futures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        futures[t].push_back(writer.append(opaque_record(fmt::format("t{}-{}", t, i))));
      }
    });
  }
  for (auto& th : threads) th.join();
  std::map<std::string, uint64_t> slot_of;
  for (int t = 0; t < kThreads; ++t) {
    uint64_t previous = 0;
    for (int i = 0; i < kPerThread; ++i) {
      auto slot = wait(futures[t][i]);
      ASSERT_TRUE(slot.is_ok()) << slot.status().to_string();
      EXPECT_GE(slot->value, previous) << "one thread's appends resolve in order";
      previous = slot->value;
      slot_of[fmt::format("t{}-{}", t, i)] = slot->value;
    }
  }
  ASSERT_TRUE(writer.close().is_ok());
  const int batch_puts = store.puts() - 1;  // minus the EpochStart
  EXPECT_LT(batch_puts, kThreads * kPerThread);
  EXPECT_EQ(store.max_in_flight(), 1);
  EXPECT_EQ(writer.stats().records, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(writer.stats().batches, uint64_t(batch_puts));
  // Every record is in the batch at the slot its future named; slots contiguous.
  LogReader reader(memory, kNode, Slot(0));
  size_t seen = 0;
  uint64_t expected_slot = 0;
  ASSERT_TRUE(reader
                  .read_to_end([&](const LogEntry& e) {
                    EXPECT_EQ(e.slot.value, expected_slot++);
                    EXPECT_LE(e.batch.records_size(), 64);
                    for (const auto& r : e.batch.records()) {
                      if (r.has_epoch_start()) continue;
                      EXPECT_EQ(slot_of.at(r.opaque()), e.slot.value);
                      ++seen;
                    }
                    return Status::ok();
                  })
                  .is_ok());
  EXPECT_EQ(seen, slot_of.size());
  std::cout << "group commit: " << kThreads * kPerThread << " appends in " << batch_puts
            << " batches\n";
}

// Under load the next batch waits a moment (a quarter of the last write's latency, at most
// batch_linger_max) for as many records as the last one carried; one caller at a time never
// waits.
TEST(LogWriter, UnderLoadABatchLingersForAsManyRecordsAsTheLastCarried) {
  MemoryObjectStore memory;
  InterceptStore store(memory);
  store.before_put = [](std::string_view, const RequestOptions&) -> std::optional<Status> {
    std::this_thread::sleep_for(milliseconds(200));  // object storage's answer time
    return std::nullopt;
  };
  LogWriterOptions options = writer_options("n1", 1, "p1");
  options.batch_linger_max = milliseconds(80);  // wide: a loaded machine may pause the test
  LogWriter writer(
      store, SystemClock::instance(), options, [] { return true; }, [](const Status&) {});
  ASSERT_TRUE(writer.open().is_ok());
  // Alone: one record, written at once.
  auto started = std::chrono::steady_clock::now();
  auto alone = writer.append(opaque_record("alone"));
  ASSERT_TRUE(wait(alone).is_ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(200 + 40));
  // Load: the first record's write is in flight while three more queue: one batch of three.
  auto first = writer.append(opaque_record("first"));
  std::this_thread::sleep_for(milliseconds(5));
  std::vector<std::future<StatusOr<Slot>>> three;
  for (int i = 0; i < 3; ++i) three.push_back(writer.append(opaque_record(fmt::format("q{}", i))));
  ASSERT_TRUE(wait(first).is_ok());
  std::set<uint64_t> slots;
  for (auto& f : three) slots.insert(wait(f).value().value);
  EXPECT_EQ(slots.size(), 1u);
  // Now a record, and two more 3 ms later: without the wait they would take two batches.
  auto a = writer.append(opaque_record("a"));
  std::this_thread::sleep_for(milliseconds(3));
  auto b = writer.append(opaque_record("b"));
  auto c = writer.append(opaque_record("c"));
  const uint64_t slot_a = wait(a).value().value;
  EXPECT_EQ(wait(b).value().value, slot_a);
  EXPECT_EQ(wait(c).value().value, slot_a);
  ASSERT_TRUE(writer.close().is_ok());
}

TEST(LogWriter, OlderWriterIsFencedByTheNewEpochStart) {
  MemoryObjectStore store;
  FatalLog fatal_a, fatal_b;
  LogWriter a(
      store, SystemClock::instance(), writer_options("n1", 1, "pA"), [] { return true; },
      fatal_a.callback(SystemClock::instance()));
  ASSERT_TRUE(a.open().is_ok());
  auto a1 = a.append(opaque_record("a1"));
  ASSERT_TRUE(wait(a1).is_ok());
  // B takes over (A still believes its lease valid: fencing alone must hold).
  LogWriter b(
      store, SystemClock::instance(), writer_options("n1", 2, "pB"), [] { return true; },
      fatal_b.callback(SystemClock::instance()));
  ASSERT_TRUE(b.open().is_ok());
  EXPECT_EQ(b.epoch_start_slot(), Slot(2));
  auto a2 = a.append(opaque_record("a2"));
  auto r2 = wait(a2);
  EXPECT_EQ(r2.status().code(), Code::kFenced) << r2.status().to_string();
  EXPECT_NE(r2.status().message().find("epoch 2"), std::string::npos) << r2.status().message();
  auto a3 = a.append(opaque_record("a3"));
  EXPECT_EQ(wait(a3).status().code(), Code::kStopped);
  EXPECT_EQ(fatal_a.count(), 1u);
  EXPECT_EQ(a.close().code(), Code::kFenced);
  auto b1 = b.append(opaque_record("b1"));
  ASSERT_TRUE(wait(b1).is_ok());
  EXPECT_TRUE(b.close().is_ok());
  EXPECT_EQ(fatal_b.count(), 0u);
  // Nothing of epoch 1 after B's EpochStart.
  auto batches = raw_batches(store, "n1");
  ASSERT_EQ(batches.size(), 4u);
  for (const auto& batch : batches) {
    if (batch.slot() >= 2) {
      EXPECT_EQ(batch.epoch(), 2u) << "slot " << batch.slot();
    }
  }
}

TEST(LogWriter, OpenMovesPastSlotsAnOlderWriterFillsMeanwhile) {
  MemoryObjectStore memory;
  InterceptStore store(memory);
  testing::put_batch(memory, "n1", 0, 1, true);
  // While B tries slot 1 and 2, the old writer gets there first.
  int raced = 0;
  store.before_put = [&](std::string_view key, const RequestOptions&) -> std::optional<Status> {
    if (raced < 2 && key == slot_key(kNode, Slot(1 + raced))) {
      testing::put_batch(memory, "n1", 1 + raced, 1, false, {"old"});
      ++raced;
    }
    return std::nullopt;
  };
  LogWriter b(
      store, SystemClock::instance(), writer_options("n1", 2, "pB"), [] { return true; },
      [](const Status&) {});
  ASSERT_TRUE(b.open().is_ok());
  EXPECT_EQ(b.epoch_start_slot(), Slot(3));
  EXPECT_EQ(b.stats().open_slot_moves, 2u);
  EXPECT_TRUE(b.close().is_ok());
}

TEST(LogWriter, OpenIsFencedByANewerEpochInTheLog) {
  MemoryObjectStore store;
  testing::put_batch(store, "n1", 0, 1, true);
  testing::put_batch(store, "n1", 1, 3, true);
  LogWriter b(
      store, SystemClock::instance(), writer_options("n1", 2, "pB"), [] { return true; },
      [](const Status&) {});
  Status opened = b.open();
  EXPECT_EQ(opened.code(), Code::kFenced) << opened.to_string();
  EXPECT_EQ(raw_batches(store, "n1").size(), 2u);  // wrote nothing
}

TEST(LogWriter, LostAnswerIsAdoptedNotReportedFenced) {
  MemoryObjectStore memory;
  InterceptStore store(memory);
  // The write of slot 1 and the EpochStart land, but their answers are lost.
  std::set<std::string> lost;
  store.after_put = [&](std::string_view key,
                        const StatusOr<std::string>& result) -> std::optional<Status> {
    if (result.is_ok() && lost.insert(std::string(key)).second) {
      return Status::transient("connection reset (answer lost)");
    }
    return std::nullopt;
  };
  FatalLog fatal;
  LogWriter writer(
      store, SystemClock::instance(), writer_options("n1", 1, "p1"), [] { return true; },
      fatal.callback(SystemClock::instance()));
  ASSERT_TRUE(writer.open().is_ok());
  auto f = writer.append(opaque_record("a"));
  auto slot = wait(f);
  ASSERT_TRUE(slot.is_ok()) << slot.status().to_string();
  EXPECT_EQ(slot.value(), Slot(1));
  EXPECT_EQ(writer.stats().adopted, 2u);  // EpochStart and the batch
  EXPECT_TRUE(writer.close().is_ok());
  EXPECT_EQ(fatal.count(), 0u);
  EXPECT_EQ(raw_batches(store, "n1").size(), 2u);
}

// Drives a ManualClock until `f` is ready, in small steps so that the writer
// thread (which polls the clock every millisecond) keeps up. Bounded.
void drive(ManualClock& clock, std::future<StatusOr<Slot>>& f, Duration step, Duration limit) {
  Duration advanced{0};
  while (f.wait_for(std::chrono::microseconds(0)) != std::future_status::ready &&
         advanced < limit) {
    std::this_thread::sleep_for(std::chrono::microseconds(1500));
    clock.advance(step);
    advanced += step;
  }
}

// The spec: "A log write that object storage does not accept within 10 seconds
// also stops the node."
TEST(LogWriter, WriteNotAcceptedWithinTenSecondsStopsTheNode) {
  ManualClock clock;
  MemoryObjectStore memory;
  InterceptStore store(memory);
  FatalLog fatal;
  LogWriter writer(
      store, clock, writer_options("n1", 1, "p1"), [] { return true; }, fatal.callback(clock));
  ASSERT_TRUE(writer.open().is_ok());
  const TimePoint outage_start = clock.now();
  std::vector<Duration> timeouts;
  std::mutex timeouts_mu;
  store.before_put = [&](std::string_view, const RequestOptions& o) -> std::optional<Status> {
    std::lock_guard<std::mutex> lock(timeouts_mu);
    timeouts.push_back(o.timeout);
    return Status::transient("503 Slow Down");  // object storage keeps refusing
  };
  auto f = writer.append(opaque_record("a"));
  drive(clock, f, milliseconds(10), seconds(30));
  auto result = wait(f);
  ASSERT_EQ(result.status().code(), Code::kStopped) << result.status().to_string();
  EXPECT_NE(result.status().message().find("within 10 s"), std::string::npos)
      << result.status().message();
  EXPECT_NE(result.status().message().find("log write limit"), std::string::npos);
  EXPECT_NE(result.status().message().find("503 Slow Down"), std::string::npos);
  ASSERT_EQ(fatal.count(), 1u);
  EXPECT_EQ(fatal.calls[0].message(), result.status().message());
  // It stopped at the limit, not before and not much after.
  Duration stopped_after = *fatal.first_at - outage_start;
  EXPECT_GE(stopped_after, seconds(10));
  EXPECT_LT(stopped_after, seconds(10) + milliseconds(500));
  // Each request was given the time left, never more than the limit.
  {
    std::lock_guard<std::mutex> lock(timeouts_mu);
    ASSERT_GE(timeouts.size(), 2u);
    EXPECT_LE(timeouts.front(), seconds(10));
    EXPECT_GT(timeouts.front(), seconds(9));
    for (size_t i = 1; i < timeouts.size(); ++i) EXPECT_LT(timeouts[i], timeouts[i - 1]);
  }
  expect_writes_nothing_more(writer, store);
}

TEST(LogWriter, EpochStartNotAcceptedWithinTenSecondsFailsOpen) {
  ManualClock clock;
  MemoryObjectStore memory;
  InterceptStore store(memory);
  store.before_put = [](std::string_view, const RequestOptions&) -> std::optional<Status> {
    return Status::transient("503 Slow Down");
  };
  FatalLog fatal;
  LogWriter writer(
      store, clock, writer_options("n1", 1, "p1"), [] { return true; }, fatal.callback(clock));
  const TimePoint start = clock.now();
  auto opened = std::async(std::launch::async, [&] { return writer.open(); });
  for (int i = 0;
       i < 3000 && opened.wait_for(std::chrono::microseconds(0)) != std::future_status::ready;
       ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(1500));
    clock.advance(milliseconds(10));
  }
  Status status = opened.get();
  EXPECT_EQ(status.code(), Code::kStopped) << status.to_string();
  EXPECT_NE(status.message().find("within 10 s"), std::string::npos) << status.message();
  EXPECT_GE(clock.now() - start, seconds(10));
  EXPECT_EQ(fatal.count(), 0u);  // open() reports to its caller
  EXPECT_TRUE(raw_batches(memory, "n1").empty());
}

TEST(LogWriter, StalledRequestIsCutOffAtTheTimeLeftAndStopsTheNode) {
  ManualClock clock;
  MemoryObjectStore memory;
  InterceptStore store(memory);
  FatalLog fatal;
  LogWriter writer(
      store, clock, writer_options("n1", 1, "p1"), [] { return true; }, fatal.callback(clock));
  ASSERT_TRUE(writer.open().is_ok());
  const TimePoint stall_start = clock.now();
  std::atomic<int64_t> first_timeout_ms{-1};
  store.before_put = [&](std::string_view, const RequestOptions& o) -> std::optional<Status> {
    int64_t expected = -1;
    first_timeout_ms.compare_exchange_strong(expected, to_ms(o.timeout));
    clock.sleep_until(clock.now() + o.timeout);  // the store hangs until the request times out
    return Status::transient("request timed out");
  };
  auto f = writer.append(opaque_record("a"));
  drive(clock, f, milliseconds(10), seconds(30));
  auto result = wait(f);
  ASSERT_EQ(result.status().code(), Code::kStopped) << result.status().to_string();
  EXPECT_NE(result.status().message().find("within 10 s"), std::string::npos);
  EXPECT_EQ(first_timeout_ms.load(), 10'000);
  ASSERT_EQ(fatal.count(), 1u);
  EXPECT_LT(*fatal.first_at - stall_start, seconds(10) + milliseconds(500));
  EXPECT_EQ(writer.close().code(), Code::kStopped);
}

TEST(LogWriter, WriteAcceptedAfterNineSecondsOfFailuresSucceeds) {
  ManualClock clock;
  MemoryObjectStore memory;
  InterceptStore store(memory);
  FatalLog fatal;
  LogWriterOptions options = writer_options("n1", 1, "p1");
  options.backoff_max = milliseconds(200);
  LogWriter writer(
      store, clock, options, [] { return true; }, fatal.callback(clock));
  ASSERT_TRUE(writer.open().is_ok());
  const TimePoint fail_until = clock.now() + seconds(9);
  store.before_put = [&](std::string_view, const RequestOptions&) -> std::optional<Status> {
    if (clock.now() < fail_until) return Status::transient("500 Internal Error");
    return std::nullopt;
  };
  auto f = writer.append(opaque_record("a"));
  drive(clock, f, milliseconds(10), seconds(30));
  auto result = wait(f);
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(result.value(), Slot(1));
  EXPECT_GT(writer.stats().transient_retries, 5u);
  EXPECT_EQ(fatal.count(), 0u);
  EXPECT_TRUE(writer.close().is_ok());
}

TEST(LogWriter, BatchIsNotAcknowledgedWhenTheLeaseEndedBeforeTheAnswer) {
  MemoryObjectStore memory;
  InterceptStore store(memory);
  std::atomic<bool> lease{true};
  FatalLog fatal;
  LogWriter writer(
      store, SystemClock::instance(), writer_options("n1", 1, "p1"), [&] { return lease.load(); },
      fatal.callback(SystemClock::instance()));
  ASSERT_TRUE(writer.open().is_ok());
  // The write lands, but the lease ends before its answer arrives.
  store.after_put = [&](std::string_view, const StatusOr<std::string>&) -> std::optional<Status> {
    lease = false;
    return std::nullopt;
  };
  auto f = writer.append(opaque_record("a"));
  auto result = wait(f);
  ASSERT_EQ(result.status().code(), Code::kStopped) << result.status().to_string();
  EXPECT_NE(result.status().message().find("not acknowledged"), std::string::npos);
  EXPECT_EQ(fatal.count(), 1u);
  EXPECT_EQ(raw_batches(memory, "n1").size(), 2u);  // in the log: the outcome is unknown
  expect_writes_nothing_more(writer, store);
}

TEST(LogWriter, WritesNothingOnceTheLeaseIsGone) {
  MemoryObjectStore memory;
  InterceptStore store(memory);
  std::atomic<bool> lease{true};
  FatalLog fatal;
  LogWriter writer(
      store, SystemClock::instance(), writer_options("n1", 1, "p1"), [&] { return lease.load(); },
      fatal.callback(SystemClock::instance()));
  ASSERT_TRUE(writer.open().is_ok());
  int puts = store.puts();
  lease = false;
  auto f = writer.append(opaque_record("a"));
  EXPECT_EQ(wait(f).status().code(), Code::kStopped);
  EXPECT_EQ(store.puts(), puts);
  EXPECT_EQ(fatal.count(), 1u);
  (void)writer.close();
  LogWriter late(
      store, SystemClock::instance(), writer_options("n1", 2, "p2"), [] { return false; },
      [](const Status&) {});
  EXPECT_EQ(late.open().code(), Code::kStopped);
}

TEST(LogWriter, PermanentErrorStopsTheNodeAtOnce) {
  MemoryObjectStore memory;
  InterceptStore store(memory);
  FatalLog fatal;
  LogWriter writer(
      store, SystemClock::instance(), writer_options("n1", 1, "p1"), [] { return true; },
      fatal.callback(SystemClock::instance()));
  ASSERT_TRUE(writer.open().is_ok());
  store.before_put = [&](std::string_view, const RequestOptions&) -> std::optional<Status> {
    return Status::permanent("403 Access Denied");
  };
  auto f = writer.append(opaque_record("a"));
  auto result = wait(f);
  EXPECT_EQ(result.status().code(), Code::kPermanent);
  EXPECT_EQ(store.puts(), 2);  // one attempt, no retries
  EXPECT_EQ(fatal.count(), 1u);
  (void)writer.close();
}

TEST(LogWriter, CloseWritesEverythingQueued) {
  MemoryObjectStore store;
  LogWriter writer(
      store, SystemClock::instance(), writer_options("n1", 1, "p1"), [] { return true; },
      [](const Status&) {});
  ASSERT_TRUE(writer.open().is_ok());
  std::vector<std::future<StatusOr<Slot>>> futures;
  for (int i = 0; i < 100; ++i) futures.push_back(writer.append(opaque_record(std::to_string(i))));
  EXPECT_TRUE(writer.close().is_ok());
  for (auto& f : futures) EXPECT_TRUE(wait(f).is_ok());
}

// LogWriterOptions::on_durable: every acknowledged batch, in slot order, after it
// is durable (readable from the store) and before any of its futures resolves;
// never the EpochStart, never a batch that was not acknowledged.
TEST(LogWriter, OnDurableRunsInSlotOrderBeforeTheFuturesResolve) {
  MemoryObjectStore store;
  std::mutex mu;
  std::vector<Slot> seen;
  std::vector<std::string> seen_payloads;
  std::atomic<bool> lease{true};
  // The futures of the batch whose hook runs: none may be ready yet.
  std::vector<std::shared_future<StatusOr<Slot>>> futures;
  bool durable_before_hook = true, resolved_before_hook = false;
  auto options = writer_options("n1", 1, "p1");
  options.epoch_start_unix_ms = 1'700'000'000'123;
  options.on_durable = [&](Slot slot, const proto::LogBatch& batch) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(slot);
    EXPECT_EQ(batch.slot(), slot.value);
    for (const auto& r : batch.records()) {
      EXPECT_FALSE(r.has_epoch_start());
      seen_payloads.push_back(r.opaque());
    }
    if (!store.get(slot_key(kNode, slot)).is_ok()) durable_before_hook = false;
    for (auto& f : futures) {
      if (f.wait_for(std::chrono::seconds(0)) == std::future_status::ready && f.get().is_ok() &&
          f.get().value() == slot) {
        resolved_before_hook = true;
      }
    }
  };
  LogWriter writer(
      store, SystemClock::instance(), options, [&] { return lease.load(); }, [](const Status&) {});
  ASSERT_TRUE(writer.open().is_ok());
  auto batches = raw_batches(store, "n1");
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].records(0).epoch_start().at_unix_ms(), 1'700'000'000'123);
  for (int i = 0; i < 200; ++i) {
    auto f = writer.append(opaque_record(std::to_string(i))).share();
    std::lock_guard<std::mutex> lock(mu);
    futures.push_back(f);
  }
  for (auto& f : futures) {
    auto slot = f.get();
    ASSERT_TRUE(slot.is_ok());
    std::lock_guard<std::mutex> lock(mu);
    // The hook of this batch has already run.
    EXPECT_FALSE(seen.empty());
    EXPECT_GE(seen.back(), slot.value());
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(durable_before_hook);
    EXPECT_FALSE(resolved_before_hook);
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen.front(), Slot(1));
    for (size_t i = 1; i < seen.size(); ++i) EXPECT_EQ(seen[i], seen[i - 1].next());
    ASSERT_EQ(seen_payloads.size(), 200u);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(seen_payloads[i], std::to_string(i));
  }
  // A batch that is not acknowledged (the lease ended) never reaches the hook.
  size_t before = seen.size();
  lease = false;
  auto lost = writer.append(opaque_record("lost"));
  EXPECT_FALSE(wait(lost).is_ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(seen.size(), before);
  }
  (void)writer.close();
}

// LogWriterOptions::on_batch_written (for metrics): once per acknowledged batch,
// with the time from the batch's first attempt to its acknowledgement (retries
// included) and its record count; never for the EpochStart or an unacknowledged batch.
TEST(LogWriter, OnBatchWrittenReportsLatencyFromFirstAttemptAndRecordCount) {
  ManualClock clock;
  MemoryObjectStore memory;
  InterceptStore store(memory);
  std::atomic<bool> lease{true};
  std::mutex mu;
  std::vector<std::pair<Duration, size_t>> calls;
  LogWriterOptions options = writer_options("n1", 1, "p1");
  options.on_batch_written = [&](Duration latency, size_t records) {
    std::lock_guard<std::mutex> lock(mu);
    calls.emplace_back(latency, records);
  };
  LogWriter writer(
      store, clock, options, [&] { return lease.load(); }, [](const Status&) {});
  ASSERT_TRUE(writer.open().is_ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(calls.empty()) << "the EpochStart batch is not reported";
  }
  // The first attempt takes 20 ms and fails transiently; the retry takes 30 ms.
  std::atomic<int> puts{0};
  store.before_put = [&](std::string_view, const RequestOptions&) -> std::optional<Status> {
    if (puts++ == 0) {
      clock.advance(milliseconds(20));
      return Status::transient("503 Slow Down");
    }
    clock.advance(milliseconds(30));
    return std::nullopt;
  };
  auto f = writer.append(opaque_record("a"));
  drive(clock, f, milliseconds(1), seconds(10));
  ASSERT_TRUE(wait(f).is_ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(calls.size(), 1u);
    // 50 ms of requests plus the backoff between them (at most backoff_max,
    // 10 ms) and whatever drive() advanced meanwhile.
    EXPECT_GE(calls[0].first, milliseconds(50));
    EXPECT_LT(calls[0].first, milliseconds(50) + seconds(1));
    EXPECT_EQ(calls[0].second, 1u);
  }
  // Group commit: the reports add up to every record, one per batch.
  store.before_put = nullptr;
  std::vector<std::future<StatusOr<Slot>>> futures;
  for (int i = 0; i < 50; ++i) futures.push_back(writer.append(opaque_record(std::to_string(i))));
  for (auto& g : futures) ASSERT_TRUE(wait(g).is_ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(calls.size(), writer.stats().batches);
    size_t records = 0;
    for (const auto& [latency, n] : calls) {
      EXPECT_GE(latency, Duration(0));
      EXPECT_GE(n, 1u);
      records += n;
    }
    EXPECT_EQ(records, 51u);
  }
  // A batch that is not acknowledged (the lease ended) is not reported.
  lease = false;
  auto lost = writer.append(opaque_record("lost"));
  EXPECT_FALSE(wait(lost).is_ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(calls.size(), writer.stats().batches);
  }
  (void)writer.close();
}

}  // namespace
}  // namespace dex
