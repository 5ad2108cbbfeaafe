// The state the flow rules read and write, as a small transaction interface
// (docs/flow-rules.md, "The transaction"). The rules never see RocksDB: the
// store behind this interface is RocksDB in the server, a map in the unit
// tests, the simulation and the fuzz target. One apply of one record runs in
// one transaction; the caller commits it (with the other records of its log
// batch) or discards it.
//
// Every read sees the transaction's own earlier writes. Reads return nullopt
// for what does not exist. Implementations decide nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dex/flow.pb.h"
#include "dex/flow_records.pb.h"
#include "flow/effects.h"

namespace dex::flow {

// A run a transaction wrote, and whether it wrote any of its Attributes (the
// search index reads Attribute values only then).
struct TouchedRun {
  RunKey key;
  bool attributes = false;
};

// One Channel queue of one run: a Channel, or one instance of a ChannelMap.
struct QueueKey {
  std::string flow_id, run_id, channel, instance_key;
  bool operator==(const QueueKey&) const = default;
};

class FlowTxn {
 public:
  virtual ~FlowTxn() = default;

  // Declarations: version 0 asks for the latest.
  virtual std::optional<DeclarationVersion> declaration(std::string_view flow_type,
                                                        uint32_t version) = 0;
  // Stores a version; it becomes the latest when its number is the highest.
  virtual void put_declaration(const DeclarationVersion& version) = 0;

  virtual std::optional<FlowIdEntry> flow_id(std::string_view flow_id) = 0;
  virtual void put_flow_id(const FlowIdEntry& entry) = 0;
  virtual void delete_flow_id(std::string_view flow_id) = 0;

  virtual std::optional<Run> run(std::string_view flow_id, std::string_view run_id) = 0;
  virtual void put_run(const Run& run) = 0;
  // Deletes the run and everything kept under it: its Step executions,
  // history, Attributes, Channel queues and messages, and RPCs (retention).
  // Index entries (timers, task queues, running attempts) are the caller's.
  virtual void delete_run(std::string_view flow_id, std::string_view run_id) = 0;

  virtual std::optional<StepExecution> step(std::string_view flow_id, std::string_view run_id,
                                            std::string_view step_execution_id) = 0;
  virtual void put_step(const StepExecution& step) = 0;

  // Channel queues: a header plus one message per sequence number, oldest first.
  virtual std::optional<ChannelQueue> queue(const QueueKey& key) = 0;
  virtual void put_queue(const QueueKey& key, const ChannelQueue& queue) = 0;
  virtual std::optional<Payload> message(const QueueKey& key, uint64_t seq) = 0;
  virtual void put_message(const QueueKey& key, uint64_t seq, const Payload& message) = 0;
  virtual void delete_message(const QueueKey& key, uint64_t seq) = 0;
  // Every queue of a run (ChannelMap instances included), in key order.
  virtual std::vector<std::pair<QueueKey, ChannelQueue>> queues(std::string_view flow_id,
                                                                std::string_view run_id) = 0;

  // The due-time index of durable timers, which the proposer scans. The rules
  // judge a fired timer by the state it names, not by this index.
  virtual void put_timer(const TimerKey& key, int64_t fire_at_ms) = 0;
  virtual void delete_timer(const TimerKey& key, int64_t fire_at_ms) = 0;
  // Whether the timer is in the index (a Flow retry abandoned by a later start
  // leaves no other trace: its closed run never changes).
  virtual bool timer_set(const TimerKey& key, int64_t fire_at_ms) = 0;

  // Each Flow type's FIFO queue of tasks waiting for a Worker. enqueue_task
  // returns the task's place (unique, increasing across all types).
  virtual uint64_t enqueue_task(std::string_view flow_type, const TaskRef& task) = 0;
  virtual void dequeue_task(std::string_view flow_type, uint64_t seq) = 0;

