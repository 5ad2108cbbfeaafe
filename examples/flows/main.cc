// dex-flow-examples: the example Flows (example_flows.h) as a program.
//
//   dex-flow-examples worker [--server ADDR]... [--concurrency N] [--work-time D]
//                            [--charge-bug] [--token-file F]   host the Flows (example_flows.h)
//   dex-flow-examples drive order|order-refund|signup|quotes|transfer|transfer-compensate|
//                           fanout|retry --flow-id ID [--server ADDR]...
//
// `drive` plays the outside world of one example (the seller approving, the
// user typing the code) against a running Worker and prints JSON lines: what
// it did, then {"event": "result", ...} with the run's status and outputs. It
// keeps going through a server restart or failover (starts and publishes are
// safe to repeat; waits ask again). `transfer` (and `transfer-compensate`,
// whose credit fails) starts a MoneyTransfer of 30 from a balance of 100 (an
// initial Attribute), asks the `balance` RPC while a failed credit waits for
// its retries, and prints
// the run's Attributes with the result. `fanout` runs a FanOut of 100 Square
// SubFlows and adds each child's status and Attribute to the result; `retry`
// runs RetryOnce under a Flow retry policy (its first run fails) and adds the
// first run's end. Exit status: 0 when the run completed as
// the example expects, 1 otherwise, 2 for usage errors.
#include <signal.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "common/units.h"
#include "common/version.h"
#include "example_flows.h"
#include "sdk/addresses.h"
#include "sdk/client.h"
#include "sdk/worker.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr dex::Duration kScenarioTimeout = dex::seconds(120);

const auto kStart = std::chrono::steady_clock::now();

// One JSON line; "ms": milliseconds since the program started.
void emit(json line) {
  line["ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - kStart)
                   .count();
  std::cout << line.dump() << std::endl;
}

struct ServeFlags {
  std::string worker_id;
  uint32_t concurrency = 16;
  std::string work_time;    // "": no work
  bool charge_bug = false;  // Checkout's Charge fails on its bug (docs/time-travel.md)
};

// --tls, --ca-file, --cert-file, --key-file, --server-name and their
// DEX_TLS* variables (sdk/tls_options.h), as dexcli takes them.
dex::TlsOptions tls_options;

// --token-file: the token sent as "authorization: Bearer <token>" (the
// Worker's needs the worker role, the driver's the client role; docs/api.md
// "Access"). Without it, $DEX_TOKEN or $DEX_TOKEN_FILE (sdk/credentials.h).
std::string token_file;

void add_token_flag(CLI::App* app, std::string_view role) {
  app->add_option("--token-file", token_file,
                  "File holding a token of the " + std::string(role) +
                      " role (default $DEX_TOKEN, $DEX_TOKEN_FILE)");
}

void add_tls_flags(CLI::App* app) {
  app->add_flag("--tls", tls_options.enabled, "Connect with TLS (default $DEX_TLS)");
  app->add_option("--ca-file", tls_options.ca_file,
                  "PEM CAs of the server's certificate (default $DEX_TLS_CA_FILE)");
  app->add_option("--cert-file", tls_options.cert_file,
                  "PEM client certificate for mutual TLS (default $DEX_TLS_CERT_FILE)");
  app->add_option("--key-file", tls_options.key_file,
                  "Its unencrypted PEM key (default $DEX_TLS_KEY_FILE)");
  app->add_option("--server-name", tls_options.server_name,
                  "The name the server's certificate must hold (default $DEX_TLS_SERVER_NAME)");
}

int serve(const std::vector<std::string>& servers, const ServeFlags& flags) {
  auto work_time = flags.work_time.empty() ? dex::StatusOr<dex::Duration>(dex::Duration::zero())
                                           : dex::parse_duration(flags.work_time);
  if (!work_time.is_ok()) {
    std::cerr << "dex-flow-examples: --work-time: " << work_time.status().message() << std::endl;
    return 2;
  }
  dex::WorkerOptions options;
  options.server_addresses = servers;
  options.tls = tls_options;
  options.token_file = token_file;
  options.worker_id = flags.worker_id;
  options.max_concurrent_tasks = flags.concurrency;
  dex::Worker worker(options);
  const auto work_ms = std::chrono::duration_cast<std::chrono::milliseconds>(*work_time);
  for (auto& flow : dex::examples::all_flows(work_ms, flags.charge_bug)) worker.host(flow);
  // SIGTERM / SIGINT: a graceful shutdown from a thread that waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    worker.shutdown();
  });
  waiter.detach();
  std::cout << "dex-flow-examples worker " << worker.worker_id()
            << " hosts OrderProcessing, SignUp, ParallelQuotes, MoneyTransfer, AttrRpcDemo, "
               "E2ECounter, FanOut, Square, RetryOnce, Checkout"
            << (flags.charge_bug ? " (Charge with its bug)" : "")
            << " and the pipelines (OneStep, ThreeSteps, E2EThreeSteps, E2ESlowStep, "
               "E2ESlowStepNoRetry, E2EIdle)"
            << std::endl;
  dex::Status s = worker.run();
  if (!s.is_ok()) {
    std::cerr << "dex-flow-examples: " << s.to_string() << std::endl;
    return 1;
  }
  return 0;
}

