// dex Flows benchmark: runs of one and of three Execute-only Steps in a row
// through a real `dex-server-zd dev` (strict durability: every log batch is
// fsynced) and a Worker in this process (the C++ SDK), next to this machine's
// fsync floor measured in the same run.
//
// For each Flow type it prints:
//  - log batches per run, measured alone: `--runs` runs one after another,
//    the log's new slots divided by the runs (one batch per Step transition:
//    expect 2 for one Step and 4 for three);
//  - closed-loop throughput and latency at each concurrency (start, then
//    WaitForFlow until the run closes; one Client per thread).
//
//   build/bin/dex_flows_bench [--seconds 5] [--concurrency 1,64] [--runs 50]
//   build/bin/dex_flows_bench --tls-row [--seconds 5] [--concurrency 64]
//     (the one-Step row in plaintext and over mutual TLS, same run)
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_process.h"
#include "common/version.h"
#include "example_flows.h"
#include "flow_bench.h"
#include "sdk/client.h"
#include "sdk/worker.h"

namespace {

namespace fs = std::filesystem;
using namespace dex::bench;

constexpr auto kStartTimeout = std::chrono::seconds(60);

// A CA, a server certificate for 127.0.0.1 and a client certificate, made by
// the openssl command in `dir` (as the TLS tests make theirs).
dex::TlsOptions make_certificates(const fs::path& dir) {
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
  const std::string steps[] = {
      "openssl req -x509 " + ec +
          " -keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca"
          " -addext basicConstraints=critical,CA:TRUE",
      "openssl req " + ec + " -keyout server.key -out server.csr -subj /CN=bench-server",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile server.ext -out server.pem",
      "openssl req " + ec + " -keyout client.key -out client.csr -subj /CN=bench-client",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-out client.pem"};
  std::ofstream(dir / "server.ext") << "subjectAltName=IP:127.0.0.1\n";
  for (const std::string& step : steps) {
    const std::string cmd = fmt::format("cd '{}' && {} >/dev/null 2>&1", dir.string(), step);
    if (std::system(cmd.c_str()) != 0) die("making the TLS certificates failed: " + step);
  }
  dex::TlsOptions tls;
  tls.ca_file = (dir / "ca.pem").string();
  tls.cert_file = (dir / "client.pem").string();
  tls.key_file = (dir / "client.key").string();
  return tls;
}

// The one-Step row at `conc` against a dev server with `extra_args`, a Worker
// and the Clients all using `tls`.
Figures one_step_row(const fs::path& bin, const std::string& name, int conc, double seconds,
                     const std::vector<std::string>& extra_args, const dex::TlsOptions& tls,
                     double* fsync_ms) {
  StrictDev dev = start_strict_dev(bin, name, kStartTimeout, extra_args);
  *fsync_ms = dev.fsync_ms;
  dex::WorkerOptions wo;
  wo.server_address = dev.address;
  wo.max_concurrent_tasks = 128;
  wo.tls = tls;
  dex::Worker worker(wo);
  worker.host(dex::examples::pipeline("BenchOne", {"S1"}, std::chrono::milliseconds(0)));
  std::thread worker_thread([&] { (void)worker.run(); });
  dex::ClientOptions co;
  co.server_address = dev.address;
  co.tls = tls;
  dex::Client client(co);
  await_first_run(client, "BenchOne", "probe-BenchOne", kStartTimeout);
  Figures f = closed_loop(
      dev.address, conc, seconds,
      [&](int, dex::Client& cl, uint64_t seq) {
        return run_once(cl, "BenchOne", fmt::format("BenchOne-{}", seq));
      },
      tls);
  check_alive(dev.server);
  worker.shutdown();
  worker_thread.join();
  warn_unless_clean_exit(dev.server, stop(dev.server, std::chrono::seconds(15)), 10);
  return f;
}

// --tls-row: the one-Step row at `conc` in plaintext and over mutual TLS (the
// API with client certificates required; Worker and Clients present theirs),
// one after the other in this run, each on a fresh dev server.
int tls_rows(const fs::path& bin, int conc, double seconds) {
  const fs::path certs =
      fs::temp_directory_path() / fmt::format("dex-flows-bench-tls-{}", getpid());
  fs::create_directories(certs);
  add_scratch(certs);
  const dex::TlsOptions tls = make_certificates(certs);
  const fs::path config = certs / "tls.yaml";
  std::ofstream(config) << fmt::format(
      "api:\n  tls:\n    certFile: {}\n    keyFile: {}\n    clientCaFile: {}\n"
      "web:\n  listen: \"\"\n",
      (certs / "server.pem").string(), (certs / "server.key").string(), tls.ca_file);
  fmt::print("{:<11} {:>5} {:>9} {:>9} {:>9} {:>10}\n", "transport", "conc", "flows/s", "p50 ms",
             "p99 ms", "p50/fsync");
  const std::vector<std::string> plain_args = {"--no-web"};
  const std::vector<std::string> tls_args = {"--no-web", "--config", config.string()};
  for (bool with_tls : {false, true}) {
    double fsync_ms = 0;
    Figures f = one_step_row(bin, with_tls ? "dex-flows-bench-mtls" : "dex-flows-bench-plain", conc,
                             seconds, with_tls ? tls_args : plain_args,
                             with_tls ? tls : dex::TlsOptions{}, &fsync_ms);
    fmt::print("{:<11} {:>5} {:>9.0f} {:>9.2f} {:>9.2f} {:>10.1f}\n",
               with_tls ? "mTLS" : "plaintext", conc, f.per_second, f.p50, f.p99, f.p50 / fsync_ms);
  }
  cleanup();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  set_program("dex_flows_bench");
  CLI::App app{
      "dex Flows of one and three Steps through dex-server-zd dev (strict): log batches "
      "per run, flows/s and latency, next to the fsync floor"};
  app.set_version_flag("--version", dex::version_line("dex_flows_bench"));
  double seconds = 5;
  std::vector<int> concurrency{1, 64};
  int runs = 50;
  app.add_option("--seconds", seconds, "Measured seconds per case")->check(CLI::PositiveNumber);
  app.add_option("--concurrency", concurrency, "Client concurrencies")->delimiter(',');
  app.add_option("--runs", runs, "Sequential runs for the batches-per-run figure")
      ->check(CLI::Range(1, 100000));
  bool tls_row = false;
  app.add_flag("--tls-row", tls_row,
               "Only the one-Step row at the last --concurrency, in plaintext and over mutual "
               "TLS (certificates made by openssl), each on a fresh dev server, in this run");
  CLI11_PARSE(app, argc, argv);
  die_on_signals("dex_flows_bench");

  const fs::path bin = fs::canonical("/proc/self/exe").parent_path();
  if (tls_row) return tls_rows(bin, concurrency.back(), seconds);
  StrictDev dev = start_strict_dev(bin, "dex-flows-bench", kStartTimeout);
  const std::string& address = dev.address;
  dex::WorkerOptions wo;
  wo.server_address = address;
  wo.max_concurrent_tasks = 128;
  dex::Worker worker(wo);
  const std::chrono::milliseconds no_work(0);
  worker.host(dex::examples::pipeline("BenchOne", {"S1"}, no_work));
  worker.host(dex::examples::pipeline("BenchThree", {"S1", "S2", "S3"}, no_work));
  std::thread worker_thread([&] { (void)worker.run(); });

  dex::ClientOptions co;
  co.server_address = address;
  dex::Client client(co);
  // The Worker's hello declared both types once a probe run of each completes.
  for (const char* type : {"BenchOne", "BenchThree"}) {
    await_first_run(client, type, fmt::format("probe-{}", type), kStartTimeout);
  }
  fmt::print(
      "fsync floor (512 B append + fdatasync) p50 {:.3f} ms; dex-server-zd dev strict on {}\n",
      dev.fsync_ms, address);
  fmt::print("{:<11} {:>15} {:>5} {:>9} {:>9} {:>9} {:>10}\n", "flow", "batches/run", "conc",
             "flows/s", "p50 ms", "p99 ms", "p50/fsync");
  for (const std::string type : {"BenchOne", "BenchThree"}) {
    const double batches =
        batches_per_run(client, dev.root / "data", type, fmt::format("seq-{}", type), runs);
    for (int c : concurrency) {
      Figures f = closed_loop(address, c, seconds, [&](int, dex::Client& cl, uint64_t seq) {
        std::string err = run_once(cl, type, fmt::format("{}-{}", type, seq));
        return err.empty() ? err : type + ": " + err;
      });
      check_alive(dev.server);
      fmt::print("{:<11} {:>15.2f} {:>5} {:>9.0f} {:>9.2f} {:>9.2f} {:>10.1f}\n", type, batches, c,
                 f.per_second, f.p50, f.p99, f.p50 / dev.fsync_ms);
    }
  }
  worker.shutdown();
  worker_thread.join();
  warn_unless_clean_exit(dev.server, stop(dev.server, std::chrono::seconds(15)), 10);
  cleanup();
  return 0;
}
