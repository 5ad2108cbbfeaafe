// RPC benchmark (issue 15): the round trip of Client::invoke_rpc, its handler
// writing one Attribute, next to a one-Step Execute-only Flow's start to
// completion, through a real `dex-server-zd dev` (strict durability: every
// log batch is fsynced) and a Worker in this process (the C++ SDK), read
// against this machine's fsync floor measured in the same run.
//
// It prints:
//  - log batches per RPC, measured alone: `--runs` RPCs one after another on
//    one idle run, the log's new slots divided by the RPCs (expect 2: the
//    InvokeRpc record, then the result record with the Attribute write), and
//    the same per one-Step run (expect 2: start_flow, then the Step's result);
//  - row A, per case CxF (C callers over F running Flows, each caller on one
//    Flow, one Client each): InvokeRpc in a closed loop, client call to answer;
//  - row B, per concurrency: StartFlow then WaitForFlow of the one-Step Flow.
//
//   build/bin/dex_rpc_bench [--seconds 5] [--rpc-cases 1x1,64x64,64x8]
//                           [--concurrency 1,64] [--runs 50]
#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_process.h"
#include "common/version.h"
#include "example_flows.h"
#include "flow_bench.h"
#include "sdk/attribute.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace {

namespace fs = std::filesystem;
using namespace dex::bench;

constexpr auto kStartTimeout = std::chrono::seconds(60);

// ------------------------------------------------------------ the RPC Flow

// BenchRpc: one WaitingStep, Hold, that waits on Channel "release" (never
// published: the run stays RUNNING until it is stopped), and the RPC "write",
// which sets the int64 Attribute "last" to its input's "i" and answers "i".
// Neither reads an Attribute, so tasks carry none: the cost measured is the
// RPC's round trip and one Attribute write.
const dex::Attribute<int64_t> kLast{"last"};
const dex::Channel kRelease("release");

class Hold final : public dex::WaitingStep {
 public:
  std::string type() const override { return "Hold"; }
  dex::Wait wait_for(dex::Context&) override { return dex::Wait::any_of({kRelease.for_one()}); }
  dex::StepDecision execute(dex::Context&) override {
    return dex::StepDecision::graceful_complete();
  }
  dex::AttributeReads attribute_reads() const override { return dex::AttributeReads::none(); }
};

class BenchRpc final : public dex::Flow {
 public:
  std::string type() const override { return "BenchRpc"; }
  std::string start_step() const override { return "Hold"; }
  std::vector<std::shared_ptr<dex::Step>> steps() const override {
    return {std::make_shared<Hold>()};
  }
  std::vector<dex::Channel> channels() const override { return {kRelease}; }
  std::vector<dex::AttributeDef> attributes() const override { return {kLast}; }
  std::vector<dex::Rpc> rpcs() const override {
    dex::RpcOptions options;
    options.attribute_reads = dex::AttributeReads::none();
    return {dex::Rpc(
        "write",
        [](dex::Context& ctx, const dex::json& input) -> dex::RpcResult {
          const int64_t i = input.at("i").get<int64_t>();
          kLast.set(ctx, i);
          return dex::json(i);
        },
        options)};
  }
};

// ------------------------------------------------------------ operations

// One RPC on `flow_id`; "" or what went wrong (also a wrong answer).
std::string rpc_once(dex::Client& client, const std::string& flow_id, int64_t i) {
  auto out = client.invoke_rpc(flow_id, "write", dex::json{{"i", i}});
  if (!out.is_ok()) return "invoke_rpc on " + flow_id + ": " + out.status().message();
  if (*out != dex::json(i))
    return fmt::format("invoke_rpc on {} answered {}", flow_id, out->dump());
  return "";
}

struct RpcCase {
  int callers = 0, flows = 0;
};

RpcCase parse_case(const std::string& s) {
  static const std::regex kCase(R"((\d+)x(\d+))");
  std::smatch m;
  if (!std::regex_match(s, m, kCase)) die("--rpc-cases: '" + s + "' is not CALLERSxFLOWS");
  RpcCase c{std::stoi(m[1]), std::stoi(m[2])};
  if (c.callers < 1 || c.flows < 1 || c.callers % c.flows != 0)
    die("--rpc-cases: '" + s + "': callers must be a positive multiple of flows");
  return c;
}

// Starts `n` BenchRpc runs named `prefix`-k and waits until each answers an
// RPC (its Worker hosts the type and the run is open).
std::vector<std::string> start_rpc_flows(dex::Client& client, const std::string& prefix, int n) {
  std::vector<std::string> ids;
  for (int k = 0; k < n; ++k) {
    ids.push_back(fmt::format("{}-{}", prefix, k));
    auto started = client.start("BenchRpc", ids.back(), nullptr);
    if (!started.is_ok()) die("start " + ids.back() + ": " + started.status().message());
  }
  for (const auto& id : ids) {
    std::string err = rpc_once(client, id, 0);
    if (!err.empty()) die(err);
  }
  return ids;
}

void stop_flows(dex::Client& client, const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    dex::Status s = client.stop(id);
    if (!s.is_ok()) die("stop " + id + ": " + s.message());
  }
}

}  // namespace

