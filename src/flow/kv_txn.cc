#include "flow/kv_txn.h"

#include <cstdio>
#include <utility>

#include "common/invariant.h"
#include "flow/limits.h"
#include "flow/search_keys.h"

namespace dex::flow {
namespace keys {

std::string sortable(int64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%020llu",
                static_cast<unsigned long long>(static_cast<uint64_t>(value) ^ (1ULL << 63)));
  return buf;
}

namespace {
std::string join(std::initializer_list<std::string_view> parts) {
  std::string out;
  bool first = true;
  for (auto p : parts) {
    if (!first) out += kSep;
    out += p;
    first = false;
  }
  return out;
}
}  // namespace

std::string digits(uint64_t n) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(n));
  return buf;
}

std::string timer(const TimerKey& key, int64_t fire_at_ms) {
  return std::string(kTimerPrefix) + sortable(fire_at_ms) + kSep + key.SerializeAsString();
}
bool parse_timer(std::string_view index_key, TimerKey* key, int64_t* fire_at_ms) {
  if (!index_key.starts_with(kTimerPrefix)) return false;
  const auto sep = index_key.find(kSep, kTimerPrefix.size());
  if (sep != kTimerPrefix.size() + 20) return false;
  const std::string digits20(index_key.substr(kTimerPrefix.size(), 20));
  *fire_at_ms = static_cast<int64_t>(std::stoull(digits20) ^ (1ULL << 63));
  return key->ParseFromArray(index_key.data() + sep + 1,
                             static_cast<int>(index_key.size() - sep - 1));
}

std::string attributes_prefix(std::string_view flow_id, std::string_view run_id) {
  return std::string(kAttributePrefix) + join({flow_id, run_id}) + kSep;
}
std::string task_queue_prefix(std::string_view flow_type) {
  return std::string(kTaskQueuePrefix) + std::string(flow_type) + kSep;
}
std::string steps_prefix(std::string_view flow_id, std::string_view run_id) {
  return std::string(kStepPrefix) + join({flow_id, run_id}) + kSep;
}
std::string events_prefix(std::string_view flow_id, std::string_view run_id) {
  return std::string(kEventPrefix) + join({flow_id, run_id}) + kSep;
}
std::string messages_prefix(const QueueKey& k) {
  return std::string(kMessagePrefix) + join({k.flow_id, k.run_id, k.channel, k.instance_key}) +
         kSep;
}

std::string declaration(std::string_view type, uint32_t version) {
  return "~d/" + std::string(type) + kSep + digits(version);
}
std::string latest_declaration(std::string_view type) { return "~dl/" + std::string(type); }
std::string flow_id(std::string_view id) { return "~i/" + std::string(id); }
std::string run(std::string_view flow_id, std::string_view run_id) {
  return std::string(kRunPrefix) + join({flow_id, run_id});
}
std::string queue_prefix(std::string_view flow_id, std::string_view run_id) {
  return "~q/" + join({flow_id, run_id}) + kSep;
}
std::string queue(const QueueKey& k) {
  return queue_prefix(k.flow_id, k.run_id) + join({k.channel, k.instance_key});
}
std::string message(const QueueKey& k, uint64_t seq) { return messages_prefix(k) + digits(seq); }
std::string run_messages_prefix(std::string_view flow_id, std::string_view run_id) {
  return std::string(kMessagePrefix) + join({flow_id, run_id}) + kSep;
}
std::string event(std::string_view flow_id, std::string_view run_id, uint64_t seq) {
  return events_prefix(flow_id, run_id) + digits(seq);
}
constexpr std::string_view kTaskSeq = "~meta/task_seq";
constexpr std::string_view kSyncSeq = "~meta/sync_seq";
std::string sync_prefix(std::string_view store) {
  return std::string(kSyncPrefix) + std::string(store) + kSep;
}
std::string sync_floor(std::string_view store) { return "~meta/sync_floor/" + std::string(store); }
std::string_view sync_store(std::string_view key) {
  if (key.substr(0, kSyncPrefix.size()) != kSyncPrefix) return {};
  key.remove_prefix(kSyncPrefix.size());
  const size_t sep = key.find(kSep);
  return sep == std::string_view::npos ? std::string_view() : key.substr(0, sep);
}
std::string attribute(std::string_view flow_id, std::string_view run_id, std::string_view key,
                      std::string_view instance_key) {
  return attributes_prefix(flow_id, run_id) + join({key, instance_key});
}
std::string rpc(std::string_view flow_id, std::string_view run_id, std::string_view rpc_id) {
  return std::string(kRpcPrefix) + join({flow_id, run_id, rpc_id});
}
std::string rpcs_prefix(std::string_view flow_id, std::string_view run_id) {
  return std::string(kRpcPrefix) + join({flow_id, run_id}) + kSep;
}
constexpr std::string_view kJournalSeq = "~meta/journal_seq";
std::string journal_prefix(std::string_view flow_id, std::string_view run_id) {
  return std::string(kJournalPrefix) + join({flow_id, run_id}) + kSep;
}
std::string open_rpc(std::string_view flow_id, std::string_view run_id, std::string_view rpc_id) {
  return std::string(kOpenRpcPrefix) + join({flow_id, run_id, rpc_id});
}

}  // namespace keys

