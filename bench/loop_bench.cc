// loop_bench: a Flow that loops for --steps Steps (issue 28, docs/flow-rules.md
// "Continue-as-new", docs/performance.md "Long loops").
//
// Builds the engine's own local store (StateMachine over RocksDB) as a Flow
// that loops: each Tick writes an Attribute and decides GoTo Tick, the next
// attempt handed out in the same record, records applied in log batches of
// --batch as the engine applies them. Two loops side by side:
//  - with continue-as-new every --every Steps and a retention of --retention-s
//    for the runs it leaves (their RETENTION timers fired when due);
//  - the baseline: the same loop in one run (no continue-as-new), for
//    --baseline-steps Steps.
// Prints per loop: Steps/s of apply, and the local store's bytes (SST files
// after a flush and full compaction) at checkpoints, so growth per Step shows.
#include <fmt/format.h>
#include <rocksdb/db.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "common/version.h"
#include "dex/records.pb.h"
#include "engine/state_machine.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using dex::flow::FlowRecord;

constexpr int64_t kStartMs = 1'800'000'000'000;
constexpr int64_t kStepMs = 10;

struct Options {
  uint64_t steps = 1'000'000;
  uint64_t baseline_steps = 100'000;
  uint32_t every = 1'000;
  int64_t retention_s = 60;
  size_t batch = 1'000;
  std::string dir;
};

std::string continued(uint32_t n) { return "r1.c" + std::to_string(n); }

class LoopStore {
 public:
  LoopStore(const fs::path& dir, const Options& o, bool rotate)
      : dir_(dir), o_(o), rotate_(rotate) {
    auto sm = dex::StateMachine::open(dir);
    if (!sm.is_ok()) throw std::runtime_error(sm.status().message());
    sm_ = std::move(sm).value();
    dex::flow::FlowDeclaration d;
    d.set_flow_type("Loop");
    d.set_start_step_type("Tick");
    d.add_steps()->set_step_type("Tick");
    auto* count = d.add_attributes();
    count->set_key("count");
    count->set_type(dex::flow::ATTRIBUTE_INT64);
    FlowRecord declare;
    *declare.mutable_declare_flows()->add_declarations() = d;
    declare.mutable_declare_flows()->set_at_unix_ms(now_);
    add(declare);
    FlowRecord start;
    auto* s = start.mutable_start_flow();
    s->set_flow_id("loop");
    s->set_run_id("r1");
    s->set_flow_type("Loop");
    s->set_retention_ms(o.retention_s * 1000);
    s->set_at_unix_ms(now_);
    add(start);
    add(assignment(1));
    flush();
  }

  void tick(uint64_t n) {
    now_ += kStepMs;
    FlowRecord r;
    auto* m = r.mutable_method_result();
    *m->mutable_task() = task(n);
    m->set_task_id("t" + std::to_string(n));
    m->set_outcome(dex::flow::ATTEMPT_COMPLETED);
    m->set_at_unix_ms(now_);
    auto* w = m->add_attribute_writes();
    w->set_key("count");
    w->mutable_value()->set_int64_value(static_cast<int64_t>(n));
    m->mutable_decision()->mutable_go_to()->add_movements()->set_step_type("Tick");
    const bool turn = rotate_ && n % o_.every == 0;
    m->mutable_decision()->set_continue_as_new(turn);
    r.set_at_unix_ms(now_);
    *r.add_assignments() = assignment(n + 1).assignments(0);
    add(r);
    if (turn) {
      expiring_.push_back({run_, now_ + o_.retention_s * 1000});
      run_ = continued(++continued_);
      add(assignment(n + 1));
    }
    while (!expiring_.empty() && expiring_.front().second <= now_) {  // bounded by the runs
      FlowRecord f;
      auto* t = f.mutable_timer_fired();
      t->mutable_key()->set_flow_id("loop");
      t->mutable_key()->set_run_id(expiring_.front().first);
      t->mutable_key()->set_kind(dex::flow::RETENTION);
      t->set_fire_at_ms(expiring_.front().second);
      t->set_at_unix_ms(now_);
      add(f);
      expiring_.pop_front();
    }
    if (static_cast<size_t>(batch_.records_size()) >= o_.batch) flush();
  }

  void flush() {
    if (batch_.records_size() == 0) return;
    batch_.set_slot(++slot_);
    auto applied = sm_->apply(dex::Slot{slot_}, batch_);
    if (!applied.is_ok()) throw std::runtime_error(applied.status().message());
    for (const auto& r : applied->flow_results)
      if (r.result.kind == dex::flow::ApplyKind::kRejected)
        throw std::runtime_error("a record was refused: " + r.result.message);
    batch_.clear_records();
  }

