// chaos_client: the clients of the fault-injection harness (tests/chaos/README.md).
//
// Load mode: several lanes, each with its own dex::Client over every address of
// the node, start runs of the chaos Flow (chaos_worker.cc) with known Flow IDs
// (<prefix>-l<lane>-<n>), publish messages to the Channel "signals" of runs
// they started, and now and then read back a Flow acknowledged earlier. Every
// request is one JSON line in the history file, written when its answer (or
// error) arrived:
//
//   {"op":"start","lane":0,"flow":"s7-l0-000012","req":"start-s7-l0-000012","try":1,
//    "t0":<unix ms>,"t1":<unix ms>,"ok":true,"existed":false,"run":"<run id>",
//    "addr":"127.0.0.1:4101"}
//   {"op":"publish","lane":0,"flow":"s7-l0-000010","req":"pub-s7-l0-000031",
//    "msg":"m-s7-l0-000031","try":2,"t0":..,"t1":..,"ok":false,"code":"UNAVAILABLE",
//    "msg_text":"...","addr":"127.0.0.1:4102"}
//   {"op":"get","lane":0,"flow":"s7-l0-000003","t0":..,"t1":..,"ok":true,
//    "status":"FLOW_RUNNING","addr":..,"acked_before":true}
//
// t0 is taken just before the call, t1 just after it (wall clock, microsecond
// resolution, printed as fractional milliseconds). "addr" is the address that
// answered. A start that failed is retried with the same Flow ID and the same
// request ID (StartOptions.request_id, ignore_already_started) up to --tries
// times, then the lane moves on. The starts' ID reuse policy is the server's
// default (ALLOW_IF_NO_RUNNING) unless --id-reuse-policy disallow: a repeat
// that arrives after the first run completed (a call that spanned a failover)
// must answer that run, not start a second (tests/chaos/README.md). A publish carries one message
// whose content is unique in the run ("m-..."), and its own request ID ("pub-..."): it is sent by
// this program's own stubs, one history line per call (every address in turn, on UNAVAILABLE or
// DEADLINE_EXCEEDED the next one with the same request ID, within --timeout), so that the
// checker sees which process answered each try and when; Client::publish retries inside one
// call and reports only the outcome.
//
// RPCs and Attributes: after about --rpc-ratio of the starts the lane invokes the RPC "add" of a
// run it started in the last 2.5 s, with a request ID "rpc-<prefix>-l<lane>-<k>", input
// {"id": that request ID, "n": 1..7}; now and then (--repeat-ratio) instead an id acknowledged in
// the last 2 s again under a new request ID ("rpcr-..."), which must answer {"repeat": true}. After
// about --set-ratio of the starts it sets the AttributeMap instance note[l<lane>] of such a run to
// a unique value ("v-<prefix>-l<lane>-<k>"). Both go through this program's own stubs like a
// publish (one line per call, every address in turn with the same request):
//
//   {"op":"rpc","lane":0,"flow":..,"req":"rpc-s7-l0-000004","id":"rpc-s7-l0-000004","n":5,
//    "try":1,"t0":..,"t1":..,"ok":true,"run":..,"output":{"n":5,"total":9,"by":{..}},"addr":..}
//   {"op":"set","lane":0,"flow":..,"inst":"l0","value":"v-s7-l0-000002","try":1,..,"ok":true}
//
// SubFlows: about --fan-ratio of the starts carry "fan": "all" (2 in 3) or "any" in their input,
// and the run's Fan Step waits on SubFlows of chaos-child (chaos_worker.cc).
//
// Readback mode (--readback IDS --out FILE): for every Flow ID in IDS (one a
// line), waits until its run closed (all together within --wait seconds), then
// writes {flow id: {"description": DescribeFlow, "events": [every history
// event], "attributes": GetAttributes, "earlier": [{"description", "events"} of
// each earlier run, after Flow retries], "error": "..."}} as protobuf JSON: the final state the
// checker reads. The SubFlow children that those histories started (SUB_FLOW_STARTED) are
// read back the same way after them, and their children (grandchildren) after those: at most
// two SubFlow levels.
#include <google/protobuf/util/json_util.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/units.h"
#include "common/version.h"
#include "dex/api.grpc.pb.h"
#include "sdk/addresses.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/grpc_status.h"