namespace {

template <typename M>
std::optional<M> parse(const std::optional<std::string>& bytes) {
  if (!bytes) return std::nullopt;
  M m;
  DEX_INVARIANT(m.ParseFromString(*bytes), "a stored flow-rules value parses");
  return m;
}

}  // namespace

std::optional<std::string> MemoryKv::get(std::string_view key) {
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second;
}
void MemoryKv::put(std::string_view key, std::string_view value) {
  data_.insert_or_assign(std::string(key), std::string(value));
}
void MemoryKv::del(std::string_view key) {
  auto it = data_.find(key);
  if (it != data_.end()) data_.erase(it);
}
std::vector<std::pair<std::string, std::string>> MemoryKv::scan(std::string_view prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = data_.lower_bound(prefix); it != data_.end() && it->first.starts_with(prefix);
       ++it)
    out.emplace_back(it->first, it->second);
  return out;
}

std::optional<DeclarationVersion> KvFlowTxn::declaration(std::string_view type, uint32_t version) {
  if (version == 0) {
    auto latest = kv_.get(keys::latest_declaration(type));
    if (!latest) return std::nullopt;
    version = static_cast<uint32_t>(std::stoul(*latest));
  }
  return parse<DeclarationVersion>(kv_.get(keys::declaration(type, version)));
}
void KvFlowTxn::put_declaration(const DeclarationVersion& v) {
  const auto& type = v.declaration().flow_type();
  kv_.put(keys::declaration(type, v.version()), v.SerializeAsString());
  auto latest = kv_.get(keys::latest_declaration(type));
  if (!latest || std::stoul(*latest) < v.version())
    kv_.put(keys::latest_declaration(type), std::to_string(v.version()));
}
std::optional<FlowIdEntry> KvFlowTxn::flow_id(std::string_view id) {
  return parse<FlowIdEntry>(kv_.get(keys::flow_id(id)));
}
void KvFlowTxn::put_flow_id(const FlowIdEntry& e) {
  kv_.put(keys::flow_id(e.flow_id()), e.SerializeAsString());
}
void KvFlowTxn::delete_flow_id(std::string_view flow_id) { kv_.del(keys::flow_id(flow_id)); }
std::optional<Run> KvFlowTxn::run(std::string_view flow_id, std::string_view run_id) {
  return parse<Run>(kv_.get(keys::run(flow_id, run_id)));
}
void KvFlowTxn::put_run(const Run& r) {
  touch(r.flow_id(), r.run_id());
  const RunKey key{r.flow_id(), r.run_id()};
  journal_.run(r, !journal_.run_known(key) && kv_.get(keys::run(key.flow_id, key.run_id)));
  kv_.put(keys::run(r.flow_id(), r.run_id()), r.SerializeAsString());
}
void KvFlowTxn::delete_run(std::string_view flow_id, std::string_view run_id) {
  touch(flow_id, run_id);
  journal_.forget(RunKey{std::string(flow_id), std::string(run_id)});
  kv_.del(keys::run(flow_id, run_id));
  for (const std::string& prefix :
       {keys::steps_prefix(flow_id, run_id), keys::events_prefix(flow_id, run_id),
        keys::journal_prefix(flow_id, run_id), keys::attributes_prefix(flow_id, run_id),
        keys::queue_prefix(flow_id, run_id), keys::run_messages_prefix(flow_id, run_id),
        keys::rpcs_prefix(flow_id, run_id)}) {
    // Bounded by the run's keys: its history, Steps,
    // Attributes (kAttributesMax), queues and messages, kept RPCs.
    for (auto& [key, value] : kv_.scan(prefix)) kv_.del(key);
  }
}
std::optional<StepExecution> KvFlowTxn::step(std::string_view flow_id, std::string_view run_id,
                                             std::string_view id) {
  return parse<StepExecution>(kv_.get(keys::steps_prefix(flow_id, run_id) + std::string(id)));
}
void KvFlowTxn::put_step(const StepExecution& s) {
  journal_.step(s);
  kv_.put(keys::steps_prefix(s.flow_id(), s.run_id()) + s.step_execution_id(),
          s.SerializeAsString());
}
std::optional<ChannelQueue> KvFlowTxn::queue(const QueueKey& key) {
  return parse<ChannelQueue>(kv_.get(keys::queue(key)));
}
void KvFlowTxn::put_queue(const QueueKey& key, const ChannelQueue& q) {
  journal_.queue(RunKey{key.flow_id, key.run_id}, key.channel, key.instance_key, q);
  kv_.put(keys::queue(key), q.SerializeAsString());
}
std::optional<Payload> KvFlowTxn::message(const QueueKey& key, uint64_t seq) {
  return parse<Payload>(kv_.get(keys::message(key, seq)));
}
void KvFlowTxn::put_message(const QueueKey& key, uint64_t seq, const Payload& m) {
  journal_.message(RunKey{key.flow_id, key.run_id}, key.channel, key.instance_key, seq, &m);
  kv_.put(keys::message(key, seq), m.SerializeAsString());
}
void KvFlowTxn::delete_message(const QueueKey& key, uint64_t seq) {
  journal_.message(RunKey{key.flow_id, key.run_id}, key.channel, key.instance_key, seq, nullptr);
  kv_.del(keys::message(key, seq));
}
std::vector<std::pair<QueueKey, ChannelQueue>> KvFlowTxn::queues(std::string_view flow_id,
                                                                 std::string_view run_id) {
  std::vector<std::pair<QueueKey, ChannelQueue>> out;
  const std::string prefix = keys::queue_prefix(flow_id, run_id);
  for (auto& [key, value] : kv_.scan(prefix)) {  // bounded by the run's queues
    std::string_view rest = std::string_view(key).substr(prefix.size());
    auto sep = rest.find(keys::kSep);
    DEX_INVARIANT(sep != std::string_view::npos, "a queue key names its channel and instance");
    QueueKey k{std::string(flow_id), std::string(run_id), std::string(rest.substr(0, sep)),
               std::string(rest.substr(sep + 1))};
    out.emplace_back(std::move(k), *parse<ChannelQueue>(value));
  }
  return out;
}
void KvFlowTxn::put_timer(const TimerKey& key, int64_t fire_at_ms) {
  kv_.put(keys::timer(key, fire_at_ms), "");
}
void KvFlowTxn::delete_timer(const TimerKey& key, int64_t fire_at_ms) {
  kv_.del(keys::timer(key, fire_at_ms));
}
bool KvFlowTxn::timer_set(const TimerKey& key, int64_t fire_at_ms) {
  return kv_.get(keys::timer(key, fire_at_ms)).has_value();
}
uint64_t KvFlowTxn::enqueue_task(std::string_view flow_type, const TaskRef& task) {
  auto last = kv_.get(keys::kTaskSeq);
  const uint64_t seq = (last ? std::stoull(*last) : 0) + 1;
  kv_.put(keys::kTaskSeq, std::to_string(seq));
  kv_.put(keys::task_queue_prefix(flow_type) + keys::digits(seq), task.SerializeAsString());
  return seq;
}
void KvFlowTxn::dequeue_task(std::string_view flow_type, uint64_t seq) {
  kv_.del(keys::task_queue_prefix(flow_type) + keys::digits(seq));
}
void KvFlowTxn::put_running(std::string_view task_id, const TaskRef& task) {
  kv_.put(std::string(keys::kRunningPrefix) + std::string(task_id), task.SerializeAsString());
}
void KvFlowTxn::delete_running(std::string_view task_id) {
  kv_.del(std::string(keys::kRunningPrefix) + std::string(task_id));
}
std::vector<std::pair<std::string, TaskRef>> KvFlowTxn::running() {
  std::vector<std::pair<std::string, TaskRef>> out;
  for (auto& [key, value] : kv_.scan(keys::kRunningPrefix))  // bounded by the running attempts
    out.emplace_back(key.substr(keys::kRunningPrefix.size()), *parse<TaskRef>(value));
  return out;
}
std::optional<AttributeValue> KvFlowTxn::attribute(std::string_view flow_id,
                                                   std::string_view run_id, std::string_view key,
                                                   std::string_view instance_key) {
  return parse<AttributeValue>(kv_.get(keys::attribute(flow_id, run_id, key, instance_key)));
}
void KvFlowTxn::put_attribute(std::string_view flow_id, std::string_view run_id,
                              const Attribute& a) {
  DEX_INVARIANT(a.has_value(), "a stored Attribute has a value");
  touch(flow_id, run_id, true);
  journal_.attribute(RunKey{std::string(flow_id), std::string(run_id)}, a.key(), a.instance_key(),
                     &a.value());
  kv_.put(keys::attribute(flow_id, run_id, a.key(), a.instance_key()),
          a.value().SerializeAsString());
}
void KvFlowTxn::delete_attribute(std::string_view flow_id, std::string_view run_id,
                                 std::string_view key, std::string_view instance_key) {
  touch(flow_id, run_id, true);
  journal_.attribute(RunKey{std::string(flow_id), std::string(run_id)}, std::string(key),
                     std::string(instance_key), nullptr);
  kv_.del(keys::attribute(flow_id, run_id, key, instance_key));
}
std::vector<Attribute> KvFlowTxn::attributes(std::string_view flow_id, std::string_view run_id,
                                             std::string_view key) {
  const std::string run_prefix = keys::attributes_prefix(flow_id, run_id);
  std::string prefix = run_prefix;
  if (!key.empty()) (prefix += key) += keys::kSep;
  std::vector<Attribute> out;
  for (auto& [k, value] : kv_.scan(prefix)) {  // bounded by the run's Attributes (kAttributesMax)
    std::string_view rest = std::string_view(k).substr(run_prefix.size());
    const auto sep = rest.find(keys::kSep);
    DEX_INVARIANT(sep != std::string_view::npos, "an Attribute key names its instance");
    Attribute a;
    a.set_key(std::string(rest.substr(0, sep)));
    a.set_instance_key(std::string(rest.substr(sep + 1)));
    auto v = parse<AttributeValue>(value);
    DEX_INVARIANT(v.has_value(), "a stored Attribute value parses");
    *a.mutable_value() = std::move(*v);
    out.push_back(std::move(a));
  }
  return out;
}
std::optional<RpcExecution> KvFlowTxn::rpc(std::string_view flow_id, std::string_view run_id,
                                           std::string_view rpc_id) {
  return parse<RpcExecution>(kv_.get(keys::rpc(flow_id, run_id, rpc_id)));
}
void KvFlowTxn::put_rpc(const RpcExecution& r) {
  journal_.rpc(RunKey{r.flow_id(), r.run_id()}, r.rpc_id(), &r);
  kv_.put(keys::rpc(r.flow_id(), r.run_id(), r.rpc_id()), r.SerializeAsString());
}
void KvFlowTxn::delete_rpc(std::string_view flow_id, std::string_view run_id,
                           std::string_view rpc_id) {
  journal_.rpc(RunKey{std::string(flow_id), std::string(run_id)}, std::string(rpc_id), nullptr);
  kv_.del(keys::rpc(flow_id, run_id, rpc_id));
}
void KvFlowTxn::put_open_rpc(const TaskRef& r) {
  kv_.put(keys::open_rpc(r.flow_id(), r.run_id(), r.step_execution_id()), r.SerializeAsString());
}
void KvFlowTxn::delete_open_rpc(const TaskRef& r) {
  kv_.del(keys::open_rpc(r.flow_id(), r.run_id(), r.step_execution_id()));
}
std::vector<TaskRef> KvFlowTxn::open_rpcs() {
  std::vector<TaskRef> out;
  for (auto& [key, value] : kv_.scan(keys::kOpenRpcPrefix))  // bounded by the open RPCs
    out.push_back(*parse<TaskRef>(value));
  return out;
}
void KvFlowTxn::put_event(std::string_view flow_id, std::string_view run_id,
                          const HistoryEvent& e) {
  kv_.put(keys::event(flow_id, run_id, e.seq()), e.SerializeAsString());
}

