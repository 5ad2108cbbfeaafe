// chaos_worker: a Worker of the fault-injection harness (tests/chaos/README.md)
// that hosts the chaos Flow type and its SubFlow chaos-child (declared here, in
// code) and records every attempt it runs, so that the checker can tell which
// attempt produced a result recorded in the log.
//
// The Flow "chaos" (docs/flow-rules.md):
//
//   Begin (Execute only, SYNC; fails its first attempt on purpose)
//     -> GoToMulti: Fast (Execute only, ASYNC: sent while its start is written)
//                   Gate {round 0}
//                   Fan {fan} when the input names "fan" ("all" or "any")
//   Fast  -> GracefulComplete
//   Gate  (WaitFor, SYNC): round r even: AnyOf(signals.ForOne, Timer 300-800 ms);
//                          round r odd:  AllOf(signals.AtMost(2), Timer 300-800 ms)
//         Execute (lock key "counter"; writes steps[exec] = total):
//                 r + 1 < rounds: GoTo Gate {round r + 1}; else GracefulComplete
//
// Persistence schema: total (int64), applied (AttributeMap int64, by RPC id),
// steps (AttributeMap int64, by Step execution: the total its Gate Execute
// saw), note (AttributeMap string, written by clients only).
//
// RPC "add" (lock key "counter"; input {"id", "n"}): if applied[id] exists it
// writes nothing and answers {"repeat": true, "n": applied[id]}; else it writes
// total += n and applied[id] = n (atomically, in its result) and answers
// {"n": n, "total": new total}. Every output carries "by" as a Step result
// does. Gate's Execute holds the same key, so Step and RPC lock holders
// interleave in each run.
//
//   Fan   (WaitFor, SYNC): "all": AllOf(2 or 3 SubFlows of chaos-child);
//                          "any": AnyOf(2 SubFlows of chaos-child, Timer 300-800 ms)
//         Execute: GracefulComplete {"fan", "children": what it got of each
//                  child (ctx.sub_flows(): flow, run, status, reason, fired,
//                  outputs), "timer"}
//
// The Flow "chaos-child" (a SubFlow's child; input {"k", "wait_ms", "two",
// "fail_runs"[, "nest"][, "timeout_ms"]}, chosen by the Fan's WaitFor from a
// hash of its execution):
//
//   Work   WaitFor: AllOf(Timer wait_ms (100-600)[, SubFlow g0 of chaos-child
//                   when "nest": the grandchild, whose plan never nests]);
//          Execute: two ? GoTo Finish : end (with "children": what it got of
//                   the grandchild, when "nest")
//   Finish (Execute only, ASYNC): end
//   end:   the run's Flow retry attempt <= fail_runs: a non-retryable failure
//          (the run ends FAILED); else GracefulComplete {"by", "k", "attempt"}
//   timeout handler (method ON_TIMEOUT, runs of timeout policy HANDLER): fails
//          its first attempt on purpose; then ForceComplete {"by", "k", "handled": true}
//
// fail_runs 0 (most), 1 with a Flow retry policy of 2 runs (the second run
// completes), or 9 without one (the child ends FAILED). 2 in 10 of Fan's
// children nest (fail_runs 0); 1 in 10 children (and grandchildren) have
// "timeout_ms" 400, started with that flow timeout and "timeout_policy" FAIL,
// CANCEL or HANDLER (a third each), fail_runs 0 and a Timer of 2.5-3 s (60 s
// under HANDLER): they end TIMED_OUT, CANCELED, or COMPLETED by the handler;
// half of them with a Flow retry policy of 2 runs (only FAIL's runs retry).
// The checker knows the plan from the wait's condition input.
//
// Every method: 20 attempts, backoff 100 ms doubling to 1 s, attempt timeout 5 s
// (ends the attempts of a killed Worker). The client publishes to the Channel
// "signals" (chaos_client.cc).
//
// For each attempt it appends JSON lines to its history file:
//
//   {"ev":"run","worker":"w1.1","t":<unix ms>,"flow":..,"run":..,"exec":"Gate-2",
//    "step":"Gate","method":"WAIT_FOR","attempt":n,"nonce":k}
//   {"ev":"done",... the same ...,"result":"wait"|"decision"|"fail",
//    "wait":<the Wait as protobuf JSON>,"locals":<JSON>}        (WaitFor)
//    "decision":<the StepDecision as protobuf JSON>}            (Execute)
//   RPCs likewise, with "method":"RPC", "exec":<the RPC ID>, "step":"rpc:add",
//   "input", and in "done": "result":"rpc"|"fail", "output", "writes"
//   (the Attribute writes as protobuf JSON).
//
// A line is written and flushed before the handler returns, so every result
// the server can have received is in the file even if the Worker is SIGKILLed
// right after. Every result carries {"by": {"w": worker, "n": nonce, "a":
// attempt, "x": execution}} (in the WaitFor's locals, in every payload of an
// Execute's decision): two attempts never produce the same result, and the
// checker matches a logged result to the attempt that produced it. (The SDK's
// Context does not expose the task ID, so the nonce stands in for it.)
//
// Every method takes a seeded time of 5-120 ms, one in twenty 0.6-1.5 s, so
// that a crash or a freeze finds attempts running.
#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/version.h"
#include "sdk/addresses.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace {

using dex::Context;
using dex::StepDecision;
using dex::Wait;

using nlohmann::json;

double now_ms() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() / 1000.0;
}

std::FILE* g_history = nullptr;
std::mutex g_mu;

void record(const json& line) {
  std::string text = line.dump() + "\n";
  std::lock_guard<std::mutex> lock(g_mu);
  std::fwrite(text.data(), 1, text.size(), g_history);
  std::fflush(g_history);
}

json proto_json(const google::protobuf::Message& m) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;  // camelCase, as dexcli inspect prints
  if (!google::protobuf::util::MessageToJsonString(m, &text, options).ok()) return "unprintable";
  return json::parse(text, nullptr, false);
}

const dex::Channel kSignals("signals");
const dex::Attribute<int64_t> kTotal{"total"};
const dex::AttributeMap<int64_t> kApplied{"applied"};
const dex::AttributeMap<int64_t> kSteps{"steps"};
const dex::AttributeMap<std::string> kNote{"note"};  // clients' SetAttributes only

// What every Step shares: the attempt's record lines, the nonce, the seeded delay.
struct Recorder {
  std::string worker_id;
  uint64_t seed = 1;
  std::atomic<uint64_t> nonce{0};

  // Writes the "run" line, sleeps the seeded time, returns the base of the "done" line.
  json begin(Context& ctx, const char* method, const json* input = nullptr) {
    const std::string exec = ctx.is_rpc() ? ctx.rpc_id() : ctx.step_execution_id();
    const std::string step = ctx.is_rpc() ? "rpc:" + ctx.rpc_name() : ctx.step_type();
    json base = {{"worker", worker_id},
                 {"flow", ctx.flow_id()},
                 {"run", ctx.run_id()},
                 {"exec", exec},
                 {"step", step},
                 {"method", method},
                 {"attempt", ctx.attempt()},
                 {"nonce", ++nonce}};
    json run = base;
    run["ev"] = "run";
    run["t"] = now_ms();
    if (input != nullptr) run["input"] = *input;
    record(run);
    const uint64_t h = std::hash<std::string>{}(ctx.flow_id() + "/" + exec + "/" + method + "/" +
                                                std::to_string(ctx.attempt())) ^
                       seed;
    int64_t work_ms = 5 + static_cast<int64_t>(h % 116);
    // RPCs wait at most 5 s in all: one in forty holds its lock for 0.6-1.5 s.
    if ((h >> 20) % (ctx.is_rpc() ? 40 : 20) == 0) {
      work_ms = 600 + static_cast<int64_t>((h >> 8) % 900);
    }
    for (int64_t slept = 0; slept < work_ms && !ctx.cancelled(); slept += 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return base;
  }
  static json by(const json& base) {
    return {
        {"w", base["worker"]}, {"n", base["nonce"]}, {"a", base["attempt"]}, {"x", base["exec"]}};
  }
  static void fail(json done, const std::string& why, bool non_retryable = false) {
    done["ev"] = "done";
    done["t"] = now_ms();
    done["result"] = "fail";
    done["error"] = why;
    record(done);
    throw dex::FlowFailure(why, non_retryable);
  }
  // A WaitFor's end: its wait and the locals it set ("by": who ran it).
  static Wait waited(json done, Context& ctx, Wait w) {
    ctx.set_local("by", by(done));
    done["ev"] = "done";
    done["t"] = now_ms();
    done["result"] = "wait";
    done["wait"] = proto_json(w.proto());
    done["locals"] = ctx.locals();
    record(done);
    return w;
  }
  static StepDecision decided(json done, StepDecision d) {
    done["ev"] = "done";
    done["t"] = now_ms();
    done["result"] = "decision";
    done["decision"] = proto_json(d.proto());
    record(done);
    return d;
  }
};

json writes_json(const Context& ctx) {
  json out = json::array();
  for (const auto& w : ctx.attribute_writes()) out.push_back(proto_json(w));
  return out;
}

dex::StepOptions options(bool async_execute, bool execute_locks = false) {
  dex::MethodOptions m;
  m.attempt_timeout = std::chrono::seconds(5);
  m.retry.initial_interval = std::chrono::milliseconds(100);
  m.retry.backoff_coefficient = 2;
  m.retry.maximum_interval = std::chrono::seconds(1);
  m.retry.maximum_attempts = 20;
  dex::StepOptions o{m, m};
  o.execute.async = async_execute;
  if (execute_locks) o.execute.lock_keys = {"counter"};
  return o;
}

class Begin final : public dex::Step {
 public:
  explicit Begin(Recorder& r) : r_(r) {}
  std::string type() const override { return "Begin"; }
  dex::StepOptions options() const override { return ::options(false); }
  StepDecision execute(Context& ctx) override {
    json done = r_.begin(ctx, "EXECUTE");
    if (ctx.attempt() == 1) Recorder::fail(done, "chaos: Begin fails its first attempt on purpose");
    json by = Recorder::by(done);
    const int rounds = ctx.input().value("rounds", 3);
    std::vector<dex::Movement> next = {
        {"Fast", {{"by", by}}, std::nullopt},
        {"Gate", {{"by", by}, {"round", 0}, {"rounds", rounds}}, std::nullopt}};
    const std::string fan = ctx.input().value("fan", "");
    if (!fan.empty()) next.push_back({"Fan", {{"by", by}, {"fan", fan}}, std::nullopt});
    return Recorder::decided(done, StepDecision::go_to_multi(std::move(next)));
  }