  // Bytes of the SST files after a flush and a full compaction.
  uint64_t settled_bytes() {
    flush();
    sm_.reset();  // the bench reopens the directory to compact it
    rocksdb::DB* raw = nullptr;
    rocksdb::Options options;
    auto s = rocksdb::DB::Open(options, dir_.string(), &raw);
    if (!s.ok()) throw std::runtime_error(s.ToString());
    std::unique_ptr<rocksdb::DB> db(raw);
    db->Flush(rocksdb::FlushOptions());
    db->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr);
    uint64_t bytes = 0;
    db->GetIntProperty("rocksdb.total-sst-files-size", &bytes);
    db.reset();
    auto sm = dex::StateMachine::open(dir_);
    if (!sm.is_ok()) throw std::runtime_error(sm.status().message());
    sm_ = std::move(sm).value();
    return bytes;
  }

 private:
  dex::flow::TaskRef task(uint64_t n) const {
    dex::flow::TaskRef t;
    t.set_flow_id("loop");
    t.set_run_id(run_);
    t.set_step_execution_id("Tick-" + std::to_string(n));
    t.set_method(dex::flow::EXECUTE);
    t.set_attempt(1);
    return t;
  }
  FlowRecord assignment(uint64_t n) const {
    FlowRecord r;
    r.set_at_unix_ms(now_);
    auto* a = r.add_assignments();
    *a->mutable_task() = task(n);
    a->set_task_id("t" + std::to_string(n));
    a->set_worker_id("w");
    return r;
  }
  void add(const FlowRecord& r) { *batch_.add_records()->mutable_flow() = r; }

  fs::path dir_;
  const Options& o_;
  const bool rotate_;
  std::unique_ptr<dex::StateMachine> sm_;
  dex::proto::LogBatch batch_;
  uint64_t slot_ = 0;
  int64_t now_ = kStartMs;
  std::string run_ = "r1";
  uint32_t continued_ = 0;
  std::deque<std::pair<std::string, int64_t>> expiring_;
};

// Runs one loop; prints a row per checkpoint (a fifth of the Steps each).
void run_loop(const Options& o, bool rotate, uint64_t steps) {
  const fs::path dir = fs::path(o.dir) / (rotate ? "with" : "without");
  fs::remove_all(dir);
  LoopStore store(dir, o, rotate);
  const char* name = rotate ? "continue-as-new" : "one run (baseline)";
  const uint64_t checkpoint = std::max<uint64_t>(steps / 5, 1);
  double apply_ms = 0;
  uint64_t first_bytes = 0;
  for (uint64_t from = 1; from <= steps; from += checkpoint) {  // bounded by --steps
    const uint64_t to = std::min(steps, from + checkpoint - 1);
    const auto t = Clock::now();
    for (uint64_t n = from; n <= to; ++n) store.tick(n);  // bounded by the checkpoint
    store.flush();
    apply_ms += std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    const uint64_t bytes = store.settled_bytes();
    if (first_bytes == 0) first_bytes = bytes;
    fmt::print("| {} | {:>9} | {:>10.0f} | {:>10.2f} | {:>8.1f} |\n", name, to,
               static_cast<double>(to) * 1000 / apply_ms, static_cast<double>(bytes) / 1e6,
               static_cast<double>(bytes) / static_cast<double>(to));
  }
  fs::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loop_bench: a Flow looping for many Steps, with continue-as-new and without"};
  app.set_version_flag("--version", dex::version_line("loop_bench"));
  Options o;
  app.add_option("--steps", o.steps, "Steps of the continue-as-new loop")->capture_default_str();
  app.add_option("--baseline-steps", o.baseline_steps, "Steps of the one-run baseline")
      ->capture_default_str();
  app.add_option("--every", o.every, "Steps per run (continue-as-new)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--retention-s", o.retention_s, "retention of a run left behind, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "records per log batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", o.dir, "scratch directory (default: a temporary one)");
  CLI11_PARSE(app, argc, argv);
  if (o.dir.empty()) o.dir = (fs::temp_directory_path() / "dex-loop-bench").string();
  fs::create_directories(o.dir);
  try {
    fmt::print(
        "A Flow looping Tick -> Tick (one Attribute write per Step), applied through\n"
        "StateMachine over RocksDB in batches of {}; each Step takes 10 ms of Flow time.\n"
        "continue-as-new every {} Steps, runs left behind kept {} s.\n\n",
        o.batch, o.every, o.retention_s);
    fmt::print("| loop | Steps | Steps/s | store MB | bytes/Step |\n|---|--:|--:|--:|--:|\n");
    run_loop(o, true, o.steps);
    run_loop(o, false, o.baseline_steps);
  } catch (const std::exception& e) {
    fmt::print(stderr, "loop_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
