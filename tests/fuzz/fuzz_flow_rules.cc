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
// records trim them.
// After every record:
//  - the rules did not crash or trip an invariant (DEX_INVARIANT aborts);
//  - check_state holds;
//  - a refused record without assignments changed nothing.
// At the end, replaying the same records into an empty state gives the same
// state, and recovery leaves no running attempt, no open RPC and a
// consistent state.
#include <vector>

#include "flow/flow_rules.h"
#include "flow/kv_txn.h"
#include "flow/state_check.h"
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
    Effects fx;
    KvFlowTxn txn(kv);
    ApplyResult result = apply_record(txn, records[i], fx);
    auto s = check_state(kv);
    FUZZ_CHECK(s.is_ok(), "record {}: {}", i, s.message());
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
