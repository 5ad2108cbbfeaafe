// search_bench: SearchFlows over a local store of many runs (issue 26,
// docs/search.md, docs/performance.md "SearchFlows").
//
// Builds the engine's own local store (StateMachine over RocksDB) with
// --runs runs of a Flow type with four indexed Attributes (Customer KEYWORD,
// qty INT, Price DOUBLE, Due DATETIME), applied through the flow rules in
// log batches of 1,000 records as the engine applies them: starts with their
// initial Attributes, and a stop for every third run. Then, on snapshots of
// that store as the engine answers SearchFlows, it times the queries users
// run: one selecting 100 runs by an indexed value, `flow list` (the newest
// 100), `flow list --type --status`, a range, and the next page of a list.
// The same store is built a second time with the Attributes not indexed, for
// the bytes and the apply time the index adds.
//
// Prints: apply rate and µs per start (indexed and not), local-store bytes per
// run (SST files after a full compaction, both stores), and per query p50,
// p99 and max ms over --queries repetitions, with the plan the planner took
// and the rows a page returned.
#include <fmt/format.h>
#include <rocksdb/db.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "common/version.h"
#include "dex/records.pb.h"
#include "engine/rocks_kv.h"
#include "engine/state_machine.h"
#include "search/index_reader.h"
#include "search/search.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using dex::flow::FlowRecord;

constexpr int64_t kStartMs = 1'800'000'000'000;  // 2027-01-15
constexpr int kCustomers = 10'000;  // each Customer value: runs / 10,000 runs (100 of 1,000,000)
constexpr size_t kRecordsPerBatch = 1'000;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

dex::flow::FlowDeclaration declaration(bool indexed) {
  using namespace dex::flow;
  FlowDeclaration d;
  d.set_flow_type("Order");
  d.set_start_step_type("Start");
  auto* step = d.add_steps();
  step->set_step_type("Start");
  const auto add = [&](const char* key, AttributeType type, IndexType index, const char* name) {
    auto* a = d.add_attributes();
    a->set_key(key);
    a->set_type(type);
    if (indexed) {
      a->mutable_index()->set_type(index);
      a->mutable_index()->set_index_key(name);
    }
  };
  add("customer", ATTRIBUTE_STRING, INDEX_KEYWORD, "Customer");
  add("qty", ATTRIBUTE_INT64, INDEX_INT, "qty");
  add("price", ATTRIBUTE_DOUBLE, INDEX_DOUBLE, "Price");
  add("due", ATTRIBUTE_DATETIME, INDEX_DATETIME, "Due");
  return d;
}

FlowRecord start_record(int64_t i) {
  FlowRecord r;
  auto* s = r.mutable_start_flow();
  s->set_flow_id(fmt::format("order-{:07}", i));
  s->set_run_id(fmt::format("run-{:07}", i));
  s->set_flow_type("Order");
  s->mutable_input()->set_data("{}");
  const int64_t at = kStartMs + i * 10;
  s->set_at_unix_ms(at);
  auto* o = s->mutable_options();
  const auto attr = [&](const char* key) {
    auto* a = o->add_initial_attributes();
    a->set_key(key);
    return a->mutable_value();
  };
  attr("customer")->set_string_value(fmt::format("c{:05}", i % kCustomers));
  attr("qty")->set_int64_value(i % 1000);
  attr("price")->set_double_value(static_cast<double>(i % 5000) / 4);
  attr("due")->set_datetime_unix_ms(at + 86'400'000);
  return r;
}

FlowRecord stop_record(int64_t i) {
  FlowRecord r;
  auto* s = r.mutable_stop_flow();
  s->set_flow_id(fmt::format("order-{:07}", i));
  s->set_mode(dex::flow::STOP_CANCEL);
  s->set_at_unix_ms(kStartMs + i * 10 + 5);
  return r;
}