// Repeats `call` while no process serves (a restart or failover), up to the
// scenario's deadline: every call used here is safe to repeat.
template <typename F>
auto retried(const char* what, F&& call) {
  const auto end = std::chrono::steady_clock::now() + kScenarioTimeout;
  while (true) {
    auto result = call();
    bool unavailable;
    if constexpr (std::is_same_v<decltype(result), dex::Status>) {
      unavailable = !result.is_ok() && result.message().rfind("UNAVAILABLE", 0) == 0;
    } else {
      unavailable = !result.is_ok() && result.status().message().rfind("UNAVAILABLE", 0) == 0;
    }
    if (!unavailable || std::chrono::steady_clock::now() >= end) {
      if constexpr (std::is_same_v<decltype(result), dex::Status>) {
        if (!result.is_ok()) throw std::runtime_error(std::string(what) + ": " + result.message());
      } else {
        if (!result.is_ok())
          throw std::runtime_error(std::string(what) + ": " + result.status().message());
      }
      return result;
    }
    std::this_thread::sleep_for(200ms);
  }
}

void wait_step(dex::Client& client, const std::string& flow_id, const std::string& step) {
  auto done = retried("wait for a Step",
                      [&] { return client.wait_for_step(flow_id, step, kScenarioTimeout); });
  if (!done->completed()) throw std::runtime_error(step + " did not complete in time");
  emit({{"event", "step-completed"}, {"step", step}});
}

void publish(dex::Client& client, const std::string& flow_id, const std::string& channel,
             const json& message) {
  (void)retried("publish", [&] { return client.publish(flow_id, channel, {message}); });
  emit({{"event", "published"}, {"channel", channel}, {"message", message}});
}

// The run's result line, once it closed: its status and outputs.
json closed_result(dex::Client& client, const std::string& flow_id) {
  auto closed = retried("wait", [&] { return client.wait_for_flow(flow_id, kScenarioTimeout); });
  json outputs = json::array();
  for (const auto& o : closed->flow().outputs())
    outputs.push_back(
        {{"step_execution_id", o.step_execution_id()}, {"output", dex::from_payload(o.output())}});
  return {{"event", "result"},
          {"flow_id", flow_id},
          {"run_id", closed->flow().run_id()},
          {"closed", closed->closed()},
          {"status", dex::flow::FlowStatus_Name(closed->flow().status())},
          {"reason", closed->flow().close_reason()},
          {"outputs", outputs},
          {"runs", closed->flow().runs()},
          {"flow_attempt", closed->flow().flow_attempt()}};
}

const dex::Attribute<int64_t> kBalance{"balance"};
const dex::Attribute<bool> kTransferred{"transferred"};

int drive_transfer(dex::Client& client, const std::string& flow_id, bool fail_credit) {
  const json input = {{"amount", 30}, {"to", "acct-2"}, {"fail_credit", fail_credit}};
  dex::StartOptions options;
  options.initial(kBalance, int64_t{100});
  auto started =
      retried("start", [&] { return client.start("MoneyTransfer", flow_id, input, options); });
  emit({{"event", "started"},
        {"flow_type", "MoneyTransfer"},
        {"flow_id", flow_id},
        {"run_id", started->run_id()}});
  if (fail_credit) {
    // Debit holds the lock from the start: the RPC waits for it and sees 70.
    // The failed credit is compensated only seconds later, so the run is
    // still on (a successful transfer may well have closed already).
    dex::InvokeRpcOptions rpc;
    rpc.request_id = flow_id + "-balance";  // a repeat answers the same
    auto balance =
        retried("rpc", [&] { return client.invoke_rpc(flow_id, "balance", json::object(), rpc); });
    emit({{"event", "rpc"}, {"rpc", "balance"}, {"output", *balance}});
  }
  json result = closed_result(client, flow_id);
  auto got = retried("attributes", [&] { return client.get_attributes(flow_id); });
  json attributes = json::object();
  if (auto b = kBalance.get(*got)) attributes["balance"] = *b;
  if (auto t = kTransferred.get(*got)) attributes["transferred"] = *t;
  result["attributes"] = attributes;
  emit(result);
  return result["status"] == "FLOW_COMPLETED" ? 0 : 1;
}

