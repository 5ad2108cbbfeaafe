// attribute_store_driver: the C++ side of bench/attribute_store_bench.py (bench/README.md,
// "attribute_store_bench"). It hosts the Flow type BenchSync in a Worker of the C++ SDK and
// makes the SDK calls the benchmark times; the Python program starts the databases and the
// server, and reads the tables.
//
//   BenchSync  Step Hold waits on Channel "release" (never published: a run stays RUNNING);
//              synced Attributes x (int64) and s (string), dex::kSync; no default store:
//              each start names one (StartOptions::attribute_store).
//
//   build/bin/attribute_store_driver --server 127.0.0.1:PORT
//
// Prints "attribute_store_driver ready" once the server accepted the Worker's stream (its hello
// declared BenchSync), then reads one command per line on stdin and answers each with one line
// of JSON on stdout ({"error": "..."} when it failed; the Python side stops then):
//
//   start PREFIX STORE N      N runs PREFIX-000000.. with StartOptions::attribute_store(STORE)
//                             ("-": no store, nothing syncs)
//   backlog PREFIX N ROUNDS THREADS [FIRST]
//                             ROUNDS x N SetAttributes calls, each writing s (16 bytes: the
//                             write's sequence round*N+r, zero-padded) to run r, rounds FIRST
//                             (default 0) to FIRST+ROUNDS-1; thread t takes the runs r with
//                             r % THREADS == t, round after round, so the last write of each run
//                             is its last round's; request ID per call
//   steady PREFIX N RATE SECONDS THREADS STORE OUT
//                             open loop: SetAttributes of x = the write's sequence number
//                             (increasing) at RATE calls/s for SECONDS, run seq % N, sent by
//                             THREADS threads at their scheduled times; one CSV line per call to
//                             OUT (seq,run,send_us,ack_us: Unix µs of this machine's clock);
//                             meanwhile AdminService Describe every 50 ms: STORE's lagSeconds
//   describe STORE            STORE's AttributeStoreStatus now
//   drain STORE TIMEOUT       from now until STORE's sync is idle after at least one commit
//                             (Describe every 10 ms): when its first commit was seen, when it was
//                             idle, its rows and transactions at each point
//   entries DIR               the SyncEntries in the local store DIR (RocksDB, opened read only
//                             while the server runs): count, key and value bytes per store
//   quit
#include <rocksdb/db.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/version.h"
#include "dex/flow_records.pb.h"
#include "sdk/attribute.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/start_options.h"
#include "sdk/worker.h"

namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

const dex::Attribute<int64_t> kX{"x", dex::kSync};
const dex::Attribute<std::string> kS{"s", dex::kSync};
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

class BenchSync final : public dex::Flow {
 public:
  std::string type() const override { return "BenchSync"; }
  std::string start_step() const override { return "Hold"; }
  std::vector<std::shared_ptr<dex::Step>> steps() const override {
    return {std::make_shared<Hold>()};
  }
  std::vector<dex::Channel> channels() const override { return {kRelease}; }
  std::vector<dex::AttributeDef> attributes() const override { return {kX, kS}; }
};