 private:
  Recorder& r_;
};

class Fast final : public dex::Step {
 public:
  explicit Fast(Recorder& r) : r_(r) {}
  std::string type() const override { return "Fast"; }
  dex::StepOptions options() const override { return ::options(true); }
  StepDecision execute(Context& ctx) override {
    json done = r_.begin(ctx, "EXECUTE");
    return Recorder::decided(done, StepDecision::graceful_complete({{"by", Recorder::by(done)}}));
  }

 private:
  Recorder& r_;
};

class Gate final : public dex::WaitingStep {
 public:
  explicit Gate(Recorder& r) : r_(r) {}
  std::string type() const override { return "Gate"; }
  dex::StepOptions options() const override { return ::options(false, true); }
  Wait wait_for(Context& ctx) override {
    json done = r_.begin(ctx, "WAIT_FOR");
    const int round = ctx.input().value("round", 0);
    const uint64_t h = std::hash<std::string>{}(ctx.flow_id() + ctx.step_execution_id()) ^ r_.seed;
    const auto timer = dex::Timer::after(std::chrono::milliseconds(300 + h % 501));
    Wait w = round % 2 == 0 ? Wait::any_of({kSignals.for_one(), timer})
                            : Wait::all_of({kSignals.at_most(2), timer});
    return Recorder::waited(done, ctx, std::move(w));
  }
  StepDecision execute(Context& ctx) override {
    json done = r_.begin(ctx, "EXECUTE");
    const int round = ctx.input().value("round", 0);
    const int rounds = ctx.input().value("rounds", 3);
    json out = {{"by", Recorder::by(done)},
                {"round", round},
                {"rounds", rounds},
                {"took", ctx.messages(kSignals)},
                {"timer", ctx.timer_fired()}};
    // Under the lock "counter": no RPC "add" runs meanwhile, so total is stable.
    kSteps.set(ctx, ctx.step_execution_id(), kTotal.get(ctx).value_or(0));
    done["writes"] = writes_json(ctx);
    if (round + 1 < rounds) {
      out["round"] = round + 1;
      return Recorder::decided(done, StepDecision::go_to("Gate", out));
    }
    return Recorder::decided(done, StepDecision::graceful_complete(out));
  }

