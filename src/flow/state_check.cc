#include "flow/state_check.h"

#include "flow/flow_rules.h"
#include "flow/kv_txn.h"
#include "flow/run_editor.h"
#include "flow/run_journal.h"
#include "flow/search_index.h"
#include "flow/search_keys.h"

#include <algorithm>
#include <map>
#include <set>

#include <google/protobuf/util/message_differencer.h>

namespace dex::flow {
namespace {

using google::protobuf::util::MessageDifferencer;

bool active(Phase p) { return p == PHASE_WAIT_FOR || p == PHASE_WAITING || p == PHASE_EXECUTE; }

template <typename M>
M parsed(const std::string& bytes) {
  M m;
  m.ParseFromString(bytes);
  return m;
}

struct Indexes {
  std::map<std::string, TaskRef> running;                      // task id -> ref
  std::map<std::pair<std::string, uint64_t>, TaskRef> queued;  // (type, seq) -> ref
  std::set<std::string> timers;                                // keys::timer(...)
  std::set<std::string> open_rpcs;                             // keys::open_rpc(...)
};

Indexes load_indexes(KvStore& kv) {
  Indexes ix;
  for (auto& [k, v] : kv.scan(keys::kRunningPrefix))
    ix.running[k.substr(keys::kRunningPrefix.size())] = parsed<TaskRef>(v);
  for (auto& [k, v] : kv.scan(keys::kTaskQueuePrefix)) {
    auto sep = k.rfind(keys::kSep);
    ix.queued[{k.substr(keys::kTaskQueuePrefix.size(), sep - keys::kTaskQueuePrefix.size()),
               std::stoull(k.substr(sep + 1))}] = parsed<TaskRef>(v);
  }
  for (auto& [k, v] : kv.scan(keys::kTimerPrefix)) ix.timers.insert(k);
  for (auto& [k, v] : kv.scan(keys::kOpenRpcPrefix)) ix.open_rpcs.insert(k);
  return ix;
}

Status bad(const std::string& what) { return Status::corruption("flow state: " + what); }

TaskRef ref_of(const StepExecution& s) {
  TaskRef r;
  r.set_flow_id(s.flow_id());
  r.set_run_id(s.run_id());
  r.set_step_execution_id(s.step_execution_id());
  r.set_method(s.method().method());
  r.set_attempt(s.method().attempt());
  return r;
}

TimerKey key_of(const StepExecution& s, TimerKind kind) {
  TimerKey k;
  k.set_flow_id(s.flow_id());
  k.set_run_id(s.run_id());
  k.set_kind(kind);
  k.set_step_execution_id(s.step_execution_id());
  return k;
}

// The step's own entries; `used` collects every index key it references.
Status check_step(const Run& run, const StepExecution& s, Indexes& ix,
                  std::set<std::string>& used_timers, std::set<std::string>& used_running,
                  std::set<std::pair<std::string, uint64_t>>& used_queued) {
  const std::string id = s.flow_id() + "/" + s.step_execution_id();
  const auto& m = s.method();
  if (!active(s.phase())) {
    if (m.state() != TASK_STATE_UNSPECIFIED) return bad(id + " is not active but has a task");
    return Status::ok();
  }
  if (run.status() != FLOW_RUNNING) return bad(id + " is active in a closed run");
  if (s.phase() == PHASE_WAITING) {
    if (m.state() != TASK_STATE_UNSPECIFIED) return bad(id + " waits but has a task");
    if (s.conditions_size() != s.wait().conditions_size())
      return bad(id + " has not one state per condition");
    for (int i = 0; i < s.conditions_size(); ++i) {
      if (!s.wait().conditions(i).has_timer() || s.conditions(i).fired()) continue;
      TimerKey k = key_of(s, CONDITION);
      k.set_condition_index(static_cast<uint32_t>(i));
      const std::string key = keys::timer(k, s.conditions(i).timer_at_ms());
      if (!ix.timers.contains(key)) return bad(id + " waits on a Timer that is not indexed");
      used_timers.insert(key);
    }
    return Status::ok();
  }
  const Method expected = s.phase() == PHASE_WAIT_FOR ? WAIT_FOR : EXECUTE;
  if (m.method() != expected) return bad(id + " runs the wrong method for its phase");
  if (m.attempt() < 1) return bad(id + " has attempt 0");
  switch (m.state()) {
    case TASK_RUNNING: {
      auto it = ix.running.find(m.task_id());
      if (it == ix.running.end() || !MessageDifferencer::Equals(it->second, ref_of(s)))
        return bad(id + " runs task " + m.task_id() + ", which is not indexed as running");
      used_running.insert(m.task_id());
      return Status::ok();
    }
    case TASK_QUEUED: {
      auto it = ix.queued.find({run.flow_type(), m.queue_seq()});
      if (it == ix.queued.end() || !MessageDifferencer::Equals(it->second, ref_of(s)))
        return bad(id + " is queued but not in its type's task queue");
      used_queued.insert(it->first);
      return Status::ok();
    }
    case TASK_BACKOFF: {
      TimerKey k = key_of(s, RETRY);
      k.set_method(m.method());
      const std::string key = keys::timer(k, m.retry_at_ms());
      if (!ix.timers.contains(key)) return bad(id + " backs off without a retry timer");
      used_timers.insert(key);
      return Status::ok();
    }
    case TASK_LOCKED:
      return Status::ok();  // check_locks
    default:
      return bad(id + " is active without a task");
  }
}

// A waiting execution's SubFlow conditions: each names its derived child, the
// child run exists, a met one's child is closed, an unmet one's child is
// running and lists this condition among its parents (or waits for a Flow retry).
Status check_sub_flow_conditions(FlowTxn& txn, const StepExecution& s) {
  if (s.phase() != PHASE_WAITING) return Status::ok();
  for (int i = 0; i < s.wait().conditions_size() && i < s.conditions_size(); ++i) {
    if (!s.wait().conditions(i).has_sub_flow()) continue;
    const auto& c = s.conditions(i);
    const std::string id =
        s.flow_id() + "/" + s.step_execution_id() + " SubFlow " + std::to_string(i);
    if (c.child_flow_id() !=
        sub_flow_id(s.flow_id(), s.step_execution_id(), static_cast<uint32_t>(i)))
      return bad(id + " names a child that is not its derived Flow ID");
    auto child = txn.run(c.child_flow_id(), c.child_run_id());
    // A met condition keeps its child's result: the child may be deleted
    // (retention) while this execution still waits for others.
    if (!child && c.fired() && c.has_sub_flow()) continue;
    if (!child) return bad(id + " names a child run that does not exist");
    if (c.fired()) {
      if (child->status() == FLOW_RUNNING) return bad(id + " is met but its child runs");
      if (!c.has_sub_flow() || c.sub_flow().status() != child->status())
        return bad(id + " is met without its child's result");
      continue;
    }
    if (retry_pending(*child)) continue;
    if (child->status() != FLOW_RUNNING) return bad(id + " waits for a closed child");
    const bool listed =
        std::any_of(child->parents().begin(), child->parents().end(), [&](const SubFlowParent& p) {
          return p.flow_id() == s.flow_id() &&
                 continued_to(txn, p.flow_id(), p.run_id()) == s.run_id() &&
                 p.step_execution_id() == s.step_execution_id() &&
                 p.condition_index() == static_cast<uint32_t>(i);
        });
    if (!listed) return bad(id + " waits for a child that does not list it as a parent");
  }
  return Status::ok();
}

// A child's parent references: each names an existing run's SubFlow condition
// whose child is this Flow ID.
Status check_parents(FlowTxn& txn, const Run& run) {
  for (const auto& p : run.parents()) {
    const std::string id = run.flow_id() + " parent " + p.flow_id() + "/" + p.step_execution_id();
    // A parent deleted by retention (it closed, the child ran on): nobody to tell.
    if (!txn.run(p.flow_id(), p.run_id())) continue;
    auto s = txn.step(p.flow_id(), p.run_id(), p.step_execution_id());
    const int i = static_cast<int>(p.condition_index());
    if (!s || i >= s->wait().conditions_size() || !s->wait().conditions(i).has_sub_flow() ||
        i >= s->conditions_size() || s->conditions(i).child_flow_id() != run.flow_id())
      return bad(id + ": the parent has no SubFlow condition for this child");
  }
  return Status::ok();
}

// An attempt that holds or wants lock keys: a Step method or an RPC.
struct LockUser {
  TaskState state = TASK_STATE_UNSPECIFIED;
  std::vector<std::string> keys;  // declared
  // An RPC: its InvokeRpc's own keys are held too (not stored with the RPC),
  // so it holds or wants its declared keys and maybe more, at most kLockKeysMax.
  bool call_keys = false;
};

// Whether `keys` are what `user` holds or wants.
bool keys_fit(const LockUser& user, const std::set<std::string>& keys) {
  const std::set<std::string> declared(user.keys.begin(), user.keys.end());
  if (!user.call_keys) return keys == declared;
  return keys.size() <= kLockKeysMax &&
         std::includes(keys.begin(), keys.end(), declared.begin(), declared.end());
}
using Holder = std::pair<std::string, int>;  // (execution or RPC ID, Method)

// The run's lock table against its attempts: every QUEUED or RUNNING attempt
// with keys holds them all, alone; every LOCKED attempt waits, and could not
// have its keys now.
Status check_locks(const Run& run, const std::map<Holder, LockUser>& users) {
  std::map<std::string, Holder> holder_of;
  std::map<Holder, std::set<std::string>> held;
  for (const auto& l : run.locks()) {
    const Holder h{l.holder(), l.method()};
    if (!holder_of.emplace(l.key(), h).second)
      return bad(run.flow_id() + ": lock key " + l.key() + " has two holders");
    held[h].insert(l.key());
  }
  std::set<Holder> waiting;
  std::set<std::string> wanted;
  for (const auto& w : run.lock_waiters()) {
    const Holder h{w.holder(), w.method()};
    if (!waiting.insert(h).second) return bad(run.flow_id() + ": a lock waiter waits twice");
    auto it = users.find(h);
    if (it == users.end() || it->second.state != TASK_LOCKED)
      return bad(run.flow_id() + ": lock waiter " + w.holder() + " is not a locked attempt");
    if (!keys_fit(it->second, std::set<std::string>(w.keys().begin(), w.keys().end())))
      return bad(run.flow_id() + ": lock waiter " + w.holder() + " waits for other keys");
    bool blocked = false;
    for (const auto& k : w.keys()) blocked = blocked || holder_of.contains(k) || wanted.contains(k);
    if (!blocked)
      return bad(run.flow_id() + ": " + w.holder() + " waits for lock keys it could have");
    for (const auto& k : w.keys()) wanted.insert(k);
  }
  for (const auto& [h, u] : users) {
    const bool holds = u.state == TASK_QUEUED || u.state == TASK_RUNNING;
    if (u.state == TASK_LOCKED && !waiting.contains(h))
      return bad(run.flow_id() + ": " + h.first + " is locked but not in the lock queue");
    auto it = held.find(h);
    const std::set<std::string> has = it == held.end() ? std::set<std::string>() : it->second;
    if (holds && !keys_fit(u, has))
      return bad(run.flow_id() + ": " + h.first + " runs without holding its lock keys");
    if (!holds && !has.empty())
      return bad(run.flow_id() + ": " + h.first + " holds lock keys but is not queued or running");
  }
  for (const auto& [h, keys] : held) {
    if (!users.contains(h)) return bad(run.flow_id() + ": lock holder " + h.first + " is gone");
  }
  return Status::ok();
}

// The timeout handler: only under TIMEOUT_HANDLER once the timeout fired; while
// it runs, its attempt is where its state says.
Status check_timeout_handler(const Run& run, Indexes& ix, std::set<std::string>& used_timers,
                             std::set<std::string>& used_running,
                             std::set<std::pair<std::string, uint64_t>>& used_queued) {
  const std::string id = run.flow_id() + " timeout handler";
  const MethodState& m = run.timeout_handler();
  if (run.timeout_handled() &&
      (run.options().timeout_policy() != TIMEOUT_HANDLER || run.options().timeout_ms() <= 0))
    return bad(id + " ran without timeout policy HANDLER");
  if (m.state() == TASK_STATE_UNSPECIFIED) return Status::ok();
  if (!run.timeout_handled()) return bad(id + " runs before the flow timeout fired");
  if (run.status() != FLOW_RUNNING) return bad(id + " runs in a closed run");
  if (m.method() != ON_TIMEOUT || m.attempt() < 1)
    return bad(id + " has the wrong method or attempt");
  TaskRef ref;
  ref.set_flow_id(run.flow_id());
  ref.set_run_id(run.run_id());
  ref.set_step_execution_id(std::string(kTimeoutHandlerId));
  ref.set_method(ON_TIMEOUT);
  ref.set_attempt(m.attempt());
  switch (m.state()) {
    case TASK_RUNNING: {
      auto it = ix.running.find(m.task_id());
      if (it == ix.running.end() || !MessageDifferencer::Equals(it->second, ref))
        return bad(id + " runs task " + m.task_id() + ", which is not indexed as running");
      used_running.insert(m.task_id());
      return Status::ok();
    }
    case TASK_QUEUED: {
      auto it = ix.queued.find({run.flow_type(), m.queue_seq()});
      if (it == ix.queued.end() || !MessageDifferencer::Equals(it->second, ref))
        return bad(id + " is queued but not in its type's task queue");
      used_queued.insert(it->first);
      return Status::ok();
    }
    case TASK_BACKOFF: {
      TimerKey k;
      k.set_flow_id(run.flow_id());
      k.set_run_id(run.run_id());
      k.set_kind(RETRY);
      k.set_step_execution_id(std::string(kTimeoutHandlerId));
      k.set_method(ON_TIMEOUT);
      const std::string key = keys::timer(k, m.retry_at_ms());
      if (!ix.timers.contains(key)) return bad(id + " backs off without a retry timer");
      used_timers.insert(key);
      return Status::ok();
    }
    default:
      return bad(id + " is in a state it never takes (it takes no lock keys)");
  }
}

// A run closed for good with a retention waits for its RETENTION timer; any
// other run has none.
Status check_retention(const Run& run, Indexes& ix, std::set<std::string>& used_timers) {
  const bool for_good = run.status() != FLOW_RUNNING && run.retry_at_ms() == 0;
  if (run.expire_at_ms() == 0) {
    if (for_good && run.retention_ms() > 0)
      return bad(run.flow_id() + " closed for good without its retention timer");
    return Status::ok();
  }
  if (run.status() == FLOW_RUNNING) return bad(run.flow_id() + " runs with a retention timer");
  if (run.expire_at_ms() != later_ms(run.close_ms(), run.retention_ms()) && for_good)
    return bad(run.flow_id() + " expires other than its retention after it closed");
  TimerKey k;
  k.set_flow_id(run.flow_id());
  k.set_run_id(run.run_id());
  k.set_kind(RETENTION);
  const std::string key = keys::timer(k, run.expire_at_ms());
  if (!ix.timers.contains(key)) return bad(run.flow_id() + " expires without its timer");
  used_timers.insert(key);
  return Status::ok();
}

// The run's journal folds to exactly its stored state (docs/flow-rules.md,
// "Run journal"): what time travel and continue-as-new rebuild is what was.
Status check_journal(KvStore& kv, const Run& run) {
  const std::string name = run.flow_id() + "/" + run.run_id();
  const auto deltas = KvFlowTxn(kv).run_journal(run.flow_id(), run.run_id());
  if (deltas.empty()) return bad(name + " has no journal");
  if (!deltas.front().has_run() || !deltas.front().run().has_options())
    return bad(name + ": its first delta is not its start");
  const auto stored = run_state(kv, RunKey{run.flow_id(), run.run_id()});
  const auto rebuilt = folded_state(deltas, deltas.size());
  for (const auto& [k, v] : stored) {  // bounded by the run's keys
    auto it = rebuilt.find(k);
    if (it == rebuilt.end()) return bad("the journal of " + name + " lacks key " + k);
    // Equal messages serialize to equal bytes within one protobuf build.
    if (it->second != v) return bad("the journal of " + name + " folds " + k + " to another value");
  }
  if (rebuilt.size() != stored.size())
    return bad("the journal of " + name + " holds keys the run no longer has");
  return Status::ok();
}

// Every key kept under a run belongs to a stored run (retention deletes them
// all), and every Flow ID entry names a stored run.
Status check_no_orphans(KvStore& kv) {
  for (std::string_view prefix :
       {keys::kStepPrefix, keys::kEventPrefix, keys::kAttributePrefix, std::string_view("~q/"),
        keys::kMessagePrefix, keys::kRpcPrefix, keys::kJournalPrefix}) {
    std::string last_run;
    for (auto& [k, v] : kv.scan(prefix)) {  // bounded by the state's keys
      const std::string_view rest = std::string_view(k).substr(prefix.size());
      const size_t a = rest.find(keys::kSep);
      const size_t b = a == std::string_view::npos ? a : rest.find(keys::kSep, a + 1);
      if (b == std::string_view::npos) return bad("key " + k + " names no run");
      const std::string run_key = keys::run(rest.substr(0, a), rest.substr(a + 1, b - a - 1));
      if (run_key == last_run) continue;
      if (!kv.get(run_key)) return bad("key " + k + " outlives its run");
      last_run = run_key;
    }
  }
  KvFlowTxn txn(kv);
  for (auto& [k, v] : kv.scan("~i/")) {  // bounded by the Flow IDs
    const FlowIdEntry e = parsed<FlowIdEntry>(v);
    if (!txn.run(e.flow_id(), e.run_id()))
      return bad("Flow ID " + e.flow_id() + " names run " + e.run_id() + ", which is gone");
  }
  return Status::ok();
}

Status check_queues(KvStore& kv, const Run& run) {
  KvFlowTxn txn(kv);
  for (const auto& [key, queue] : txn.queues(run.flow_id(), run.run_id())) {
    if (queue.next_seq() < queue.first_seq()) return bad("a queue's bounds are reversed");
    auto messages = kv.scan(keys::messages_prefix(key));
    if (messages.size() != queue.next_seq() - queue.first_seq())
      return bad("queue " + key.channel + " of " + run.flow_id() + " holds " +
                 std::to_string(messages.size()) + " messages; its bounds say " +
                 std::to_string(queue.next_seq() - queue.first_seq()));
    uint64_t seq = queue.first_seq();
    for (const auto& [k, v] : messages) {
      if (k != keys::messages_prefix(key) + keys::digits(seq++))
        return bad("queue " + key.channel + " has a message outside its bounds");
    }
  }
  return Status::ok();
}

}  // namespace

// The search index is exactly what the runs and declarations give: each
// run's doc as build_search_doc makes it now, its entries and no other, and
// every live declaration's index keys registered under its Flow type.
// SyncEntries (docs/attribute-store.md): each names a Flow ID and writes or
// removes its row; per store, log order (slots never go down); the sequence
// counter is above every entry's.
static Status check_sync_entries(KvStore& kv) {
  std::map<std::string, uint64_t, std::less<>> last_slot;
  uint64_t max_seq = 0;
  for (auto& [k, v] : kv.scan(keys::kSyncPrefix)) {  // bounded by the entries kept
    const std::string store(keys::sync_store(k));
    if (store.empty()) return bad("sync key " + k + " names no store");
    const SyncEntry e = parsed<SyncEntry>(v);
    if (e.flow_id().empty()) return bad("sync entry " + k + " names no Flow ID");
    if (e.delete_row() == (e.writes_size() > 0))
      return bad("sync entry " + k + " must either write fields or remove the row");
    auto [it, fresh] = last_slot.try_emplace(store, e.slot());
    if (!fresh && e.slot() < it->second) return bad("sync entry " + k + " goes back in the log");
    it->second = e.slot();
    max_seq = std::max<uint64_t>(max_seq, std::stoull(k.substr(k.size() - 20)));
  }
  for (const auto& [store, slot] : last_slot) {  // bounded by the stores with entries
    (void)slot;
    auto floor = kv.get(keys::sync_floor(store));
    auto first = kv.scan_first(keys::sync_prefix(store), 1, "");
    if (floor && !first.empty() && first.front().first <= *floor)
      return bad("sync entry " + first.front().first + " is at or below its store's trim floor");
  }
  auto seq = kv.get("~meta/sync_seq");
  if (max_seq > 0 && (!seq || std::stoull(*seq) < max_seq))
    return bad("the sync sequence is below an entry's");
  return Status::ok();
}

static Status check_search_index(KvStore& kv) {
  KvFlowTxn txn(kv);
  std::set<std::string> docs, entries;
  for (auto& [rk, rv] : kv.scan(keys::kRunPrefix)) {  // bounded by the runs
    const Run run = parsed<Run>(rv);
    auto decl = txn.declaration(run.flow_type(), run.declaration_version());
    if (!decl) return bad(run.flow_id() + " has no declaration version");
    const SearchDoc want = build_search_doc(txn, run, decl->declaration());
    auto have = txn.search_doc(run.flow_id(), run.run_id());
    if (!have || !MessageDifferencer::Equals(*have, want))
      return bad(run.flow_id() + "/" + run.run_id() + ": its search doc is not its state's");
    for (auto& e : search_entries(want)) entries.insert(std::move(e));
    docs.insert(search_keys::doc(run.flow_id(), run.run_id()));
  }
  std::set<std::string> stored_docs, stored_entries;
  for (auto& [k, v] : kv.scan(search_keys::kDocPrefix)) stored_docs.insert(k);
  for (auto& [k, v] : kv.scan(search_keys::kEntryPrefix)) stored_entries.insert(k);
  if (stored_docs != docs) return bad("a search doc is stored for no run, or a run has none");
  if (stored_entries != entries) return bad("the search entries are not the docs' entries");
  std::map<std::string, std::set<std::string>> declared;  // index key -> Flow types
  for (auto& [k, v] : kv.scan("~dl/")) {                  // bounded by the Flow types
    auto latest = txn.declaration(k.substr(4), 0);
    if (!latest) return bad("a latest declaration is missing");
    for (const auto& a : latest->declaration().attributes())
      if (a.index().type() != INDEX_TYPE_UNSPECIFIED)
        declared[std::string(index_key_of(a))].insert(latest->declaration().flow_type());
  }
  std::map<std::string, std::set<std::string>> registered;
  for (auto& [k, v] : kv.scan(search_keys::kIndexKeyPrefix)) {
    const IndexKeyEntry e = parsed<IndexKeyEntry>(v);
    registered[e.index_key()].insert(e.flow_types().begin(), e.flow_types().end());
  }
  if (declared != registered) return bad("the index keys in use are not the live declarations'");
  return Status::ok();
}

StateKeys run_state(KvStore& kv, const RunKey& run) {
  StateKeys out;
  const std::string run_key = keys::run(run.flow_id, run.run_id);
  if (auto v = kv.get(run_key)) out[run_key] = *v;
  for (const std::string& prefix :
       {keys::steps_prefix(run.flow_id, run.run_id), keys::queue_prefix(run.flow_id, run.run_id),
        keys::run_messages_prefix(run.flow_id, run.run_id),
        keys::attributes_prefix(run.flow_id, run.run_id),
        keys::rpcs_prefix(run.flow_id, run.run_id)}) {
    for (auto& [k, v] : kv.scan(prefix)) out[k] = v;  // bounded by the run's keys
  }
  return out;
}

StateKeys folded_state(const std::vector<RunDelta>& deltas, size_t count) {
  MemoryKv folded;
  KvFlowTxn into(folded);
  store_image(into, fold_journal(deltas, count));
  return StateKeys(folded.data().begin(), folded.data().end());
}

Status check_state(KvStore& kv, JournalCheck journals) {
  Indexes ix = load_indexes(kv);
  std::set<std::string> used_timers, used_running;
  std::set<std::pair<std::string, uint64_t>> used_queued;
  for (auto& [rk, rv] : kv.scan(keys::kRunPrefix)) {
    const Run run = parsed<Run>(rv);
    std::set<std::string> listed(run.active().begin(), run.active().end());
    if (listed.size() != static_cast<size_t>(run.active_size()))
      return bad(run.flow_id() + " lists an active execution twice");
    std::map<std::string, uint32_t> per_type;
    std::set<std::string> found_active;
    std::map<Holder, LockUser> users;
    KvFlowTxn txn(kv);
    auto decl = txn.declaration(run.flow_type(), run.declaration_version());
    if (!decl) return bad(run.flow_id() + " has no declaration version");
    for (auto& [sk, sv] : kv.scan(keys::steps_prefix(run.flow_id(), run.run_id()))) {
      const StepExecution s = parsed<StepExecution>(sv);
      per_type[s.step_type()]++;
      if (active(s.phase())) found_active.insert(s.step_execution_id());
      if (active(s.phase()) && s.method().state() != TASK_STATE_UNSPECIFIED &&
          s.method().state() != TASK_BACKOFF) {
        const auto& o =
            s.method().method() == WAIT_FOR ? s.options().wait_for() : s.options().execute();
        users[{s.step_execution_id(), s.method().method()}] = {
            s.method().state(), {o.lock_keys().begin(), o.lock_keys().end()}};
      }
      if (auto st = check_step(run, s, ix, used_timers, used_running, used_queued); !st.is_ok())
        return st;
      if (auto st = check_sub_flow_conditions(txn, s); !st.is_ok()) return st;
    }
    if (found_active != listed) return bad(run.flow_id() + ": the active list is wrong");
    // Executions that ended in the runs this one continues are counted, not stored.
    for (const auto& b : run.counters_before()) per_type[b.step_type()] += b.count();
    for (const auto& c : run.counters()) {
      if (per_type[c.step_type()] != c.count())
        return bad(run.flow_id() + ": " + c.step_type() + " has " +
                   std::to_string(per_type[c.step_type()]) + " executions; its counter says " +
                   std::to_string(c.count()));
    }
    TimerKey k;
    k.set_flow_id(run.flow_id());
    k.set_run_id(run.run_id());
    if (auto st = check_timeout_handler(run, ix, used_timers, used_running, used_queued);
        !st.is_ok())
      return st;
    if (run.status() == FLOW_RUNNING && run.options().timeout_ms() > 0 && !run.timeout_handled()) {
      k.set_kind(FLOW_TIMEOUT);
      const std::string key = keys::timer(k, later_ms(run.start_ms(), run.options().timeout_ms()));
      if (!ix.timers.contains(key)) return bad(run.flow_id() + " has no flow timeout timer");
      used_timers.insert(key);
    }
    if (run.start_pending()) {
      if (run.status() != FLOW_RUNNING) return bad("a closed run has a pending start");
      k.set_kind(START_DELAY);
      const std::string key =
          keys::timer(k, later_ms(run.start_ms(), run.options().start_delay_ms()));
      if (!ix.timers.contains(key)) return bad(run.flow_id() + " has no start-delay timer");
      used_timers.insert(key);
    }
    if (run.retry_at_ms() != 0) {  // a Flow retry: its timer, until the retry starts
      if (run.status() == FLOW_RUNNING) return bad(run.flow_id() + " runs with a retry pending");
      if (run.next_run_id().empty()) return bad(run.flow_id() + " retries without a run ID");
      k.set_kind(FLOW_RETRY);
      const std::string key = keys::timer(k, run.retry_at_ms());
      // The entry may be gone: a later start's run, deleted by retention.
      auto entry = txn.flow_id(run.flow_id());
      if (entry && entry->run_id() == run.run_id() && !ix.timers.contains(key))
        return bad(run.flow_id() + " waits for a Flow retry without its timer");
      if (ix.timers.contains(key)) used_timers.insert(key);
    }
    if (auto st = check_retention(run, ix, used_timers); !st.is_ok()) return st;
    if (auto st = check_parents(txn, run); !st.is_ok()) return st;
    if (auto st = check_queues(kv, run); !st.is_ok()) return st;
    // RPCs: the open ones are listed, indexed, timed and have an attempt.
    std::set<std::string> open, done;
    for (auto& [pk, pv] : kv.scan(keys::rpcs_prefix(run.flow_id(), run.run_id()))) {
      const RpcExecution x = parsed<RpcExecution>(pv);
      const std::string id = run.flow_id() + " RPC " + x.rpc_id();
      const auto& m = x.method();
      if (x.done()) {
        done.insert(x.rpc_id());
        if (m.state() != TASK_STATE_UNSPECIFIED) return bad(id + " is done but has a task");
        continue;
      }
      open.insert(x.rpc_id());
      if (run.status() != FLOW_RUNNING) return bad(id + " is open in a closed run");
      const RpcDeclaration* d = nullptr;
      for (const auto& r : decl->declaration().rpcs())
        if (r.name() == x.name()) d = &r;
      if (d == nullptr) return bad(id + " is not declared");
      users[{x.rpc_id(), RPC}] = {m.state(), {d->lock_keys().begin(), d->lock_keys().end()}, true};
      TaskRef ref;
      ref.set_flow_id(run.flow_id());
      ref.set_run_id(run.run_id());
      ref.set_step_execution_id(x.rpc_id());
      ref.set_method(RPC);
      ref.set_attempt(1);
      const std::string open_key = keys::open_rpc(run.flow_id(), run.run_id(), x.rpc_id());
      if (!ix.open_rpcs.erase(open_key)) return bad(id + " is open but not indexed");
      TimerKey k;
      k.set_flow_id(run.flow_id());
      k.set_run_id(run.run_id());
      k.set_kind(RPC_DEADLINE);
      k.set_step_execution_id(x.rpc_id());
      const std::string timer = keys::timer(k, x.deadline_ms());
      if (!ix.timers.contains(timer)) return bad(id + " has no deadline timer");
      used_timers.insert(timer);
      if (m.state() == TASK_RUNNING) {
        auto it = ix.running.find(m.task_id());
        if (it == ix.running.end() || !MessageDifferencer::Equals(it->second, ref))
          return bad(id + " runs task " + m.task_id() + ", which is not indexed as running");
        used_running.insert(m.task_id());
      } else if (m.state() == TASK_QUEUED) {
        auto it = ix.queued.find({run.flow_type(), m.queue_seq()});
        if (it == ix.queued.end() || !MessageDifferencer::Equals(it->second, ref))
          return bad(id + " is queued but not in its type's task queue");
        used_queued.insert(it->first);
      } else if (m.state() != TASK_LOCKED) {
        return bad(id + " is open without a task");
      }
    }
    if (open != std::set<std::string>(run.rpcs_open().begin(), run.rpcs_open().end()) ||
        static_cast<size_t>(run.rpcs_open_size()) != open.size())
      return bad(run.flow_id() + ": the open RPC list is wrong");
    if (done != std::set<std::string>(run.rpcs_done().begin(), run.rpcs_done().end()) ||
        static_cast<size_t>(run.rpcs_done_size()) != done.size())
      return bad(run.flow_id() + ": the done RPC list is wrong");
    if (done.size() > kRpcsDoneKept) return bad(run.flow_id() + " keeps too many done RPCs");
    if (auto st = check_locks(run, users); !st.is_ok()) return st;
    if (run.status() != FLOW_RUNNING && (run.locks_size() > 0 || run.lock_waiters_size() > 0))
      return bad(run.flow_id() + " is closed but holds lock keys");
    const size_t stored = kv.scan(keys::attributes_prefix(run.flow_id(), run.run_id())).size();
    if (stored != run.attribute_count())
      return bad(run.flow_id() + " stores " + std::to_string(stored) +
                 " Attributes; its count says " + std::to_string(run.attribute_count()));
    if (stored > kAttributesMax) return bad(run.flow_id() + " stores too many Attributes");
    if (journals == JournalCheck::kAll) {
      if (auto st = check_journal(kv, run); !st.is_ok()) return st;
    }
  }
  if (auto st = check_no_orphans(kv); !st.is_ok()) return st;
  if (!ix.open_rpcs.empty()) return bad("an RPC is indexed as open that no run has open");
  if (used_timers.size() != ix.timers.size()) return bad("a timer is indexed that nothing uses");
  if (used_running.size() != ix.running.size())
    return bad("an attempt is indexed as running that no execution runs");
  if (used_queued.size() != ix.queued.size())
    return bad("a task is queued that no execution waits for");
  if (auto st = check_sync_entries(kv); !st.is_ok()) return st;
  return check_search_index(kv);
}

}  // namespace dex::flow
