// dexcli: the dex command-line client.
//   flow start|stop|publish|wait|describe|state|history|skip-timer|watch|
//     attributes get|set|rpc|inspect (dex Flows: flow_commands.cc, docs/cli.md),
//     search|list (finding runs: search_commands.cc),
//   admin describe|step-down: calls to a server over gRPC (--server,
//     --timeout), JSON on stdout; with several --server addresses (a node's
//     active process and its standbys) each call goes to whichever is active
//     (src/sdk/README.md); admin step-down combines its expectation flags as
//     the spec says ("Step down the active process", docs/api.md "Step down");
//   health: one process's gRPC health;
//   inspect lease|log: reads a node's lease and log straight from object
//     storage (read-only): a dev/local data directory (--data-dir) or the
//     store a serve config names (--config: S3 or filesystem); inspect.cc.
// Exit codes: 0 success; 1 the call or the read failed (stderr says
// "dexcli: <what failed>: <gRPC code>: <message>"); 2 bad flags or input
// (nothing was sent); 3 `flow wait` or `flow watch` gave up before the run
// closed; 4 `flow wait --expect-completed` and the run closed otherwise.
#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/flow_commands.h"
#include "cli/inspect.h"
#include "cli/output.h"
#include "cli/tls_flags.h"
#include "cli/token_flags.h"
#include "common/node_id.h"
#include "common/units.h"
#include "common/version.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "sdk/addresses.h"
#include "sdk/client.h"
#include "sdk/grpc_status.h"