std::optional<SearchDoc> KvFlowTxn::search_doc(std::string_view flow_id, std::string_view run_id) {
  return parse<SearchDoc>(kv_.get(search_keys::doc(flow_id, run_id)));
}
void KvFlowTxn::put_search_doc(const SearchDoc& d) {
  kv_.put(search_keys::doc(d.flow_id(), d.run_id()), d.SerializeAsString());
}
void KvFlowTxn::delete_search_doc(std::string_view flow_id, std::string_view run_id) {
  kv_.del(search_keys::doc(flow_id, run_id));
}
void KvFlowTxn::put_search_entry(std::string_view entry_key) { kv_.put(entry_key, ""); }
void KvFlowTxn::delete_search_entry(std::string_view entry_key) { kv_.del(entry_key); }
std::optional<IndexKeyEntry> KvFlowTxn::index_key(std::string_view index_key) {
  return parse<IndexKeyEntry>(kv_.get(search_keys::index_key(index_key)));
}
void KvFlowTxn::put_index_key(const IndexKeyEntry& e) {
  kv_.put(search_keys::index_key(e.index_key()), e.SerializeAsString());
}
void KvFlowTxn::delete_index_key(std::string_view index_key) {
  kv_.del(search_keys::index_key(index_key));
}
void KvFlowTxn::touch(std::string_view flow_id, std::string_view run_id, bool attributes) {
  RunKey key{std::string(flow_id), std::string(run_id)};
  auto [it, added] = touched_at_.try_emplace(std::move(key), touched_.size());
  if (added) touched_.push_back(TouchedRun{it->first, false});
  touched_[it->second].attributes |= attributes;
}
void KvFlowTxn::append_sync_entry(std::string_view store, const SyncEntry& entry) {
  DEX_INVARIANT(!store.empty(), "a SyncEntry names its store");
  auto last = kv_.get(keys::kSyncSeq);
  const uint64_t seq = (last ? std::stoull(*last) : 0) + 1;
  kv_.put(keys::kSyncSeq, std::to_string(seq));
  SyncEntry stamped = entry;
  stamped.set_slot(slot_);
  kv_.put(keys::sync_prefix(store) + keys::digits(seq), stamped.SerializeAsString());
}
uint64_t KvFlowTxn::trim_sync_entries(std::string_view store, uint64_t through_slot) {
  const std::string prefix = keys::sync_prefix(store);
  const std::string floor_key = keys::sync_floor(store);
  // From the last key a trim removed: RocksDB keeps the removed keys as
  // tombstones for a while, and walking them from the prefix's start at every
  // trim made a long backlog's drain slower and slower.
  const std::string floor = kv_.get(floor_key).value_or("");
  uint64_t removed = 0;
  std::string last;
  // One read, bounded by kSyncTrimMax: a larger backlog takes more records.
  for (auto& [key, value] : kv_.scan_first(prefix, kSyncTrimMax, floor)) {
    auto entry = parse<SyncEntry>(std::optional<std::string>(std::move(value)));
    DEX_INVARIANT(entry.has_value(), "a SyncEntry parses");
    if (entry->slot() > through_slot) break;
    kv_.del(key);
    last = key;
    ++removed;
  }
  if (removed > 0) kv_.put(floor_key, last);
  return removed;
}