const dex::Attribute<int64_t> kSquare{"square"};

// FanOut of 100 Square children: the parent's result, then each child's
// status and Attribute, read by its derived Flow ID.
int drive_fanout(dex::Client& client, const std::string& flow_id) {
  constexpr int kChildren = 100;
  auto started = retried("start", [&] {
    return client.start("FanOut", flow_id, json{{"children", kChildren}});
  });
  emit({{"event", "started"},
        {"flow_type", "FanOut"},
        {"flow_id", flow_id},
        {"run_id", started->run_id()}});
  json result = closed_result(client, flow_id);
  int completed = 0;
  int64_t squares = 0;  // the sum of the children's Attributes
  for (int i = 0; i < kChildren; ++i) {
    const std::string child = flow_id + "/Fan-1/" + std::to_string(i);
    auto d = retried("describe", [&] { return client.describe_flow(child); });
    completed += d->status() == dex::flow::FLOW_COMPLETED ? 1 : 0;
    auto got = retried("attributes", [&] { return client.get_attributes(child); });
    squares += kSquare.get(*got).value_or(0);
    if (i == 0) {
      result["first_child"] = {{"flow_id", child},
                               {"run_id", d->run_id()},
                               {"parent", d->parents_size() > 0 ? d->parents(0).flow_id() : ""}};
    }
  }
  result["children_completed"] = completed;
  result["children_square_sum"] = squares;
  emit(result);
  return result["status"] == "FLOW_COMPLETED" && completed == kChildren ? 0 : 1;
}

// RetryOnce under a Flow retry policy: its first run fails, the second
// completes; wait_for_flow without a run ID follows the retry.
int drive_retry(dex::Client& client, const std::string& flow_id) {
  dex::StartOptions options;
  options.retry({.initial_interval = 200ms, .maximum_attempts = 3});
  auto started = retried("start", [&] {
    return client.start("RetryOnce", flow_id, json{{"fail_runs", 1}}, options);
  });
  emit({{"event", "started"},
        {"flow_type", "RetryOnce"},
        {"flow_id", flow_id},
        {"run_id", started->run_id()}});
  json result = closed_result(client, flow_id);
  auto first =
      retried("describe", [&] { return client.describe_flow(flow_id, started->run_id()); });
  result["first_run"] = {{"run_id", first->run_id()},
                         {"status", dex::flow::FlowStatus_Name(first->status())},
                         {"reason", first->close_reason()},
                         {"next_run_id", first->next_run_id()}};
  emit(result);
  return result["status"] == "FLOW_COMPLETED" ? 0 : 1;
}

