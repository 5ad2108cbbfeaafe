#include "corpus_seeds.h"

#include <cassert>
#include <cstdint>

#include "common/framing.h"
#include "dex/flow_records.pb.h"
#include "dex/records.pb.h"
#include "fuzz_util.h"
#include "lease/lease_record.h"
#include "log/log_format.h"
#include "snapshot/snapshot.h"

namespace dex::fuzz {
namespace {

const NodeId kNode("n1");
constexpr int64_t kAtUnixMs = 1'700'000'000'000;

std::string serialized(const google::protobuf::Message& m) {
  std::string out;
  bool ok = m.SerializeToString(&out);
  assert(ok);
  (void)ok;
  return out;
}

proto::LogRecord epoch_start_record(const std::string& holder, uint64_t previous_end) {
  proto::LogRecord r;
  auto* es = r.mutable_epoch_start();
  es->set_holder_process_id(holder);
  es->set_previous_end_slot(previous_end);
  es->set_at_unix_ms(kAtUnixMs);
  return r;
}

proto::LogBatch batch(uint64_t slot, uint64_t epoch, bool epoch_start, int opaque_records) {
  proto::LogBatch b;
  b.set_node_id(kNode.value);
  b.set_epoch(epoch);
  b.set_slot(slot);
  b.set_writer_process_id("host-1-" + std::to_string(epoch));
  b.set_write_id("w" + std::to_string(slot));
  if (epoch_start) *b.add_records() = epoch_start_record(b.writer_process_id(), slot);
  for (int i = 0; i < opaque_records; ++i)
    b.add_records()->set_opaque("payload " + std::to_string(i));
  return b;
}

// One of each flow record kind, as the engine appends them (docs/flow-rules.md).
proto::LogBatch flow_batch() {
  proto::LogBatch b = batch(5, 2, false, 0);
  auto add = [&]() { return b.add_records()->mutable_flow(); };
  auto task = [](const std::string& exec, flow::Method method, uint32_t attempt) {
    flow::TaskRef t;
    t.set_flow_id("order-1");
    t.set_run_id("run-1");
    t.set_step_execution_id(exec);
    t.set_method(method);
    t.set_attempt(attempt);
    return t;
  };
  auto* declare = add();
  declare->set_proposal_id(1);
  auto* d = declare->mutable_declare_flows()->add_declarations();
  d->set_flow_type("Order");
  d->set_start_step_type("Charge");
  auto* charge = d->add_steps();
  charge->set_step_type("Charge");
  charge->mutable_options()->mutable_execute()->mutable_retry()->set_maximum_attempts(5);
  auto* ship = d->add_steps();
  ship->set_step_type("Ship");
  ship->set_has_wait_for(true);
  ship->mutable_options()->mutable_execute()->set_durability(flow::ASYNC);
  d->add_channels()->set_name("approval");
  declare->mutable_declare_flows()->set_at_unix_ms(kAtUnixMs);
  auto* start = add();
  start->set_proposal_id(2);
  auto* s = start->mutable_start_flow();
  s->set_flow_id("order-1");
  s->set_run_id("run-1");
  s->set_flow_type("Order");
  s->mutable_input()->set_data(R"({"n":1})");
  s->set_at_unix_ms(kAtUnixMs);
  auto* assigned = start->add_assignments();
  *assigned->mutable_task() = task("Charge-1", flow::EXECUTE, 1);
  assigned->set_task_id("f2.1");
  assigned->set_worker_id("worker-1");
  start->set_at_unix_ms(kAtUnixMs);
  auto* decided = add()->mutable_method_result();
  *decided->mutable_task() = task("Charge-1", flow::EXECUTE, 1);
  decided->set_task_id("f2.1");
  decided->set_outcome(flow::ATTEMPT_COMPLETED);
  decided->mutable_decision()->mutable_go_to()->add_movements()->set_step_type("Ship");
  decided->set_at_unix_ms(kAtUnixMs + 1);
  auto* waited = add()->mutable_method_result();
  *waited->mutable_task() = task("Ship-1", flow::WAIT_FOR, 1);
  waited->set_task_id("f2.2");
  waited->set_outcome(flow::ATTEMPT_COMPLETED);
  waited->mutable_wait()->set_kind(flow::ANY_OF);
  auto* channel = waited->mutable_wait()->add_conditions()->mutable_channel();
  channel->set_channel("approval");
  channel->set_match(flow::FOR_ONE);
  waited->mutable_wait()->add_conditions()->mutable_timer()->set_duration_ms(86'400'000);
  waited->mutable_locals()->set_data("seen");
  waited->set_at_unix_ms(kAtUnixMs + 2);
  auto* withdrawn = add()->mutable_attempt_withdrawn();
  *withdrawn->mutable_task() = task("Ship-1", flow::EXECUTE, 1);
  withdrawn->set_task_id("f2.3");
  auto* timer = add()->mutable_timer_fired();
  timer->mutable_key()->set_flow_id("order-1");
  timer->mutable_key()->set_run_id("run-1");
  timer->mutable_key()->set_kind(flow::CONDITION);
  timer->mutable_key()->set_step_execution_id("Ship-1");
  timer->mutable_key()->set_condition_index(1);
  timer->set_fire_at_ms(kAtUnixMs + 86'400'002);
  auto* publish = add()->mutable_publish();
  publish->set_flow_id("order-1");
  publish->mutable_publish()->set_channel("approval");
  publish->mutable_publish()->add_messages()->set_data("approved");
  publish->set_request_id("req-1");
  auto* skip = add()->mutable_skip_timer();
  skip->set_flow_id("order-1");
  skip->set_step_execution_id("Ship-1");
  skip->set_condition_index(1);
  auto* stop = add()->mutable_stop_flow();
  stop->set_flow_id("order-1");
  stop->set_mode(flow::STOP_FAIL);
  stop->set_reason("out of stock");
  return b;
}

void log_batch_seeds(std::vector<Seed>& out) {
  auto add = [&](std::string name, bool raw, const std::string& key, std::string body) {
    out.push_back({"log_batch", std::move(name), join_input(raw, key, true, body)});
  };
  const std::string key0 = slot_key(kNode, Slot(0));
  const std::string key5 = slot_key(kNode, Slot(5));
  const proto::LogBatch first = batch(0, 1, true, 0);
  const proto::LogBatch flows = flow_batch();
  add("epoch_start_payload", false, key0, serialized(first));
  add("epoch_start_object", true, key0, encode_batch(first));
  add("flow_records_payload", false, key5, serialized(flows));
  add("flow_records_object", true, key5, encode_batch(flows));
  add("opaque_records_payload", false, slot_key(kNode, Slot(7)), serialized(batch(7, 3, false, 3)));
  add("empty_batch_payload", false, key0, "");
  // The frame checks, one each.
  std::string object = encode_batch(first);
  add("edge_empty_object", true, key0, "");
  add("edge_short_object", true, key0, object.substr(0, 7));
  add("edge_torn_tail", true, key0, object.substr(0, object.size() - 3));
  std::string flipped = object;
  flipped.back() = static_cast<char>(flipped.back() ^ 0x40);
  add("edge_crc_mismatch", true, key0, flipped);
  std::string version = object;
  version[4] = 2;
  add("edge_version_2", true, key0, version);
  add("edge_lease_magic", true, key0, frame(kLeaseMagic, serialized(first)));
  add("edge_length_overflow", true, key0,
      std::string(kLogBatchMagic) + std::string("\x01\xff\xff\xff\xff\0\0\0\0", 9));
  add("edge_not_protobuf", false, key0, "\xff\xff\xff\xff\xff");
  // Keys parse_slot_key refuses.
  add("key_other_node", false, "nodes/n2/log/00000000000000000001", serialized(first));
  add("key_overflow", false, "nodes/n1/log/99999999999999999999", serialized(first));
  add("key_max", false, slot_key(kNode, Slot(UINT64_MAX)), serialized(first));
  add("key_short", false, "nodes/n1/log/1", serialized(first));
}

std::string join_slots(const std::vector<std::string>& pieces) {
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0) out += "|SLOT|";
    out += pieces[i];
  }
  return out;
}