void KvFlowTxn::journal(int64_t at_ms) {
  auto deltas = journal_.take(at_ms);
  if (deltas.empty()) return;
  auto last = kv_.get(keys::kJournalSeq);
  uint64_t seq = last ? std::stoull(*last) : 0;
  for (auto& [run, delta] : deltas)  // bounded by the runs this record changed
    kv_.put(keys::journal_prefix(run.flow_id, run.run_id) + keys::digits(++seq),
            delta.SerializeAsString());
  kv_.put(keys::kJournalSeq, std::to_string(seq));
}
std::vector<RunDelta> KvFlowTxn::run_journal(std::string_view flow_id, std::string_view run_id) {
  std::vector<RunDelta> out;
  // Bounded by the run's records (continue-as-new keeps a run's history short).
  for (auto& [key, value] : kv_.scan(keys::journal_prefix(flow_id, run_id)))
    out.push_back(*parse<RunDelta>(value));
  return out;
}
std::vector<RunKey> KvFlowTxn::touched_runs() const {
  std::vector<RunKey> out;
  out.reserve(touched_.size());
  for (const auto& t : touched_) out.push_back(t.key);  // bounded by the runs one record touched
  return out;
}

std::vector<TouchedRun> KvFlowTxn::take_touched_runs() {
  touched_at_.clear();
  return std::exchange(touched_, {});
}

}  // namespace dex::flow