int main(int argc, char** argv) {
  set_program("dex_rpc_bench");
  CLI::App app{
      "InvokeRpc round trips (the handler writes one Attribute) next to one-Step Flows through "
      "dex-server-zd dev (strict): log batches per RPC and per run, calls/s and latency, next to "
      "the fsync floor"};
  app.set_version_flag("--version", dex::version_line("dex_rpc_bench"));
  double seconds = 5;
  std::vector<std::string> rpc_cases{"1x1", "64x64", "64x8"};
  std::vector<int> concurrency{1, 64};
  int runs = 50;
  app.add_option("--seconds", seconds, "Measured seconds per case")->check(CLI::PositiveNumber);
  app.add_option("--rpc-cases", rpc_cases, "RPC cases CALLERSxFLOWS (each caller on one Flow)")
      ->delimiter(',');
  app.add_option("--concurrency", concurrency, "Client concurrencies of the one-Step Flow")
      ->delimiter(',');
  app.add_option("--runs", runs, "Sequential RPCs and runs for the batches-per-call figures")
      ->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  std::vector<RpcCase> cases;
  for (const auto& s : rpc_cases) cases.push_back(parse_case(s));
  for (int c : concurrency)
    if (c < 1) die("--concurrency: every value must be at least 1");
  die_on_signals("dex_rpc_bench");

  const fs::path bin = own_bin_dir();
  require_programs(bin, {"dex-server-zd"});
  StrictDev dev = start_strict_dev(bin, "dex-rpc-bench", kStartTimeout);
  const std::string& address = dev.address;
  const fs::path data = dev.root / "data";
  dex::WorkerOptions wo;
  wo.server_address = address;
  wo.max_concurrent_tasks = 128;
  dex::Worker worker(wo);
  worker.host(std::make_shared<BenchRpc>());
  worker.host(dex::examples::pipeline("BenchOne", {"S1"}, std::chrono::milliseconds(0)));
  std::thread worker_thread([&] { (void)worker.run(); });

  dex::ClientOptions co;
  co.server_address = address;
  dex::Client client(co);
  // The Worker's hello declared both types once a probe of each completes.
  await_first_run(client, "BenchOne", "probe", kStartTimeout);
  stop_flows(client, start_rpc_flows(client, "probe-rpc", 1));

  // Batches per call, each measured alone. The idle run's Hold has committed
  // its Wait before the count starts (its first RPC answered, then a pause).
  const std::vector<std::string> idle = start_rpc_flows(client, "seq-rpc", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t before = dev_log_slots(data);
  for (int i = 1; i <= runs; ++i) {
    std::string err = rpc_once(client, idle[0], i);
    if (!err.empty()) die(err);
  }
  const double batches_rpc = static_cast<double>(dev_log_slots(data) - before) / runs;
  stop_flows(client, idle);
  const double batches_run = batches_per_run(client, data, "BenchOne", "seq-one", runs);

  fmt::print(
      "fsync floor (512 B append + fdatasync) p50 {:.3f} ms; dex-server-zd dev strict on {}\n",
      dev.fsync_ms, address);
  fmt::print(
      "log batches per RPC {:.2f} (expect 2: InvokeRpc, then its result); per one-Step "
      "run {:.2f} (expect 2: start, then the Step's result); {} of each in a row\n",
      batches_rpc, batches_run, runs);
  fmt::print("{:<3} {:<34} {:>7} {:>5} {:>9} {:>9} {:>9} {:>10}\n", "row", "what", "callers",
             "flows", "calls/s", "p50 ms", "p99 ms", "p50/fsync");
  for (size_t n = 0; n < cases.size(); ++n) {
    const RpcCase c = cases[n];
    const std::vector<std::string> ids =
        start_rpc_flows(client, fmt::format("rpc-{}-{}x{}", n, c.callers, c.flows), c.flows);
    // Caller t calls Flow t % flows; the value written is the call's sequence.
    Figures f = closed_loop(address, c.callers, seconds, [&](int t, dex::Client& cl, uint64_t seq) {
      return rpc_once(cl, ids[t % c.flows], static_cast<int64_t>(seq));
    });
    check_alive(dev.server);
    stop_flows(client, ids);
    fmt::print("{:<3} {:<34} {:>7} {:>5} {:>9.0f} {:>9.2f} {:>9.2f} {:>10.1f}\n", "A",
               "InvokeRpc, writes 1 Attribute", c.callers, c.flows, f.per_second, f.p50, f.p99,
               f.p50 / dev.fsync_ms);
  }
  for (int c : concurrency) {
    Figures f = closed_loop(address, c, seconds, [&](int, dex::Client& cl, uint64_t seq) {
      std::string err = run_once(cl, "BenchOne", fmt::format("one-{}", seq));
      return err.empty() ? err : "BenchOne: " + err;
    });
    check_alive(dev.server);
    fmt::print("{:<3} {:<34} {:>7} {:>5} {:>9.0f} {:>9.2f} {:>9.2f} {:>10.1f}\n", "B",
               "one-Step Flow, start to completion", c, "-", f.per_second, f.p50, f.p99,
               f.p50 / dev.fsync_ms);
  }
  worker.shutdown();
  worker_thread.join();
  warn_unless_clean_exit(dev.server, stop(dev.server, std::chrono::seconds(15)), 10);
  cleanup();
  return 0;
}
