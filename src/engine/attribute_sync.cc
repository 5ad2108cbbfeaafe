#include "engine/attribute_sync.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "blob/blob_values.h"
#include "common/invariant.h"
#include "engine/flow_engine.h"
#include "flow/kv_txn.h"

namespace dex {

namespace {

SyncMachine::Config machine_config(const AttributeSyncOptions& o) {
  SyncMachine::Config c;
  c.budget = o.budget;
  c.retry = o.common.sync_retry_policy;
  c.schema_sync_interval = o.common.schema_sync_interval;
  c.batch_size = o.common.sync_batch_size;
  c.delete_rows = o.store.delete_rows;
  c.seed = o.seed;
  return c;
}

AttributeSyncReport first_report(const AttributeSyncOptions& o) {
  AttributeSyncReport r;
  r.store = o.store.name;
  r.type = std::string(attrstore::store_type_name(o.store.type));
  r.table = o.store.table_name;
  return r;
}

}  // namespace

AttributeSync::AttributeSync(AttributeSyncOptions options, attrstore::AttributeTable& table,
                             const SharedStore& store, FlowEngine& flows, BlobStore* blobs,
                             Clock& clock)
    : options_(std::move(options)),
      table_(table),
      store_(store),
      flows_(flows),
      blobs_(blobs),
      clock_(clock),
      machine_(machine_config(options_), first_report(options_), clock.now()) {
  DEX_INVARIANT(static_cast<bool>(options_.lease_remaining), "the sync reads the lease");
  report_ = machine_.report();
}

AttributeSync::~AttributeSync() { stop(); }

void AttributeSync::start() {
  DEX_INVARIANT(!thread_.joinable(), "started once");
  thread_ = std::thread([this] { run(); });
}

void AttributeSync::request_stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

void AttributeSync::stop() {
  request_stop();
  if (thread_.joinable()) thread_.join();
}

void AttributeSync::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

AttributeSyncReport AttributeSync::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  return report_;
}

void AttributeSync::publish() {
  const AttributeSyncReport& r = machine_.report();
  // Each new failure once (a database that stays down logs at every backoff
  // step, which is bounded by the retry policy's maximum interval).
  if (r.state == "retrying" && r.last_error != last_logged_error_) {
    spdlog::warn("Attribute Store \"{}\": {}; retrying, nothing is skipped", r.store, r.last_error);
  } else if (r.last_error.empty() && !last_logged_error_.empty()) {
    spdlog::info("Attribute Store \"{}\": syncing again", r.store);
  }
  last_logged_error_ = r.last_error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    report_ = r;
  }
  if (options_.on_report) options_.on_report(r);
}

bool AttributeSync::pause(TimePoint until, bool wakeable) {
  std::unique_lock<std::mutex> lock(mu_);
  clock_.wait_until(lock, cv_, until, [&] { return stopped_ || (wakeable && woken_); });
  if (wakeable) woken_ = false;
  return !stopped_;
}

void AttributeSync::run() {
  spdlog::info("Attribute Store \"{}\": syncing {} (epoch {})", options_.store.name,
               table_.describe_target(), options_.epoch.value);
  while (true) {  // bounded by stop(): every action waits, fails with a backoff or makes progress
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) machine_.stop();
    }
    const SyncAction action = machine_.next(clock_.now(), options_.lease_remaining());
    if (!perform(action)) break;
  }
  if (machine_.report().state == "fenced") {
    spdlog::error("Attribute Store \"{}\": {}", options_.store.name, machine_.report().last_error);
  }
  publish();
}

