// The flow rules (src/flow/flow_rules.h) fed arbitrary records. The input is
// a sequence of frames, each a 2-byte little-endian length and a serialized
// dex.flow.FlowRecord (a frame that does not parse is skipped), applied to a
// state that already holds a declaration and a running flow, so that most
// records reach the rules rather than "no such run". The declaration has
// Attributes, lock keys (A's Execute, B's WaitFor, RPC "p") and RPCs, so
// SetAttributes, InvokeRpc, RPC results and RPC deadlines reach their rules
// too; B's waits may name SubFlow conditions (a child of type T, nested
// further by its own waits) and starts a Flow retry policy, so children,
// reuse policies, parent notifications and Flow retry timers reach theirs; T
// has a timeout handler (reads s), so a start with timeout policy HANDLER
// reaches the handler's rules when its timeout fires. T syncs s to the
// Attribute Store "st", so writes leave SyncEntries and AttributeStoreSynced
// records trim them. TimeTravel records start new runs of f (or of a child)
// from points of their latest run's journal. UpdateFlowConfig records (valid
// or not: unknown, repeated or set-and-cleared field names, bad durabilities,
// Attribute Store changes, closed and missing runs) change a run's config,
// and a lowered history threshold continues it as new.
// After every record:
//  - the rules did not crash or trip an invariant (DEX_INVARIANT aborts);
//  - check_state holds;
//  - a refused record without assignments changed nothing;
//  - an applied TimeTravel linked both runs, the Flow ID names the new run,
//    and the new run holds the point's Attributes and Step executions (the
//    old run's journal folded to the point) and no more queued messages;
//  - an applied UpdateFlowConfig wrote one FLOW_CONFIG_UPDATED, first, whose
//    old config was the run's and whose new config is the run's now: each
//    field the update set as it set it, each it cleared as the declaration
//    has it, the others as they were; its repeat (same request ID) is
//    unchanged and changes nothing;
//  - no running run's history reached its config's threshold without a
//    continue-as-new pending (unless it completes gracefully).
// At the end, replaying the same records into an empty state gives the same
// state, and recovery leaves no running attempt, no open RPC and a
// consistent state.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flow/flow_rules.h"
#include "flow/kv_txn.h"
#include "flow/run_journal.h"
#include "flow/state_check.h"
#include "flow/time_travel.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"