namespace {

using nlohmann::json;
namespace flow = dex::flow;

double now_ms() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() / 1000.0;
}

json proto_json(const google::protobuf::Message& m) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;  // camelCase, as dexcli inspect prints
  if (!google::protobuf::util::MessageToJsonString(m, &text, options).ok()) return "unprintable";
  return json::parse(text, nullptr, false);
}

class History {
 public:
  explicit History(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {}
  ~History() {
    if (file_ != nullptr) std::fclose(file_);
  }
  bool ok() const { return file_ != nullptr; }
  void write(const json& line) {
    std::string text = line.dump() + "\n";
    std::lock_guard<std::mutex> lock(mu_);
    std::fwrite(text.data(), 1, text.size(), file_);
    std::fflush(file_);
  }

 private:
  std::FILE* file_;
  std::mutex mu_;
};

struct Settings {
  std::vector<std::string> servers;
  std::string prefix = "chaos";
  std::string flow_type = "chaos";
  uint32_t lanes = 4;
  double rate = 10;  // flow starts per second, all lanes together
  double get_ratio = 0.3;
  double publish_ratio = 0.8;
  double rpc_ratio = 0.6;
  double repeat_ratio = 0.15;
  double set_ratio = 0.3;
  double fan_ratio = 0.36;  // runs with a Fan Step (SubFlows): 2 in 3 AllOf, 1 in 3 AnyOf
  uint32_t rounds = 3;
  uint32_t tries = 3;
  flow::IdReusePolicy id_reuse = flow::ALLOW_IF_NO_RUNNING;
  dex::Duration timeout = dex::seconds(15);
  double duration_s = 60;
  std::string stop_file;
  uint64_t seed = 1;
};

struct Counters {
  std::atomic<uint64_t> ops{0}, starts_ok{0}, starts_failed{0}, gets_ok{0}, gets_failed{0},
      publishes_ok{0}, publishes_failed{0}, rpcs_ok{0}, rpcs_failed{0}, sets_ok{0}, sets_failed{0};
};

void record_error(json& line, const dex::Status& status) {
  line["ok"] = false;
  line["code"] = std::string(dex::sdk_internal::grpc_code_of(status));
  std::string msg = status.message();
  if (msg.size() > 300) msg.resize(300);
  line["msg_text"] = msg;
}

// dex.FlowService calls through stubs of our own over every address, so that every try is one
// history line with the address that answered: PublishToChannel with a request ID the caller
// chooses, InvokeRpc, SetAttributes.
class Caller {
 public:
  explicit Caller(const std::vector<std::string>& servers) : servers_(servers) {
    for (const auto& s : servers) {
      stubs_.push_back(dex::FlowService::NewStub(
          dex::sdk_internal::make_channel(s, dex::milliseconds(100), dex::seconds(1))));
    }
  }

