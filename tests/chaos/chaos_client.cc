// chaos_client: the clients of the fault-injection harness (tests/chaos/README.md).
//
// Several lanes, each with its own dex::Client over every address of the node,
// start flows with known flow IDs (<prefix>-l<lane>-<n>) and now and then read
// back a flow that was acknowledged earlier. Every request is one JSON line in
// the history file, written when its answer (or error) arrived:
//
//   {"op":"start","lane":0,"flow":"r-l0-000012","try":1,"t0":<unix ms>,"t1":<unix ms>,
//    "ok":true,"existed":false,"addr":"127.0.0.1:4101","status":"RUNNING"}
//   {"op":"get","lane":0,"flow":"r-l0-000003","t0":...,"t1":...,"ok":false,
//    "code":"UNAVAILABLE","msg":"...","addr":"127.0.0.1:4102","acked_before":true}
//
// t0 is taken just before the call, t1 just after it (wall clock, microsecond
// resolution, printed as fractional milliseconds). "addr" is the address that
// answered (Client::preferred_address() after the call). A start that failed is
// retried with the same flow ID up to --tries times (a client retrying an unknown
// outcome), then the lane moves on. Runs until --duration passes or the stop
// file appears; every call is bounded by --timeout.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/version.h"
#include "config/config.h"
#include "sdk/addresses.h"
#include "sdk/client.h"
#include "sdk/grpc_status.h"

namespace {

using nlohmann::json;

double now_ms() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() / 1000.0;
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

std::string status_name(dex::FlowStatus s) {
  switch (s) {
    case dex::FLOW_STATUS_RUNNING:
      return "RUNNING";
    case dex::FLOW_STATUS_COMPLETED:
      return "COMPLETED";
    case dex::FLOW_STATUS_FAILED:
      return "FAILED";
    case dex::FLOW_STATUS_CANCELLED:
      return "CANCELLED";
    default:
      return "UNSPECIFIED";
  }
}

struct Settings {
  std::vector<std::string> servers;
  std::string prefix = "chaos";
  std::string flow_type = "chaos";
  uint32_t lanes = 4;
  double rate = 10;  // flow starts per second, all lanes together
  double get_ratio = 0.3;
  uint32_t tries = 3;
  dex::Duration timeout = dex::seconds(15);
  double duration_s = 60;
  std::string stop_file;
  uint64_t seed = 1;
};

struct Counters {
  std::atomic<uint64_t> ops{0}, starts_ok{0}, starts_failed{0}, gets_ok{0}, gets_failed{0};
};

void record_error(json& line, const dex::Status& status) {
  line["ok"] = false;
  line["code"] = std::string(dex::sdk_internal::grpc_code_of(status));
  std::string msg = status.message();
  if (msg.size() > 300) msg.resize(300);
  line["msg"] = msg;
}

void run_lane(const Settings& settings, uint32_t lane, History& history, Counters& counters,
              const std::atomic<bool>& stop) {
  dex::ClientOptions options;
  options.server_addresses = settings.servers;
  options.timeout = settings.timeout;
  options.connect_timeout = dex::milliseconds(500);
  dex::Client client(options);
  std::mt19937_64 rng(settings.seed * 1000 + lane);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<std::string> acknowledged;
  const double pause_ms = 1000.0 * settings.lanes / settings.rate;
  const std::string input = json{{"lane", lane}}.dump();
  for (uint64_t n = 0; !stop.load(); ++n) {
    char id[64];
    std::snprintf(id, sizeof id, "-l%u-%06llu", lane, static_cast<unsigned long long>(n));
    const std::string flow_id = settings.prefix + id;
    const double started = now_ms();
    for (uint32_t attempt = 1; attempt <= settings.tries && !stop.load(); ++attempt) {
      json line = {{"op", "start"}, {"lane", lane}, {"flow", flow_id}, {"try", attempt}};
      line["t0"] = now_ms();
      auto result = client.start_flow(settings.flow_type, input, flow_id);
      line["t1"] = now_ms();
      line["addr"] = client.preferred_address();
      counters.ops++;
      if (result.is_ok()) {
        line["ok"] = true;
        line["existed"] = result->already_existed();
        line["status"] = status_name(result->flow().status());
        history.write(line);
        counters.starts_ok++;
        acknowledged.push_back(flow_id);
        break;
      }
      record_error(line, result.status());
      history.write(line);
      counters.starts_failed++;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // A read of a flow acknowledged before this read was sent: it must be found.
    if (!acknowledged.empty() && unit(rng) < settings.get_ratio && !stop.load()) {
      const std::string& target = acknowledged[rng() % acknowledged.size()];
      json line = {{"op", "get"}, {"lane", lane}, {"flow", target}, {"acked_before", true}};
      line["t0"] = now_ms();
      auto got = client.get_flow(target);
      line["t1"] = now_ms();
      line["addr"] = client.preferred_address();
      counters.ops++;
      if (got.is_ok()) {
        line["ok"] = true;
        line["status"] = status_name(got->status());
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chaos_client: flow starts and reads with known flow IDs, every request recorded"};
  Settings settings;
  std::string servers_text, history_path, timeout_text = "15s";
  app.add_option("--servers", servers_text, "Every address of the node, comma-separated")
      ->required();
  app.add_option("--history", history_path, "JSON-lines history file (appended)")->required();
  app.add_option("--prefix", settings.prefix, "Flow ID prefix")->capture_default_str();
  app.add_option("--flow-type", settings.flow_type, "Flow type to start")->capture_default_str();
  app.add_option("--lanes", settings.lanes, "Concurrent lanes")->check(CLI::Range(1u, 64u));
  app.add_option("--rate", settings.rate, "Flow starts per second, all lanes")
      ->check(CLI::PositiveNumber);
  app.add_option("--get-ratio", settings.get_ratio, "Probability of a read after each start");
  app.add_option("--tries", settings.tries, "Attempts per flow start")->check(CLI::Range(1u, 20u));
  app.add_option("--timeout", timeout_text, "Deadline of each call")->capture_default_str();
  app.add_option("--duration", settings.duration_s, "Seconds to run")->check(CLI::PositiveNumber);
  app.add_option("--stop-file", settings.stop_file, "Stop when this file exists");
  app.add_option("--seed", settings.seed, "Seed of the lanes' choices");
  app.set_version_flag("--version", dex::version_line("chaos_client"));
  CLI11_PARSE(app, argc, argv);
  auto servers = dex::parse_server_addresses(servers_text);
  if (!servers.is_ok()) {
    std::cerr << "chaos_client: --servers: " << servers.status().message() << "\n";
    return 2;
  }
  settings.servers = servers.value();
  auto timeout = dex::parse_duration(timeout_text);
  if (!timeout.is_ok()) {
    std::cerr << "chaos_client: --timeout: " << timeout.status().message() << "\n";
    return 2;
  }
  settings.timeout = timeout.value();
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
            << " ok / " << counters.starts_failed << " failed, reads " << counters.gets_ok
            << " ok / " << counters.gets_failed << " failed" << std::endl;
  return 0;
}
