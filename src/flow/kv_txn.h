// The flow rules' state as keys and values (docs/flow-rules.md, "Keys"): a
// FlowTxn over any ordered key-value store. The server puts it over a RocksDB
// write batch; tests, the simulation and the fuzz target over MemoryKv.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flow/flow_txn.h"
#include "flow/journal_builder.h"

namespace dex::flow {

// An ordered key-value store as the rules' transaction sees it. Reads see the
// transaction's own writes.
class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual std::optional<std::string> get(std::string_view key) = 0;
  virtual void put(std::string_view key, std::string_view value) = 0;
  virtual void del(std::string_view key) = 0;
  // Every key starting with `prefix`, in order, with its value.
  virtual std::vector<std::pair<std::string, std::string>> scan(std::string_view prefix) = 0;
  // The first `limit` keys of scan(prefix) at or after `from` (empty: from the
  // prefix); a store may stop reading there.
  virtual std::vector<std::pair<std::string, std::string>> scan_first(std::string_view prefix,
                                                                      size_t limit,
                                                                      std::string_view from) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& kv : scan(prefix)) {  // bounded by the keys under the prefix
      if (out.size() >= limit) break;
      if (kv.first >= from) out.push_back(std::move(kv));
    }
    return out;
  }
};

// A KvStore in memory.
class MemoryKv final : public KvStore {
 public:
  std::optional<std::string> get(std::string_view key) override;
  void put(std::string_view key, std::string_view value) override;
  void del(std::string_view key) override;
  std::vector<std::pair<std::string, std::string>> scan(std::string_view prefix) override;
  const std::map<std::string, std::string, std::less<>>& data() const { return data_; }

 private:
  std::map<std::string, std::string, std::less<>> data_;
};

class KvFlowTxn final : public FlowTxn {
 public:
  // `slot`: the log slot whose records this transaction applies (stamped on
  // SyncEntries); 0 for a preview or a read.
  explicit KvFlowTxn(KvStore& kv, uint64_t slot = 0) : kv_(kv), slot_(slot) {}

  std::optional<DeclarationVersion> declaration(std::string_view flow_type,
                                                uint32_t version) override;
  void put_declaration(const DeclarationVersion& version) override;
  std::optional<FlowIdEntry> flow_id(std::string_view flow_id) override;
  void put_flow_id(const FlowIdEntry& entry) override;
  void delete_flow_id(std::string_view flow_id) override;
  std::optional<Run> run(std::string_view flow_id, std::string_view run_id) override;
  void put_run(const Run& run) override;
  void delete_run(std::string_view flow_id, std::string_view run_id) override;
  std::optional<StepExecution> step(std::string_view flow_id, std::string_view run_id,
                                    std::string_view step_execution_id) override;
  void put_step(const StepExecution& step) override;
  std::optional<ChannelQueue> queue(const QueueKey& key) override;
  void put_queue(const QueueKey& key, const ChannelQueue& queue) override;
  std::optional<Payload> message(const QueueKey& key, uint64_t seq) override;
  void put_message(const QueueKey& key, uint64_t seq, const Payload& message) override;
  void delete_message(const QueueKey& key, uint64_t seq) override;
  std::vector<std::pair<QueueKey, ChannelQueue>> queues(std::string_view flow_id,
                                                        std::string_view run_id) override;
  void put_timer(const TimerKey& key, int64_t fire_at_ms) override;
  void delete_timer(const TimerKey& key, int64_t fire_at_ms) override;
  bool timer_set(const TimerKey& key, int64_t fire_at_ms) override;
  uint64_t enqueue_task(std::string_view flow_type, const TaskRef& task) override;
  void dequeue_task(std::string_view flow_type, uint64_t seq) override;
  void put_running(std::string_view task_id, const TaskRef& task) override;
  void delete_running(std::string_view task_id) override;
  std::vector<std::pair<std::string, TaskRef>> running() override;
  std::optional<AttributeValue> attribute(std::string_view flow_id, std::string_view run_id,
                                          std::string_view key,
                                          std::string_view instance_key) override;
  void put_attribute(std::string_view flow_id, std::string_view run_id,
                     const Attribute& attribute) override;
  void delete_attribute(std::string_view flow_id, std::string_view run_id, std::string_view key,
                        std::string_view instance_key) override;
  std::vector<Attribute> attributes(std::string_view flow_id, std::string_view run_id,
                                    std::string_view key) override;
  std::optional<RpcExecution> rpc(std::string_view flow_id, std::string_view run_id,
                                  std::string_view rpc_id) override;
  void put_rpc(const RpcExecution& rpc) override;
  void delete_rpc(std::string_view flow_id, std::string_view run_id,
                  std::string_view rpc_id) override;
  void put_open_rpc(const TaskRef& rpc) override;
  void delete_open_rpc(const TaskRef& rpc) override;
  std::vector<TaskRef> open_rpcs() override;
  void put_event(std::string_view flow_id, std::string_view run_id,
                 const HistoryEvent& event) override;
  std::optional<SearchDoc> search_doc(std::string_view flow_id, std::string_view run_id) override;
  void put_search_doc(const SearchDoc& doc) override;
  void delete_search_doc(std::string_view flow_id, std::string_view run_id) override;
  void put_search_entry(std::string_view entry_key) override;
  void delete_search_entry(std::string_view entry_key) override;
  std::optional<IndexKeyEntry> index_key(std::string_view index_key) override;
  void put_index_key(const IndexKeyEntry& entry) override;
  void delete_index_key(std::string_view index_key) override;
  void append_sync_entry(std::string_view store, const SyncEntry& entry) override;
  uint64_t trim_sync_entries(std::string_view store, uint64_t through_slot) override;
  void journal(int64_t at_ms) override;
  std::vector<RunDelta> run_journal(std::string_view flow_id, std::string_view run_id) override;
  std::vector<TouchedRun> take_touched_runs() override;
  std::vector<RunKey> touched_runs() const override;

