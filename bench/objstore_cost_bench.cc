// Object-storage request cost against a real MinIO on loopback: what the lease
// costs per hour, and what the log costs per Step completion. Request counts
// are what an S3 bill charges for, so the spec states them ("Lease renewals
// then make about 180 PUT requests per hour, compared with about 1,080 at 10
// seconds").
//
// Part "lease": the real LeaseKeeper over the real S3ObjectStore, through a
// counting ObjectStore decorator (GET/PUT/DELETE/LIST), for each lease duration:
//  - simulated: a clock that moves only when the benchmark moves it (a
//    ManualClock inside, see EventClock) is jumped to the next time the keeper
//    waits for, and only while no request is in flight, so one simulated hour
//    takes seconds while every request really goes to MinIO and every attempt
//    gets its full cut-off of real time;
//  - real time: a sample with the SystemClock (default 60 s at a 10 s lease),
//    to check the simulated figure against reality.
// Expected by the spec's rules: one renewal PUT every duration / 3, no GET.
//
// Part "log": a real `dex-server-zd serve` on MinIO (through
// tests/tools/faultproxy.py, which counts requests by method and key class)
// and a real `dex-flow-examples worker` hosting the dex Flows OneStep and
// ThreeSteps (examples/flows/pipelines.cc); for each Flow type and client
// concurrency, N runs started and waited for by closed-loop clients
// (dex.FlowService StartFlow, WaitForFlow). Per case: Step completions,
// log PUTs (from the proxy), log objects written (from a listing) and the
// flow rules' records in them, lease PUTs, elapsed time.
//
//   build/bin/objstore_cost_bench [--parts lease,log] [--lease-durations 10,60]
//       [--sim-hours 1] [--real-seconds 60] [--flows 1000] [--concurrency 1,32]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "bench_process.h"
#include "common/clock.h"
#include "common/random.h"
#include "common/version.h"
#include "dex/flow_records.pb.h"
#include "dex/records.pb.h"
#include "lease/lease_keeper.h"
#include "lease/lease_machine.h"
#include "lease/lease_record.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "objstore/s3_store.h"
#include "sdk/client.h"

namespace {

namespace fs = std::filesystem;
using RealClock = std::chrono::steady_clock;
using dex::Duration;
using dex::TimePoint;
using dex::bench::add_scratch;
using dex::bench::check_alive;
using dex::bench::Child;
using dex::bench::cleanup;
using dex::bench::die;
using dex::bench::die_on_signals;
using dex::bench::own_bin_dir;
using dex::bench::percentile;
using dex::bench::require_programs;
using dex::bench::set_program;
using dex::bench::spawn;
using dex::bench::stop;
using dex::bench::tail;
using dex::bench::warn_unless_clean_exit;

constexpr std::string_view kAccessKey = "dexcost";
constexpr std::string_view kSecretKey = "dexcost-secret-key";
constexpr std::string_view kBucket = "dex";
constexpr auto kStartTimeout = std::chrono::seconds(60);
constexpr auto kStopGrace = std::chrono::seconds(15);
// The simulated run gives up if the keeper neither waits nor finishes a request
// for this long (real time).
constexpr auto kQuiescenceTimeout = std::chrono::seconds(60);

double seconds_since(RealClock::time_point t0) {
  return std::chrono::duration<double>(RealClock::now() - t0).count();
}

// ------------------------------------------------------------------ processes

// The first line of `child`'s log matching `pattern`; dies after the timeout.
std::smatch wait_for_line(const Child& child, const std::regex& pattern, std::string& line_out) {
  auto deadline = RealClock::now() + kStartTimeout;
  while (RealClock::now() < deadline) {
    check_alive(child);
    std::ifstream in(child.log);
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
      line_out = line;
      if (std::regex_search(line_out, m, pattern)) return m;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  die(fmt::format("{} printed no line matching the expected one within {} s; last lines of {}:\n{}",
                  child.name, kStartTimeout.count(), child.log.string(), tail(child.log, 20)));
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    die(fmt::format("cannot find a free loopback port: {}", std::strerror(errno)));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// `name` if it contains a '/', else its first executable match in $PATH.
std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  die(fmt::format("{} is not in PATH", name));
}

// ------------------------------------------------------------------ MinIO

// $DEX_MINIO_BIN, then ${DEX_CACHE_DIR:-~/.cache/dex}/bin/minio (scripts/install-minio).
std::string find_minio(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* e = std::getenv("DEX_MINIO_BIN"); e != nullptr && *e != '\0') return e;
  fs::path cache;
  if (const char* c = std::getenv("DEX_CACHE_DIR"); c != nullptr && *c != '\0') {
    cache = c;
  } else if (const char* h = std::getenv("HOME"); h != nullptr) {
    cache = fs::path(h) / ".cache/dex";
  }
  return (cache / "bin/minio").string();
}

struct Minio {
  Child child;
  int port = 0;
  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port); }
};

dex::S3Options s3_options(const std::string& endpoint, const std::string& prefix) {
  dex::S3Options o;
  o.bucket = std::string(kBucket);
  o.prefix = prefix;
  o.endpoint = endpoint;
  o.credentials.access_key_id = std::string(kAccessKey);
  o.credentials.secret_access_key = std::string(kSecretKey);
  return o;
}