 private:
  Recorder& r_;
};

// The SubFlow plan of one child (what the checker reads back from the wait's
// condition input): how long its WaitFor waits, whether it takes a second Step,
// how many of its runs fail on purpose (1: with a Flow retry of 2 runs), and
// (a child of Fan only: `may_nest`) for 2 in 10 "nest": its WaitFor also starts
// one grandchild (whose plan never nests: depth 2 at most), or for 1 in 10
// "timeout_ms": a flow timeout of 400 ms, its "timeout_policy" one of FAIL
// (ends TIMED_OUT), CANCEL (ends CANCELED) or HANDLER (the timeout handler
// ends it COMPLETED with ForceComplete), with a Timer of 2.5-3 s (60 s under
// HANDLER, so that Work never ends the run before the handler does); half
// of them "retry" (a Flow retry policy of 2 runs: FAIL times out both runs,
// CANCEL and HANDLER never retry). Nesting and timed-out plans never fail on
// purpose; a grandchild may time out too.
json child_input(uint64_t h, int k, bool may_nest) {
  const uint64_t c = h >> (8 + 6 * k);
  const uint64_t kind = (c >> 16) % 10;
  const bool nest = may_nest && kind < 2;
  const bool timeout = kind == 2;
  const int fail_runs = nest || timeout ? 0 : (c % 20 < 14 ? 0 : (c % 20 < 17 ? 1 : 9));
  static constexpr const char* kPolicies[] = {"FAIL", "CANCEL", "HANDLER"};
  const std::string policy = kPolicies[(c >> 24) % 3];
  const int64_t wait_ms = !timeout ? 100 : (policy == "HANDLER" ? 60000 : 2500);
  json plan = {{"k", k},
               {"wait_ms", wait_ms + static_cast<int64_t>((c >> 5) % 501)},
               {"two", (c >> 3) % 2 == 0},
               {"fail_runs", fail_runs}};
  if (nest) plan["nest"] = true;
  if (timeout) {
    plan["timeout_ms"] = 400;
    plan["timeout_policy"] = policy;
    if ((c >> 28) % 2 == 0) plan["retry"] = true;
  }
  return plan;
}

// The SubFlow condition that starts a chaos-child with `plan`.
dex::Condition start_child(const json& plan) {
  dex::SubFlowOptions child;
  if (plan["fail_runs"] == 1 || plan.value("retry", false)) {
    dex::RetryPolicy retry;
    retry.initial_interval = std::chrono::milliseconds(200);
    retry.maximum_attempts = 2;
    child.start.retry(retry);
  }
  if (plan.value("timeout_ms", 0) > 0) {
    const std::string policy = plan.value("timeout_policy", "FAIL");
    child.start.timeout(std::chrono::milliseconds(plan.value("timeout_ms", 0)),
                        policy == "CANCEL"    ? dex::flow::TIMEOUT_CANCEL
                        : policy == "HANDLER" ? dex::flow::TIMEOUT_HANDLER
                                              : dex::flow::TIMEOUT_FAIL);
  }
  return dex::SubFlow::start("chaos-child", plan, child);
}

// What an Execute got of each SubFlow child of its wait (ctx.sub_flows(): flow,
// run, status, reason, fired, outputs).
json sub_flows_json(Context& ctx) {
  json children = json::array();
  for (const dex::SubFlowResult& c : ctx.sub_flows()) {  // bounded by the wait's conditions
    json outputs = json::array();
    for (const auto& o : c.outputs) {
      outputs.push_back({{"exec", o.step_execution_id}, {"output", o.output}});
    }
    children.push_back({{"i", c.condition_index},
                        {"flow", c.flow_id},
                        {"run", c.run_id},
                        {"status", dex::flow::FlowStatus_Name(c.status)},
                        {"reason", c.close_reason},
                        {"fired", c.fired},
                        {"outputs", outputs}});
  }
  return children;
}

class Fan final : public dex::WaitingStep {
 public:
  explicit Fan(Recorder& r) : r_(r) {}
  std::string type() const override { return "Fan"; }
  dex::StepOptions options() const override { return ::options(false); }
  Wait wait_for(Context& ctx) override {
    json done = r_.begin(ctx, "WAIT_FOR");
    const bool any = ctx.input().value("fan", "all") == "any";
    const uint64_t h =
        std::hash<std::string>{}("fan/" + ctx.flow_id() + ctx.step_execution_id()) ^ r_.seed;
    const int children = any ? 2 : 2 + static_cast<int>(h % 2);
    std::vector<dex::Condition> conditions;
    for (int k = 0; k < children; ++k) {
      conditions.push_back(start_child(child_input(h, k, true)).id("c" + std::to_string(k)));
    }
    if (any) {
      conditions.push_back(
          dex::Timer::after(std::chrono::milliseconds(300 + (h >> 40) % 501)).id("t"));
    }
    Wait w = any ? Wait::any_of(std::move(conditions)) : Wait::all_of(std::move(conditions));
    return Recorder::waited(done, ctx, std::move(w));
  }
  StepDecision execute(Context& ctx) override {
    json done = r_.begin(ctx, "EXECUTE");
    json out = {{"by", Recorder::by(done)},
                {"fan", ctx.input().value("fan", "all")},
                {"children", sub_flows_json(ctx)},
                {"timer", ctx.timer_fired()}};
    return Recorder::decided(done, StepDecision::graceful_complete(out));
  }

