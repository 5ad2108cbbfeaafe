// dex-bulk-start: starts many runs of a Flow type on a dex server as fast as
// it takes them, for tests and demos that need a large store (dex-web's
// search at 100,000 runs, tests/web-ui/search-scale.test.mjs).
//
// Run i (0-based) is Flow ID <prefix><i> of --flow-type, started with the
// request ID "<prefix><i>" (so running the same command again starts nothing
// twice: each start answers the run the first one made), the input
// {"order": "<prefix><i>", "amount": i % 1000}, a start delay of
// --start-delay-ms (default a day: the run waits RUNNING and no Worker task
// is made, so a start is one log record) and three initial Attributes, the
// indexed ones of the examples' OrderProcessing (examples/flows):
//   customer (string)  "<customer-prefix><i % --customers>"
//   items    (int64)   i % 10 + 1
//   total    (double)  i % 1000 + 0.5
// --no-attributes leaves them out (for a Flow type that declares none).
//
// --concurrency threads (one dex::Client each) take the next i in turn. The
// Flow type must be declared by a Worker: the first start is retried while
// the server answers that it was never declared, up to --wait-s. Any other
// failure stops the program (exit 1) with the server's message. Progress goes
// to stderr once a second; the last line on stdout is
//   started 100000 runs in 41.2 s: 2427 runs/s (64 callers)
//
//   build/bin/dex-bulk-start --server 127.0.0.1:8801 --runs 100000
//       [--flow-type OrderProcessing] [--prefix bulk-] [--concurrency 64]
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sdk/client.h"

namespace {

struct Flags {
  std::string server = "127.0.0.1:8801";
  std::string flow_type = "OrderProcessing";
  std::string prefix = "bulk-";
  std::string customer_prefix = "customer-";
  int64_t runs = 100'000;
  int64_t first = 0;
  int concurrency = 64;
  int64_t customers = 100;
  int64_t start_delay_ms = 86'400'000;
  bool no_attributes = false;
  int wait_s = 60;
};

dex::flow::StartOptions options_for(const Flags& flags, int64_t i) {
  dex::flow::StartOptions o;
  o.set_request_id(flags.prefix + std::to_string(i));
  o.set_ignore_already_started(true);
  if (flags.start_delay_ms > 0) o.set_start_delay_ms(flags.start_delay_ms);
  if (!flags.no_attributes) {
    auto* customer = o.add_initial_attributes();
    customer->set_key("customer");
    customer->mutable_value()->set_string_value(flags.customer_prefix +
                                                std::to_string(i % flags.customers));
    auto* items = o.add_initial_attributes();
    items->set_key("items");
    items->mutable_value()->set_int64_value(i % 10 + 1);
    auto* total = o.add_initial_attributes();
    total->set_key("total");
    total->mutable_value()->set_double_value(static_cast<double>(i % 1000) + 0.5);
  }
  return o;
}

dex::Status start_one(dex::Client& client, const Flags& flags, int64_t i) {
  const std::string id = flags.prefix + std::to_string(i);
  return client
      .start(flags.flow_type, id, {{"order", id}, {"amount", i % 1000}}, options_for(flags, i))
      .status();
}

// The first start, retried while the Flow type is not declared yet (the
// Worker has not said hello).
dex::Status first_start(const Flags& flags) {
  dex::ClientOptions options;
  options.server_address = flags.server;
  dex::Client client(options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(flags.wait_s);
  for (;;) {
    dex::Status s = start_one(client, flags, flags.first);
    const bool undeclared = s.message().find("was never declared") != std::string::npos;
    if (s.is_ok() || !undeclared || std::chrono::steady_clock::now() > deadline) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"dex-bulk-start: start many waiting runs of a Flow type, fast"};
  app.add_option("--server", flags.server, "the API address (default 127.0.0.1:8801)");
  app.add_option("--runs", flags.runs, "runs to start (default 100000)")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  app.add_option("--first", flags.first, "the first run's number (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--flow-type", flags.flow_type, "the Flow type (default OrderProcessing)");
  app.add_option("--prefix", flags.prefix, "Flow ID and request ID prefix (default bulk-)");
  app.add_option("--customer-prefix", flags.customer_prefix,
                 "the customer Attribute's prefix (default customer-)");
  app.add_option("--customers", flags.customers, "distinct customer values (default 100)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}));
  app.add_option("--concurrency", flags.concurrency, "callers at once (default 64)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--start-delay-ms", flags.start_delay_ms,
                 "each run's start delay; 0 starts the start Step at once (default a day)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-attributes", flags.no_attributes, "start without initial Attributes");
  app.add_option("--wait-s", flags.wait_s,
                 "how long to wait for the Flow type's declaration (default 60)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  const auto t0 = std::chrono::steady_clock::now();
  if (dex::Status s = first_start(flags); !s.is_ok()) {
    fmt::print(stderr, "dex-bulk-start: run {}{}: {}\n", flags.prefix, flags.first, s.message());
    return 1;
  }
  const int64_t end = flags.first + flags.runs;
  std::atomic<int64_t> next{flags.first + 1};
  std::atomic<int64_t> done{1};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::string error;

  std::vector<std::thread> callers;
  callers.reserve(static_cast<size_t>(flags.concurrency));
  for (int c = 0; c < flags.concurrency; ++c) {
    callers.emplace_back([&] {
      dex::ClientOptions options;
      options.server_address = flags.server;
      dex::Client client(options);
      for (;;) {  // bounded by `end`
        const int64_t i = next.fetch_add(1);
        if (i >= end || failed.load()) return;
        if (dex::Status s = start_one(client, flags, i); !s.is_ok()) {
          std::lock_guard lock(error_mu);
          if (!failed.exchange(true))
            error = fmt::format("run {}{}: {}", flags.prefix, i, s.message());
          return;
        }
        done.fetch_add(1);
      }
    });
  }

  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  int64_t last_done = 0;
  auto last_t = std::chrono::steady_clock::now();
  while (done.load() < flags.runs && !failed.load()) {  // ends when every caller has
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (seconds_since(last_t) < 1.0) continue;
    const int64_t d = done.load();
    fmt::print(stderr, "dex-bulk-start: {}/{} started, {:.0f} runs/s now\n", d, flags.runs,
               static_cast<double>(d - last_done) / seconds_since(last_t));
    last_done = d;
    last_t = std::chrono::steady_clock::now();
  }
  for (auto& t : callers) t.join();
  if (failed.load()) {
    fmt::print(stderr, "dex-bulk-start: {}\n", error);
    return 1;
  }
  const double elapsed = seconds_since(t0);
  fmt::print("started {} runs in {:.1f} s: {:.0f} runs/s ({} callers)\n", flags.runs, elapsed,
             static_cast<double>(flags.runs) / elapsed, flags.concurrency);
  std::fflush(stdout);
  return 0;
}