std::unique_ptr<dex::S3ObjectStore> open_store(const std::string& endpoint,
                                               const std::string& prefix) {
  auto store = dex::S3ObjectStore::open(s3_options(endpoint, prefix));
  if (!store.is_ok()) die("cannot open the S3 store: " + store.status().to_string());
  return std::move(store.value());
}

Minio start_minio(const std::string& binary, const fs::path& dir) {
  if (access(binary.c_str(), X_OK) != 0) {
    die(
        fmt::format("MinIO is not installed at {}: run scripts/install-minio (or set "
                    "DEX_MINIO_BIN / --minio)",
                    binary));
  }
  Minio m;
  m.port = free_port();
  fs::create_directories(dir / "data");
  m.child = spawn(
      "minio",
      {binary, "server", (dir / "data").string(), "--address", fmt::format("127.0.0.1:{}", m.port),
       "--console-address", fmt::format("127.0.0.1:{}", free_port()), "--quiet",
       // As every MinIO of the tests and the deploy docs (docs/operations.md, "MinIO").
       "--idle-timeout", "2s", "--read-header-timeout", "2s"},
      {fmt::format("MINIO_ROOT_USER={}", kAccessKey),
       fmt::format("MINIO_ROOT_PASSWORD={}", kSecretKey), "MINIO_BROWSER=off", "MINIO_UPDATE=off"},
      dir / "minio.log");
  auto store = open_store(m.endpoint(), "");
  auto deadline = RealClock::now() + kStartTimeout;
  for (;;) {
    check_alive(m.child);
    dex::RequestOptions options;
    options.timeout = std::chrono::seconds(2);
    dex::Status s = store->create_bucket(options);
    if (s.is_ok()) break;
    if (RealClock::now() > deadline) {
      die(fmt::format("MinIO did not come up within {} s ({}); last lines of {}:\n{}",
                      kStartTimeout.count(), s.to_string(), m.child.log.string(),
                      tail(m.child.log, 20)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return m;
}

// ------------------------------------------------------------------ counting

// Counts every request by operation, and remembers when each PUT was sent (by
// the clock the keeper uses) so the benchmark can show the renewal interval.
class CountingStore final : public dex::ObjectStore {
 public:
  struct Counts {
    uint64_t get = 0, put = 0, remove = 0, list = 0;
    uint64_t failed = 0;  // answers other than ok (NotFound of a GET included)
    uint64_t total() const { return get + put + remove + list; }
    Counts operator-(const Counts& o) const {
      return {get - o.get, put - o.put, remove - o.remove, list - o.list, failed - o.failed};
    }
  };

  CountingStore(dex::ObjectStore& inner, dex::Clock& clock) : inner_(inner), clock_(clock) {
    trace_ = std::getenv("DEX_COST_TRACE") != nullptr;
  }

  dex::StatusOr<dex::ObjectData> get(std::string_view key,
                                     const dex::RequestOptions& options) override {
    Scope scope(*this);
    auto r = inner_.get(key, options);
    finish(&Counts::get, r.status(), scope);
    return r;
  }
  dex::StatusOr<std::string> put(std::string_view key, std::string_view body,
                                 const dex::PutCondition& condition,
                                 const dex::RequestOptions& options) override {
    TimePoint sent = clock_.now();
    Scope scope(*this);
    auto r = inner_.put(key, body, condition, options);
    {
      std::lock_guard lock(mu_);
      put_sent_.push_back(sent);
    }
    if (trace_) {
      std::cerr << fmt::format("  trace: PUT {} {} sent at {:.3f} s: {}\n", key,
                               condition.mode == dex::PutMode::kCreate    ? "create"
                               : condition.mode == dex::PutMode::kReplace ? "replace"
                                                                          : "overwrite",
                               std::chrono::duration<double>(sent.time_since_epoch()).count(),
                               r.status().to_string());
    }
    finish(&Counts::put, r.status(), scope);
    return r;
  }
  dex::Status remove(std::string_view key, const dex::RequestOptions& options) override {
    Scope scope(*this);
    dex::Status s = inner_.remove(key, options);
    finish(&Counts::remove, s, scope);
    return s;
  }
  dex::StatusOr<dex::ListResult> list(std::string_view prefix, std::string_view start_after,
                                      size_t max_keys,
                                      const dex::RequestOptions& options) override {
    Scope scope(*this);
    auto r = inner_.list(prefix, start_after, max_keys, options);
    finish(&Counts::list, r.status(), scope);
    return r;
  }
  std::string describe() const override { return "counting " + inner_.describe(); }

  Counts counts() const {
    std::lock_guard lock(mu_);
    return counts_;
  }
  int in_flight() const { return in_flight_.load(); }
  // Send times of every PUT so far, in order.
  std::vector<TimePoint> put_sent() const {
    std::lock_guard lock(mu_);
    return put_sent_;
  }
  // Real-time latency of every request so far, in ms.
  std::vector<double> latencies_ms() const {
    std::lock_guard lock(mu_);
    return latencies_ms_;
  }

 private:
  struct Scope {
    explicit Scope(CountingStore& s) : store(s), start(RealClock::now()) { ++store.in_flight_; }
    CountingStore& store;
    RealClock::time_point start;
  };
  // Counts before the request is marked done, so that the simulation never
  // sees an idle store with the count not yet raised.
  void finish(uint64_t Counts::*field, const dex::Status& status, Scope& scope) {
    {
      std::lock_guard lock(mu_);
      ++(counts_.*field);
      if (!status.is_ok()) ++counts_.failed;
      latencies_ms_.push_back(
          std::chrono::duration<double, std::milli>(RealClock::now() - scope.start).count());
    }
    --in_flight_;
  }

  dex::ObjectStore& inner_;
  dex::Clock& clock_;
  bool trace_ = false;  // DEX_COST_TRACE set: every PUT on stderr
  std::atomic<int> in_flight_{0};
  mutable std::mutex mu_;
  Counts counts_;                     // guarded by mu_
  std::vector<TimePoint> put_sent_;   // guarded by mu_
  std::vector<double> latencies_ms_;  // guarded by mu_
};

// A ManualClock that also knows what every thread waits for, so the benchmark
// can jump straight to the next deadline instead of stepping: a fixed step
// would delay every renewal by up to one step (and so undercount) or make an
// hour take as many real milliseconds as there are steps. Waits behave exactly
// as ManualClock's (polling every millisecond of real time), which is how the
// lease tests drive the keeper.
class EventClock final : public dex::Clock {
 public:
  TimePoint now() const override { return manual_.now(); }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  TimePoint deadline, const std::function<bool()>& done) override {
    std::multiset<TimePoint>::iterator it;
    {
      std::lock_guard g(mu_);
      it = deadlines_.insert(deadline);
    }
    bool result = manual_.wait_until(lock, cv, deadline, done);
    {
      std::lock_guard g(mu_);
      deadlines_.erase(it);
    }
    return result;
  }
  void set(TimePoint t) { manual_.set(t); }
  // The earliest deadline a thread waits for, if any thread waits.
  std::optional<TimePoint> next_deadline() const {
    std::lock_guard g(mu_);
    if (deadlines_.empty()) return std::nullopt;
    return *deadlines_.begin();
  }

 private:
  dex::ManualClock manual_;
  mutable std::mutex mu_;
  std::multiset<TimePoint> deadlines_;  // guarded by mu_
};

// ------------------------------------------------------------------ lease part

struct LeaseRow {
  std::string mode;  // "simulated" or "real time"
  int lease_s = 0;
  double window_s = 0;  // the measured window (simulated or real seconds)
  CountingStore::Counts acquire, window, release;
  uint64_t renewal_puts_ok = 0;
  double mean_interval_s = 0;  // between renewal PUT sends, by the keeper's clock
  double request_p50_ms = 0, request_p99_ms = 0;
  double real_s = 0;  // wall time the window took
};

double per_hour(uint64_t n, double window_s) { return static_cast<double>(n) * 3600.0 / window_s; }
double expected_per_hour(int lease_s) { return 3600.0 / (lease_s / 3.0); }

double mean_interval_s(const std::vector<TimePoint>& sends) {
  if (sends.size() < 2) return 0;
  return std::chrono::duration<double>(sends.back() - sends.front()).count() /
         static_cast<double>(sends.size() - 1);
}

dex::LeaseKeeperOptions keeper_options(int lease_s) {
  dex::LeaseKeeperOptions o;
  o.node_id = dex::NodeId("cost");
  o.process_id = dex::ProcessId(dex::make_process_id());
  o.duration = std::chrono::seconds(lease_s);
  o.seed = 42;
  return o;
}

// Moves `clock` to the next deadline any thread waits for, each time the store
// is idle and every waiter waits for a time still ahead (and has for `settle`
// of real time), until `done()`, or until the next deadline would pass `end`
// (then the clock is set to `end`). A nonzero `settle` lets the keeper act on
// a release request before the clock jumps to its next renewal.
void pump(EventClock& clock, CountingStore& store, const std::function<bool()>& done,
          std::optional<TimePoint> end, Duration settle,
          const std::function<std::string()>& state) {
  auto last_progress = RealClock::now();
  std::optional<RealClock::time_point> quiet_since;
  while (!done()) {
    std::optional<TimePoint> next = clock.next_deadline();
    if (store.in_flight() == 0 && next && *next > clock.now()) {
      if (!quiet_since) quiet_since = RealClock::now();
      if (RealClock::now() - *quiet_since >= settle) {
        if (end && *next > *end) {
          clock.set(*end);
          return;
        }
        clock.set(*next);
        last_progress = RealClock::now();
        quiet_since.reset();
        continue;
      }
    } else {
      quiet_since.reset();
    }
    if (RealClock::now() - last_progress > kQuiescenceTimeout) {
      die(
          fmt::format("simulated lease: no progress for {} s of real time (requests in flight: "
                      "{}, keeper: {})",
                      kQuiescenceTimeout.count(), store.in_flight(), state()));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

LeaseRow simulate_lease(const std::string& endpoint, int lease_s, double hours) {
  auto s3 = open_store(endpoint, fmt::format("cost-{}-sim-{}s", getpid(), lease_s));
  EventClock clock;
  CountingStore store(*s3, clock);
  dex::LeaseKeeper keeper(store, clock, keeper_options(lease_s));
  auto state = [&] { return std::string(dex::lease_state_name(keeper.state())); };

  LeaseRow row;
  row.mode = "simulated";
  row.lease_s = lease_s;
  std::atomic<bool> acquired{false};
  dex::Status acquire_status;
  std::thread acquirer([&] {
    acquire_status = keeper.acquire();
    acquired = true;
  });
  pump(
      clock, store, [&] { return acquired.load(); }, std::nullopt, Duration(0), state);
  acquirer.join();
  if (!acquire_status.is_ok()) die("simulated lease: acquire: " + acquire_status.to_string());
  row.acquire = store.counts();
  const size_t puts_before = store.put_sent().size();

  std::atomic<bool> lost{false};
  keeper.start_renewing([&](const dex::Status& why) {
    lost = true;
    spdlog::error("simulated lease lost: {}", why.to_string());
  });
  const TimePoint t0 = clock.now();
  const TimePoint end =
      t0 + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(hours * 3600.0));
  auto real0 = RealClock::now();
  pump(
      clock, store, [&] { return lost.load(); }, end, Duration(0), state);
  row.real_s = seconds_since(real0);
  if (lost) die(fmt::format("simulated lease of {} s was lost", lease_s));
  // Let a request the last jump started finish before counting.
  while (store.in_flight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  row.window = store.counts() - row.acquire;
  row.window_s = hours * 3600.0;
  row.renewal_puts_ok = keeper.counters().renewal_puts_ok;
  auto sends = store.put_sent();
  row.mean_interval_s = mean_interval_s(std::vector<TimePoint>(
      sends.begin() + static_cast<std::ptrdiff_t>(puts_before - 1), sends.end()));

  const CountingStore::Counts before_release = store.counts();
  std::atomic<bool> released{false};
  dex::Status release_status;
  std::thread releaser([&] {
    release_status = keeper.release();
    released = true;
  });
  pump(
      clock, store, [&] { return released.load(); }, std::nullopt, std::chrono::milliseconds(200),
      state);
  releaser.join();
  if (!release_status.is_ok()) die("simulated lease: release: " + release_status.to_string());
  row.release = store.counts() - before_release;
  auto lat = store.latencies_ms();
  row.request_p50_ms = percentile(lat, 0.5);
  row.request_p99_ms = percentile(lat, 0.99);
  return row;
}

LeaseRow real_time_lease(const std::string& endpoint, int lease_s, double seconds) {
  auto s3 = open_store(endpoint, fmt::format("cost-{}-real-{}s", getpid(), lease_s));
  dex::Clock& clock = dex::SystemClock::instance();
  CountingStore store(*s3, clock);
  dex::LeaseKeeper keeper(store, clock, keeper_options(lease_s));
  LeaseRow row;
  row.mode = "real time";
  row.lease_s = lease_s;
  if (dex::Status s = keeper.acquire(); !s.is_ok())
    die("real-time lease: acquire: " + s.to_string());
  row.acquire = store.counts();
  const size_t puts_before = store.put_sent().size();
  std::atomic<bool> lost{false};
  keeper.start_renewing([&](const dex::Status& why) {
    lost = true;
    spdlog::error("real-time lease lost: {}", why.to_string());
  });
  auto real0 = RealClock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  // If a renewal is due within half a second, let it land inside the window,
  // so that it is neither cut in two nor counted as part of the release.
  const Duration delay = dex::renewal_delay(std::chrono::seconds(lease_s));
  for (;;) {
    TimePoint due = store.put_sent().back() + delay;
    TimePoint now = clock.now();
    if (now < due - std::chrono::milliseconds(500) || now > due + std::chrono::milliseconds(500)) {
      break;
    }
    std::this_thread::sleep_until(due + std::chrono::milliseconds(500));
  }
  row.window = store.counts() - row.acquire;
  row.real_s = seconds_since(real0);
  row.window_s = row.real_s;
  if (lost) die(fmt::format("real-time lease of {} s was lost", lease_s));
  row.renewal_puts_ok = keeper.counters().renewal_puts_ok;
  auto sends = store.put_sent();
  row.mean_interval_s = mean_interval_s(std::vector<TimePoint>(
      sends.begin() + static_cast<std::ptrdiff_t>(puts_before - 1), sends.end()));
  const CountingStore::Counts before_release = store.counts();
  if (dex::Status s = keeper.release(); !s.is_ok())
    die("real-time lease: release: " + s.to_string());
  row.release = store.counts() - before_release;
  auto lat = store.latencies_ms();
  row.request_p50_ms = percentile(lat, 0.5);
  row.request_p99_ms = percentile(lat, 0.99);
  return row;
}

void print_lease(const std::vector<LeaseRow>& rows) {
  fmt::print(
      "\nLease: requests of one LeaseKeeper on MinIO while it holds the lease (acquisition and "
      "release counted apart)\n");
  const std::string header =
      "{:<10} {:>5} {:>7} {:>6} {:>5} {:>5} {:>5} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} "
      "{:>7}\n";
  fmt::print(fmt::runtime(header), "clock", "lease", "window", "PUT", "GET", "LIST", "DEL",
             "failed", "interval", "PUT/h", "PUT/h", "expected", "meas/exp", "acquire", "release",
             "real");
  fmt::print(fmt::runtime(header), "", "s", "s", "", "", "", "", "", "s", "count", "interval",
             "PUT/h", "", "GET+PUT", "GET+PUT", "s");
  for (const LeaseRow& r : rows) {
    double by_interval = r.mean_interval_s > 0 ? 3600.0 / r.mean_interval_s : 0;
    double expected = expected_per_hour(r.lease_s);
    fmt::print(
        "{:<10} {:>5} {:>7.0f} {:>6} {:>5} {:>5} {:>5} {:>6} {:>9.4f} {:>8.0f} {:>8.1f} {:>8.0f} "
        "{:>8.4f} {:>8} {:>8} {:>7.1f}\n",
        r.mode, r.lease_s, r.window_s, r.window.put, r.window.get, r.window.list, r.window.remove,
        r.window.failed, r.mean_interval_s, per_hour(r.window.put, r.window_s), by_interval,
        expected, by_interval / expected, fmt::format("{}+{}", r.acquire.get, r.acquire.put),
        fmt::format("{}+{}", r.release.get, r.release.put), r.real_s);
  }
  fmt::print(
      "window: the measured period (simulated or real seconds); interval: mean time between "
      "renewal PUT sends by the keeper's clock; PUT/h count: PUTs in the window scaled to an hour "
      "(a short real window quantizes it); PUT/h interval: 3600 / interval; expected: 3600 / "
      "(lease / 3); meas/exp: PUT/h interval / expected; real: wall time of the window. Every "
      "request went to MinIO.\n");
}

std::vector<LeaseRow> run_lease_part(const std::string& endpoint, const std::vector<int>& durations,
                                     double hours, double real_seconds, int real_lease_s) {
  std::vector<LeaseRow> rows;
  for (int d : durations) {
    std::cerr << fmt::format("lease: simulating {} h at a {} s lease...\n", hours, d);
    LeaseRow r = simulate_lease(endpoint, d, hours);
    std::cerr << fmt::format(
        "  {} PUTs, {} GETs in {:.1f} s of real time; request latency p50 {:.2f} ms, p99 {:.2f} "
        "ms\n",
        r.window.put, r.window.get, r.real_s, r.request_p50_ms, r.request_p99_ms);
    rows.push_back(r);
  }
  if (real_seconds > 0) {
    std::cerr << fmt::format("lease: real-time sample, {} s at a {} s lease...\n", real_seconds,
                             real_lease_s);
    LeaseRow r = real_time_lease(endpoint, real_lease_s, real_seconds);
    std::cerr << fmt::format(
        "  {} PUTs, {} GETs in {:.1f} s; request latency p50 {:.2f} ms, p99 {:.2f} ms\n",
        r.window.put, r.window.get, r.real_s, r.request_p50_ms, r.request_p99_ms);
    rows.push_back(r);
  }
  return rows;
}

// ------------------------------------------------------------------ log part

// The fault proxy's HTTP control API (tests/tools/faultproxy.py).
size_t append_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

std::string http(const std::string& method, const std::string& url) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) die("curl_easy_init failed");
  std::string body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST") curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10'000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK || code / 100 != 2) {
    die(fmt::format("{} {}: {} (HTTP {}) {}", method, url, curl_easy_strerror(rc), code, body));
  }
  return body;
}

// Request counts by key class and method, as the proxy reports them.
struct ProxyCounts {
  std::map<std::string, std::map<std::string, uint64_t>> by_class;  // class -> method -> n
  uint64_t get(const std::string& cls, const std::string& method) const {
    auto c = by_class.find(cls);
    if (c == by_class.end()) return 0;
    auto m = c->second.find(method);
    return m == c->second.end() ? 0 : m->second;
  }
};

class Proxy {
 public:
  Proxy(const std::string& python, const fs::path& script, int upstream_port, const fs::path& log) {
    port_ = free_port();
    child_ = spawn("faultproxy",
                   {which(python), script.string(), "--listen", fmt::format("127.0.0.1:{}", port_),
                    "--upstream", fmt::format("127.0.0.1:{}", upstream_port)},
                   {}, log);
    std::string line;
    wait_for_line(child_, std::regex("faultproxy listening on"), line);
  }
  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }
  const Child& child() const { return child_; }
  void reset() { http("POST", endpoint() + "/_faultproxy/stats/reset"); }
  ProxyCounts counts() const;
  std::string raw_stats() const { return http("GET", endpoint() + "/_faultproxy/stats"); }

 private:
  Child child_;
  int port_ = 0;
};

// {"detail": {class: {method: {action: n}}}, ...}: every request the proxy
// saw, whatever it did with it (no rules are posted here, so all "forwarded").
ProxyCounts parse_proxy_stats(const std::string& text) {
  ProxyCounts out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.contains("detail") || !j["detail"].is_object()) {
    die("faultproxy stats have no \"detail\" object: " + text);
  }
  for (auto& [cls, methods] : j["detail"].items()) {
    if (!methods.is_object()) continue;
    for (auto& [method, actions] : methods.items()) {
      if (!actions.is_object()) continue;
      for (auto& [action, n] : actions.items()) {
        if (n.is_number_integer()) out.by_class[cls][method] += n.get<uint64_t>();
      }
    }
  }
  return out;
}

ProxyCounts Proxy::counts() const { return parse_proxy_stats(raw_stats()); }

struct LogRow {
  std::string flow_type;
  int steps = 0;
  int concurrency = 0;
  uint64_t flows = 0, completions = 0;
  double elapsed_s = 0;
  uint64_t log_objects = 0, log_records = 0;
  std::optional<ProxyCounts> proxy;
};

// The Flow types the worker hosts (examples/flows/pipelines.cc) and their Steps.
constexpr std::pair<const char*, int> kFlowTypes[] = {{"OneStep", 1}, {"ThreeSteps", 3}};
constexpr auto kRunTimeout = std::chrono::seconds(60);

// Starts a run of `type` with ID `flow_id` and waits until it closes: "" when
// it completed, else why not. The request ID is the flow ID's: a start the
// client repeats on its own answers the run the first attempt started.
std::string run_flow(dex::Client& client, const std::string& type, const std::string& flow_id,
                     uint64_t n, dex::Duration timeout) {
  dex::flow::StartOptions options;
  options.set_request_id("req-" + flow_id);
  options.set_ignore_already_started(true);
  auto started = client.start(type, flow_id, nlohmann::json{{"n", n}}, options);
  if (!started.is_ok())
    return fmt::format("StartFlow {}: {}", flow_id, started.status().to_string());
  auto closed = client.wait_for_flow(flow_id, timeout);
  if (!closed.is_ok())
    return fmt::format("WaitForFlow {}: {}", flow_id, closed.status().to_string());
  if (!closed->closed())
    return fmt::format("flow {} did not close within {} s", flow_id,
                       std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
  const dex::flow::FlowDescription& flow = closed->flow();
  if (flow.status() == dex::flow::FLOW_COMPLETED) return "";
  std::string why = fmt::format("flow {} ({}) ended {}", flow.flow_id(), flow.flow_type(),
                                dex::flow::FlowStatus_Name(flow.status()));
  if (!flow.close_reason().empty()) why += ": " + flow.close_reason();
  return why;
}

// Until a probe run of each Flow type completes: the worker has connected and
// declared them (a start of a type not yet declared fails).
void wait_worker(const std::string& address, const Child& server, const Child& worker) {
  dex::ClientOptions options;
  options.server_address = address;
  dex::Client client(options);
  auto deadline = RealClock::now() + kStartTimeout;
  for (const auto& flow_type : kFlowTypes) {
    const char* type = flow_type.first;
    std::string err = "never tried";
    for (int i = 0; !err.empty(); ++i) {
      check_alive(server);
      check_alive(worker);
      if (RealClock::now() > deadline) {
        die(fmt::format("no probe run of {} completed within {} s ({}); last lines of {}:\n{}",
                        type, kStartTimeout.count(), err, worker.log.string(),
                        tail(worker.log, 20)));
      }
      err = run_flow(client, type, fmt::format("probe-{}-{}", type, i), 0, std::chrono::seconds(5));
      if (!err.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// Runs `flows` flows of `type` with `concurrency` closed-loop clients. Returns
// the elapsed seconds.
double run_flows(const std::string& address, const std::string& type, int concurrency,
                 uint64_t flows, const std::string& tag) {
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> threads;
  auto t0 = RealClock::now();
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&] {
      dex::ClientOptions options;
      options.server_address = address;
      dex::Client client(options);
      for (uint64_t n = next++; n < flows; n = next++) {
        std::string err = run_flow(client, type, fmt::format("{}-{}", tag, n), n, kRunTimeout);
        if (!err.empty()) die(err);
      }
    });
  }
  for (auto& t : threads) t.join();
  return seconds_since(t0);
}

dex::Slot log_end(dex::ObjectStore& store, const dex::NodeId& node) {
  auto bounds = dex::find_log_bounds(store, node);
  if (!bounds.is_ok()) die("listing the log: " + bounds.status().to_string());
  return bounds->end;
}

struct RecordCounts {
  // The flow rules' records by kind ("start_flow", "method_result", ...);
  // any other record by its LogRecord kind ("epoch_start", ...).
  std::map<std::string, uint64_t> kinds;
  // Tasks handed to Workers: they ride in the records above, not in their own.
  uint64_t assignments = 0;
};

// Records in slots [from, to).
RecordCounts count_records(dex::ObjectStore& store, const dex::NodeId& node, dex::Slot from,
                           dex::Slot to) {
  dex::LogReader reader(store, node, from);
  RecordCounts counts;
  for (uint64_t s = from.value; s < to.value; ++s) {
    auto batch = reader.read(dex::Slot(s));
    if (!batch.is_ok()) die("reading the log: " + batch.status().to_string());
    if (!batch.value()) die(fmt::format("log slot {} is missing", s));
    for (const dex::proto::LogRecord& record : batch.value()->records()) {
      const google::protobuf::FieldDescriptor* field =
          record.GetDescriptor()->FindFieldByNumber(record.kind_case());
      if (record.has_flow()) {
        const dex::flow::FlowRecord& flow = record.flow();
        field = flow.GetDescriptor()->FindFieldByNumber(flow.kind_case());
        counts.assignments += static_cast<uint64_t>(flow.assignments_size());
      }
      ++counts.kinds[field != nullptr ? std::string(field->name()) : "unknown"];
    }
  }
  return counts;
}

struct LogOptions {
  uint64_t flows = 1000;
  std::vector<int> concurrency{1, 32};
  int lease_s = 10;
  std::string python = "python3";
  std::string faultproxy;
  int worker_concurrency = 128;
};

std::vector<LogRow> run_log_part(const LogOptions& o, const Minio& minio, const fs::path& root,
                                 const fs::path& bin, bool& counted_by_proxy) {
  const std::string prefix = fmt::format("cost-{}-log", getpid());
  const dex::NodeId node("cost");
  std::optional<Proxy> proxy;
  counted_by_proxy = !o.faultproxy.empty() && fs::exists(o.faultproxy);
  if (counted_by_proxy) {
    proxy.emplace(o.python, o.faultproxy, minio.port, root / "faultproxy.log");
  } else {
    std::cerr << fmt::format(
        "log: no fault proxy at {}: counting log objects written (one PUT each unless retried) "
        "instead of log PUTs; lease PUTs are not counted\n",
        o.faultproxy.empty() ? "(none)" : o.faultproxy);
  }
  const std::string endpoint = proxy ? proxy->endpoint() : minio.endpoint();
  fs::path config = root / "serve.yaml";
  std::ofstream(config) << fmt::format(
      "nodeId: {}\napi:\n  listen: 127.0.0.1:0\nobjectStore:\n  type: s3\n  bucket: {}\n"
      "  prefix: {}\n  endpoint: {}\nlocalStore:\n  path: {}\nlease:\n  duration: {}s\n",
      node.value, kBucket, prefix, endpoint, (root / "local").string(), o.lease_s);
  Child server = spawn("dex-server-zd serve",
                       {(bin / "dex-server-zd").string(), "serve", "--config", config.string()},
                       {fmt::format("AWS_ACCESS_KEY_ID={}", kAccessKey),
                        fmt::format("AWS_SECRET_ACCESS_KEY={}", kSecretKey)},
                       root / "server.log");
  std::string line;
  std::smatch m = wait_for_line(server, std::regex(R"(serve ready: .* listening on (\S+))"), line);
  const std::string address = m[1].str();
  Child worker = spawn("dex-flow-examples worker",
                       {(bin / "dex-flow-examples").string(), "worker", "--server", address,
                        "--concurrency", std::to_string(o.worker_concurrency)},
                       {}, root / "worker.log");
  wait_worker(address, server, worker);
  std::cerr << fmt::format("log: server {} on {} ({}), worker {} connected\n", server.pid, address,
                           endpoint, worker.pid);

  auto direct = open_store(minio.endpoint(), prefix);  // not through the proxy
  std::vector<LogRow> rows;
  for (auto [type, steps] : kFlowTypes) {
    for (int concurrency : o.concurrency) {
      LogRow row;
      row.flow_type = type;
      row.steps = steps;
      row.concurrency = concurrency;
      row.flows = o.flows;
      row.completions = o.flows * static_cast<uint64_t>(steps);
      dex::Slot from = log_end(*direct, node);
      if (proxy) proxy->reset();
      row.elapsed_s =
          run_flows(address, type, concurrency, o.flows, fmt::format("{}-c{}", type, concurrency));
      if (proxy) row.proxy = proxy->counts();
      dex::Slot to = log_end(*direct, node);
      check_alive(server);
      check_alive(worker);
      row.log_objects = to.value - from.value;
      std::string kinds;
      const RecordCounts records = count_records(*direct, node, from, to);
      for (const auto& [kind, n] : records.kinds) {
        row.log_records += n;
        kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kind, n);
      }
      std::cerr << fmt::format(
          "  {} x{}: {} flows in {:.1f} s; {} log objects, {} records ({}; {} task assignments "
          "in them){}\n",
          type, concurrency, row.flows, row.elapsed_s, row.log_objects, row.log_records, kinds,
          records.assignments,
          row.proxy ? fmt::format("; log PUTs {}, lease PUTs {}", row.proxy->get("log", "PUT"),
                                  row.proxy->get("lease", "PUT"))
                    : "");
      rows.push_back(row);
    }
  }
  int worker_status = stop(worker, kStopGrace);
  int server_status = stop(server, kStopGrace);
  warn_unless_clean_exit(server, server_status, 10);
  warn_unless_clean_exit(worker, worker_status);
  if (proxy) stop(proxy->child(), kStopGrace);
  return rows;
}

void print_log(const std::vector<LogRow>& rows, bool counted_by_proxy, int lease_s) {
  fmt::print(
      "\nLog: object-storage requests of dex-server-zd serve on MinIO per 1,000 Step "
      "completions (lease {} s)\n",
      lease_s);
  if (!counted_by_proxy) {
    fmt::print(
        "(no fault proxy: log PUTs are the log objects written, one PUT each unless "
        "retried; lease PUTs not counted)\n");
  }
  fmt::print("{:<12} {:>4} {:>6} {:>7} {:>8} {:>7} {:>9} {:>8} {:>8} {:>9} {:>7} {:>7} {:>8}\n",
             "flow type", "conc", "flows", "steps", "elapsed", "log PUT", "PUT/1k", "objects",
             "records", "rec/batch", "lease", "lease", "other");
  fmt::print("{:<12} {:>4} {:>6} {:>7} {:>8} {:>7} {:>9} {:>8} {:>8} {:>9} {:>7} {:>7} {:>8}\n", "",
             "", "", "done", "s", "", "steps", "", "", "", "PUT", "GET", "requests");
  for (const LogRow& r : rows) {
    uint64_t log_puts = r.proxy ? r.proxy->get("log", "PUT") : r.log_objects;
    uint64_t other = 0;
    if (r.proxy) {
      for (auto& [cls, methods] : r.proxy->by_class) {
        for (auto& [method, n] : methods) {
          if (!(cls == "log" && method == "PUT") && cls != "lease") other += n;
        }
      }
    }
    fmt::print(
        "{:<12} {:>4} {:>6} {:>7} {:>8.1f} {:>7} {:>9.1f} {:>8} {:>8} {:>9.2f} {:>7} {:>7} {:>8}\n",
        r.flow_type, r.concurrency, r.flows, r.completions, r.elapsed_s, log_puts,
        1000.0 * static_cast<double>(log_puts) / static_cast<double>(r.completions), r.log_objects,
        r.log_records,
        r.log_objects ? static_cast<double>(r.log_records) / static_cast<double>(r.log_objects) : 0,
        r.proxy ? std::to_string(r.proxy->get("lease", "PUT")) : "-",
        r.proxy ? std::to_string(r.proxy->get("lease", "GET")) : "-",
        r.proxy ? std::to_string(other) : "-");
  }
  if (counted_by_proxy) {
    uint64_t lease_puts = 0;
    double elapsed = 0;
    for (const LogRow& r : rows) {
      lease_puts += r.proxy->get("lease", "PUT");
      elapsed += r.elapsed_s;
    }
    fmt::print(
        "lease PUTs during the cases: {} in {:.1f} s; the rule (one per {:.2f} s) gives "
        "{:.1f}\n",
        lease_puts, elapsed, lease_s / 3.0, elapsed / (lease_s / 3.0));
  }
  fmt::print(
      "steps done: Step completions (flows x Steps); PUT/1k steps: log PUTs per 1,000 "
      "completions; objects: log slots written; rec/batch: records per log object; "
      "other: every request that is neither a log PUT nor a lease request (log GETs and "
      "LISTs, snapshots)\n");
}

// ------------------------------------------------------------------ main

struct Options {
  std::vector<std::string> parts{"lease", "log"};
  std::vector<int> lease_durations{10, 60};
  double sim_hours = 1;
  double real_seconds = 60;
  int real_lease_s = 10;
  LogOptions log;
  std::string minio;
  std::string dir = fs::temp_directory_path().string();
};

}  // namespace

int main(int argc, char** argv) {
  set_program("objstore_cost_bench");
  CLI::App app{
      "objstore_cost_bench: object-storage requests of the lease (PUTs per hour) and of the log "
      "(PUTs per 1,000 Step completions) against a MinIO on loopback"};
  Options o;
  o.log.faultproxy = (fs::path(DEX_SOURCE_DIR) / "tests/tools/faultproxy.py").string();
  app.add_option("--parts", o.parts, "What to measure, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"lease", "log"}));
  app.add_option("--lease-durations", o.lease_durations,
                 "Lease durations (s) to simulate, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(3, 3600));
  app.add_option("--sim-hours", o.sim_hours, "Simulated hours per lease duration")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--real-seconds", o.real_seconds,
                 "Seconds of the real-time lease sample (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--real-lease", o.real_lease_s, "Lease duration (s) of the real-time sample")
      ->capture_default_str()
      ->check(CLI::Range(3, 3600));
  app.add_option("--flows", o.log.flows, "Flows per case of the log part")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--concurrency", o.log.concurrency, "Client concurrencies, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--server-lease", o.log.lease_s,
                 "lease.duration (s) of the server in the log part")
      ->capture_default_str()
      ->check(CLI::Range(3, 3600));
  app.add_option("--faultproxy", o.log.faultproxy,
                 "tests/tools/faultproxy.py, which counts the server's requests (absent: count "
                 "log objects instead)")
      ->capture_default_str();
  app.add_option("--python", o.log.python, "Python interpreter for the fault proxy")
      ->capture_default_str();
  app.add_option("--minio", o.minio,
                 "MinIO binary (default: $DEX_MINIO_BIN, else ~/.cache/dex/bin/minio)");
  app.add_option("--dir", o.dir, "Parent of the scratch directory (removed afterwards)")
      ->capture_default_str();
  app.set_version_flag("--version", dex::version_line("objstore_cost_bench"));
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  curl_global_init(CURL_GLOBAL_DEFAULT);

  die_on_signals("MinIO, the server and the worker are killed");

  const bool want_lease = std::ranges::find(o.parts, "lease") != o.parts.end();
  const bool want_log = std::ranges::find(o.parts, "log") != o.parts.end();
  fs::path bin = own_bin_dir();
  if (want_log) require_programs(bin, {"dex-server-zd", "dex-flow-examples"});
  fs::path root = fs::path(o.dir) / fmt::format("dex-objstore-cost-{}", getpid());
  add_scratch(root);
  fs::create_directories(root);

  Minio minio = start_minio(find_minio(o.minio), root / "minio");
  std::cerr << fmt::format("MinIO {} on {} (data in {})\n", minio.child.pid, minio.endpoint(),
                           (root / "minio").string());

  std::vector<LeaseRow> lease_rows;
  if (want_lease) {
    lease_rows = run_lease_part(minio.endpoint(), o.lease_durations, o.sim_hours, o.real_seconds,
                                o.real_lease_s);
  }
  std::vector<LogRow> log_rows;
  bool counted_by_proxy = false;
  if (want_log) log_rows = run_log_part(o.log, minio, root, bin, counted_by_proxy);
  stop(minio.child, kStopGrace);

  fmt::print("objstore_cost_bench: MinIO on loopback; {} CPUs\n",
             std::thread::hardware_concurrency());
  if (want_lease) print_lease(lease_rows);
  if (want_log) print_log(log_rows, counted_by_proxy, o.log.lease_s);
  cleanup();
  return 0;
}