 private:
  Recorder& r_;
};

class ChaosFlow final : public dex::Flow {
 public:
  explicit ChaosFlow(Recorder& r) : r_(r) {}
  std::string type() const override { return "chaos"; }
  std::string start_step() const override { return "Begin"; }
  std::vector<std::shared_ptr<dex::Step>> steps() const override {
    return {std::make_shared<Begin>(r_), std::make_shared<Fast>(r_), std::make_shared<Gate>(r_),
            std::make_shared<Fan>(r_)};
  }
  std::vector<dex::Channel> channels() const override { return {kSignals}; }
  std::vector<dex::AttributeDef> attributes() const override {
    return {kTotal, kApplied, kSteps, kNote};
  }
  std::vector<dex::Rpc> rpcs() const override {
    Recorder* r = &r_;
    return {dex::Rpc(
        "add",
        [r](Context& ctx, const json& input) -> dex::RpcResult {
          json done = r->begin(ctx, "RPC", &input);
          done["ev"] = "done";
          const std::string id = input.value("id", "");
          const int64_t n = input.value("n", int64_t{0});
          json out = {{"by", Recorder::by(done)}};
          if (id.empty()) {
            done["t"] = now_ms();
            done["result"] = "fail";
            done["error"] = "chaos: add without an id";
            record(done);
            throw dex::FlowFailure("chaos: add without an id", true);
          }
          if (auto seen = kApplied.get(ctx, id)) {
            out["repeat"] = true;
            out["n"] = *seen;
          } else {
            const int64_t total = kTotal.get(ctx).value_or(0) + n;
            kTotal.set(ctx, total);
            kApplied.set(ctx, id, n);
            out["n"] = n;
            out["total"] = total;
          }
          done["t"] = now_ms();
          done["result"] = "rpc";
          done["output"] = out;
          done["writes"] = writes_json(ctx);
          record(done);
          return out;
        },
        dex::RpcOptions{{"counter"}, dex::AttributeReads::all()})};
  }

 private:
  Recorder& r_;
};

// The SubFlow child: Work (a Timer, then Execute), sometimes Finish; fails the
// runs its plan says.
// `children`: what a nesting child's Work Execute got of its grandchild.
StepDecision child_end(Context& ctx, json done, const json* children = nullptr) {
  const int fail_runs = ctx.input().value("fail_runs", 0);
  if (static_cast<int>(ctx.flow_attempt()) <= fail_runs) {
    Recorder::fail(
        done, "chaos: chaos-child fails run " + std::to_string(ctx.flow_attempt()) + " on purpose",
        true);
  }
  json out = {{"by", Recorder::by(done)},
              {"k", ctx.input().value("k", 0)},
              {"attempt", ctx.flow_attempt()}};
  if (children != nullptr) out["children"] = *children;
  return Recorder::decided(done, StepDecision::graceful_complete(out));
}

class Work final : public dex::WaitingStep {
 public:
  explicit Work(Recorder& r) : r_(r) {}
  std::string type() const override { return "Work"; }
  dex::StepOptions options() const override { return ::options(false); }
  Wait wait_for(Context& ctx) override {
    json done = r_.begin(ctx, "WAIT_FOR");
    std::vector<dex::Condition> conditions = {
        dex::Timer::after(std::chrono::milliseconds(ctx.input().value("wait_ms", 100)))};
    if (ctx.input().value("nest", false)) {  // one grandchild, condition 1; it never nests
      const uint64_t h =
          std::hash<std::string>{}("nest/" + ctx.flow_id() + ctx.step_execution_id()) ^ r_.seed;
      conditions.push_back(start_child(child_input(h, 0, false)).id("g0"));
    }
    Wait w = Wait::all_of(std::move(conditions));
    return Recorder::waited(done, ctx, std::move(w));
  }
  StepDecision execute(Context& ctx) override {
    json done = r_.begin(ctx, "EXECUTE");
    const bool nest = ctx.input().value("nest", false);
    const json children = nest ? sub_flows_json(ctx) : json::array();
    if (ctx.input().value("two", false)) {
      json next = ctx.input();
      next["by"] = Recorder::by(done);
      if (nest) next["children"] = children;
      return Recorder::decided(done, StepDecision::go_to("Finish", next));
    }
    return child_end(ctx, done, nest ? &children : nullptr);
  }