namespace dex::fuzz {
namespace {

using namespace dex::flow;

constexpr size_t kRecordsMax = 64;

std::vector<FlowRecord> prelude() {
  std::vector<FlowRecord> out(2);
  FlowDeclaration* d = out[0].mutable_declare_flows()->add_declarations();
  d->set_flow_type("T");
  d->set_start_step_type("A");
  auto* a = d->add_steps();
  a->set_step_type("A");
  a->mutable_options()->mutable_execute()->add_lock_keys("k");
  a->add_attribute_reads("s");
  auto* b = d->add_steps();
  b->set_step_type("B");
  b->set_has_wait_for(true);
  b->mutable_options()->mutable_wait_for()->add_lock_keys("k");
  d->set_attribute_store("st");  // s syncs: its writes leave SyncEntries
  auto* attr = d->add_attributes();
  attr->set_key("s");
  attr->set_type(ATTRIBUTE_STRING);
  attr->set_sync(true);
  attr = d->add_attributes();
  attr->set_key("t");
  attr->set_type(ATTRIBUTE_JSON);
  attr->set_is_map(true);
  auto* rpc = d->add_rpcs();
  rpc->set_name("p");
  rpc->add_lock_keys("k");
  rpc->add_attribute_reads("t");
  d->add_rpcs()->set_name("q");
  d->add_channels()->set_name("c");
  d->set_has_timeout_handler(true);
  d->mutable_on_timeout()->add_attribute_reads("s");
  auto* m = d->add_channels();
  m->set_name("m");
  m->set_is_map(true);
  auto* s = out[1].mutable_start_flow();
  s->set_flow_id("f");
  s->set_run_id("r");
  s->set_flow_type("T");
  s->set_at_unix_ms(1'000);
  s->set_retention_ms(5'000);  // once it closes, a RETENTION timer deletes it
  out[1].set_at_unix_ms(1'000);
  auto* assign = out[1].add_assignments();
  assign->mutable_task()->set_flow_id("f");
  assign->mutable_task()->set_run_id("r");
  assign->mutable_task()->set_step_execution_id("A-1");
  assign->mutable_task()->set_method(EXECUTE);
  assign->mutable_task()->set_attempt(1);
  assign->set_task_id("t");
  assign->set_worker_id("w");
  return out;
}

// An applied TimeTravel `t` against the old run's record and journal as they
// were before it: the new run starts from the fold of that journal to the point
// (tests/flow/flow_sim_test.cc checks every field; this is the cheap core).
void check_travel(KvStore& kv, const TimeTravel& t, const std::optional<Run>& old,
                  const std::vector<RunDelta>& journal, size_t i) {
  FUZZ_CHECK(old.has_value() && !journal.empty(), "record {} traveled from no journaled run", i);
  TravelPoint point;
  const ApplyResult resolved = resolve_point(journal, *old, t.point(), &point);
  FUZZ_CHECK(resolved.kind == ApplyKind::kApplied, "record {} traveled to a point it lacks: {}", i,
             resolved.message);
  const RunImage image = fold_journal(journal, point.deltas);
  KvFlowTxn txn(kv);
  auto run = txn.run(t.flow_id(), t.new_run_id());
  auto from = txn.run(t.flow_id(), t.run_id());
  auto entry = txn.flow_id(t.flow_id());
  FUZZ_CHECK(run && from && entry && entry->run_id() == t.new_run_id(),
             "record {}: the Flow ID does not name the new run", i);
  FUZZ_CHECK(
      run->traveled_from_run_id() == t.run_id() && from->traveled_to_run_id() == run->run_id(),
      "record {}: the runs are not linked", i);
  FUZZ_CHECK(from->status() == (old->status() == FLOW_RUNNING ? FLOW_TERMINATED : old->status()),
             "record {}: the old run is {}", i, FlowStatus_Name(from->status()));
  std::map<std::pair<std::string, std::string>, std::string> attributes;
  for (const auto& a : txn.attributes(t.flow_id(), t.new_run_id(), ""))
    attributes[{a.key(), a.instance_key()}] = a.value().SerializeAsString();
  std::map<std::pair<std::string, std::string>, std::string> want;
  for (const auto& [ki, v] : image.attributes) want[ki] = v.SerializeAsString();
  FUZZ_CHECK(attributes == want, "record {}: {} Attributes at the point, {} in the new run", i,
             want.size(), attributes.size());
  // The point's executions, plus the start Step if a due start delay made it now.
  for (const auto& [id, s] : image.steps) {  // bounded by the run's executions
    auto now = txn.step(t.flow_id(), t.new_run_id(), id);
    FUZZ_CHECK(now && now->step_type() == s.step_type(), "record {}: {} is not in the new run", i,
               id);
  }
  const int active = image.run.active_size();
  const bool start_created = image.run.start_pending() && !run->start_pending();
  FUZZ_CHECK(run->active_size() == active || (start_created && run->active_size() == active + 1),
             "record {}: {} active executions at the point, {} in the new run", i, active,
             run->active_size());
  // Queued messages: the point's, less what waits met at once took.
  uint64_t queued = 0;
  for (const auto& [key, q] : txn.queues(t.flow_id(), t.new_run_id()))
    queued += q.next_seq() - q.first_seq();
  FUZZ_CHECK(queued <= image.messages.size(), "record {}: {} messages at the point, {} queued now",
             i, image.messages.size(), queued);
}

// A run that continued as new: the new run is linked both ways, is the Flow
// ID's latest, and holds the old one's Attributes and active executions.
void check_continued(KvStore& kv, const std::string& flow_id, const std::string& run_id, size_t i) {
  KvFlowTxn txn(kv);
  auto old = txn.run(flow_id, run_id);
  FUZZ_CHECK(old.has_value() && !old->next_run_id().empty(), "record {}: {} continued to no run", i,
             run_id);
  auto run = txn.run(flow_id, old->next_run_id());
  FUZZ_CHECK(run.has_value() && run->continued_from_run_id() == run_id,
             "record {}: {} is not linked back to {}", i, old->next_run_id(), run_id);
  FUZZ_CHECK(txn.flow_id(flow_id)->run_id() == run->run_id() || run->status() != FLOW_RUNNING,
             "record {}: the Flow ID does not name the running new run", i);
  const auto a = txn.attributes(flow_id, run_id, "");
  const auto b = txn.attributes(flow_id, run->run_id(), "");
  FUZZ_CHECK(a.size() == b.size(), "record {}: {} Attributes became {}", i, a.size(), b.size());
  for (size_t k = 0; k < a.size() && k < b.size(); ++k)  // bounded by kAttributesMax
    FUZZ_CHECK(a[k].SerializeAsString() == b[k].SerializeAsString(),
               "record {}: Attribute {} differs in the new run", i, a[k].key());
  for (const auto& id : run->active()) {  // bounded by kActiveStepsMax
    auto s = txn.step(flow_id, run_id, id);
    FUZZ_CHECK(s.has_value() && s->phase() == PHASE_CANCELED,
               "record {}: carried execution {} did not end in the old run", i, id);
  }
}

// The FlowConfig field names clear_fields takes (docs/flow-rules.md, "FlowConfig").
constexpr const char* kConfigFields[] = {"continue_as_new_after_events",
                                         "continue_as_new_after_bytes", "default_durability",
                                         "attribute_store", "index_active_step_types"};

// Field `f` of a config as bytes (unset and zero alike), and whether `c` sets it.
std::string config_field(const FlowConfig& c, std::string_view f) {
  if (f == "continue_as_new_after_events") return std::to_string(c.continue_as_new_after_events());
  if (f == "continue_as_new_after_bytes") return std::to_string(c.continue_as_new_after_bytes());
  if (f == "default_durability") return std::to_string(c.default_durability());
  if (f == "attribute_store") return c.attribute_store();
  return c.has_index_active_step_types() ? std::to_string(c.index_active_step_types()) : "unset";
}
bool config_sets(const FlowConfig& c, std::string_view f) {
  if (f == "index_active_step_types") return c.has_index_active_step_types();
  if (f == "attribute_store") return !c.attribute_store().empty();
  return config_field(c, f) != "0";
}

// An applied UpdateFlowConfig `u` of the run `before` was.
void check_config_update(KvStore& kv, const UpdateFlowConfig& u, const std::optional<Run>& before,
                         size_t i) {
  FUZZ_CHECK(before.has_value() && before->status() == FLOW_RUNNING,
             "record {}: a FlowConfig update of a run that was not running applied", i);
  KvFlowTxn txn(kv);
  auto run = txn.run(u.flow_id(), u.run_id());
  FUZZ_CHECK(run.has_value(), "record {}: the updated run is gone", i);
  std::vector<HistoryEvent> added;
  for (auto& [k, v] : kv.scan(keys::events_prefix(u.flow_id(), u.run_id()))) {
    HistoryEvent e;
    e.ParseFromString(v);
    if (e.seq() >= before->next_event()) added.push_back(std::move(e));
  }
  const auto updated = std::count_if(added.begin(), added.end(), [](const HistoryEvent& e) {
    return e.kind() == FLOW_CONFIG_UPDATED;
  });
  FUZZ_CHECK(updated == 1 && added.front().kind() == FLOW_CONFIG_UPDATED,
             "record {}: an applied FlowConfig update wrote {} FLOW_CONFIG_UPDATED events", i,
             updated);
  const HistoryEvent& e = added.front();
  FlowConfig was = before->config();
  was.set_attribute_store(before->attribute_store());
  FUZZ_CHECK(e.old_config().SerializeAsString() == was.SerializeAsString(),
             "record {}: FLOW_CONFIG_UPDATED's old config is not the run's", i);
  FUZZ_CHECK(e.new_config().SerializeAsString() == run->config().SerializeAsString() &&
                 run->attribute_store() == run->config().attribute_store(),
             "record {}: FLOW_CONFIG_UPDATED's new config is not the run's", i);
  auto decl = txn.declaration(run->flow_type(), run->declaration_version());
  FUZZ_CHECK(decl.has_value(), "record {}: the run's declaration is not stored", i);
  FlowConfig declared = decl->declaration().config();
  if (declared.attribute_store().empty())
    declared.set_attribute_store(decl->declaration().attribute_store());
  for (const char* f : kConfigFields) {
    const bool cleared =
        std::find(u.clear_fields().begin(), u.clear_fields().end(), f) != u.clear_fields().end();
    const FlowConfig& from = config_sets(u.config(), f) ? u.config() : cleared ? declared : was;
    FUZZ_CHECK(config_field(run->config(), f) == config_field(from, f),
               "record {}: the run's {} is {}, not {}", i, f, config_field(run->config(), f),
               config_field(from, f));
  }
}

// Every running run whose history reached a threshold of its config has a
// continue-as-new pending (a run completing gracefully does not continue).
void check_thresholds(KvStore& kv, size_t i) {
  for (auto& [k, v] : kv.scan(keys::kRunPrefix)) {  // bounded by the runs of the input
    Run run;
    run.ParseFromString(v);
    if (run.status() != FLOW_RUNNING || !run.continue_as_new_pending().empty() ||
        run.graceful_complete())
      continue;
    const FlowConfig& c = run.config();
    FUZZ_CHECK(c.continue_as_new_after_events() == 0 ||
                   run.next_event() < c.continue_as_new_after_events(),
               "record {}: run {} has {} events, its threshold is {}, and nothing is pending", i,
               run.run_id(), run.next_event(), c.continue_as_new_after_events());
    FUZZ_CHECK(
        c.continue_as_new_after_bytes() == 0 ||
            run.history_bytes() < c.continue_as_new_after_bytes(),
        "record {}: run {} has {} history bytes, its threshold is {}, and nothing is pending", i,
        run.run_id(), run.history_bytes(), c.continue_as_new_after_bytes());
  }
}

}  // namespace

int flow_rules(const uint8_t* data, size_t size) {
  std::vector<FlowRecord> records = prelude();
  const size_t first_input = records.size();
  for (size_t at = 0; at + 2 <= size && records.size() < first_input + kRecordsMax;) {
    const size_t len = data[at] | (static_cast<size_t>(data[at + 1]) << 8);
    at += 2;
    if (len > size - at) break;
    FlowRecord r;
    if (r.ParseFromArray(data + at, static_cast<int>(len))) records.push_back(std::move(r));
    at += len;
  }
  MemoryKv kv;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto before = kv.data();
    // A TimeTravel appends to the old run's journal: read it before.
    std::optional<Run> old;
    std::vector<RunDelta> journal;
    if (records[i].has_update_flow_config()) {
      const UpdateFlowConfig& u = records[i].update_flow_config();
      KvFlowTxn read(kv);
      old = read.run(u.flow_id(), u.run_id());
    }
    if (records[i].has_time_travel()) {
      const TimeTravel& t = records[i].time_travel();
      KvFlowTxn read(kv);
      old = read.run(t.flow_id(), t.run_id());
      if (old) journal = read.run_journal(t.flow_id(), t.run_id());
    }
    Effects fx;
    KvFlowTxn txn(kv);
    ApplyResult result = apply_record(txn, records[i], fx);
    if (records[i].has_time_travel() && result.kind == ApplyKind::kApplied)
      check_travel(kv, records[i].time_travel(), old, journal, i);
    if (records[i].has_update_flow_config() && result.kind == ApplyKind::kApplied) {
      check_config_update(kv, records[i].update_flow_config(), old, i);
      if (!records[i].update_flow_config().request_id().empty()) {  // a client's retry
        FlowRecord again = records[i];
        again.clear_assignments();
        const auto applied = kv.data();
        Effects fx_again;
        KvFlowTxn retry(kv);
        const ApplyResult repeat = apply_record(retry, again, fx_again);
        FUZZ_CHECK(repeat.kind == ApplyKind::kUnchanged && kv.data() == applied,
                   "record {}: a repeated FlowConfig update was {} or changed the state", i,
                   apply_kind_name(repeat.kind));
      }
    }
    for (const auto& c : fx.closed)  // bounded by the runs the record closed
      if (c.status == FLOW_CONTINUED_AS_NEW) check_continued(kv, c.flow_id, c.run_id, i);
    auto s = check_state(kv);
    FUZZ_CHECK(s.is_ok(), "record {}: {}", i, s.message());
    check_thresholds(kv, i);
    if (result.kind != ApplyKind::kApplied && records[i].assignments_size() == 0)
      FUZZ_CHECK(kv.data() == before, "record {} was {} ({}) but changed the state", i,
                 apply_kind_name(result.kind), result.message);
    if (i < first_input)
      FUZZ_CHECK(result.kind == ApplyKind::kApplied, "prelude record {}: {}", i, result.message);
  }
  MemoryKv replayed;
  for (const auto& r : records) {
    Effects fx;
    KvFlowTxn txn(replayed);
    apply_record(txn, r, fx);
  }
  FUZZ_CHECK(replayed.data() == kv.data(), "a replay of the same records differs");
  Effects fx;
  KvFlowTxn txn(kv);
  recover_attempts(txn, 5'000, fx);
  FUZZ_CHECK(txn.running().empty(), "an attempt still runs after recovery");
  FUZZ_CHECK(txn.open_rpcs().empty(), "an RPC is still open after recovery");
  auto s = check_state(kv);
  FUZZ_CHECK(s.is_ok(), "after recovery: {}", s.message());
  return 0;
}

DEX_FUZZ_ENTRY(flow_rules)

}  // namespace dex::fuzz