  // `call(stub, ctx, line)` makes one call (filling `line` on success). Every address in turn,
  // the next one on UNAVAILABLE or DEADLINE_EXCEEDED, within `budget`; one line per call; true
  // once a call answered OK.
  using Call = std::function<grpc::Status(dex::FlowService::Stub&, grpc::ClientContext&, json&)>;
  bool call(const json& base, const Call& call, dex::Duration budget, dex::Duration per_call,
            History& history, Counters& counters, std::atomic<uint64_t>& ok,
            std::atomic<uint64_t>& failed, const std::atomic<bool>& stop) {
    const auto until = std::chrono::steady_clock::now() + budget;
    auto backoff = std::chrono::milliseconds(50);
    uint32_t tries = 0;
    while (std::chrono::steady_clock::now() < until) {
      for (size_t k = 0; k < servers_.size(); ++k) {
        const size_t i = (preferred_ + k) % servers_.size();
        const auto left = until - std::chrono::steady_clock::now();
        if (left <= std::chrono::milliseconds(0)) break;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() +
                         std::min<std::chrono::nanoseconds>(left, per_call));
        json line = base;
        line["try"] = ++tries;
        line["addr"] = servers_[i];
        line["t0"] = now_ms();
        grpc::Status s = call(*stubs_[i], ctx, line);
        line["t1"] = now_ms();
        counters.ops++;
        if (s.ok()) {
          line["ok"] = true;
          history.write(line);
          ok++;
          preferred_ = i;
          return true;
        }
        line["ok"] = false;
        line["code"] = std::string(dex::sdk_internal::grpc_code_name(s.error_code()));
        std::string msg = s.error_message();
        if (msg.size() > 300) msg.resize(300);
        line["msg_text"] = msg;
        history.write(line);
        failed++;
        if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
            s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
          preferred_ = i;
          return false;  // an answer: the run is closed, say
        }
      }
      if (stop.load()) return false;
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
    return false;
  }

 private:
  std::vector<std::string> servers_;
  std::vector<std::unique_ptr<dex::FlowService::Stub>> stubs_;
  size_t preferred_ = 0;
};

