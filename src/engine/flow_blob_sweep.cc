// The active process's collection of unreferenced blobs (flow_blob_sweep.h).
#include "engine/flow_blob_sweep.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <shared_mutex>
#include <string_view>

#include "engine/rocks_kv.h"

namespace dex {

BlobSweeper::BlobSweeper(BlobStore& blobs, SharedStore& local, Clock& clock,
                         BlobSweepOptions options)
    : blobs_(blobs),
      local_(local),
      clock_(clock),
      options_(std::move(options)),
      prefix_(blobs.prefix()) {}

BlobSweeper::~BlobSweeper() { stop(); }

void BlobSweeper::start() {
  if (options_.interval <= Duration::zero()) return;
  // The first pass is an interval after start(), read here rather than on the
  // new thread, which may first run after the clock has moved on.
  const TimePoint first = clock_.now() + options_.interval;
  thread_ = std::thread([this, first] { run(first); });
}

void BlobSweeper::stop() {
  std::call_once(stop_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  });
}

void BlobSweeper::run(TimePoint next) {
  // One pass per interval, counted from the start of the previous one: the
  // blob store's protection of lately put keys relies on that spacing.
  while (true) {  // until stop()
    {
      std::unique_lock<std::mutex> lock(mu_);
      clock_.wait_until(lock, cv_, next, [&] { return stopping_.load(); });
      if (stopping_) return;
    }
    const TimePoint began = clock_.now();
    next = began + options_.interval;
    auto counts = run_pass();
    if (!counts.is_ok()) {
      if (!stopping_) {
        spdlog::warn("blob collection: the pass ended early: {}; the next is in {} s",
                     counts.status().to_string(), to_ms(options_.interval) / 1000);
      }
      continue;
    }
    const SweepCounts& c = *counts;
    // One line per pass, only counts (never keys or values).
    const auto level =
        c.candidates > 0 || c.delete_errors > 0 ? spdlog::level::info : spdlog::level::debug;
    spdlog::log(level,
                "blob collection: {} blobs listed, {} old enough, {} referenced, {} put lately, "
                "{} deleted ({} bytes freed), {} delete errors{} in {} ms",
                c.listed, c.candidates, c.referenced, c.recently_put, c.deleted, c.bytes_freed,
                c.delete_errors, c.capped ? " (limit reached: the next pass goes on)" : "",
                to_ms(clock_.now() - began));
    if (options_.on_pass) options_.on_pass(c);
  }
}

StatusOr<SweepCounts> BlobSweeper::run_pass() {
  if (stopping_) return Status::stopped("blob collection stopped");
  auto begun = blobs_.begin_sweep(options_.min_age, options_.now_unix_ms());
  if (!begun.is_ok()) return begun.status();
  SweepPass pass = std::move(begun).value();
  if (pass.done()) return pass.counts();  // no candidates: nothing to search for
  auto referenced = find_references(pass.candidates());
  if (!referenced.is_ok()) return referenced.status();  // the pass ends, nothing deleted
  // Bounded by the candidates: each call decides at least one.
  while (!pass.done()) {
    if (stopping_) return Status::stopped("blob collection stopped");
    // A process that lost its lease must not delete what the next holder may
    // be writing again.
    if (!options_.lease_valid()) return Status::stopped("the lease is not valid");
    blobs_.finish_sweep(pass, *referenced, 1);
  }
  return pass.counts();
}

StatusOr<std::unordered_set<std::string>> BlobSweeper::find_references(
    const std::vector<std::string>& candidates) {
  std::unordered_set<std::string_view> wanted(candidates.begin(), candidates.end());
  std::unordered_set<std::string> found;
  const size_t key_bytes = candidates.front().size();  // every blob key of a node is as long
  // The local store stays open while its lock is held shared: the engine's
  // stop() takes it unique only after it stopped this sweeper.
  std::shared_lock<std::shared_mutex> lock(local_.mu);
  if (!local_.sm) return Status::stopped("the local store is closed");
  // One snapshot for the whole search: a reference moving between two keys
  // meanwhile is seen where it was or where it went.
  auto view = local_.sm->flow_view();
  std::string from;
  // Bounded by the keys of the store: each page starts after the last one.
  while (true) {
    if (stopping_) return Status::stopped("blob collection stopped");
    auto page = view->scan_first("", kSweepScanPageKeys, from);
    if (!view->status().is_ok()) return view->status();
    for (const auto& [key, value] : page) {
      const std::string_view v(value);
      // Bounded by the value's length: each match moves past its start.
      for (size_t at = v.find(prefix_); at != std::string_view::npos;
           at = v.find(prefix_, at + 1)) {
        if (auto it = wanted.find(v.substr(at, key_bytes)); it != wanted.end()) found.emplace(*it);
      }
    }
    if (page.size() < kSweepScanPageKeys) break;
    from = page.back().first;
    from.push_back('\0');  // the first key after it
  }
  return found;
}

}  // namespace dex
