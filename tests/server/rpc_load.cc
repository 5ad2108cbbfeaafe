// dex-rpc-load: many RPCs and SetAttributes in flight at once on running
// E2ECounter Flows (examples/flows/e2e_counter.cc), for the failover test
// tests/server/test_rpc_failover.py.
//
// Every operation has its own thread and starts at its own time, spread evenly
// over --spread-ms, so that a failover in that window finds many of them in
// flight. Operation i < --rpcs is the RPC `add` {"id": "r<i>", "n": i % 7 + 1}
// on Flow i % flows with request ID "rpc-r<i>" (the Client repeats it on
// another process with that ID after UNAVAILABLE, and this program repeats
// the call when no process could be reached, within --timeout-s); the others
// write the Attribute note[s<j>] = "v<j>" with SetAttributes. One JSON
// line per operation on stdout, when it ended:
//   {"op":"rpc","flow":"c3","id":"r13","n":7,"ok":true,"output":{"total":42}}
//   {"op":"set","flow":"c1","id":"s4","value":"v4","ok":false,"code":"Transient","error":"..."}
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sdk/client.h"

namespace {

struct Flags {
  std::string servers;
  std::vector<std::string> flows;
  int rpcs = 200;
  int sets = 100;
  int spread_ms = 10'000;
  int timeout_s = 60;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)  // bounded by the text
    if (!part.empty()) out.push_back(part);
  return out;
}

nlohmann::json run_once(dex::Client& client, const Flags& flags, int i) {
  nlohmann::json line;
  const std::string& flow = flags.flows[static_cast<size_t>(i) % flags.flows.size()];
  line["flow"] = flow;
  dex::Status status;
  if (i < flags.rpcs) {
    const std::string id = "r" + std::to_string(i);
    const int n = i % 7 + 1;
    line["op"] = "rpc";
    line["id"] = id;
    line["n"] = n;
    dex::InvokeRpcOptions options;
    options.timeout = dex::seconds(20);
    options.request_id = "rpc-" + id;
    auto out = client.invoke_rpc(flow, "add", {{"id", id}, {"n", n}}, options);
    if (out.is_ok()) line["output"] = *out;
    status = out.status();
  } else {
    const std::string id = "s" + std::to_string(i - flags.rpcs);
    const std::string value = "v" + std::to_string(i - flags.rpcs);
    line["op"] = "set";
    line["id"] = id;
    line["value"] = value;
    dex::flow::Attribute write;
    write.set_key("note");
    write.set_instance_key(id);
    write.mutable_value()->set_string_value(value);
    status = client.set_attributes(flow, {write});
  }
  line["ok"] = status.is_ok();
  if (!status.is_ok()) {
    line["code"] = std::string(dex::code_name(status.code()));
    line["error"] = status.message();
  }
  return line;
}

// One operation, repeated with the same request ID (or the same write) while the
// node cannot be reached (the Client gives up after a short grace when no
// process listens, during a takeover's gap), within --timeout-s: as an
// application would retry.
nlohmann::json run_op(dex::Client& client, const Flags& flags, int i) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(flags.timeout_s);
  nlohmann::json line;
  // Bounded by the deadline; each try takes at least the Client's grace.
  for (int tries = 1;; ++tries) {
    line = run_once(client, flags, i);
    line["tries"] = tries;
    if (line["ok"] || line["code"] != "Transient" || std::chrono::steady_clock::now() >= deadline)
      return line;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  std::string flows;
  CLI::App app{"dex-rpc-load: concurrent RPCs and SetAttributes on E2ECounter Flows"};
  app.add_option("--server", flags.servers, "the node's addresses, comma-separated")->required();
  app.add_option("--flows", flows, "the running E2ECounter Flow IDs, comma-separated")->required();
  app.add_option("--rpcs", flags.rpcs, "RPCs `add` to invoke")->check(CLI::Range(0, 100'000));
  app.add_option("--sets", flags.sets, "SetAttributes calls")->check(CLI::Range(0, 100'000));
  app.add_option("--spread-ms", flags.spread_ms, "start times spread over this long")
      ->check(CLI::Range(0, 600'000));
  app.add_option("--timeout-s", flags.timeout_s, "each call's deadline, repeats included")
      ->check(CLI::Range(1, 600));
  CLI11_PARSE(app, argc, argv);
  flags.flows = split(flows);
  if (flags.flows.empty()) {
    std::cerr << "dex-rpc-load: --flows names no Flow\n";
    return 2;
  }
  dex::ClientOptions options;
  options.server_addresses = split(flags.servers);
  options.timeout = dex::seconds(flags.timeout_s);
  dex::Client client(options);
  std::mutex out_mu;
  const int total = flags.rpcs + flags.sets;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) {  // bounded by --rpcs + --sets
    // RPCs and sets interleave in time: op i starts at its share of the spread.
    const int slot = (i * 7919) % total;
    const auto at = t0 + std::chrono::milliseconds(static_cast<int64_t>(flags.spread_ms) * slot /
                                                   std::max(1, total));
    threads.emplace_back([&, i, at] {
      std::this_thread::sleep_until(at);
      nlohmann::json line = run_op(client, flags, i);
      std::lock_guard<std::mutex> lock(out_mu);
      std::cout << line.dump() << std::endl;
    });
  }
  for (auto& t : threads) t.join();
  return 0;
}