void log_reader_seeds(std::vector<Seed>& out) {
  // Mode byte: bit 0 raw objects, bits 1-3 the reader's start slot.
  auto add = [&](std::string name, uint8_t start, bool raw,
                 const std::vector<proto::LogBatch*>& slots) {
    std::vector<std::string> pieces;
    for (auto* b : slots) {
      pieces.push_back(b == nullptr ? std::string() : raw ? encode_batch(*b) : serialized(*b));
    }
    std::string bytes(1, static_cast<char>((start << 1) | (raw ? 1 : 0)));
    out.push_back({"log_reader", std::move(name), bytes + join_slots(pieces)});
  };
  proto::LogBatch s0 = batch(0, 1, true, 0), s1 = batch(1, 1, false, 2), s2 = batch(2, 1, false, 1);
  add("one_epoch", 0, false, {&s0, &s1, &s2});
  add("one_epoch_objects", 0, true, {&s0, &s1, &s2});
  // A fenced epoch-1 writer lands at slot 3 after epoch 2 started at slot 2.
  proto::LogBatch e2 = batch(2, 2, true, 0), late = batch(3, 1, false, 1),
                  e2b = batch(4, 2, false, 1);
  add("fenced_writer", 0, false, {&s0, &s1, &e2, &late, &e2b});
  add("fenced_writer_from_3", 3, false, {&s0, &s1, &e2, &late, &e2b});
  add("hole", 0, false, {&s0, &s1, nullptr, &late});
  add("collected_prefix", 2, false, {nullptr, nullptr, &e2, &e2b});
  proto::LogBatch liar = batch(7, 1, false, 1);
  add("slot_mismatch", 0, false, {&s0, &liar});
  proto::LogBatch no_start = batch(1, 2, false, 1);
  add("new_epoch_without_epoch_start", 0, false, {&s0, &no_start});
  proto::LogBatch zero = batch(1, 0, false, 1);
  add("epoch_zero", 0, false, {&s0, &zero});
  proto::LogBatch other = batch(1, 1, false, 1);
  other.set_node_id("n2");
  add("other_node", 0, false, {&s0, &other});
}

LeaseRecordValue lease(uint64_t epoch, uint64_t renewals, bool released) {
  LeaseRecordValue r;
  r.node_id = kNode;
  r.epoch = Epoch(epoch);
  r.holder_process_id = ProcessId("host-1-4242-9f3a");
  r.duration = seconds(10);
  r.renewal_count = renewals;
  r.released = released;
  r.write_id = "w-" + std::to_string(epoch) + "-" + std::to_string(renewals);
  return r;
}

void lease_record_seeds(std::vector<Seed>& out) {
  auto add = [&](std::string name, bool raw, std::string body) {
    out.push_back({"lease_record", std::move(name), join_input(raw, "", false, body)});
  };
  auto payload = [](const std::string& object) {
    auto p = unframe(kLeaseMagic, object);
    assert(p.is_ok());
    return std::string(p.value());
  };
  const std::string acquired = encode_lease_record(lease(1, 0, false));
  add("acquired_object", true, acquired);
  add("acquired_payload", false, payload(acquired));
  add("renewed_payload", false, payload(encode_lease_record(lease(7, 123, false))));
  add("released_payload", false, payload(encode_lease_record(lease(8, 4, true))));
  proto::LeaseRecord pb;
  pb.set_node_id("n1");
  pb.set_epoch(3);
  pb.set_holder_process_id("p");
  add("edge_no_write_id", false, serialized(pb));
  pb.set_epoch(0);
  add("edge_epoch_zero", false, serialized(pb));
  add("edge_empty_payload", false, "");
  add("edge_torn_tail", true, acquired.substr(0, acquired.size() - 1));
  add("edge_log_magic", true, frame(kLogBatchMagic, payload(acquired)));
}