// The store, built through StateMachine::apply; returns µs per start record.
double build(const fs::path& dir, int64_t runs, bool indexed) {
  auto sm = dex::StateMachine::open(dir);
  if (!sm.is_ok()) throw std::runtime_error(sm.status().message());
  uint64_t slot = 0;
  dex::proto::LogBatch batch;
  const auto flush = [&] {
    batch.set_slot(++slot);
    auto applied = (*sm)->apply(dex::Slot{slot}, batch);
    if (!applied.is_ok()) throw std::runtime_error(applied.status().message());
    for (const auto& r : applied->flow_results)
      if (r.result.kind != dex::flow::ApplyKind::kApplied)
        throw std::runtime_error("a record was refused: " + r.result.message);
    batch.clear_records();
  };
  *batch.add_records()->mutable_flow()->mutable_declare_flows()->add_declarations() =
      declaration(indexed);
  batch.mutable_records(0)->mutable_flow()->mutable_declare_flows()->set_at_unix_ms(kStartMs);
  flush();
  const auto t = Clock::now();
  int64_t last_report = 0;
  for (int64_t i = 0; i < runs; ++i) {  // bounded by --runs
    *batch.add_records()->mutable_flow() = start_record(i);
    if (i % 3 == 0) *batch.add_records()->mutable_flow() = stop_record(i);
    if (static_cast<size_t>(batch.records_size()) >= kRecordsPerBatch) flush();
    if (i - last_report >= 200'000) {
      fmt::print(stderr, "  {} runs applied ({:.0f} s)\n", i, ms_since(t) / 1000);
      last_report = i;
    }
  }
  if (batch.records_size() > 0) flush();
  return ms_since(t) * 1000 / static_cast<double>(runs);
}

// Bytes of the SST files after a full compaction (the store as it settles).
uint64_t settled_bytes(const fs::path& dir) {
  rocksdb::DB* raw = nullptr;
  rocksdb::Options options;
  auto s = rocksdb::DB::Open(options, dir.string(), &raw);
  if (!s.ok()) throw std::runtime_error(s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  db->Flush(rocksdb::FlushOptions());
  db->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr);
  uint64_t bytes = 0;
  db->GetIntProperty("rocksdb.total-sst-files-size", &bytes);
  return bytes;
}

class Reader final : public dex::search::IndexReader {
 public:
  explicit Reader(dex::RocksKv& kv) : kv_(kv) {}
  std::optional<std::string> get(std::string_view key) override { return kv_.get(key); }
  void scan(std::string_view from, std::string_view to, bool reverse, const Visit& visit) override {
    kv_.visit(from, to, reverse, visit);
  }

 private:
  dex::RocksKv& kv_;
};

struct QueryCase {
  std::string name;
  std::function<std::string(int)> query;  // the i-th repetition's query
  int32_t page_size = 100;
  bool second_page = false;  // time the page after the first
  double target_ms = 0;      // issue 26's bound (0: none)
};