namespace {

using json = nlohmann::ordered_json;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

int fail(const std::string& message) {
  std::cerr << "dexcli: " << message << "\n";
  return kExitFailed;
}

int usage_error(const std::string& message) {
  std::cerr << "dexcli: " << message << "\nRun with --help for usage.\n";
  return kExitUsage;
}

int print(const json& out) {
  std::cout << out.dump(2) << "\n";
  return 0;
}

// ------------------------------------------------------------- API commands

dex::StatusOr<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return dex::Status::invalid_argument("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return dex::Status::invalid_argument("cannot read " + path);
  return text.str();
}

// ----------------------------------------------------------------- admin

// The admin credential: the file's content without surrounding whitespace.
// Unreadable or empty: InvalidArgument naming the file. The token itself never
// appears in a message.
dex::StatusOr<std::string> read_credential(const std::string& path) {
  auto text = read_file(path);
  if (!text.is_ok()) return text.status();
  std::string token = text.value();
  token.erase(token.find_last_not_of(" \t\r\n") + 1);
  token.erase(0, token.find_first_not_of(" \t\r\n"));
  if (token.empty()) {
    return dex::Status::invalid_argument(path + " is empty: it must hold the admin credential");
  }
  return token;
}

// `arg` quoted for a POSIX shell when it needs it.
std::string shell_word(const std::string& arg) {
  bool plain = !arg.empty() && arg.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                   "QRSTUVWXYZ0123456789._-/:,@%+=[]") == std::string::npos;
  if (plain) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// What the admin calls need to say about a failure beyond the server's words:
// the extra lines for the codes an operator can act on.
std::string admin_hint(std::string_view code, const std::string& credential_file) {
  if (code == "UNAUTHENTICATED" || code == "PERMISSION_DENIED") {
    if (credential_file.empty()) {
      return "dexcli: this server needs an admin credential: give --credential-file FILE (the "
             "file holds the token), or --token-file FILE (or $DEX_TOKEN_FILE) with a token of "
             "the admin role\n";
    }
    return "dexcli: the server refused the admin credential in " + credential_file + "\n";
  }
  if (code == "UNIMPLEMENTED") {
    return "dexcli: this server does not serve this dex.AdminService call (admin.enabled is "
           "false, or the server is older)\n";
  }
  return "";
}

int fail_admin(const std::string& what, const dex::Status& status,
               const std::string& credential_file, const std::string& more = "") {
  std::cerr << "dexcli: " << what << ": " << status.message() << "\n"
            << admin_hint(dex::sdk_internal::grpc_code_of(status), credential_file) << more;
  return kExitFailed;
}

// The unknown-outcome text, prepared before the StepDown call so that a
// signal handler can write it as it is.
std::string g_interrupted_text;

extern "C" void on_interrupt_while_stepping_down(int) {
  ssize_t ignored = ::write(STDERR_FILENO, g_interrupted_text.data(), g_interrupted_text.size());
  (void)ignored;
  ::_exit(kExitFailed);
}

struct StepDownFlags {
  std::vector<std::string> servers;
  std::string timeout_text;  // empty when --timeout was not given
  std::string credential_file;
};

// The command that retries a step down for the same process: every address,
// --timeout if it was given, and the expectations this call used.
std::string retry_command(const StepDownFlags& flags, const std::string& node_id,
                          const std::string& epoch) {
  std::string servers;
  for (const std::string& s : flags.servers) servers += (servers.empty() ? "" : ",") + s;
  std::string retry = "dexcli --server " + shell_word(servers);
  if (!flags.timeout_text.empty()) retry += " --timeout " + shell_word(flags.timeout_text);
  retry += " admin step-down --yes --expected-node-id " + shell_word(node_id) +
           " --expected-node-epoch " + epoch;
  if (!flags.credential_file.empty()) {
    retry += " --credential-file " + shell_word(flags.credential_file);
  }
  return retry;
}

// Spec, "Retry a step down safely": the outcome is unknown; the only safe
// retry names the same process, with the expectations this call used.
std::string unknown_outcome_text(const StepDownFlags& flags, const std::string& node_id,
                                 const std::string& epoch) {
  const std::string retry = retry_command(flags, node_id, epoch);
  return "dexcli: the outcome of the step down is unknown: the process may or may not have "
         "stepped down. The call used:\n"
         "  expectedNodeId: " +
         node_id +
         "\n"
         "  expectedNodeEpoch: " +
         epoch +
         "\n"
         "Retry only with these values, which identify the process you meant to step down:\n"
         "  " +
         retry +
         "\n"
         "If that process already stepped down, the retry answers FAILED_PRECONDITION and "
         "changes nothing.\n"
         "Never retry with a node epoch that 'dexcli admin describe' prints after this failure: "
         "describe shows whichever process is active by then (a standby that took over, or this "
         "process after taking the lease back), and stepping that one down would cause another "
         "switchover, or on a single replica a second outage. Do not run the command again "
         "without --expected-node-id and --expected-node-epoch either: it would describe and "
         "step down whichever process is active now. 'dexcli admin describe' shows what "
         "happened: a different node epoch or holder process ID means the step down (or another "
         "takeover) already happened, so do not retry.\n";
}

// dexcli admin step-down, after its flags were checked (spec: "Step down the
// active process"): without expectations it describes the active process and
// expects what describe returns; with the node ID alone it describes first and
// refuses another node ID; with both it sends them as they are.
int step_down(dex::Client& client, const StepDownFlags& flags, std::string node_id,
              std::string epoch, dex::Duration timeout) {
  if (epoch.empty()) {
    auto described = client.describe();
    if (!described.is_ok()) {
      std::string more;
      if (dex::sdk_internal::grpc_code_of(described.status()) == "FAILED_PRECONDITION") {
        more =
            "dexcli: a step down or its hold-off is in progress (one that you or someone else "
            "started): wait past the hold-off, run 'dexcli admin describe', and step down again "
            "only if the switchover you wanted has not happened\n";
      }
      return fail_admin("describing the active process before stepping it down", described.status(),
                        flags.credential_file, more + "dexcli: nothing was stepped down\n");
    }
    if (!node_id.empty() && described->node_id() != node_id) {
      return fail("the server reports node ID '" + described->node_id() + "', not '" + node_id +
                  "' (--expected-node-id): nothing was stepped down; check --server");
    }
    if (auto s = dex::validate_node_epoch(described->node_epoch()); !s.is_ok()) {
      return fail("describe answered " + s.message() + ": nothing was stepped down");
    }
    node_id = described->node_id();
    epoch = described->node_epoch();
  }

  // From here on the outcome may be unknown: Ctrl-C or SIGTERM prints how to
  // retry safely instead of dying silently.
  g_interrupted_text = "\ndexcli: interrupted while stepping down node " + node_id +
                       " at node epoch " + epoch + "\n" +
                       unknown_outcome_text(flags, node_id, epoch);
  struct sigaction action = {};
  struct sigaction old_int = {}, old_term = {};
  action.sa_handler = on_interrupt_while_stepping_down;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  std::string sent_to;
  auto result = client.step_down(node_id, epoch, timeout, &sent_to);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  const std::string what = "stepping down node " + node_id + " at node epoch " + epoch;
  if (result.is_ok()) {
    dex::StepDownResponse response = std::move(result).value();
    // The precondition that was sent, should a server leave it out.
    if (response.expected_node_id().empty()) response.set_expected_node_id(node_id);
    if (response.expected_node_epoch().empty()) response.set_expected_node_epoch(epoch);
    return print(dex::cli::to_json(response));
  }
  const std::string_view code = dex::sdk_internal::grpc_code_of(result.status());
  if (sent_to.empty()) {
    // No connection to any address: the request never went out.
    return fail_admin(what, result.status(), flags.credential_file,
                      "dexcli: the step down was not sent (no connection could be made), so "
                      "nothing was stepped down. To try again for the same process:\n  " +
                          retry_command(flags, node_id, epoch) + "\n");
  }
  if (code == "DEADLINE_EXCEEDED" || code == "CANCELLED" || code == "UNAVAILABLE") {
    return fail_admin(what, result.status(), flags.credential_file,
                      unknown_outcome_text(flags, node_id, epoch));
  }
  if (code == "FAILED_PRECONDITION") {
    return fail_admin(
        what, result.status(), flags.credential_file,
        "dexcli: this call stepped nothing down: the process that answered does not match node " +
            node_id + " at node epoch " + epoch +
            " (or is already stepping down). Another process may be active now (a takeover, or a "
            "step down that already happened), a step down may be in progress (one that you or "
            "someone else started), "
            "or the call reached a standby connection of a process that has just taken over. "
            "Wait past the hold-off (standby.stepDownHoldOff), run 'dexcli admin describe', and "
            "step down again only if the switchover you wanted has not happened.\n");
  }
  if (code == "INTERNAL") {
    return fail_admin(what, result.status(), flags.credential_file,
                      "dexcli: the process released the lease but could not compete for it again "
                      "(its local store did not close in time); it exits without taking the "
                      "lease, and another process, or its restart, takes over. Run 'dexcli admin "
                      "describe' to see which process is active.\n");
  }
  return fail_admin(what, result.status(), flags.credential_file);
}

}  // namespace