 private:
  Recorder& r_;
};

class Finish final : public dex::Step {
 public:
  explicit Finish(Recorder& r) : r_(r) {}
  std::string type() const override { return "Finish"; }
  dex::StepOptions options() const override { return ::options(true); }
  StepDecision execute(Context& ctx) override { return child_end(ctx, r_.begin(ctx, "EXECUTE")); }

 private:
  Recorder& r_;
};

class ChildFlow final : public dex::Flow {
 public:
  explicit ChildFlow(Recorder& r) : r_(r) {}
  std::string type() const override { return "chaos-child"; }
  std::string start_step() const override { return "Work"; }
  std::vector<std::shared_ptr<dex::Step>> steps() const override {
    return {std::make_shared<Work>(r_), std::make_shared<Finish>(r_)};
  }
  // Runs of plans with timeout policy HANDLER: ForceComplete, which cancels Work.
  bool has_timeout_handler() const override { return true; }
  StepDecision on_timeout(Context& ctx) override {
    json done = r_.begin(ctx, "ON_TIMEOUT");
    if (ctx.attempt() == 1) {  // so that every handler's retry (a RETRY timer) is exercised
      Recorder::fail(done, "chaos: the timeout handler fails its first attempt on purpose");
    }
    json out = {{"by", Recorder::by(done)}, {"k", ctx.input().value("k", 0)}, {"handled", true}};
    return Recorder::decided(done, StepDecision::force_complete(out));
  }
  dex::MethodOptions timeout_handler_options() const override { return ::options(false).execute; }

 private:
  Recorder& r_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chaos_worker: hosts the chaos Flow and records every attempt it runs"};
  std::string servers_text, history_path, worker_id;
  uint32_t concurrency = 8;
  uint64_t seed = 1;
  app.add_option("--servers", servers_text, "Every address of the node, comma-separated")
      ->required();
  app.add_option("--history", history_path, "JSON-lines history file (appended)")->required();
  app.add_option("--worker-id", worker_id, "Worker ID")->required();
  app.add_option("--concurrency", concurrency, "Tasks run at once")->check(CLI::Range(1u, 256u));
  app.add_option("--seed", seed, "Seed of the Step durations");
  app.set_version_flag("--version", dex::version_line("chaos_worker"));
  CLI11_PARSE(app, argc, argv);
  auto servers = dex::parse_server_addresses(servers_text);
  if (!servers.is_ok()) {
    std::cerr << "chaos_worker: --servers: " << servers.status().message() << "\n";
    return 2;
  }
  g_history = std::fopen(history_path.c_str(), "a");
  if (g_history == nullptr) {
    std::cerr << "chaos_worker: cannot open " << history_path << "\n";
    return 2;
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  dex::WorkerOptions options;
  options.server_addresses = servers.value();
  options.worker_id = worker_id;
  options.max_concurrent_tasks = concurrency;
  options.reconnect_backoff_max = dex::seconds(1);
  options.shutdown_timeout = dex::seconds(5);
  dex::Worker worker(options);
  Recorder recorder;
  recorder.worker_id = worker_id;
  recorder.seed = seed;
  worker.host(std::make_shared<ChaosFlow>(recorder));
  worker.host(std::make_shared<ChildFlow>(recorder));

  std::thread signal_thread([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    spdlog::info("chaos_worker: signal {}: shutting down", signal);
    worker.shutdown();
  });
  signal_thread.detach();
  dex::Status s = worker.run();
  if (!s.is_ok()) {
    std::cerr << "chaos_worker: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