  // Attempts handed to Workers, by task id: recovery ends every one of them.
  virtual void put_running(std::string_view task_id, const TaskRef& task) = 0;
  virtual void delete_running(std::string_view task_id) = 0;
  virtual std::vector<std::pair<std::string, TaskRef>> running() = 0;

  // A run's Attributes: one value per key, or per AttributeMap instance key
  // (instance_key empty for a plain Attribute). Each instance is its own entry,
  // so writing one never rewrites the others.
  virtual std::optional<AttributeValue> attribute(std::string_view flow_id, std::string_view run_id,
                                                  std::string_view key,
                                                  std::string_view instance_key) = 0;
  virtual void put_attribute(std::string_view flow_id, std::string_view run_id,
                             const Attribute& attribute) = 0;  // value set
  virtual void delete_attribute(std::string_view flow_id, std::string_view run_id,
                                std::string_view key, std::string_view instance_key) = 0;
  // The run's Attributes with this key (every instance of a map), or all of
  // them for an empty key; in (key, instance key) order.
  virtual std::vector<Attribute> attributes(std::string_view flow_id, std::string_view run_id,
                                            std::string_view key) = 0;

  // A run's RPCs, by RPC ID.
  virtual std::optional<RpcExecution> rpc(std::string_view flow_id, std::string_view run_id,
                                          std::string_view rpc_id) = 0;
  virtual void put_rpc(const RpcExecution& rpc) = 0;
  virtual void delete_rpc(std::string_view flow_id, std::string_view run_id,
                          std::string_view rpc_id) = 0;
  // The RPCs not done, of every run (TaskRef of their one attempt): recovery
  // ends them all.
  virtual void put_open_rpc(const TaskRef& rpc) = 0;
  virtual void delete_open_rpc(const TaskRef& rpc) = 0;
  virtual std::vector<TaskRef> open_rpcs() = 0;

  // A run's semantic history, by event sequence number.
  virtual void put_event(std::string_view flow_id, std::string_view run_id,
                         const HistoryEvent& event) = 0;

  // The search index (flow/search_index.h, search_keys.h): one SearchDoc per
  // run, its entries (keys with no value), the index keys in use.
  virtual std::optional<SearchDoc> search_doc(std::string_view flow_id,
                                              std::string_view run_id) = 0;
  virtual void put_search_doc(const SearchDoc& doc) = 0;
  virtual void delete_search_doc(std::string_view flow_id, std::string_view run_id) = 0;
  virtual void put_search_entry(std::string_view entry_key) = 0;
  virtual void delete_search_entry(std::string_view entry_key) = 0;
  virtual std::optional<IndexKeyEntry> index_key(std::string_view index_key) = 0;
  virtual void put_index_key(const IndexKeyEntry& entry) = 0;
  virtual void delete_index_key(std::string_view index_key) = 0;
  // What each Attribute Store still has to receive (docs/attribute-store.md):
  // SyncEntries in log order per store. append_sync_entry stamps the entry
  // with the log slot being applied; trim_sync_entries removes the store's
  // entries of slots at or below `through_slot` (oldest first) and answers how many.
  virtual void append_sync_entry(std::string_view store, const SyncEntry& entry) = 0;
  virtual uint64_t trim_sync_entries(std::string_view store, uint64_t through_slot) = 0;

  // The run journal (docs/flow-rules.md, "Run journal"): the writes to each
  // run's state since the last call become one RunDelta of that run at
  // `at_ms`, stored after the run's earlier ones. The rules call it at the end
  // of every record (and recovery); a delete_run drops the run's journal.
  virtual void journal(int64_t at_ms) = 0;
  // A run's deltas, oldest first.
  virtual std::vector<RunDelta> run_journal(std::string_view flow_id, std::string_view run_id) = 0;

  // The runs whose record or Attributes were written or deleted since the
  // last call, each once, in the order first touched; forgets them.
  virtual std::vector<TouchedRun> take_touched_runs() = 0;
  // The same runs, without forgetting them.
  virtual std::vector<RunKey> touched_runs() const = 0;
};

}  // namespace dex::flow