proto::SnapshotManifest manifest(uint64_t slot) {
  proto::SnapshotManifest m;
  m.set_node_id(kNode.value);
  m.set_slot(slot);
  m.set_epoch(4);
  m.set_writer_process_id("host-1-4242-9f3a");
  m.set_write_id("w-manifest");
  m.set_created_unix_ms(kAtUnixMs);
  const char* names[] = {"CURRENT", "MANIFEST-000005", "OPTIONS-000007", "000009.sst"};
  for (int i = 0; i < 4; ++i) {
    auto* f = m.add_files();
    f->set_name(names[i]);
    f->set_sha256(std::string(63, "0123456789abcdef"[i]) + "a");
    f->set_key(snapshot_file_prefix(kNode) + f->sha256());
    f->set_size(100u * (i + 1));
  }
  return m;
}

void snapshot_manifest_seeds(std::vector<Seed>& out) {
  auto add = [&](std::string name, bool raw, const std::string& key, std::string body) {
    out.push_back({"snapshot_manifest", std::move(name), join_input(raw, key, true, body)});
  };
  const std::string key = snapshot_manifest_key(kNode, Slot(42));
  const proto::SnapshotManifest m = manifest(42);
  add("valid_object", true, key, encode_snapshot_manifest(m));
  add("valid_payload", false, key, serialized(m));
  add("key_other_slot", false, snapshot_manifest_key(kNode, Slot(41)), serialized(m));
  add("key_other_node", false, "nodes/n2/snapshots/manifests/00000000000000000042", serialized(m));
  add("key_junk", false, "nodes/n1/snapshots/manifests/0000000000000000004x", serialized(m));
  proto::SnapshotManifest escape = m;
  escape.mutable_files(0)->set_name("../../etc/passwd");
  add("edge_escaping_name", false, key, serialized(escape));
  proto::SnapshotManifest twice = m;
  *twice.add_files() = m.files(0);
  add("edge_file_twice", false, key, serialized(twice));
  proto::SnapshotManifest bad_sha = m;
  bad_sha.mutable_files(1)->set_sha256("ABC");
  add("edge_bad_sha256", false, key, serialized(bad_sha));
  proto::SnapshotManifest no_files = m;
  no_files.clear_files();
  add("edge_no_files", false, key, serialized(no_files));
}

void config_seeds(std::vector<Seed>& out) {
  auto add = [&](std::string name, std::string text) {
    out.push_back({"config", std::move(name), std::move(text)});
  };
  add("dev_override.yaml", R"(nodeId: dev-2
api:
  listen: 127.0.0.1:8802
lease:
  duration: 15s
  failIfHeld: true
dev:
  durabilityMode: processCrashSafe
standby:
  mode: cold
snapshots:
  interval: 0
  everyRecords: 5000
  keep: 3
)");
  add("local.yaml", R"(nodeId: local-1
local:
  dataDir: /var/lib/dex
  durabilityMode: strict
api: {listen: "0.0.0.0:8801"}
lease: {duration: 2m}
)");
  add("serve_s3.yaml", R"(nodeId: prod-1
api:
  listen: 0.0.0.0:8801
objectStore:
  type: s3
  bucket: dex-state
  prefix: team-a
  endpoint: http://127.0.0.1:9000
  region: eu-west-1
  addressing: virtualHost
  credentials:
    profile: dex
localStore:
  path: /var/lib/dex/store
lease:
  duration: 10s
  failIfHeld: false
standby:
  mode: hot
  heldLeasePollInterval: 250ms
  stepDownHoldOff: 5s
  laggingTakeoverDelay: 1500ms
  behindLagThreshold: 10s
metrics:
  listen: 0.0.0.0:9100
lifecycle:
  attemptDrainTimeout: 30s
snapshots:
  interval: 10m
  everyRecords: 100000
  keep: 2
admin:
  enabled: true
auth:
  adminTokenSha256:
    - 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
)");
  add("serve_filesystem.yaml", R"(nodeId: fs-1
objectStore: {type: filesystem, path: /srv/dex/objects, durability: processCrashSafe}
localStore: {path: /srv/dex/store}
)");
  add("duration_first_line.txt", "1500ms\nnodeId: x\n");
  add("edge_empty.yaml", "");
  add("edge_unknown_key.yaml", "nodeId: a\nstandby:\n  mod: cold\n");
  add("edge_anchor.yaml", "a: &x {nodeId: b}\nlease: *x\n");
}

// Frames of flow records (fuzz_flow_rules.cc): a 2-byte little-endian length,
// then a serialized dex.flow.FlowRecord. The target's prelude has declared
// Flow type T (A: Execute only, start, lock key k, reads s; B: WaitFor with
// lock key k; Channel c, ChannelMap m; Attribute s (string), AttributeMap t
// (JSON); RPC p (lock key k, reads t) and q; a timeout handler reading s) and
// started flow f run r with A-1's attempt 1 running as task "t", holding k.
std::string frame(const google::protobuf::Message& m) {
  const std::string bytes = serialized(m);
  std::string out;
  out.push_back(static_cast<char>(bytes.size() & 0xff));
  out.push_back(static_cast<char>(bytes.size() >> 8));
  return out + bytes;
}

flow::TaskRef flow_task(const std::string& exec, flow::Method method, uint32_t attempt) {
  flow::TaskRef t;
  t.set_flow_id("f");
  t.set_run_id("r");
  t.set_step_execution_id(exec);
  t.set_method(method);
  t.set_attempt(attempt);
  return t;
}