 private:
  void touch(std::string_view flow_id, std::string_view run_id, bool attributes = false);

  KvStore& kv_;
  const uint64_t slot_;
  // The runs written since take_touched_runs: bounded by the runs one record
  // (or one recovery) changes.
  std::vector<TouchedRun> touched_;
  std::map<RunKey, size_t> touched_at_;  // its index in touched_
  JournalBuilder journal_;               // this record's writes, until journal()
};

// Key layout, shared with the readers (the server's queries, the simulation).
namespace keys {
inline constexpr char kSep = '\x1f';  // names never hold control characters
std::string timer(const TimerKey& key, int64_t fire_at_ms);
inline constexpr std::string_view kTimerPrefix = "~t/";
// The key and fire time of a timer index entry; false for another key.
bool parse_timer(std::string_view index_key, TimerKey* key, int64_t* fire_at_ms);
std::string task_queue_prefix(std::string_view flow_type);
inline constexpr std::string_view kRunningPrefix = "~a/";
std::string steps_prefix(std::string_view flow_id, std::string_view run_id);
std::string events_prefix(std::string_view flow_id, std::string_view run_id);
std::string messages_prefix(const QueueKey& key);
inline constexpr std::string_view kRunPrefix = "~r/";
// Every key of the flow state starts with "~", apart from the DAG engine's keys
// in the same local store.
inline constexpr std::string_view kStepPrefix = "~s/";
inline constexpr std::string_view kMessagePrefix = "~m/";
inline constexpr std::string_view kEventPrefix = "~h/";
inline constexpr std::string_view kTaskQueuePrefix = "~w/";
inline constexpr std::string_view kAttributePrefix = "~v/";
inline constexpr std::string_view kRpcPrefix = "~p/";
inline constexpr std::string_view kOpenRpcPrefix = "~o/";
std::string attributes_prefix(std::string_view flow_id, std::string_view run_id);
// SyncEntries: ~y/<store>␟<sequence, 20 digits>, the sequence increasing
// across every store in log order.
inline constexpr std::string_view kSyncPrefix = "~y/";
std::string sync_prefix(std::string_view store);
// The store of a SyncEntry key (empty for another key).
std::string_view sync_store(std::string_view key);
// The last SyncEntry key a trim removed from a store (value: the key): reads
// and trims start there, not over the removed keys' tombstones.
std::string sync_floor(std::string_view store);
std::string rpcs_prefix(std::string_view flow_id, std::string_view run_id);
// The run journal: ~j/<flow id>␟<run id>␟<sequence, 20 digits>, the sequence
// increasing across every run in log order.
inline constexpr std::string_view kJournalPrefix = "~j/";
std::string journal_prefix(std::string_view flow_id, std::string_view run_id);
// Every key kept under one run (its record and the prefixes delete_run clears).
std::string run(std::string_view flow_id, std::string_view run_id);
std::string queue_prefix(std::string_view flow_id, std::string_view run_id);
std::string run_messages_prefix(std::string_view flow_id, std::string_view run_id);
std::string open_rpc(std::string_view flow_id, std::string_view run_id, std::string_view rpc_id);
// A time as 20 digits that sort like the signed value.
std::string sortable(int64_t value);
std::string digits(uint64_t n);
}  // namespace keys

}  // namespace dex::flow