int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string run_id(const std::string& prefix, uint64_t r) {
  return fmt::format("{}-{:06}", prefix, r);
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Driver {
 public:
  explicit Driver(std::string address) : address_(std::move(address)) {}

  json handle(const std::string& line) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "start") {
      std::string prefix, store;
      uint64_t n = 0;
      in >> prefix >> store >> n;
      return start(prefix, store, n);
    }
    if (cmd == "backlog") {
      std::string prefix;
      uint64_t n = 0, rounds = 0, threads = 0, first = 0;
      in >> prefix >> n >> rounds >> threads;
      if (!(in >> first)) first = 0;
      return backlog(prefix, n, first, rounds, threads);
    }
    if (cmd == "steady") {
      std::string prefix, store, out;
      uint64_t n = 0, threads = 0;
      double rate = 0, seconds = 0;
      in >> prefix >> n >> rate >> seconds >> threads >> store >> out;
      return steady(prefix, n, rate, seconds, threads, store, out);
    }
    if (cmd == "describe") {
      std::string store;
      in >> store;
      return status_json(describe(store));
    }
    if (cmd == "drain") {
      std::string store;
      double timeout = 0;
      in >> store >> timeout;
      return drain(store, timeout);
    }
    if (cmd == "entries") {
      std::string dir;
      in >> dir;
      return entries(dir);
    }
    throw Failure("unknown command: " + line);
  }

 private:
  std::unique_ptr<dex::Client> client() const {
    dex::ClientOptions o;
    o.server_address = address_;
    return std::make_unique<dex::Client>(o);
  }

  json start(const std::string& prefix, const std::string& store, uint64_t n) {
    auto c = client();
    const auto t0 = SteadyClock::now();
    for (uint64_t r = 0; r < n; ++r) {
      dex::StartOptions o;
      if (store != "-") o.attribute_store(store);
      auto s = c->start("BenchSync", run_id(prefix, r), nullptr, o);
      if (!s.is_ok()) throw Failure("start " + run_id(prefix, r) + ": " + s.status().message());
    }
    return {{"started", n},
            {"seconds", std::chrono::duration<double>(SteadyClock::now() - t0).count()}};
  }

  json backlog(const std::string& prefix, uint64_t n, uint64_t first, uint64_t rounds,
               uint64_t threads) {
    if (n == 0 || rounds == 0 || threads == 0) throw Failure("backlog: N, ROUNDS, THREADS > 0");
    threads = std::min(threads, n);
    std::vector<std::vector<double>> lat(threads);
    std::mutex mu;
    std::string error;
    const auto t0 = SteadyClock::now();
    std::vector<std::thread> pool;
    for (uint64_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        auto c = client();
        for (uint64_t round = first; round < first + rounds; ++round) {
          for (uint64_t r = t; r < n; r += threads) {
            const uint64_t seq = round * n + r;
            const auto a = SteadyClock::now();
            dex::Status s =
                c->set_attributes(run_id(prefix, r), {kS.write(fmt::format("{:016}", seq))}, "",
                                  fmt::format("{}-bk-{}", prefix, seq));
            if (!s.is_ok()) {
              std::lock_guard<std::mutex> lock(mu);
              if (error.empty()) error = "set_attributes " + run_id(prefix, r) + ": " + s.message();
              return;
            }
            lat[t].push_back(
                std::chrono::duration<double, std::milli>(SteadyClock::now() - a).count());
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    if (!error.empty()) throw Failure(error);
    const double seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    return {{"writes", all.size()},
            {"seconds", seconds},
            {"per_second", static_cast<double>(all.size()) / seconds},
            {"p50_ms", pct(all, 0.5)},
            {"p99_ms", pct(all, 0.99)}};
  }

  json steady(const std::string& prefix, uint64_t n, double rate, double seconds, uint64_t threads,
              const std::string& store, const std::string& out_path) {
    if (n == 0 || rate <= 0 || seconds <= 0 || threads == 0) throw Failure("steady: bad arguments");
    const uint64_t total = static_cast<uint64_t>(rate * seconds);
    struct Call {
      int64_t send_us = 0, ack_us = 0;
      double late_ms = 0;
    };
    std::vector<Call> calls(total);
    std::atomic<uint64_t> next{0};
    std::atomic<bool> done{false};
    std::mutex mu;
    std::string error;
    const auto t0 = SteadyClock::now() + std::chrono::milliseconds(50);
    std::vector<double> lag;
    std::vector<std::string> states;
    std::thread watcher([&] {
      auto c = client();
      while (!done) {
        auto d = c->describe();
        if (d.is_ok()) {
          for (const auto& st : d->attribute_stores()) {
            if (st.name() != store) continue;
            lag.push_back(st.lag_seconds());
            if (states.empty() || states.back() != st.state()) states.push_back(st.state());
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    std::vector<std::thread> pool;
    for (uint64_t t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        auto c = client();
        while (true) {
          const uint64_t seq = next++;
          if (seq >= total) return;
          const auto due = t0 + std::chrono::duration_cast<SteadyClock::duration>(
                                    std::chrono::duration<double>(static_cast<double>(seq) / rate));
          std::this_thread::sleep_until(due);
          Call& call = calls[seq];
          call.late_ms =
              std::chrono::duration<double, std::milli>(SteadyClock::now() - due).count();
          call.send_us = unix_us();
          // seq + 1: x never takes 0, the value of no write.
          dex::Status s =
              c->set_attributes(run_id(prefix, seq % n), {kX.write(static_cast<int64_t>(seq + 1))},
                                "", fmt::format("{}-st-{}", prefix, seq));
          call.ack_us = unix_us();
          if (!s.is_ok()) {
            std::lock_guard<std::mutex> lock(mu);
            if (error.empty())
              error = "set_attributes " + run_id(prefix, seq % n) + ": " + s.message();
            return;
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    const double wall = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    done = true;
    watcher.join();
    if (!error.empty()) throw Failure(error);
    std::ofstream out(out_path);
    std::vector<double> late, call_ms;
    for (uint64_t seq = 0; seq < total; ++seq) {
      const Call& c = calls[seq];
      out << seq + 1 << ',' << seq % n << ',' << c.send_us << ',' << c.ack_us << '\n';
      late.push_back(c.late_ms);
      call_ms.push_back(static_cast<double>(c.ack_us - c.send_us) / 1000.0);
    }
    out.close();
    if (!out) throw Failure("writing " + out_path);
    return {{"writes", total},
            {"seconds", wall},
            {"per_second", static_cast<double>(total) / wall},
            {"late_p99_ms", pct(late, 0.99)},
            {"call_p50_ms", pct(call_ms, 0.5)},
            {"call_p99_ms", pct(call_ms, 0.99)},
            {"describe_samples", lag.size()},
            {"describe_lag_p50_s", pct(lag, 0.5)},
            {"describe_lag_p99_s", pct(lag, 0.99)},
            {"describe_lag_max_s", lag.empty() ? 0 : *std::max_element(lag.begin(), lag.end())},
            {"states", states}};
  }

  dex::AttributeStoreStatus describe(const std::string& store) const {
    auto c = client();
    auto d = c->describe();
    if (!d.is_ok()) throw Failure("describe: " + d.status().message());
    for (const auto& st : d->attribute_stores())
      if (st.name() == store) return st;
    throw Failure("describe: no Attribute Store " + store);
  }

  static json status_json(const dex::AttributeStoreStatus& s) {
    return {{"state", s.state()},
            {"watermark_slot", s.watermark_slot()},
            {"lag_slots", s.lag_slots()},
            {"lag_seconds", s.lag_seconds()},
            {"transactions", s.transactions()},
            {"failures", s.failures()},
            {"rows", s.rows()},
            {"last_error", s.last_error()},
            {"at_us", unix_us()}};
  }

  json drain(const std::string& store, double timeout) {
    auto c = client();
    auto sample = [&] {
      auto d = c->describe();
      if (!d.is_ok()) throw Failure("describe: " + d.status().message());
      for (const auto& st : d->attribute_stores())
        if (st.name() == store) return status_json(st);
      throw Failure("describe: no Attribute Store " + store);
    };
    const json base = sample();
    json first, last = base;
    const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                   std::chrono::duration<double>(timeout));
    while (SteadyClock::now() < deadline) {  // bounded by the deadline
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      json now = sample();
      const bool committed =
          now["transactions"].get<uint64_t>() > base["transactions"].get<uint64_t>();
      if (committed && first.is_null()) first = now;
      last = now;
      if (committed && now["state"] == "idle" && now["lag_slots"].get<uint64_t>() == 0)
        return {{"base", base}, {"first", first}, {"idle", now}};
    }
    throw Failure(
        fmt::format("drain {}: not idle after {} s (last: {})", store, timeout, last.dump()));
  }

  static json entries(const std::string& dir) {
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s;
    // The server may be flushing or compacting while we open: try a few times.
    for (int attempt = 0; attempt < 5; ++attempt) {  // bounded: 5 tries
      s = rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir, &raw);
      if (s.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (!s.ok()) throw Failure("opening " + dir + " read only: " + s.ToString());
    std::unique_ptr<rocksdb::DB> db(raw);
    struct Sum {
      uint64_t count = 0, key = 0, value = 0, flow_id = 0, run_id = 0, writes = 0;
    };
    std::map<std::string, Sum> by_store;
    const std::string prefix = "~y/";
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const std::string key = it->key().ToString();
      const size_t sep = key.find('\x1f', prefix.size());
      Sum& sum =
          by_store[key.substr(prefix.size(), sep == std::string::npos ? 0 : sep - prefix.size())];
      dex::flow::SyncEntry e;
      if (!e.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())))
        throw Failure("a SyncEntry does not parse: " + key);
      ++sum.count;
      sum.key += key.size();
      sum.value += it->value().size();
      sum.flow_id += e.flow_id().size();
      sum.run_id += e.run_id().size();
      for (const auto& w : e.writes()) sum.writes += w.ByteSizeLong();
    }
    if (!it->status().ok()) throw Failure("reading " + dir + ": " + it->status().ToString());
    json out = json::object();
    for (const auto& [store, sum] : by_store) {
      out[store] = {{"count", sum.count},         {"key_bytes", sum.key},
                    {"value_bytes", sum.value},   {"flow_id_bytes", sum.flow_id},
                    {"run_id_bytes", sum.run_id}, {"write_bytes", sum.writes}};
    }
    return out;
  }

  std::string address_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The SDK side of bench/attribute_store_bench.py: hosts BenchSync, runs commands"};
  app.set_version_flag("--version", dex::version_line("attribute_store_driver"));
  std::string server;
  app.add_option("--server", server, "The dex server (host:port)")->required();
  CLI11_PARSE(app, argc, argv);

  dex::WorkerOptions options;
  options.server_address = server;
  options.max_concurrent_tasks = 64;
  dex::Worker worker(options);
  worker.host(std::make_shared<BenchSync>());
  std::thread worker_thread([&] { (void)worker.run(); });
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  while (worker.stats().streams_accepted == 0) {  // bounded by the deadline
    if (SteadyClock::now() > deadline) {
      std::cout << json{{"error", "the server did not accept the Worker's stream in 60 s"}}.dump()
                << std::endl;
      worker.shutdown();
      worker_thread.join();
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::cout << "attribute_store_driver ready" << std::endl;

  Driver driver(server);
  int code = 0;
  std::string line;
  while (std::getline(std::cin, line)) {  // bounded by stdin
    if (line.empty()) continue;
    if (line == "quit") break;
    try {
      std::cout << driver.handle(line).dump() << std::endl;
    } catch (const std::exception& e) {
      std::cout << json{{"error", e.what()}}.dump() << std::endl;
      code = 1;
      break;
    }
  }
  worker.shutdown();
  worker_thread.join();
  return code;
}