bool AttributeSync::perform(const SyncAction& a) {
  using Kind = SyncAction::Kind;
  switch (a.kind) {
    case Kind::kStop:
      return false;
    case Kind::kWait:
      return pause(a.until, a.wakeable);
    case Kind::kClaim:
      // The lease again, just before the database: the machine asked a moment ago.
      if (!sync_may_begin(options_.lease_remaining(), options_.budget)) return true;
      machine_.claimed(table_.claim(options_.epoch.value, options_.process, options_.budget),
                       clock_.now());
      break;
    case Kind::kRefresh:
      // A failed refresh keeps the schema it had; the next one is as planned.
      if (Status s = table_.refresh_schema(); !s.is_ok()) {
        spdlog::warn("Attribute Store \"{}\": refreshing the table's schema failed: {}",
                     options_.store.name, s.message());
      }
      machine_.refreshed(clock_.now());
      return true;
    case Kind::kRead:
      machine_.read(read_pending(a.cursor, a.watermark), table_.schema(), clock_.now(),
                    options_.now_unix_ms());
      for (const auto& m : machine_.take_misfits()) {  // bounded by the plan's fields
        spdlog::warn(
            "Attribute Store \"{}\": Flow ID {:?}, Attribute {:?}: {}; that field is left out",
            options_.store.name, m.flow_id, m.attribute, m.reason);
      }
      break;
    case Kind::kCommit:
      DEX_INVARIANT(a.plan != nullptr, "a commit carries its plan");
      if (!sync_may_begin(options_.lease_remaining(), options_.budget)) return true;
      machine_.committed(table_.commit(options_.epoch.value, options_.process, a.watermark,
                                       a.plan->through_slot, a.plan->rows, options_.budget),
                         clock_.now());
      break;
    case Kind::kTrim:
      if (Status s = propose_trim(a.watermark); !s.is_ok() && s.code() != Code::kStopped) {
        spdlog::warn("Attribute Store \"{}\": recording the watermark in the log failed: {}",
                     options_.store.name, s.message());
      }
      machine_.trimmed(clock_.now());
      return true;
  }
  publish();
  return true;
}

StatusOr<PendingRead> AttributeSync::read_pending(const std::string& cursor, uint64_t watermark) {
  const std::string prefix = flow::keys::sync_prefix(options_.store.name);
  const size_t want = options_.common.sync_batch_size;
  constexpr size_t kChunk = 256;
  auto parse = [](const std::string& key, const std::string& value) -> StatusOr<flow::SyncEntry> {
    flow::SyncEntry e;
    if (!e.ParseFromString(value))
      return Status::corruption(fmt::format("local store: SyncEntry {} does not parse", key));
    return e;
  };
  auto read = with_view(store_, [&](RocksKv& kv) -> StatusOr<PendingRead> {
    PendingRead out;
    // Past the keys trims removed (their tombstones), as the trims do.
    const std::string floor = kv.get(flow::keys::sync_floor(options_.store.name)).value_or("");
    auto head = kv.scan_first(prefix, 1, floor);
    if (!head.empty()) {
      auto e = parse(head.front().first, head.front().second);
      if (!e.is_ok()) return e.status();
      out.oldest_kept_slot = e->slot();
    }
    std::string from = cursor.empty() ? floor : cursor;
    // Bounded by `want` entries plus the rest of the last slot, and by the
    // entries the table holds already (each passed over once: the cursor moves).
    while (true) {
      auto chunk = kv.scan_first(prefix, kChunk, from);
      const bool more = chunk.size() == kChunk;
      for (auto& [key, value] : chunk) {
        if (!from.empty() && key == from) continue;
        from = key;
        auto e = parse(key, value);
        if (!e.is_ok()) return e.status();
        if (e->slot() <= watermark) {
          if (out.entries.empty()) out.skipped_to = key;
          continue;
        }
        if (out.entries.size() >= want && e->slot() != out.entries.back().entry.slot()) return out;
        out.entries.push_back({key, std::move(e.value())});
      }
      if (!more) return out;
    }
  });
  if (!read.is_ok() || blobs_ == nullptr) return read;
  for (auto& p : read->entries) {  // bounded by the entries read
    if (Status s = inline_values(*blobs_, p.entry, UINT64_MAX); !s.is_ok()) return s;
  }
  return read;
}

Status AttributeSync::propose_trim(uint64_t through_slot) {
  flow::FlowRecord record;
  auto* synced = record.mutable_attribute_store_synced();
  synced->set_store(options_.store.name);
  synced->set_through_slot(through_slot);
  synced->set_at_unix_ms(options_.now_unix_ms());
  auto r = flows_.propose_and_wait(std::move(record), /*speculative=*/false);
  return r.is_ok() ? Status::ok() : r.status();
}

}  // namespace dex