int drive(const std::string& example, const std::vector<std::string>& servers,
          const std::string& flow_id) {
  dex::ClientOptions options;
  options.server_addresses = servers;
  options.tls = tls_options;
  options.token_file = token_file;
  dex::Client client(options);
  if (example == "transfer" || example == "transfer-compensate")
    return drive_transfer(client, flow_id, example == "transfer-compensate");
  if (example == "fanout") return drive_fanout(client, flow_id);
  if (example == "retry") return drive_retry(client, flow_id);
  std::string type;
  json input;
  if (example == "order" || example == "order-refund") {
    type = "OrderProcessing";
    input = {{"order", flow_id},
             {"amount", 42},
             {"fail_charges", 2},
             {"reminder_ms", 500},
             {"fail_shipping", example == "order-refund"}};
  } else if (example == "signup") {
    type = "SignUp";
    input = {
        {"email", "ann@example.com"}, {"code", "123456"}, {"resend_ms", 500}, {"max_sends", 10}};
  } else {
    type = "ParallelQuotes";
    input = {{"parcel", flow_id},
             {"delays_ms", {{"A", 100}, {"B", 300}, {"C", 600'000}}},
             {"prices", {{"A", 12}, {"B", 9}, {"C", 5}}},
             {"settle_ms", 100}};
  }
  auto started = retried("start", [&] { return client.start(type, flow_id, input); });
  emit({{"event", "started"},
        {"flow_type", type},
        {"flow_id", flow_id},
        {"run_id", started->run_id()}});
  if (type == "OrderProcessing") {
    wait_step(client, flow_id, "Ship-1");  // the first reminder fired: Ship-2 waits
    publish(client, flow_id, "seller-approval", json{{"seller", "s-1"}});
  } else if (type == "SignUp") {
    wait_step(client, flow_id, "AwaitVerification-1");  // a resend
    publish(client, flow_id, "verify", json{{"code", "000000"}});
    publish(client, flow_id, "verify", json{{"code", "123456"}});
  }
  json result = closed_result(client, flow_id);
  // The messages the run's history shows published by clients, in order.
  json history_publishes = json::array();
  uint64_t after = 0;
  bool from_start = true;
  for (int page = 0; page < 1000; ++page) {  // bounded: 1,000 pages of 100 events
    auto h = retried("history", [&] { return client.history(flow_id, after, from_start); });
    from_start = false;
    for (const auto& e : h->events()) {
      after = e.seq();
      if (e.kind() != dex::flow::CHANNEL_PUBLISHED) continue;
      for (const auto& m : e.publish().messages())
        history_publishes.push_back(dex::from_payload(m));
    }
    if (!h->more()) break;
  }
  result["history_publishes"] = history_publishes;
  emit(result);
  return result["status"] == "FLOW_COMPLETED" ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The dex example Flows: a Worker that hosts them, and drivers of each example"};
  app.set_version_flag("--version", dex::version_line("dex-flow-examples"));
  app.require_subcommand(1);
  std::vector<std::string> servers;
  ServeFlags flags;
  auto* worker = app.add_subcommand(
      "worker",
      "Host OrderProcessing, SignUp, ParallelQuotes, Checkout and the pipelines (example_flows.h)");
  worker->add_option("--server", servers,
                     "Address of a process of the node (repeat for its standbys, or "
                     "comma-separated); default 127.0.0.1:8801");
  worker->add_option("--worker-id", flags.worker_id,
                     "Stable Worker ID (default: <hostname>-<pid>)");
  worker->add_option("--concurrency", flags.concurrency, "Tasks run at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  worker
      ->add_option("--work-time", flags.work_time,
                   "How long each pipeline Step works (sleeps): 20ms, 1s")
      ->capture_default_str();
  worker->add_flag("--charge-bug", flags.charge_bug,
                   "Run Checkout's Charge with its bug: it fails every run, non-retryably (the "
                   "time travel example, docs/time-travel.md); without it, the fixed Charge");
  std::string example, flow_id;
  auto* driver = app.add_subcommand("drive", "Run one example end to end against a Worker");
  driver
      ->add_option("example", example,
                   "order, order-refund, signup, quotes, transfer, transfer-compensate, fanout "
                   "or retry")
      ->required()
      ->check(CLI::IsMember({"order", "order-refund", "signup", "quotes", "transfer",
                             "transfer-compensate", "fanout", "retry"}));
  driver->add_option("--flow-id", flow_id, "The Flow ID to start")->required();
  driver->add_option("--server", servers, "Address of a process of the node (repeatable)");
  add_tls_flags(worker);
  add_tls_flags(driver);
  add_token_flag(worker, "worker");
  add_token_flag(driver, "client");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (auto s = dex::apply_tls_env(tls_options); !s.is_ok()) {
    std::cerr << "dex-flow-examples: " << s.message() << std::endl;
    return 2;
  }
  std::vector<std::string> addresses;
  for (const std::string& arg : servers) {
    auto parsed = dex::parse_server_addresses(arg);
    if (!parsed.is_ok()) {
      std::cerr << "dex-flow-examples: --server: " << parsed.status().message() << std::endl;
      return 2;
    }
    addresses.insert(addresses.end(), parsed->begin(), parsed->end());
  }
  servers = addresses;
  if (servers.empty()) servers.push_back("127.0.0.1:8801");
  try {
    if (worker->parsed()) return serve(servers, flags);
    return drive(example, servers, flow_id);
  } catch (const std::exception& e) {
    emit({{"event", "error"}, {"message", e.what()}});
    return 1;
  }
}