flow::FlowRecord flow_result(const std::string& exec, flow::Method method,
                             const std::string& task_id) {
  flow::FlowRecord r;
  auto* m = r.mutable_method_result();
  *m->mutable_task() = flow_task(exec, method, 1);
  m->set_task_id(task_id);
  m->set_outcome(flow::ATTEMPT_COMPLETED);
  m->set_at_unix_ms(2'000);
  return r;
}

void flow_rules_seeds(std::vector<Seed>& out) {
  auto add = [&](std::string name, std::string bytes) {
    out.push_back({"flow_rules", std::move(name), std::move(bytes)});
  };
  // A-1 goes to B twice (the first B's WaitFor handed out in the same record);
  // B-1 waits for c or a Timer; a client publishes; the Timer fires.
  flow::FlowRecord go = flow_result("A-1", flow::EXECUTE, "t");
  for (int i = 0; i < 2; ++i)
    go.mutable_method_result()->mutable_decision()->mutable_go_to()->add_movements()->set_step_type(
        "B");
  go.set_at_unix_ms(2'000);
  auto* a = go.add_assignments();
  *a->mutable_task() = flow_task("B-1", flow::WAIT_FOR, 1);
  a->set_task_id("t2");
  a->set_worker_id("w");
  flow::FlowRecord wait = flow_result("B-1", flow::WAIT_FOR, "t2");
  auto* w = wait.mutable_method_result()->mutable_wait();
  w->set_kind(flow::ANY_OF);
  auto* c = w->add_conditions()->mutable_channel();
  c->set_channel("c");
  c->set_match(flow::FOR_ONE);
  w->add_conditions()->mutable_timer()->set_duration_ms(500);
  flow::FlowRecord publish;
  publish.mutable_publish()->set_flow_id("f");
  publish.mutable_publish()->mutable_publish()->set_channel("c");
  publish.mutable_publish()->mutable_publish()->add_messages()->set_data("hello");
  flow::FlowRecord fire;
  auto* key = fire.mutable_timer_fired()->mutable_key();
  key->set_flow_id("f");
  key->set_run_id("r");
  key->set_kind(flow::CONDITION);
  key->set_step_execution_id("B-1");
  fire.mutable_timer_fired()->set_fire_at_ms(2'500);
  add("goto_wait_publish_timer", frame(go) + frame(wait) + frame(publish) + frame(fire));
  // A-1 fails twice (the retry's timer fires between), then decides to close.
  flow::FlowRecord failed = flow_result("A-1", flow::EXECUTE, "t");
  failed.mutable_method_result()->set_outcome(flow::ATTEMPT_FAILED);
  failed.mutable_method_result()->set_error("boom");
  flow::FlowRecord retry;
  auto* rk = retry.mutable_timer_fired()->mutable_key();
  rk->set_flow_id("f");
  rk->set_run_id("r");
  rk->set_kind(flow::RETRY);
  rk->set_step_execution_id("A-1");
  rk->set_method(flow::EXECUTE);
  retry.mutable_timer_fired()->set_fire_at_ms(3'000);
  flow::FlowRecord done = flow_result("A-1", flow::EXECUTE, "t");
  done.mutable_method_result()->mutable_decision()->mutable_graceful_complete()->set_data("ok");
  add("fail_retry_complete", frame(failed) + frame(retry) + frame(done));
  // Refused and stale records: an undeclared Step, a stop, a late result.
  flow::FlowRecord bad = flow_result("A-1", flow::EXECUTE, "t");
  bad.mutable_method_result()->mutable_decision()->mutable_go_to()->add_movements()->set_step_type(
      "Z");
  flow::FlowRecord stop;
  stop.mutable_stop_flow()->set_flow_id("f");
  stop.mutable_stop_flow()->set_mode(flow::STOP_TERMINATE);
  add("refused_then_stopped", frame(bad) + frame(stop) + frame(done));
  // RPC p waits behind A-1 for k; a client sets s; A-1 writes t and goes to
  // B (whose WaitFor queues behind p); p runs, writes, publishes and starts a
  // B; RPC q's deadline passes; a bad SetAttributes is refused.
  flow::FlowRecord invoke;
  auto* i = invoke.mutable_invoke_rpc();
  i->set_flow_id("f");
  i->set_rpc_id("req:1");
  i->set_request_id("1");
  i->set_name("p");
  i->mutable_input()->set_data("in");
  i->set_timeout_ms(5'000);
  i->set_at_unix_ms(1'500);
  flow::FlowRecord set;
  auto* sa = set.mutable_set_attributes();
  sa->set_flow_id("f");
  auto* wa = sa->add_writes();
  wa->set_key("s");
  wa->mutable_value()->set_string_value("x");
  sa->set_at_unix_ms(1'600);
  flow::FlowRecord wrote = flow_result("A-1", flow::EXECUTE, "t");
  auto* tw = wrote.mutable_method_result()->add_attribute_writes();
  tw->set_key("t");
  tw->set_instance_key("i");
  tw->mutable_value()->set_json_value(R"({"n": 1})");
  wrote.mutable_method_result()
      ->mutable_decision()
      ->mutable_go_to()
      ->add_movements()
      ->set_step_type("B");
  wrote.set_at_unix_ms(2'000);
  auto* ra = wrote.add_assignments();
  *ra->mutable_task() = flow_task("req:1", flow::RPC, 1);
  ra->set_task_id("t3");
  ra->set_worker_id("w");
  flow::FlowRecord answered = flow_result("req:1", flow::RPC, "t3");
  auto* am = answered.mutable_method_result();
  am->mutable_rpc()->mutable_output()->set_data("out");
  am->mutable_rpc()->add_next_steps()->set_step_type("B");
  *am->add_attribute_writes() = *wa;
  auto* ap = am->add_publishes();
  ap->set_channel("c");
  ap->add_messages()->set_data("from-rpc");
  flow::FlowRecord late = invoke;
  late.mutable_invoke_rpc()->set_rpc_id("rpc:2");
  late.mutable_invoke_rpc()->set_name("q");
  late.mutable_invoke_rpc()->set_timeout_ms(100);
  flow::FlowRecord deadline;
  auto* dk = deadline.mutable_timer_fired()->mutable_key();
  dk->set_flow_id("f");
  dk->set_run_id("r");
  dk->set_kind(flow::RPC_DEADLINE);
  dk->set_step_execution_id("rpc:2");
  deadline.mutable_timer_fired()->set_fire_at_ms(1'600);
  deadline.mutable_timer_fired()->set_at_unix_ms(1'600);
  flow::FlowRecord bad_set = set;
  bad_set.mutable_set_attributes()->mutable_writes(0)->set_key("nope");
  add("rpc_locks_attributes", frame(invoke) + frame(set) + frame(wrote) + frame(answered) +
                                  frame(late) + frame(deadline) + frame(bad_set) + frame(invoke));
  // s syncs to store "st": two sets leave SyncEntries; the sync trims them.
  flow::FlowRecord synced;
  synced.mutable_attribute_store_synced()->set_store("st");
  synced.mutable_attribute_store_synced()->set_through_slot(1);
  synced.mutable_attribute_store_synced()->set_at_unix_ms(1'700);
  add("attribute_store_sync", frame(set) + frame(set) + frame(synced) + frame(set));
  // B-1 waits for a SubFlow of T (Flow retry: 2 runs): its child f/B-1/0 run
  // r starts in the same record; the child's A-1 fails the run, its Flow retry
  // r.2 starts when the backoff fires and completes, which meets B-1's wait.
  flow::FlowRecord sub_wait = flow_result("B-1", flow::WAIT_FOR, "t2");
  auto* sw = sub_wait.mutable_method_result()->mutable_wait();
  sw->set_kind(flow::ALL_OF);
  auto* sub = sw->add_conditions()->mutable_sub_flow();
  sub->set_flow_type("T");
  sub->mutable_input()->set_data("child");
  sub->mutable_options()->mutable_retry_policy()->set_initial_interval_ms(100);
  sub->mutable_options()->mutable_retry_policy()->set_maximum_attempts(2);
  auto child_run = [&](const std::string& run, const std::string& task, bool fail) {
    flow::FlowRecord assign;
    assign.set_at_unix_ms(2'000);
    auto* ca = assign.add_assignments();
    *ca->mutable_task() = flow_task("A-1", flow::EXECUTE, 1);
    ca->mutable_task()->set_flow_id("f/B-1/0");
    ca->mutable_task()->set_run_id(run);
    ca->set_task_id(task);
    ca->set_worker_id("w");
    flow::FlowRecord end = flow_result("A-1", flow::EXECUTE, task);
    *end.mutable_method_result()->mutable_task() = ca->task();
    if (fail)
      end.mutable_method_result()->mutable_decision()->set_force_fail("child failed");
    else
      end.mutable_method_result()->mutable_decision()->mutable_graceful_complete()->set_data("ok");
    return frame(assign) + frame(end);
  };
  flow::FlowRecord flow_retry;
  auto* fk = flow_retry.mutable_timer_fired()->mutable_key();
  fk->set_flow_id("f/B-1/0");
  fk->set_run_id("r");
  fk->set_kind(flow::FLOW_RETRY);
  flow_retry.mutable_timer_fired()->set_fire_at_ms(2'100);
  flow_retry.mutable_timer_fired()->set_at_unix_ms(2'100);
  add("sub_flow_with_flow_retry", frame(go) + frame(sub_wait) + child_run("r", "c1", true) +
                                      frame(flow_retry) + child_run("r.2", "c2", false));
  // Timeout policy HANDLER: flow h's timeout fires while its A-1 runs; its
  // handler (handed out, withdrawn, handed out again) writes s and goes to B
  // cancelling every active Step; flow g's handler fails, retries after its
  // backoff and fails for good (g ends TIMED_OUT); a late timeout is stale.
  auto handled = [&](const std::string& flow_id) {
    flow::FlowRecord start;
    auto* st = start.mutable_start_flow();
    st->set_flow_id(flow_id);
    st->set_run_id("r");
    st->set_flow_type("T");
    st->mutable_options()->set_timeout_ms(1'000);
    st->mutable_options()->set_timeout_policy(flow::TIMEOUT_HANDLER);
    st->set_at_unix_ms(1'000);
    start.set_at_unix_ms(1'000);
    auto* sa = start.add_assignments();
    *sa->mutable_task() = flow_task("A-1", flow::EXECUTE, 1);
    sa->mutable_task()->set_flow_id(flow_id);
    sa->set_task_id(flow_id + "-a");
    sa->set_worker_id("w");
    flow::FlowRecord timeout;
    auto* tk = timeout.mutable_timer_fired()->mutable_key();
    tk->set_flow_id(flow_id);
    tk->set_run_id("r");
    tk->set_kind(flow::FLOW_TIMEOUT);
    timeout.mutable_timer_fired()->set_fire_at_ms(2'000);
    timeout.mutable_timer_fired()->set_at_unix_ms(2'000);
    return std::pair(frame(start), frame(timeout));
  };
  auto handler_task = [&](const std::string& flow_id, uint32_t attempt) {
    flow::TaskRef t = flow_task("timeout", flow::ON_TIMEOUT, attempt);
    t.set_flow_id(flow_id);
    return t;
  };
  auto hand_out = [&](const std::string& flow_id, uint32_t attempt, const std::string& task_id) {
    flow::FlowRecord r;
    r.set_at_unix_ms(2'000);
    auto* a = r.add_assignments();
    *a->mutable_task() = handler_task(flow_id, attempt);
    a->set_task_id(task_id);
    a->set_worker_id("w");
    return frame(r);
  };
  const auto [h_start, h_timeout] = handled("h");
  flow::FlowRecord withdrawn;
  *withdrawn.mutable_attempt_withdrawn()->mutable_task() = handler_task("h", 1);
  withdrawn.mutable_attempt_withdrawn()->set_task_id("h1");
  flow::FlowRecord decided = flow_result("timeout", flow::ON_TIMEOUT, "h2");
  *decided.mutable_method_result()->mutable_task() = handler_task("h", 1);
  auto* hd = decided.mutable_method_result()->mutable_decision();
  hd->mutable_go_to()->add_movements()->set_step_type("B");
  hd->set_cancel_siblings(true);
  *decided.mutable_method_result()->add_attribute_writes() = *wa;
  const auto [g_start, g_timeout] = handled("g");
  flow::FlowRecord g_failed = flow_result("timeout", flow::ON_TIMEOUT, "g1");
  *g_failed.mutable_method_result()->mutable_task() = handler_task("g", 1);
  g_failed.mutable_method_result()->set_outcome(flow::ATTEMPT_FAILED);
  g_failed.mutable_method_result()->set_error("no");
  flow::FlowRecord g_retry;
  auto* gk = g_retry.mutable_timer_fired()->mutable_key();
  gk->set_flow_id("g");
  gk->set_run_id("r");
  gk->set_kind(flow::RETRY);
  gk->set_step_execution_id("timeout");
  gk->set_method(flow::ON_TIMEOUT);
  g_retry.mutable_timer_fired()->set_fire_at_ms(3'000);
  g_retry.mutable_timer_fired()->set_at_unix_ms(3'000);
  flow::FlowRecord g_failed_again = g_failed;
  *g_failed_again.mutable_method_result()->mutable_task() = handler_task("g", 2);
  g_failed_again.mutable_method_result()->set_task_id("g2");
  g_failed_again.mutable_method_result()->set_non_retryable(true);
  add("timeout_handler", h_start + h_timeout + hand_out("h", 1, "h1") + frame(withdrawn) +
                             hand_out("h", 1, "h2") + frame(decided) + g_start + g_timeout +
                             hand_out("g", 1, "g1") + frame(g_failed) + frame(g_retry) +
                             hand_out("g", 2, "g2") + frame(g_failed_again) + g_timeout);
  // Time travel. f's B-1 waits for c or a 500 ms Timer, then a publish meets
  // it; f travels back to before the publish (r2: B-1 waits again, its Timer
  // with the time it had left, s as set); a repeat of the request answers
  // r2; a travel from r (no longer the latest) is refused; r2's B-1 is met by
  // a publish, and r2 travels to just after it (r4, r2 ends TERMINATED).
  auto travel = [](const std::string& from, const std::string& to, flow::TimeTravelKind kind,
                   int64_t at) {
    flow::FlowRecord r;
    auto* t = r.mutable_time_travel();
    t->set_flow_id("f");
    t->set_run_id(from);
    t->set_new_run_id(to);
    t->mutable_point()->set_kind(kind);
    t->set_reason("a fix");
    t->set_at_unix_ms(at);
    return r;
  };
  flow::FlowRecord set_early = set;
  set_early.mutable_set_attributes()->set_at_unix_ms(2'100);
  flow::FlowRecord wait_timed = wait;
  wait_timed.mutable_method_result()->set_at_unix_ms(2'200);
  flow::FlowRecord publish_late = publish;
  publish_late.mutable_publish()->set_at_unix_ms(2'300);
  flow::FlowRecord back = travel("r", "r2", flow::TIME_TRAVEL_EVENT_TIME, 3'000);
  back.mutable_time_travel()->mutable_point()->set_event_time_ms(2'250);
  back.mutable_time_travel()->set_request_id("tt");
  flow::FlowRecord again = back;
  again.mutable_time_travel()->set_new_run_id("r3");
  flow::FlowRecord stale_from = travel("r", "r5", flow::TIME_TRAVEL_STEP_EXECUTION, 3'050);
  stale_from.mutable_time_travel()->mutable_point()->set_step_execution_id("B-1");
  flow::FlowRecord publish_r2 = publish;
  publish_r2.mutable_publish()->mutable_publish()->mutable_messages(0)->set_data("again");
  publish_r2.mutable_publish()->set_at_unix_ms(3'100);
  flow::FlowRecord met = travel("r2", "r4", flow::TIME_TRAVEL_EVENT_TIME, 3'200);
  met.mutable_time_travel()->mutable_point()->set_event_time_ms(3'150);
  add("time_travel_event_time", frame(go) + frame(set_early) + frame(wait_timed) +
                                    frame(publish_late) + frame(back) + frame(again) +
                                    frame(stale_from) + frame(publish_r2) + frame(met));
  // f travels to its beginning while A-1 runs (r ends TERMINATED, its attempt
  // ends, r2's A-1 is handed out in the same record and takes k); r2
  // completes; r3 starts from r2 while its A-1 ran; r3 has no B (refused),
  // and a point without a kind is refused.
  flow::FlowRecord begin = travel("r", "r2", flow::TIME_TRAVEL_BEGINNING, 1'500);
  begin.set_at_unix_ms(1'500);
  auto* ba = begin.add_assignments();
  *ba->mutable_task() = flow_task("A-1", flow::EXECUTE, 1);
  ba->mutable_task()->set_run_id("r2");
  ba->set_task_id("t9");
  ba->set_worker_id("w");
  flow::FlowRecord r2_done = done;
  *r2_done.mutable_method_result()->mutable_task() = ba->task();
  r2_done.mutable_method_result()->set_task_id("t9");
  flow::FlowRecord from_running = travel("r2", "r3", flow::TIME_TRAVEL_EVENT_TIME, 2'500);
  from_running.mutable_time_travel()->mutable_point()->set_event_time_ms(1'600);
  flow::FlowRecord no_b = travel("r3", "r4", flow::TIME_TRAVEL_FIRST_OF_STEP_TYPE, 2'600);
  no_b.mutable_time_travel()->mutable_point()->set_step_type("B");
  flow::FlowRecord no_kind = travel("r3", "r4", flow::TIME_TRAVEL_KIND_UNSPECIFIED, 2'600);
  add("time_travel_beginning_and_refusals",
      frame(begin) + frame(r2_done) + frame(from_running) + frame(no_b) + frame(no_kind));
  // Continue-as-new. A client asks while A-1 runs (pending); A-1 goes to B
  // twice and r continues as r.c1 (B-1's WaitFor handed out there after);
  // B-1 waits and a publish is queued; r.c1's B-2 decides to continue again
  // once its WaitFor has run; repeats and a run no longer the latest.
  auto ask = [](const std::string& run, const std::string& request, int64_t at) {
    flow::FlowRecord r;
    auto* c = r.mutable_continue_as_new();
    c->set_flow_id("f");
    c->set_run_id(run);
    c->set_reason("rotate");
    c->set_request_id(request);
    c->set_at_unix_ms(at);
    return r;
  };
  flow::FlowRecord go_on = go;
  go_on.mutable_method_result()->mutable_decision()->set_continue_as_new(true);
  flow::FlowRecord hand_b = go_on;
  hand_b.clear_method_result();
  hand_b.mutable_assignments(0)->mutable_task()->set_run_id("r.c1");
  flow::FlowRecord wait_c1 = wait;
  wait_c1.mutable_method_result()->mutable_task()->set_run_id("r.c1");
  add("continue_as_new", frame(ask("r", "x", 1'500)) + frame(ask("r", "x", 1'600)) + frame(go_on) +
                             frame(hand_b) + frame(wait_c1) + frame(publish) +
                             frame(ask("r", "x", 2'700)) + frame(ask("r.c1", "y", 2'800)) +
                             frame(ask("r", "", 2'900)));
  flow::FlowRecord loop = flow_result("A-1", flow::EXECUTE, "t");
  loop.mutable_method_result()->mutable_decision()->mutable_go_to()->add_movements()->set_step_type(
      "A");
  loop.mutable_method_result()->mutable_decision()->set_continue_as_new(true);
  add("continue_as_new_by_decision", frame(loop));
  // UpdateFlowConfig. While A-1 runs, a client lowers r's event threshold
  // below its history (pending) and sets ASYNC; the repeat changes nothing;
  // A-1 goes to B and r continues as r.c1 with that config, pending again at
  // once (its threshold stays below its history); an update that clears the
  // threshold back to the declaration's and turns ActiveStepTypes off
  // applies, and r.c1 continues as r.c2 (a continue-as-new pending stays); one
  // sets a byte threshold r.c2 passed already: it continues at once.
  auto config = [](const std::string& run, const std::string& request, int64_t at) {
    flow::FlowRecord r;
    auto* u = r.mutable_update_flow_config();
    u->set_flow_id("f");
    u->set_run_id(run);
    u->set_request_id(request);
    u->set_at_unix_ms(at);
    return r;
  };
  flow::FlowRecord lower = config("r", "u1", 1'500);
  lower.mutable_update_flow_config()->mutable_config()->set_continue_as_new_after_events(2);
  lower.mutable_update_flow_config()->mutable_config()->set_default_durability(flow::ASYNC);
  flow::FlowRecord clear = config("r.c1", "u2", 2'100);
  clear.mutable_update_flow_config()->add_clear_fields("continue_as_new_after_events");
  clear.mutable_update_flow_config()->mutable_config()->set_index_active_step_types(false);
  flow::FlowRecord bytes = config("r.c2", "", 2'200);
  bytes.mutable_update_flow_config()->mutable_config()->set_continue_as_new_after_bytes(10);
  add("flow_config_update_continues",
      frame(lower) + frame(lower) + frame(go) + frame(clear) + frame(bytes) + frame(clear));
  // Refused and unchanged updates: an unknown field name, a field set and
  // cleared, one cleared twice, a durability that is neither SYNC nor ASYNC,
  // nothing to change, no run ID, a missing run, another Attribute Store;
  // the same store (set, or cleared back to the declaration's) is no change;
  // a threshold of 2^64-1 (a client's -1) applies; a closed run's is refused.
  std::vector<flow::FlowRecord> odd(12, config("r", "", 1'500));
  odd[0].mutable_update_flow_config()->add_clear_fields("retention");
  odd[1].mutable_update_flow_config()->mutable_config()->set_continue_as_new_after_events(5);
  odd[1].mutable_update_flow_config()->add_clear_fields("continue_as_new_after_events");
  odd[2].mutable_update_flow_config()->add_clear_fields("default_durability");
  odd[2].mutable_update_flow_config()->add_clear_fields("default_durability");
  odd[3].mutable_update_flow_config()->mutable_config()->set_default_durability(
      static_cast<flow::Durability>(9));
  odd[5].mutable_update_flow_config()->set_run_id("");
  odd[5].mutable_update_flow_config()->mutable_config()->set_continue_as_new_after_events(5);
  odd[6].mutable_update_flow_config()->set_run_id("gone");
  odd[6].mutable_update_flow_config()->mutable_config()->set_continue_as_new_after_events(5);
  odd[7].mutable_update_flow_config()->mutable_config()->set_attribute_store("other");
  odd[8].mutable_update_flow_config()->mutable_config()->set_attribute_store("st");
  odd[9].mutable_update_flow_config()->add_clear_fields("attribute_store");
  odd[10].mutable_update_flow_config()->mutable_config()->set_continue_as_new_after_events(
      UINT64_MAX);
  odd[11] = odd[10];
  std::string refusals;
  for (size_t n = 0; n + 1 < odd.size(); ++n) refusals += frame(odd[n]);
  add("flow_config_update_refusals", refusals + frame(stop) + frame(odd[11]));
  add("edge_empty", "");
  add("edge_truncated_frame", std::string("\xff\x00\x01", 3));
}

void s3_xml_seeds(std::vector<Seed>& out) {
  // Selector: bits 0-2 operation (% 5: get, put, delete, list, create bucket),
  // bit 3 put with If-Match, bits 4-7 the HTTP status (fuzz_s3_xml.cc's table).
  auto add = [&](std::string name, uint8_t op, uint8_t status_index, std::string body) {
    out.push_back({"s3_xml", std::move(name),
                   std::string(1, static_cast<char>((status_index << 4) | op)) + body});
  };
  const std::string prolog = R"(<?xml version="1.0" encoding="UTF-8"?>)"
                             "\n";
  add("no_such_key_get_404", 0, 6,
      prolog +
          "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
          "<Key>nodes/n1/lease</Key><RequestId>17A</RequestId></Error>");
  add("no_such_key_replace_404", 1 | 8, 6,
      prolog + "<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>");
  add("precondition_failed_put_412", 1, 10,
      prolog +
          "<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions "
          "you specified did not hold</Message><Condition>If-None-Match</Condition></Error>");
  add("slow_down_503", 1, 13,
      prolog +
          "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
          "</Error>");
  add("internal_error_in_200_put", 1, 0,
      "\xEF\xBB\xBF" + prolog +
          "<Error>\n  <Code>InternalError</Code>\n  <Message>We encountered "
          "an internal error &amp; retried.</Message>\n</Error>\n");
  add("bucket_owned_create_409", 4, 9,
      prolog + "<Error><Code>BucketAlreadyOwnedByYou</Code><Message>yours</Message></Error>");
  add("forbidden_403_no_body", 2, 5, "");
  add("html_502", 0, 12, "<html><body><h1>502 Bad Gateway</h1></body></html>");
  add("list_page", 3, 0,
      prolog + R"(<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">)"
               "<Name>dex</Name><Prefix>nodes/n1/log/</Prefix><KeyCount>2</KeyCount>"
               "<MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>"
               "<Contents><Key>nodes/n1/log/00000000000000000000</Key><Size>120</Size>"
               "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag></Contents>"
               "<Contents><Key>nodes/n1/log/00000000000000000001</Key></Contents>"
               "<NextContinuationToken>1ueGcxLPRx1Tr</NextContinuationToken></ListBucketResult>");
  add("list_empty", 3, 0,
      "<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></"
      "ListBucketResult>");
  add("xml_features", 3, 0,
      "<?xml version='1.0'?><!-- a comment --><s3:ListBucketResult a='1' b=\"x>y\">"
      "<?pi data?><Contents><Key><![CDATA[a<b&c]]>&#x41;&#66;&lt;&gt;&apos;</Key></Contents>"
      "<IsTruncated>false</IsTruncated><Empty/></s3:ListBucketResult>\n");
  add("edge_doctype", 0, 12, "<!DOCTYPE x [<!ENTITY a 'b'>]><Error><Code>&a;</Code></Error>");
  add("edge_mismatched_end", 1, 13, "<Error><Code>SlowDown</Message></Error>");
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "<a>";
  add("edge_deep", 3, 0, deep);
  add("edge_unterminated_cdata", 3, 0, "<a><![CDATA[xx</a>");
  add("edge_char_ref_range", 0, 12, "<Error><Code>&#x110000;</Code></Error>");
}

// Query text (fuzz_search_query.cc): every operator and keyword, ORDER BY,
// both quotes and their escapes, backquoted fields, nesting, and a few
// refusals; the fields are the system fields and the index keys of the
// target's Order runs (Customer, note, Tags, qty, Price, vip, Due).
// Sync machine schedules (fuzz_sync_machine.cc): batch size, deleteRows,
// slots, each slot's entries, then one byte per step (0: all goes well; bit
// 7: a short lease; bits 3-5: a failure or a lost answer; 0xff: a takeover).
void sync_machine_seeds(std::vector<Seed>& out) {
  using namespace std::string_literals;  // the seeds hold NUL bytes
  auto add = [&](std::string name, std::string bytes) {
    out.push_back({"sync_machine", std::move(name), std::move(bytes)});
  };
  const std::string log = "\x02\x01\x08\x01\x02\x43\x83\x00\x96\x03\x41\x02"s;
  add("quiet", log + std::string(40, '\0'));
  add("failures_and_lost_answers", log + "\x00\x08\x00\x10\x08\x08\x00\x10\x00\x00\x10"s);
  add("short_lease_then_takeover", log + "\x81\x81\x00\xff\x00\x10\xff\x00\x08\x00"s);
}

void search_query_seeds(std::vector<Seed>& out) {
  auto add = [&](std::string name, std::string text) {
    out.push_back({"search_query", std::move(name), std::move(text)});
  };
  add("compare_every_op",
      "qty = 3 AND qty != 4 AND qty <> 5 AND qty < 10 AND qty <= 9 AND qty > -2 AND qty >= -1");
  add("in_and_not_in", "Customer IN ('acme', \"beta\") AND Status NOT IN ('FAILED', 'CANCELED')");
  add("between",
      "Price BETWEEN 1 AND 9.5 OR Due NOT BETWEEN '2023-11-14T22:13:20Z' AND 1700007200000");
  add("starts_with", "FlowId STARTS_WITH 'order-' AND note STARTS_WITH 'ber'");
  add("is_null", "vip IS NULL OR Tags IS NOT NULL AND CloseTime IS NULL");
  add("order_by_desc", "FlowType = 'Order' ORDER BY Price DESC");
  add("order_by_only", "order by StartTime asc");
  add("quoting",
      "Customer = 'it''s' OR Customer = \"say \"\"hi\"\"\" OR note = 'a\\'b\\\\c\\n\\t\\\"d' "
      "OR `Tags` = 'x'");
  add("backquoted_keyword_field", "`order` = 1 OR `a``b` IS NULL ORDER BY `ORDER`");
  add("nesting",
      "NOT (qty > 3 OR (vip = TRUE AND NOT Price < 1.5e1)) AND (Tags = 'a' OR Tags = 'b')");
  add("literals",
      "qty IN (0, -9223372036854775808, 9223372036854775807) OR Price = -0.0 OR vip = false");
  add("every_system_field",
      "FlowId = 'order-0' OR RunId = 'run-1' OR Status = 'running' OR StartTime > 0 OR "
      "ExecutionDuration >= 0 OR ParentFlowId = '' OR ActiveStepTypes = 'Start' ORDER BY "
      "CloseTime");
  add("full_text", "note = 'rush BERLIN' AND note != 'gate'");
  add("empty", "");
  // Refusals: a position each.
  add("edge_unterminated_string", "Customer = 'acme");
  add("edge_trailing_and", "qty = 1 AND");
  add("edge_unknown_field", "nope = 1");
  add("edge_type_mismatch", "qty = 'three' ORDER BY note");
  add("edge_bad_escape", "note = 'a\\qb'");
  add("edge_int_overflow", "qty = 9223372036854775808");
  add("edge_deep", std::string(40, '(') + "qty = 1" + std::string(40, ')'));
  // An empty index range: the reader must not scan from 5 down to -9e8.
  add("edge_between_reversed", "Price BETWEEN 5 AND -907200000");
}

}  // namespace

std::vector<Seed> corpus_seeds() {
  std::vector<Seed> out;
  log_batch_seeds(out);
  log_reader_seeds(out);
  lease_record_seeds(out);
  snapshot_manifest_seeds(out);
  config_seeds(out);
  s3_xml_seeds(out);
  flow_rules_seeds(out);
  search_query_seeds(out);
  sync_machine_seeds(out);
  return out;
}

}  // namespace dex::fuzz