void time_queries(const fs::path& dir, int repetitions) {
  auto sm = dex::StateMachine::open(dir);
  if (!sm.is_ok()) throw std::runtime_error(sm.status().message());
  const std::vector<QueryCase> cases = {
      {"Customer = 'cNNNNN' (100 of 1M)",
       [](int i) { return fmt::format("Customer = 'c{:05}'", (i * 7919) % kCustomers); }, 100,
       false, 50},
      {"flow list: newest 100", [](int) { return std::string(); }, 100, false, 20},
      {"flow list --type --status RUNNING",
       [](int) { return std::string("FlowType = 'Order' AND Status = 'Running'"); }, 100, false, 0},
      {"flow list: next page", [](int) { return std::string(); }, 100, true, 0},
      {"qty = N AND Price > X",
       [](int i) { return fmt::format("qty = {} AND Price > 600", (i * 31) % 1000); }, 100, false,
       0},
      {"CANCELED, oldest first",
       [](int) { return std::string("Status = 'Canceled' ORDER BY StartTime ASC"); }, 100, false,
       0},
      {"Due BETWEEN (a 1-second window)",
       [](int i) {
         const int64_t from = kStartMs + 86'400'000 + (i * 104'729) % 1'000'000 * 10;
         return fmt::format("Due BETWEEN {} AND {}", from, from + 999);
       },
       100, false, 0},
  };
  fmt::print("\n{:<38} {:>9} {:>9} {:>9} {:>7} {:>13} {:>9}\n", "query", "p50 ms", "p99 ms",
             "max ms", "rows", "plan", "target");
  for (const auto& c : cases) {
    std::vector<double> times;
    size_t rows = 0;
    std::string plan;
    for (int i = 0; i < repetitions; ++i) {  // bounded by --queries
      dex::flow::SearchFlowsRequest request;
      request.set_query(c.query(i));
      request.set_page_size(c.page_size);
      if (c.second_page) {
        auto view = (*sm)->flow_view();
        Reader reader(*view);
        auto first = dex::search::search_flows(reader, request);
        if (!first.is_ok()) throw std::runtime_error(first.status().message());
        request.set_page_token(first->next_page_token());
      }
      const auto t = Clock::now();
      auto view = (*sm)->flow_view();  // what the engine takes per call
      Reader reader(*view);
      auto page = dex::search::search_flows(reader, request);
      times.push_back(ms_since(t));
      if (!page.is_ok()) throw std::runtime_error(c.name + ": " + page.status().message());
      rows = static_cast<size_t>(page->rows_size());
      plan = dex::search::last_plan();
    }
    std::sort(times.begin(), times.end());
    const auto at = [&](double p) { return times[static_cast<size_t>(p * (times.size() - 1))]; };
    fmt::print("{:<38} {:>9.3f} {:>9.3f} {:>9.3f} {:>7} {:>13} {:>9}\n", c.name, at(0.5), at(0.99),
               times.back(), rows, plan,
               c.target_ms > 0 ? fmt::format("<= {:.0f}", c.target_ms) : "-");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "SearchFlows over a local store of many runs with four indexed Attributes: apply cost, "
      "bytes per run and query latency (docs/performance.md)"};
  int64_t runs = 1'000'000;
  int queries = 50;
  std::string dir_flag;
  bool keep = false;
  app.add_option("--runs", runs, "runs in the store (default 1000000)")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--queries", queries, "repetitions per query (default 50)")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--dir", dir_flag, "scratch directory (default $TMPDIR/dex-search-bench-<pid>)");
  app.add_flag("--keep", keep, "keep the stores afterwards");
  app.set_version_flag("--version", dex::version_line("search_bench"));
  CLI11_PARSE(app, argc, argv);

  const fs::path dir =
      dir_flag.empty() ? fs::temp_directory_path() / fmt::format("dex-search-bench-{}", getpid())
                       : fs::path(dir_flag);
  if (fs::exists(dir) && !fs::is_empty(dir)) {
    fmt::print(stderr, "search_bench: --dir {} is not empty\n", dir.string());
    return 2;
  }
  try {
    fmt::print("search_bench: {} runs (a third of them stopped), 4 indexed Attributes\n", runs);
    fs::create_directories(dir);
    const double plain_us = build(dir / "plain", runs, false);
    const double indexed_us = build(dir / "indexed", runs, true);
    const uint64_t plain_bytes = settled_bytes(dir / "plain");
    const uint64_t indexed_bytes = settled_bytes(dir / "indexed");
    const double n = static_cast<double>(runs);
    fmt::print("\n{:<34} {:>14} {:>14} {:>10}\n", "store", "apply µs/start", "bytes/run", "");
    fmt::print("{:<34} {:>14.2f} {:>14.0f}\n", "Attributes not indexed", plain_us,
               static_cast<double>(plain_bytes) / n);
    fmt::print("{:<34} {:>14.2f} {:>14.0f} {:>+9.0f}%\n", "4 indexed Attributes", indexed_us,
               static_cast<double>(indexed_bytes) / n,
               100.0 * (static_cast<double>(indexed_bytes) / static_cast<double>(plain_bytes) - 1));
    time_queries(dir / "indexed", queries);
  } catch (const std::exception& e) {
    fmt::print(stderr, "search_bench: {}\n", e.what());
    if (!keep) fs::remove_all(dir);
    return 1;
  }
  if (!keep) fs::remove_all(dir);
  return 0;
}