void run_lane(const Settings& settings, uint32_t lane, History& history, Counters& counters,
              const std::atomic<bool>& stop) {
  dex::ClientOptions options;
  options.server_addresses = settings.servers;
  options.timeout = settings.timeout;
  options.connect_timeout = dex::milliseconds(500);
  dex::Client client(options);
  Caller caller(settings.servers);
  uint64_t rpcs = 0, sets = 0;
  // (acked at, flow, input) of acknowledged adds of the last 2 s (their runs likely still run).
  std::deque<std::tuple<double, std::string, json>> rpcs_acked;
  std::mt19937_64 rng(settings.seed * 1000 + lane);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<std::string> acknowledged;
  std::deque<std::pair<double, std::string>> recent;  // (acked at, flow): likely still running
  const double pause_ms = 1000.0 * settings.lanes / settings.rate;
  const json plain = {{"lane", lane}, {"rounds", settings.rounds}};
  uint64_t messages = 0;
  for (uint64_t n = 0; !stop.load(); ++n) {
    json input = plain;
    if (const double f = unit(rng); f < settings.fan_ratio) {
      input["fan"] = f < settings.fan_ratio * 2 / 3 ? "all" : "any";
    }
    char id[64];
    std::snprintf(id, sizeof id, "-l%u-%06llu", lane, static_cast<unsigned long long>(n));
    const std::string flow_id = settings.prefix + id;
    const std::string request_id = "start-" + flow_id;
    const double started = now_ms();
    for (uint32_t attempt = 1; attempt <= settings.tries && !stop.load(); ++attempt) {
      json line = {{"op", "start"},
                   {"lane", lane},
                   {"flow", flow_id},
                   {"req", request_id},
                   {"try", attempt}};
      flow::StartOptions start_options;
      start_options.set_request_id(request_id);
      start_options.set_ignore_already_started(true);
      start_options.set_id_reuse_policy(settings.id_reuse);
      line["t0"] = now_ms();
      auto result = client.start(settings.flow_type, flow_id, input, start_options);
      line["t1"] = now_ms();
      line["addr"] = client.preferred_address();
      counters.ops++;
      if (result.is_ok()) {
        line["ok"] = true;
        line["existed"] = result->already_started();
        line["run"] = result->run_id();
        history.write(line);
        counters.starts_ok++;
        acknowledged.push_back(flow_id);
        recent.emplace_back(now_ms(), flow_id);
        break;
      }
      record_error(line, result.status());
      history.write(line);
      counters.starts_failed++;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // A message to a run acknowledged in the last 2.5 s (most still wait on "signals").
    while (!recent.empty() && recent.front().first < now_ms() - 2500) recent.pop_front();
    if (!recent.empty() && unit(rng) < settings.publish_ratio && !stop.load()) {
      const std::string& target = recent[rng() % recent.size()].second;
      char tail[64];
      std::snprintf(tail, sizeof tail, "-l%u-%06llu", lane,
                    static_cast<unsigned long long>(messages++));
      const std::string msg = "m-" + settings.prefix + tail;
      flow::PublishToChannelRequest request;
      request.set_flow_id(target);
      request.set_channel("signals");
      request.set_request_id("pub-" + settings.prefix + tail);
      *request.add_messages() = dex::to_payload(json{{"m", msg}});
      json base = {{"op", "publish"},
                   {"lane", lane},
                   {"flow", target},
                   {"req", request.request_id()},
                   {"msg", msg}};
      caller.call(
          base,
          [&](dex::FlowService::Stub& stub, grpc::ClientContext& ctx, json&) {
            flow::PublishToChannelResponse response;
            return stub.PublishToChannel(&ctx, request, &response);
          },
          settings.timeout, dex::seconds(2), history, counters, counters.publishes_ok,
          counters.publishes_failed, stop);
    }
    // The RPC "add" on a recent run, or again (new request ID, same id) after an acked one.
    if (!recent.empty() && unit(rng) < settings.rpc_ratio && !stop.load()) {
      char tail[64];
      std::snprintf(tail, sizeof tail, "-l%u-%06llu", lane,
                    static_cast<unsigned long long>(rpcs++));
      flow::InvokeRpcRequest request;
      json input;
      std::string target;
      while (!rpcs_acked.empty() && std::get<0>(rpcs_acked.front()) < now_ms() - 2000) {
        rpcs_acked.pop_front();
      }
      if (!rpcs_acked.empty() && unit(rng) < settings.repeat_ratio) {
        std::tie(std::ignore, target, input) = rpcs_acked[rng() % rpcs_acked.size()];
        request.set_request_id("rpcr-" + settings.prefix + tail);
      } else {
        target = recent[rng() % recent.size()].second;
        request.set_request_id("rpc-" + settings.prefix + tail);
        input = {{"id", request.request_id()}, {"n", 1 + static_cast<int64_t>(rng() % 7)}};
      }
      request.mutable_flow()->set_flow_id(target);
      request.set_name("add");
      *request.mutable_input() = dex::to_payload(input);
      request.set_timeout_ms(4000);
      json base = {{"op", "rpc"},       {"lane", lane},
                   {"flow", target},    {"req", request.request_id()},
                   {"id", input["id"]}, {"n", input["n"]}};
      const bool ok = caller.call(
          base,
          [&](dex::FlowService::Stub& stub, grpc::ClientContext& ctx, json& line) {
            flow::InvokeRpcResponse response;
            grpc::Status s = stub.InvokeRpc(&ctx, request, &response);
            if (s.ok()) {
              line["run"] = response.run_id();
              line["output"] = json::parse(response.output().data(), nullptr, false);
            }
            return s;
          },
          settings.timeout, dex::seconds(5), history, counters, counters.rpcs_ok,
          counters.rpcs_failed, stop);
      if (ok && request.request_id().rfind("rpc-", 0) == 0) {
        rpcs_acked.emplace_back(now_ms(), target, input);
      }
    }
    // A client-only Attribute: note[l<lane>] of a recent run, a unique value each time.
    if (!recent.empty() && unit(rng) < settings.set_ratio && !stop.load()) {
      char tail[64];
      std::snprintf(tail, sizeof tail, "-l%u-%06llu", lane,
                    static_cast<unsigned long long>(sets++));
      const std::string target = recent[rng() % recent.size()].second;
      const std::string inst = "l" + std::to_string(lane);
      const std::string value = "v-" + settings.prefix + tail;
      flow::SetAttributesRequest request;
      request.mutable_flow()->set_flow_id(target);
      auto* w = request.add_writes();
      w->set_key("note");
      w->set_instance_key(inst);
      w->mutable_value()->set_string_value(value);
      json base = {
          {"op", "set"}, {"lane", lane}, {"flow", target}, {"inst", inst}, {"value", value}};
      caller.call(
          base,
          [&](dex::FlowService::Stub& stub, grpc::ClientContext& ctx, json& line) {
            flow::SetAttributesResponse response;
            grpc::Status s = stub.SetAttributes(&ctx, request, &response);
            if (s.ok()) line["run"] = response.run_id();
            return s;
          },
          settings.timeout, dex::seconds(2), history, counters, counters.sets_ok,
          counters.sets_failed, stop);
    }
    // A read of a flow acknowledged before this read was sent: it must be found.
    if (!acknowledged.empty() && unit(rng) < settings.get_ratio && !stop.load()) {
      const std::string& target = acknowledged[rng() % acknowledged.size()];
      json line = {{"op", "get"}, {"lane", lane}, {"flow", target}, {"acked_before", true}};
      line["t0"] = now_ms();
      auto got = client.describe_flow(target);
      line["t1"] = now_ms();
      line["addr"] = client.preferred_address();
      counters.ops++;
      if (got.is_ok()) {
        line["ok"] = true;
        line["status"] = flow::FlowStatus_Name(got->status());
        line["run"] = got->run_id();
        counters.gets_ok++;
      } else {
        record_error(line, got.status());
        counters.gets_failed++;
      }
      history.write(line);
    }
    const double spent = now_ms() - started;
    // Jittered pacing so that lanes do not move in lockstep.
    const double wait = pause_ms * (0.5 + unit(rng)) - spent;
    if (wait > 0) std::this_thread::sleep_for(std::chrono::microseconds(int64_t(wait * 1000)));
  }
}

// Every history event of one run, appended to `events`; the SubFlow children
// its SUB_FLOW_STARTED events name, appended to `children`.
dex::Status read_events(dex::Client& client, const std::string& id, const std::string& run_id,
                        json& events, std::vector<std::string>& children) {
  uint64_t after = 0;
  for (bool first = true;; first = false) {  // bounded by the run's history, 1000 a page
    auto h = client.history(id, after, first, 1000, run_id);
    if (!h.is_ok()) return h.status();
    for (const auto& e : h->events()) {
      events.push_back(proto_json(e));
      after = e.seq();
      if (e.kind() == flow::SUB_FLOW_STARTED && !e.child_flow_id().empty()) {
        children.push_back(e.child_flow_id());
      }
    }
    if (!h->more() || h->events().empty()) return dex::Status::ok();
  }
}

// One Flow's final state: the latest run's description, history and
// Attributes, and ("earlier") each earlier run's description and history when
// Flow retries made more than one. Retries a failed read 5 times.
json read_flow(dex::Client& client, const std::string& id, std::vector<std::string>& children,
               bool& running) {
  json entry = json::object();
  for (int attempt = 0; attempt < 5; ++attempt) {
    entry = json::object();
    std::vector<std::string> found;
    auto d = client.describe_flow(id);
    if (!d.is_ok()) {
      entry["error"] = d.status().message();
      if (dex::sdk_internal::grpc_code_of(d.status()) == "NOT_FOUND") break;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    entry["description"] = proto_json(d.value());
    json events = json::array();
    dex::Status s = read_events(client, id, d->run_id(), events, found);
    json earlier = json::array();
    // Bounded by the Flow retry policy's runs (at most 10 read here).
    for (std::string prev = d->previous_run_id();
         s.is_ok() && !prev.empty() && earlier.size() < 10;) {
      auto pd = client.describe_flow(id, prev);
      if (!pd.is_ok()) {
        s = pd.status();
        break;
      }
      json run = {{"description", proto_json(pd.value())}, {"events", json::array()}};
      s = read_events(client, id, prev, run["events"], found);
      earlier.push_back(std::move(run));
      prev = pd->previous_run_id();
    }
    if (!s.is_ok()) {
      entry["error"] = s.message();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    entry["events"] = events;
    if (!earlier.empty()) entry["earlier"] = earlier;
    auto a = client.get_attributes(id, d->run_id());
    if (!a.is_ok()) {
      entry["error"] = a.status().message();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    entry["attributes"] = proto_json(a.value());
    running = d->status() == flow::FLOW_RUNNING;
    children.insert(children.end(), found.begin(), found.end());
    break;
  }
  return entry;
}

// Waits for every run to close (within `wait_s` in all), then dumps each Flow's
// description, history and Attributes; then does the same for the SubFlow
// children those histories started, and theirs (at most kMaxDepth levels).
int readback(const Settings& settings, const std::string& ids_path, const std::string& out_path,
             double wait_s) {
  std::vector<std::string> ids;
  {
    std::ifstream in(ids_path);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) ids.push_back(line);
  }
  std::set<std::string> known(ids.begin(), ids.end());
  dex::ClientOptions options;
  options.server_addresses = settings.servers;
  options.timeout = settings.timeout;
  options.connect_timeout = dex::milliseconds(500);
  dex::Client client(options);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(wait_s * 1000));
  size_t open = 0, listed = ids.size(), beyond = 0;
  json out = json::object();
  // One round per SubFlow level: the lanes' Flows, their children, the children's
  // grandchildren (a nesting chaos-child starts one; a grandchild's plan never
  // nests). Children found in the last level's histories are counted, not read:
  // the checker reports a SUB_FLOW_STARTED that its run's recorded wait does not
  // hold, and chaos_worker.cc never nests deeper.
  constexpr int kMaxDepth = 2;
  for (size_t begin = 0, depth = 0; begin < ids.size(); ++depth) {
    const size_t end = ids.size();
    for (size_t i = begin; i < end; ++i) {
      for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        auto w = client.wait_for_flow(ids[i], std::min<dex::Duration>(left, dex::seconds(20)));
        if (w.is_ok() && w->closed()) break;
        if (!w.is_ok() && dex::sdk_internal::grpc_code_of(w.status()) == "NOT_FOUND") break;
        if (!w.is_ok()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    for (size_t i = begin; i < end; ++i) {
      std::vector<std::string> children;
      bool running = false;
      out[ids[i]] = read_flow(client, ids[i], children, running);
      open += running;
      for (auto& c : children) {
        if (depth >= kMaxDepth) {
          beyond += known.insert(c).second;
        } else if (known.insert(c).second) {
          ids.push_back(std::move(c));
        }
      }
    }
    begin = end;
  }
  std::ofstream f(out_path);
  f << out.dump() << "\n";
  std::cout << "chaos_client: read back " << ids.size() << " flows (" << listed << " started by "
            << "the lanes, " << ids.size() - listed << " SubFlow children and grandchildren), "
            << open << " still running, " << beyond << " SubFlow children deeper than " << kMaxDepth
            << " not read" << std::endl;
  return f.good() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chaos_client: Flow starts, publishes and reads, every request recorded"};
  Settings settings;
  std::string servers_text, history_path, timeout_text = "15s", readback_path, out_path;
  double wait_s = 240;
  app.add_option("--servers", servers_text, "Every address of the node, comma-separated")
      ->required();
  app.add_option("--history", history_path, "JSON-lines history file (appended)");
  app.add_option("--prefix", settings.prefix, "Flow ID prefix")->capture_default_str();
  app.add_option("--flow-type", settings.flow_type, "Flow type to start")->capture_default_str();
  app.add_option("--lanes", settings.lanes, "Concurrent lanes")->check(CLI::Range(1u, 64u));
  app.add_option("--rate", settings.rate, "Flow starts per second, all lanes")
      ->check(CLI::PositiveNumber);
  app.add_option("--get-ratio", settings.get_ratio, "Probability of a read after each start");
  app.add_option("--publish-ratio", settings.publish_ratio,
                 "Probability of a publish after each start");
  app.add_option("--rpc-ratio", settings.rpc_ratio, "Probability of an RPC after each start");
  app.add_option("--repeat-ratio", settings.repeat_ratio,
                 "Probability that an RPC repeats an acknowledged one's id");
  app.add_option("--set-ratio", settings.set_ratio,
                 "Probability of a SetAttributes after each start");
  app.add_option("--fan-ratio", settings.fan_ratio,
                 "Share of runs with a Fan Step that waits on SubFlows (2 in 3 AllOf)");
  app.add_option("--rounds", settings.rounds, "Gate rounds of each run")
      ->check(CLI::Range(1u, 20u));
  std::string id_reuse = "allow-if-no-running";
  app.add_option(
         "--id-reuse-policy", id_reuse,
         "allow-if-no-running (default, the server's) or disallow: the starts' ID reuse policy")
      ->check(CLI::IsMember({"disallow", "allow-if-no-running"}));
  app.add_option("--tries", settings.tries, "Attempts per flow start")->check(CLI::Range(1u, 20u));
  app.add_option("--timeout", timeout_text, "Deadline of each call")->capture_default_str();
  app.add_option("--duration", settings.duration_s, "Seconds to run")->check(CLI::PositiveNumber);
  app.add_option("--stop-file", settings.stop_file, "Stop when this file exists");
  app.add_option("--seed", settings.seed, "Seed of the lanes' choices");
  app.add_option("--readback", readback_path, "Readback mode: a file of Flow IDs, one a line");
  app.add_option("--out", out_path, "Readback mode: the JSON file to write");
  app.add_option("--wait", wait_s, "Readback mode: seconds to wait for the runs to close");
  app.set_version_flag("--version", dex::version_line("chaos_client"));
  CLI11_PARSE(app, argc, argv);
  auto servers = dex::parse_server_addresses(servers_text);
  if (!servers.is_ok()) {
    std::cerr << "chaos_client: --servers: " << servers.status().message() << "\n";
    return 2;
  }
  settings.servers = servers.value();
  settings.id_reuse = id_reuse == "disallow" ? flow::DISALLOW : flow::ALLOW_IF_NO_RUNNING;
  auto timeout = dex::parse_duration(timeout_text);
  if (!timeout.is_ok()) {
    std::cerr << "chaos_client: --timeout: " << timeout.status().message() << "\n";
    return 2;
  }
  settings.timeout = timeout.value();
  if (!readback_path.empty()) {
    if (out_path.empty()) {
      std::cerr << "chaos_client: --readback needs --out\n";
      return 2;
    }
    return readback(settings, readback_path, out_path, wait_s);
  }
  if (history_path.empty()) {
    std::cerr << "chaos_client: --history is required\n";
    return 2;
  }
  History history(history_path);
  if (!history.ok()) {
    std::cerr << "chaos_client: cannot open " << history_path << "\n";
    return 2;
  }
  Counters counters;
  std::atomic<bool> stop{false};
  std::vector<std::thread> lanes;
  for (uint32_t lane = 0; lane < settings.lanes; ++lane) {
    lanes.emplace_back(run_lane, std::cref(settings), lane, std::ref(history), std::ref(counters),
                       std::cref(stop));
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int64_t(settings.duration_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    if (!settings.stop_file.empty() && std::filesystem::exists(settings.stop_file)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop = true;
  for (auto& t : lanes) t.join();  // bounded: each call by --timeout, at most --tries per flow
  std::cout << "chaos_client: " << counters.ops << " requests, starts " << counters.starts_ok
            << " ok / " << counters.starts_failed << " failed, publishes " << counters.publishes_ok
            << " ok / " << counters.publishes_failed << " failed calls, rpcs " << counters.rpcs_ok
            << " ok / " << counters.rpcs_failed << " failed calls, sets " << counters.sets_ok
            << " ok / " << counters.sets_failed << " failed calls, reads " << counters.gets_ok
            << " ok / " << counters.gets_failed << " failed" << std::endl;
  return 0;
}