// gRPC health Check of one process (grpc.health.v1, proto/grpc/health).
int check_health(const std::string& server, const std::string& service, dex::Duration timeout,
                 const dex::TlsOptions& tls) {
  auto channel =
      dex::sdk_internal::make_channel(server, dex::milliseconds(100), dex::seconds(1), tls);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    dex::Status failed = dex::sdk_internal::explain_tls_failure(
        dex::Status::transient(status.error_message()), server, tls);
    return fail("checking the health of '" + service + "' at " + server + ": " +
                std::to_string(status.error_code()) + ": " + failed.message());
  }
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  (void)print(json{{"server", server}, {"service", service}, {"status", name}});
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

int main(int argc, char** argv) {
  dex::cli::quiet_grpc_handshake_logs();
  CLI::App app{
      "dexcli: the dex command-line client. Prints JSON on stdout; errors go to stderr as\n"
      "'dexcli: <what failed>: <gRPC code>: <message>'. Exit codes: 0 ok, 1 the call failed,\n"
      "2 bad flags or input (nothing sent), 3 'flow wait' or 'flow watch' timed out, 4 'flow wait\n"
      "--expect-completed' and the run closed otherwise. The flow commands' errors are JSON."};
  app.require_subcommand(1);
  app.fallthrough();  // --server and --timeout are accepted after the subcommand too

  std::vector<std::string> server_args;
  std::string timeout_text = "30s";
  app.add_option("--server", server_args,
                 "Address (host:port) of a dex server, default $DEX_FLOW_SERVICE_ADDRESS or "
                 "127.0.0.1:8801. Give every process "
                 "of a node, its active one and its standbys, in any order, comma-separated or "
                 "with --server repeated (host1:8801,host2:8801): each call goes to whichever "
                 "is active")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  CLI::Option* timeout_option =
      app.add_option("--timeout", timeout_text,
                     "Deadline of each call, the search for the active process included: 250ms, "
                     "10s, 2m. admin step-down: default 2m, for the step down call itself")
          ->capture_default_str();

  dex::TlsOptions tls_flags;
  dex::cli::add_tls_flags(app, tls_flags);

  // flow: dex Flows (flow_commands.cc)
  dex::cli::FlowCommands flows(app);
  dex::cli::TokenFlags token_flags;
  dex::cli::add_token_flags(app, token_flags);

  // admin
  CLI::App* admin = app.add_subcommand(
      "admin", "Describe the active process of a node or step it down (admin credential)");
  admin->require_subcommand(1);
  std::string credential_file;
  const std::string credential_help =
      "File holding the admin credential: its content, without surrounding whitespace, is sent "
      "as 'authorization: Bearer <token>' (never printed). Needed when the server has admin "
      "credentials configured";
  CLI::App* a_describe = admin->add_subcommand(
      "describe",
      "Print the active process: nodeId, nodeEpoch (decimal string), holderProcessId. Changes "
      "nothing. FAILED_PRECONDITION while a step down or its hold-off is in progress");
  a_describe->add_option("--credential-file", credential_file, credential_help);
  bool step_down_yes = false;
  std::string expected_node_id, expected_node_epoch;
  CLI::App* a_step_down = admin->add_subcommand(
      "step-down",
      "Step the active process down: it stops handing out Step tasks, drains running attempts "
      "(lifecycle.attemptDrainTimeout), releases the lease and keeps running as a standby. "
      "Another process of the node takes over; if none does within the hold-off "
      "(standby.stepDownHoldOff), the same process takes the lease back with a new node epoch "
      "(on a single replica: an outage of about one hold-off). The request names the process to "
      "step down (node ID and node epoch); a process that does not match answers "
      "FAILED_PRECONDITION and changes nothing. Without expectation flags it describes the "
      "active process first and expects what describe returns. Waits up to --timeout (default "
      "2m: raise it by as much as you raise lifecycle.attemptDrainTimeout above 30s). Prints "
      "expectedNodeId, expectedNodeEpoch, nodeId, releasedNodeEpoch, leaseReacquisitionHoldOff, "
      "leaseHolderAfterStepDown (takenOverByAnotherProcess, takenBackByThisProcess, unknown with "
      "leaseHolderUnknownDetail), activeNodeEpoch and activeHolderProcessId. On "
      "DEADLINE_EXCEEDED, CANCELLED or UNAVAILABLE the outcome is unknown: retry only with the "
      "expectations that the error prints");
  a_step_down->add_flag("--yes", step_down_yes,
                        "Required: confirms that the active process is to stop serving (it drains "
                        "and releases the lease; on a single replica nothing serves for about "
                        "one hold-off)");
  a_step_down->add_option(
      "--expected-node-id", expected_node_id,
      "Step down only a process of this node ID. Alone: describe first, refuse (stepping "
      "nothing down) if the server reports another node ID, which guards against a wrong "
      "--server, and expect the described node epoch");
  a_step_down->add_option(
      "--expected-node-epoch", expected_node_epoch,
      "Step down only the process holding this node epoch (a decimal number). Needs "
      "--expected-node-id; with both, nothing is described first and the two are sent as they "
      "are. To retry a step down whose outcome is unknown, give the values its error printed, "
      "never an epoch that describe prints afterwards");
  a_step_down->add_option("--credential-file", credential_file, credential_help);

  // health: one process's gRPC health, as a probe sees it
  std::string health_service;
  CLI::App* health = app.add_subcommand(
      "health",
      "Print one process's gRPC health for a service name (default \"\": readiness; "
      "dex.HotStandby: a following hot standby) as JSON; exit 0 if SERVING, 1 otherwise. "
      "Asks exactly one --server: it checks that process, not the active one");
  health->add_option("--service", health_service,
                     "Health service name: \"\", dex.FlowService, dex.WorkerTaskService, "
                     "dex.HotStandby");

  // inspect (no server: reads object storage)
  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "Read a node's durable state straight from object storage (read-only) and print JSON: "
      "from a dev/local data directory (--data-dir) or from the object store a serve config "
      "names (--config)");
  inspect->require_subcommand(1);
  dex::cli::InspectSource source;
  std::string node_id = "dev";
  dex::cli::InspectLogFlags log_flags;
  uint64_t from_slot = 0;
  CLI::App* lease = inspect->add_subcommand(
      "lease", "Print the lease record: nodeId, nodeEpoch, holderProcessId, duration, released");
  CLI::App* log = inspect->add_subcommand(
      "log",
      "Print the log's batches in slot order; each batch's kinds are epochStart, opaque or "
      "flow.<kind>: flow.declareFlows, flow.startFlow, flow.methodResult, "
      "flow.attemptWithdrawn, flow.timerFired, flow.publish, flow.stopFlow, flow.skipTimer, "
      "flow.setAttributes, flow.invokeRpc");
  for (CLI::App* cmd : {lease, log}) {
    CLI::Option* dir = cmd->add_option("--data-dir", source.data_dir,
                                       "Data directory of dex-server-zd dev or local")
                           ->capture_default_str();
    CLI::Option* config = cmd->add_option(
        "--config", source.config_file,
        "A dex-server-zd serve config (YAML): read the object store it names (objectStore: s3 "
        "with the credentials it names or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or "
        "filesystem); the node ID defaults to its nodeId");
    config->excludes(dir);
    cmd->add_option("--node-id", node_id, "Node ID (default: dev, or the config's nodeId)");
  }
  log->add_option("--limit", log_flags.limit, "Print at most this many batches")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  log->add_flag("--raw", log_flags.raw,
                "Read every slot from the first one to the end without skipping batches of a "
                "lower epoch (a fenced writer's), listing missing slots as {\"missing\": true}");
  log->add_flag("--records", log_flags.records,
                "Print each record in full (recordDetails: epochStart, flow records) and the "
                "batch's writeId");
  log->add_option("--from-slot", from_slot, "Start at this slot (default: the log's first)");

  app.set_version_flag("--version", dex::version_line("dexcli"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The deepest command given that still needs a subcommand, if any.
    CLI::App* command = &app;
    std::string path = "dexcli";
    while (!command->get_subcommands().empty()) {
      command = command->get_subcommands().front();
      path += " " + command->get_name();
    }
    std::string message = e.what();
    if (command->get_require_subcommand_min() > 0 && command->get_subcommands().empty()) {
      std::string names;
      for (const CLI::App* sub : command->get_subcommands({})) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      message = "'" + path + "' needs one of these commands: " + names;
    }
    if (path.rfind("dexcli flow", 0) == 0) {  // the flow commands' errors are JSON
      std::cerr << json{{"error",
                         {{"kind", "usage"}, {"operation", path.substr(7)}, {"message", message}}}}
                       .dump()
                << "\n";
      return kExitUsage;
    }
    return usage_error(message);
  }

  if (*inspect) {
    CLI::App* cmd = *lease ? lease : log;
    if (!source.config_file.empty() && cmd->get_option("--node-id")->count() == 0) {
      auto config_node_id = dex::cli::inspect_config_node_id(source.config_file);
      if (!config_node_id.is_ok()) {
        return usage_error("--config: " + config_node_id.status().message());
      }
      node_id = config_node_id.value();
    }
    if (auto s = dex::validate_node_id(node_id); !s.is_ok()) return usage_error(s.message());
    if (*lease) return dex::cli::inspect_lease(source, node_id);
    if (log->get_option("--from-slot")->count() > 0) log_flags.from_slot = from_slot;
    if (*log) return dex::cli::inspect_log(source, node_id, log_flags);
    return kExitUsage;
  }

  // Everything below talks to a server: check all input before sending anything.
  if (*a_step_down) {
    if (!step_down_yes) {
      return usage_error(
          "admin step-down needs --yes: stepping down makes the active process stop serving (it "
          "drains its running attempts, releases the lease and stays as a standby until another "
          "process takes over); on a single replica nothing serves for about one hold-off "
          "(standby.stepDownHoldOff), until the same process takes the lease back");
    }
    const bool id_given = a_step_down->get_option("--expected-node-id")->count() > 0;
    const bool epoch_given = a_step_down->get_option("--expected-node-epoch")->count() > 0;
    if (epoch_given && !id_given) {
      return usage_error(
          "--expected-node-epoch needs --expected-node-id: an epoch alone does not say which "
          "node's process to step down (with a wrong --server it could match another node). Give "
          "both, or --expected-node-id alone to take the epoch from describe");
    }
    if (id_given) {
      if (auto s = dex::validate_node_id(expected_node_id); !s.is_ok()) {
        return usage_error("--expected-node-id: " + s.message());
      }
    }
    if (epoch_given) {
      if (auto s = dex::validate_node_epoch(expected_node_epoch); !s.is_ok()) {
        return usage_error("--expected-node-epoch: " + s.message());
      }
    }
  }
  const bool timeout_given = timeout_option->count() > 0;
  if (*a_step_down && !timeout_given) timeout_text = "2m";
  auto timeout = dex::parse_duration(timeout_text);
  if (!timeout.is_ok()) return usage_error("--timeout: " + timeout.status().message());
  if (flows.chosen()) {
    if (int rc = flows.check(); rc != 0) return rc;
  }
  std::vector<std::string> servers;
  if (server_args.empty()) {
    const char* env = std::getenv("DEX_FLOW_SERVICE_ADDRESS");
    server_args.push_back(env != nullptr && *env != '\0' ? env : "127.0.0.1:8801");
  }
  for (const std::string& arg : server_args) {
    auto parsed = dex::parse_server_addresses(arg);
    if (!parsed.is_ok()) return usage_error("--server: " + parsed.status().message());
    servers.insert(servers.end(), parsed->begin(), parsed->end());
  }
  if (auto s = dex::validate_server_addresses(servers); !s.is_ok()) {
    return usage_error("--server: " + s.message());
  }
  auto tls = dex::cli::resolve_tls_flags(tls_flags);
  if (!tls.is_ok()) return usage_error(tls.status().message());
  if (*health) {
    if (servers.size() != 1) {
      return usage_error("health checks one process: give exactly one --server, not " +
                         std::to_string(servers.size()));
    }
    return check_health(servers.front(), health_service, timeout.value(), tls.value());
  }
  dex::ClientOptions options;
  options.server_addresses = servers;
  options.tls = tls.value();
  options.timeout = timeout.value();
  if (auto s = dex::cli::apply_token_flags(token_flags, options); !s.is_ok()) {
    return usage_error(s.message());
  }
  if ((*a_describe || *a_step_down) &&
      (a_describe->get_option("--credential-file")->count() > 0 ||
       a_step_down->get_option("--credential-file")->count() > 0)) {
    auto token = read_credential(credential_file);
    if (!token.is_ok()) return usage_error("--credential-file: " + token.status().message());
    options.admin_credential = std::move(token).value();
  }

  if (flows.chosen()) return flows.run(options);
  if (*a_describe) {
    dex::Client client(options);
    auto described = client.describe();
    if (!described.is_ok()) {
      std::string more;
      if (dex::sdk_internal::grpc_code_of(described.status()) == "FAILED_PRECONDITION") {
        more =
            "dexcli: a step down or its hold-off is in progress: wait past the hold-off "
            "(standby.stepDownHoldOff) and describe again\n";
      }
      return fail_admin("describing the server", described.status(), credential_file, more);
    }
    return print(dex::cli::to_json(described.value()));
  }
  if (*a_step_down) {
    // --timeout bounds the step down call itself (default 2m); the describe
    // before it keeps the usual 30 s, or less when --timeout is shorter.
    options.timeout = std::min(timeout.value(), dex::Duration(dex::seconds(30)));
    dex::Client client(options);
    StepDownFlags flags{servers, timeout_given ? timeout_text : "", credential_file};
    return step_down(client, flags, expected_node_id, expected_node_epoch, timeout.value());
  }
  return kExitUsage;
}
