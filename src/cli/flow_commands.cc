#include "cli/flow_commands.h"

#include <absl/strings/escaping.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/attributes.h"
#include "cli/continue_as_new_command.h"
#include "cli/flow_calls.h"
#include "cli/flow_config_command.h"
#include "cli/flow_errors.h"
#include "cli/flow_table.h"
#include "cli/proto_json.h"
#include "cli/search_commands.h"
#include "cli/sub_flows.h"
#include "cli/time_travel_command.h"
#include "common/clock.h"
#include "common/random.h"
#include "config/config.h"
#include "sdk/client.h"
#include "sdk/grpc_status.h"

namespace dex::cli {

namespace {

using json = nlohmann::ordered_json;

constexpr int kExitNotCompleted = 4;
// What a value read from a file or stdin may hold before it is refused here:
// the largest values.maxSize a server takes. The server's own maximum (64 MiB
// unless configured) decides below that (docs/api.md, "Limits").
constexpr size_t kMaxInputBytes = 512u << 20;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int print_json(const json& out) {
  std::cout << json_text(out, 2) << "\n";
  return 0;
}

// The value of --input / --input-file (a path, or "-" for stdin), as JSON text.
StatusOr<std::string> read_input(const std::string& inline_text, const std::string& file,
                                 bool file_given) {
  std::string text = inline_text;
  std::string source = "--input";
  if (file_given) {
    std::ostringstream buffer;
    if (file == "-") {
      buffer << std::cin.rdbuf();
      source = "stdin";
    } else {
      std::ifstream in(file, std::ios::binary);
      if (!in) return Status::invalid_argument("--input-file: cannot read " + file);
      buffer << in.rdbuf();
      source = file;
    }
    text = buffer.str();
  }
  if (text.size() > kMaxInputBytes) {
    return Status::invalid_argument(source + " holds " + std::to_string(text.size()) +
                                    " bytes: a value may have at most 512 MiB (and the "
                                    "server's values.maxSize, 64 MiB unless configured)");
  }
  try {
    return json::parse(text).dump();  // parsed text: valid UTF-8
  } catch (const json::parse_error& e) {
    return Status::invalid_argument(source + " is not valid JSON: " + e.what());
  }
}

template <typename Enum>
std::optional<Enum> parse_choice(const std::string& text,
                                 const std::vector<std::pair<std::string, Enum>>& choices) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(c == '_' ? '-' : std::tolower(c));
  for (const auto& [name, value] : choices) {
    if (name == lower) return value;
  }
  return std::nullopt;
}

template <typename Enum>
std::string choice_names(const std::vector<std::pair<std::string, Enum>>& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "" : ", ") + c.first;
  return out;
}

const std::vector<std::pair<std::string, flow::StopMode>> kStopModes = {
    {"cancel", flow::STOP_CANCEL}, {"terminate", flow::STOP_TERMINATE}, {"fail", flow::STOP_FAIL}};
const std::vector<std::pair<std::string, flow::IdReusePolicy>> kIdReuse = {
    {"allow-if-no-running", flow::ALLOW_IF_NO_RUNNING},
    {"allow-if-previous-failed", flow::ALLOW_IF_PREVIOUS_FAILED},
    {"disallow", flow::DISALLOW},
    {"terminate-if-running", flow::TERMINATE_IF_RUNNING}};
const std::vector<std::pair<std::string, flow::TimeoutPolicy>> kTimeoutPolicies = {
    {"fail", flow::TIMEOUT_FAIL},
    {"cancel", flow::TIMEOUT_CANCEL},
    {"handler", flow::TIMEOUT_HANDLER}};

bool is_waiting_error(const Status& s) {
  const std::string_view code = sdk_internal::grpc_code_of(s);
  return code == "UNAVAILABLE" || code == "DEADLINE_EXCEEDED";
}

// A history event's JSON, with its seq even when it is 0 (the run's first).
json event_json(const flow::HistoryEvent& e) {
  json out = {{"seq", e.seq()}};
  const json fields = proto_to_json(e);  // kept alive while its items are read
  for (const auto& [key, value] : fields.items()) out[key] = value;
  if (e.attribute_writes_size() > 0) out["attributeWrites"] = attributes_json(e.attribute_writes());
  return out;
}

// One `flow watch` line: an event of `run`, flushed for pipes.
void print_event(const std::string& flow_id, const std::string& run, const flow::HistoryEvent& e) {
  json line = event_json(e);
  line["flowId"] = flow_id;
  line["runId"] = run;
  std::cout << json_text(line) << std::endl;
}

// `flow watch --follow-runs` waits for a Flow retry that has not started by
// asking DescribeFlow again: until its retry time (at most kFollowPollMax at a
// time), then after kFollowPollMin, doubling up to kFollowPollMax.
constexpr Duration kFollowPollMin = milliseconds(100);
constexpr Duration kFollowPollMax = seconds(5);

// An RPC's output: the JSON value it holds, or base64 when it is not JSON.
void put_output(json& out, const std::string& data) {
  if (data.empty()) {
    out["output"] = nullptr;
    return;
  }
  json value = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    out["outputBase64"] = absl::Base64Escape(data);
  } else {
    out["output"] = std::move(value);
  }
}

}  // namespace

struct FlowCommands::Impl {
  CLI::App* flow = nullptr;
  CLI::App *start = nullptr, *stop = nullptr, *publish = nullptr, *wait = nullptr,
           *describe = nullptr, *state = nullptr, *history = nullptr, *skip = nullptr,
           *watch = nullptr, *attributes = nullptr, *attr_get = nullptr, *attr_set = nullptr,
           *rpc = nullptr, *inspect = nullptr;

  // Flags (one set: a command line names one command).
  std::string flow_type, flow_id, run_id, output = "json";
  std::string input_text = "{}", input_file, input;  // input: the checked JSON text
  std::string start_delay_text, flow_timeout_text, timeout_policy_text, id_reuse_text, request_id;
  std::string retry_interval_text;
  std::optional<uint32_t> retry_runs;
  std::optional<std::string> attribute_store;
  bool ignore_already_started = false, yes = false, expect_completed = false;
  bool skip_flow_timeout = false, skip_start_delay = false;
  bool follow_runs = false;  // flow watch
  std::string mode_text = "cancel", reason;
  std::string channel, instance_key;
  std::vector<std::string> message_texts;
  std::vector<std::string> messages;  // checked JSON texts
  std::string wait_timeout_text = "60s", watch_timeout_text;
  std::string step_type_filter, phase_filter, kind_filter;
  uint64_t after_seq = 0;
  uint32_t limit = 1000;
  std::string step_execution_id, condition_id;
  uint32_t condition_index = 0;
  std::vector<std::string> attribute_keys;  // attributes get --key
  AttributeWriteFlags write_flags;          // attributes set
  std::string rpc_name, rpc_timeout_text;
  std::vector<std::string> rpc_lock_keys;  // rpc --lock-key

  // Parsed in check().
  flow::StartOptions start_options;
  flow::StopMode mode = flow::STOP_CANCEL;
  Duration wait_timeout{};
  std::optional<Duration> watch_timeout;
  TimePoint watch_start;  // when flow watch began: --watch-timeout counts from it
  std::vector<flow::Attribute> writes;
  int64_t rpc_timeout_ms = 0;  // 0: the server's default (10 s)

  void add_commands(CLI::App& app);
  void add_mutations();
  void add_reads();
  CLI::App* chosen_command() const;
  int check_start(const std::string& op);
  int check_publish(const std::string& op);
  int check_output(const std::string& op);
  int check_rpc(const std::string& op);
  // --input or --input-file of `cmd` into `input`.
  int check_input(const std::string& op, CLI::App& cmd);
  void add_attributes_and_rpcs();
  std::unique_ptr<SearchCommands> search;                 // flow search, flow list
  std::unique_ptr<TimeTravelCommand> time_travel;         // flow time-travel
  std::unique_ptr<ContinueAsNewCommand> continue_as_new;  // flow continue-as-new
  // flow config
  std::unique_ptr<FlowConfigCommand> config_command;

  int run_start(Client& c);
  int run_stop(Client& c);
  int run_publish(Client& c);
  int run_skip(Client& c);
  int run_wait(Client& c);
  int run_describe(Client& c);
  int run_state(Client& c);
  int run_history(Client& c);
  int run_watch(Client& c);
  // flow watch: prints `run`'s events after `after` (from the first when
  // from_start) until its FLOW_CLOSED (following runs: with the rest of that
  // page); 0 once it closed. `run` empty: the latest, set to the run seen.
  int watch_run(Client& c, std::string& run, uint64_t& after, bool from_start);
  // flow watch --follow-runs: the run that follows closed `run` into `next`
  // (empty: none) and how (`link`), waiting while a Flow retry is pending;
  // first prints the events of `run` after `after` not printed yet.
  int next_run(Client& c, const std::string& run, uint64_t& after, std::string& next,
               std::string& link);
  // Prints the events of `run` after `after` that are written now.
  int print_rest(Client& c, const std::string& run, uint64_t& after);
  // What --watch-timeout leaves of the whole watch (nullopt: no timeout).
  std::optional<Duration> watch_left() const;
  int run_attr_get(Client& c);
  int run_attr_set(Client& c);
  int run_rpc(FlowCalls& calls);
  int run_inspect(Client& c);
  // The run's events after `after` (from the first when 0), at most `max`,
  // only `kind` when given; `run` is set to the run they belong to.
  Status fetch_history(Client& c, const std::string& run_ref, uint64_t after, uint32_t max,
                       const std::string& kind, std::vector<flow::HistoryEvent>& events,
                       std::string& run);
};

void FlowCommands::Impl::add_commands(CLI::App& app) {
  flow = app.add_subcommand(
      "flow",
      "dex Flows: start, stop, publish to a Channel, wait, describe, state, history, skip a "
      "Timer, watch, get and set Attributes, invoke an RPC, inspect a run, search and list "
      "runs, time travel, continue as new, change a run's FlowConfig. JSON on stdout (--output "
      "table for people), errors as "
      "JSON on stderr; "
      "exit "
      "2 for bad flags or input (nothing sent), 1 when the request failed");
  flow->require_subcommand(1);
  add_mutations();
  add_reads();
  add_attributes_and_rpcs();
  search = std::make_unique<SearchCommands>(*flow);
  time_travel = std::make_unique<TimeTravelCommand>(*flow);
  config_command = std::make_unique<FlowConfigCommand>(*flow);
  continue_as_new = std::make_unique<ContinueAsNewCommand>(*flow);
  for (CLI::App* cmd :
       {publish, wait, describe, state, history, skip, watch, attr_get, attr_set, rpc, inspect}) {
    cmd->add_option("--run-id", run_id, "A run of the Flow ID (default: its latest run)");
  }
  for (CLI::App* cmd : {wait, describe, state, history, attr_get, inspect}) {
    cmd->add_option("--output", output, "json (default, stable) or table (for people)")
        ->capture_default_str();
  }
}

void FlowCommands::Impl::add_mutations() {
  start = flow->add_subcommand("start", "Start a run of a Flow type; prints flowId, runId");
  start->add_option("TYPE", flow_type, "Flow type (declared by a Worker)")->required();
  start->add_option("--flow-id", flow_id, "The run's Flow ID (your business key)")->required();
  start->add_option("--input", input_text, "The start Step's input as JSON text")
      ->capture_default_str();
  start->add_option("--input-file", input_file, "Read the input from a file, or stdin with '-'");
  start->add_option("--start-delay", start_delay_text, "Run the start Step after this: 10s, 5m");
  start->add_option("--flow-timeout", flow_timeout_text, "End the run if still running after this");
  start->add_option("--timeout-policy", timeout_policy_text,
                    "What --flow-timeout does: " + choice_names(kTimeoutPolicies) +
                        " (default fail: TIMED_OUT; handler runs the type's timeout handler)");
  start->add_option("--retry-runs", retry_runs,
                    "Flow retry: a run that ends FAILED or TIMED_OUT starts again as a new run, up "
                    "to this many runs in all (the first included; 0: no limit)");
  start->add_option("--retry-interval", retry_interval_text,
                    "Flow retry: the backoff before the second run (then x2 each time): 1s, 30s "
                    "(default 1s; sets the retry policy on its own too)");
  start->add_option("--id-reuse", id_reuse_text,
                    "May a closed (or running) run's Flow ID start again: " +
                        choice_names(kIdReuse) + " (default allow-if-no-running)");
  start->add_option("--request-id", request_id,
                    "Makes a repeat of this command safe: with the same request ID a second "
                    "start answers the first's run (alreadyStarted: true) instead of refusing");
  start->add_option("--attribute-store", attribute_store,
                    "The Attribute Store (the server's attributeStore.stores.NAME) the run's "
                    "synced Attributes go to, instead of the one its Flow type declares");
  // Initial Attributes, written with the start: the typed flags of `attributes set`.
  const auto initial = [this](const char* flag, std::vector<std::string>& into, const char* what) {
    start->add_option(flag, into, std::string("Initial Attribute ") + what + "; repeatable")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->allow_extra_args(false);
  };
  initial("--string", write_flags.strings, "KEY=TEXT: a string (KEY[INSTANCE]=... for a map)");
  initial("--int,--int64", write_flags.int64s, "KEY=N: an int64");
  initial("--double", write_flags.doubles, "KEY=X: a double (finite)");
  initial("--bool", write_flags.bools, "KEY=true|false");
  initial("--datetime", write_flags.datetimes,
          "KEY=2027-01-15T10:00:00Z (RFC 3339, ms precision) or KEY=<Unix ms>");
  initial("--json", write_flags.jsons,
          "KEY=JSON: any JSON value ({...}, [...], \"text\", 1.5, true, null); an array of "
          "strings for one indexed KEYWORD_ARRAY");
  initial("--bytes-base64", write_flags.bytes_base64, "KEY=BASE64: bytes, given in base64");

  stop = flow->add_subcommand(
      "stop", "Stop a run (CANCEL, TERMINATE or FAIL), named exactly by --run-id; needs --yes");
  stop->add_option("ID", flow_id, "Flow ID")->required();
  stop->add_option("--run-id", run_id,
                   "Required: the run to stop, exactly (flow describe ID shows the latest run's "
                   "runId)");
  stop->add_option("--mode", mode_text, "cancel, terminate or fail")->capture_default_str();
  stop->add_option("--reason", reason, "Why (required with --mode fail)");
  stop->add_option(
      "--request-id", request_id,
      "Makes a repeat safe: the run takes a request ID once, and a repeat answers as the "
      "first did (default: a fresh ID, retried as one through a failover)");
  stop->add_flag("--yes", yes, "Required: confirms that the run is to be stopped");

  publish = flow->add_subcommand("publish",
                                 "Append messages to a run's Channel in order (FIFO); needs --yes");
  publish->add_option("ID", flow_id, "Flow ID")->required();
  publish->add_option("CHANNEL", channel, "Channel (or ChannelMap) name")->required();
  publish->add_option("--instance", instance_key, "A ChannelMap's instance key");
  publish->add_option("--message", message_texts, "A message as JSON text; repeat for several");
  publish->add_option("--input-file", input_file,
                      "Read one message from a file, or stdin with '-'");
  publish->add_option("--request-id", request_id,
                      "Makes a repeat safe: the run takes a request ID's messages once "
                      "(default: a fresh ID, retried as one through a failover)");
  publish->add_flag("--yes", yes, "Required: confirms that the messages are to be published");

  skip = flow->add_subcommand("skip-timer",
                              "Fire a waiting Step execution's Timer now (skipped); needs --yes");
  skip->add_option("ID", flow_id, "Flow ID")->required();
  CLI::Option* step_id = skip->add_option("STEP_EXECUTION_ID", step_execution_id,
                                          "e.g. Ship-1 (see flow state); none with "
                                          "--flow-timeout or --start-delay");
  CLI::Option* by_id = skip->add_option("--condition-id", condition_id, "The Timer's condition ID");
  CLI::Option* by_index =
      skip->add_option("--condition-index", condition_index,
                       "The Timer's position in the wait (from 0; flow state lists them)")
          ->excludes(by_id);
  CLI::Option* timeout =
      skip->add_flag("--flow-timeout", skip_flow_timeout,
                     "Fire the run's flow timeout now (its timeout policy applies)")
          ->excludes(step_id)
          ->excludes(by_id)
          ->excludes(by_index);
  skip->add_flag("--start-delay", skip_start_delay,
                 "Fire the run's start delay now (the start Step is created)")
      ->excludes(step_id)
      ->excludes(by_id)
      ->excludes(by_index)
      ->excludes(timeout);
  skip->add_option(
      "--request-id", request_id,
      "Makes a repeat safe: the run takes a request ID once, and a repeat answers as the "
      "first did (default: a fresh ID, retried as one through a failover)");
  skip->add_flag("--yes", yes, "Required: confirms that the Timer is to fire now");
}

void FlowCommands::Impl::add_reads() {
  wait = flow->add_subcommand(
      "wait",
      "Wait until a run closes and print it; keeps waiting through a server restart or "
      "failover. Exit 3 if --wait-timeout passes first; with --expect-completed, exit 4 if the "
      "run closed with another status");
  wait->add_option("ID", flow_id, "Flow ID")->required();
  wait->add_option("--wait-timeout", wait_timeout_text, "How long to wait in all: 10s, 5m")
      ->capture_default_str();
  wait->add_flag("--expect-completed", expect_completed,
                 "Exit 4 unless the run COMPLETED (FAILED, CANCELED, TERMINATED, TIMED_OUT)");

  describe = flow->add_subcommand("describe", "Print a run: status, times, input, result");
  describe->add_option("ID", flow_id, "Flow ID")->required();

  state = flow->add_subcommand(
      "state",
      "Print a run's active Step executions (phase, attempt, what they wait on, last failure), "
      "the Workers hosting its Flow type and hints (e.g. no Worker hosts the type)");
  state->add_option("ID", flow_id, "Flow ID")->required();
  state->add_option("--step-type", step_type_filter, "Table: only executions of this Step type");
  state->add_option("--phase", phase_filter,
                    "Table: only executions in this phase: WAIT_FOR, WAITING, EXECUTE");

  history = flow->add_subcommand(
      "history", "Print a run's history events (oldest first in JSON, newest first in a table)");
  history->add_option("ID", flow_id, "Flow ID")->required();
  history->add_option("--after", after_seq, "Only events after this seq");
  history->add_option("--limit", limit, "At most this many events")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  history->add_option("--kind", kind_filter,
                      "Only events of this kind, e.g. EXECUTE_COMPLETED, CHANNEL_PUBLISHED");

  watch = flow->add_subcommand(
      "watch",
      "Print a run's history events as JSON lines, then each new one as it happens, until the "
      "run closes (with --follow-runs: the runs that follow it too); keeps watching through a "
      "server restart or failover");
  watch->add_option("ID", flow_id, "Flow ID")->required();
  watch->add_option("--after", after_seq, "Start after this seq (default: from the first)");
  watch->add_flag("--follow-runs", follow_runs,
                  "When the run closes and a later run follows from it (a Flow retry, a time "
                  "travel, a continue-as-new), print a line naming it and watch that run too, "
                  "until a run closes "
                  "with none after it");
  watch->add_option("--watch-timeout", watch_timeout_text,
                    "Give up after this long (exit 3; default: until the run closes)");
}

void FlowCommands::Impl::add_attributes_and_rpcs() {
  // One value per flag: a word after it is a positional argument (a write), not the flag's.
  const auto one_each = [](CLI::Option* o) {
    o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->allow_extra_args(false);
  };
  attributes = flow->add_subcommand(
      "attributes", "A run's Attributes (typed values the run's Steps and RPCs read and write)");
  attributes->require_subcommand(1);
  attr_get = attributes->add_subcommand(
      "get",
      "Print a run's Attributes: key, instanceKey (AttributeMap instances), type and value "
      "(datetime as RFC 3339 plus unixMs, json as its value, bytes as base64). Works on a "
      "closed run too");
  attr_get->add_option("ID", flow_id, "Flow ID")->required();
  one_each(
      attr_get->add_option("--key", attribute_keys,
                           "Only this Attribute (an AttributeMap: all its instances); repeatable"));

  attr_set = attributes->add_subcommand(
      "set",
      "Write a RUNNING run's Attributes in one change; needs --yes. Each write is KEY=VALUE, or "
      "KEY[INSTANCE]=VALUE for an AttributeMap instance; the flag says the type. The server "
      "refuses an undeclared key or a wrong type (INVALID_ARGUMENT) and then writes nothing");
  attr_set->add_option("ID", flow_id, "Flow ID")->required();
  attr_set->add_option("KEY=VALUE", write_flags.positional, "String values (as --string)");
  one_each(attr_set->add_option("--string", write_flags.strings, "KEY=TEXT: a string; repeatable"));
  one_each(
      attr_set->add_option("--int,--int64", write_flags.int64s, "KEY=N: an int64; repeatable"));
  one_each(attr_set->add_option("--double", write_flags.doubles,
                                "KEY=X: a double (finite); repeatable"));
  one_each(attr_set->add_option("--bool", write_flags.bools, "KEY=true|false; repeatable"));
  one_each(
      attr_set->add_option("--datetime", write_flags.datetimes,
                           "KEY=2026-12-02T10:00:00Z (RFC 3339, ms precision) or KEY=<Unix ms>; "
                           "repeatable"));
  one_each(attr_set->add_option("--json", write_flags.jsons,
                                "KEY=JSON: any JSON value ({...}, [...], \"text\", 1.5, true, "
                                "null); an array of strings for one indexed KEYWORD_ARRAY; "
                                "repeatable"));
  one_each(attr_set->add_option("--bytes-base64", write_flags.bytes_base64,
                                "KEY=BASE64: bytes, given in base64; repeatable"));
  one_each(attr_set->add_option("--delete", write_flags.deletes,
                                "KEY or KEY[INSTANCE]: remove the value; repeatable"));
  attr_set->add_option("--instance", write_flags.instance,
                       "The AttributeMap instance of every write that names none in [brackets]");
  attr_set->add_option(
      "--request-id", request_id,
      "Makes a repeat safe: the run takes a request ID once, and a repeat answers as the "
      "first did (default: a fresh ID, retried as one through a failover)");
  attr_set->add_flag("--yes", yes, "Required: confirms that the run's Attributes are to change");

  rpc = flow->add_subcommand(
      "rpc",
      "Invoke a RUNNING run's RPC and print its output; needs --yes (an RPC may change the run). "
      "Exit 1 with FAILED_PRECONDITION when the run is closed or the handler failed, "
      "INVALID_ARGUMENT for an undeclared RPC, DEADLINE_EXCEEDED after --rpc-timeout");
  rpc->add_option("ID", flow_id, "Flow ID")->required();
  rpc->add_option("NAME", rpc_name, "The RPC's name (declared by the Flow type)")->required();
  rpc->add_option("--input", input_text, "The RPC's input as JSON text")->capture_default_str();
  rpc->add_option("--input-file", input_file, "Read the input from a file, or stdin with '-'");
  rpc->add_option("--rpc-timeout", rpc_timeout_text,
                  "How long the server waits for the RPC's result (default 10s, at most 60s); "
                  "the call's own --timeout is added on top");
  rpc->add_option("--request-id", request_id,
                  "Makes a repeat safe: an RPC whose result was committed answers the same "
                  "output again without running (default: a fresh ID, printed)");
  one_each(rpc->add_option(
      "--lock-key", rpc_lock_keys,
      "K: a lock key of this call, held besides the RPC's declared ones (at most 16 in all) "
      "until it ends, so calls with the same key run one at a time; repeatable"));
  rpc->add_flag("--yes", yes, "Required: confirms that the RPC is to run (it may change the run)");

  inspect = flow->add_subcommand(
      "inspect",
      "Print everything about one run in one document: flow (describe), state (active Step "
      "executions, Workers, hints), attributes, SubFlow parents and children, and the full history "
      "(oldest first)");
  inspect->add_option("ID", flow_id, "Flow ID")->required();
}

CLI::App* FlowCommands::Impl::chosen_command() const {
  for (CLI::App* cmd : {start, stop, publish, wait, describe, state, history, skip, watch, attr_get,
                        attr_set, rpc, inspect}) {
    if (cmd->parsed()) return cmd;
  }
  return nullptr;
}

int FlowCommands::Impl::check_output(const std::string& op) {
  if (output != "json" && output != "table") {
    return usage_error(op, "--output must be json or table, not '" + output + "'");
  }
  return 0;
}

int FlowCommands::Impl::check_input(const std::string& op, CLI::App& cmd) {
  if (cmd.get_option("--input")->count() > 0 && !input_file.empty()) {
    return usage_error(op, "give the input with --input or --input-file, not both");
  }
  auto text = read_input(input_text, input_file, !input_file.empty());
  if (!text.is_ok()) return usage_error(op, text.status().message());
  input = *text;
  return 0;
}

int FlowCommands::Impl::check_rpc(const std::string& op) {
  if (int rc = check_input(op, *rpc); rc != 0) return rc;
  if (!rpc_timeout_text.empty()) {
    auto d = parse_duration(rpc_timeout_text);
    if (!d.is_ok()) return usage_error(op, "--rpc-timeout: " + d.status().message());
    rpc_timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(*d).count();
    if (rpc_timeout_ms <= 0 || rpc_timeout_ms > 60'000) {
      return usage_error(op, "--rpc-timeout " + rpc_timeout_text +
                                 ": an RPC's timeout is more than 0 and at most 60s");
    }
  }
  return 0;
}

int FlowCommands::Impl::check_start(const std::string& op) {
  if (int rc = check_input(op, *start); rc != 0) return rc;
  for (auto [flag, value, field] : {std::tuple{"--start-delay", &start_delay_text, 0},
                                    {"--flow-timeout", &flow_timeout_text, 1}}) {
    if (value->empty()) continue;
    auto d = parse_duration(*value);
    if (!d.is_ok()) return usage_error(op, std::string(flag) + ": " + d.status().message());
    const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(*d).count();
    if (field == 0) start_options.set_start_delay_ms(ms);
    if (field == 1) start_options.set_timeout_ms(ms);
  }
  if (!timeout_policy_text.empty()) {
    auto p = parse_choice(timeout_policy_text, kTimeoutPolicies);
    if (!p) return usage_error(op, "--timeout-policy must be " + choice_names(kTimeoutPolicies));
    if (flow_timeout_text.empty()) {
      return usage_error(op, "--timeout-policy needs --flow-timeout (what happens at the timeout)");
    }
    start_options.set_timeout_policy(*p);
  }
  if (retry_runs || !retry_interval_text.empty()) {
    flow::RetryPolicy* retry = start_options.mutable_retry_policy();
    if (retry_runs) retry->set_maximum_attempts(*retry_runs);
    if (!retry_interval_text.empty()) {
      auto d = parse_duration(retry_interval_text);
      if (!d.is_ok()) return usage_error(op, "--retry-interval: " + d.status().message());
      const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(*d).count();
      retry->set_initial_interval_ms(ms);
    }
  }
  if (!id_reuse_text.empty()) {
    auto p = parse_choice(id_reuse_text, kIdReuse);
    if (!p) return usage_error(op, "--id-reuse must be one of " + choice_names(kIdReuse));
    start_options.set_id_reuse_policy(*p);
  }
  if (!request_id.empty()) {
    start_options.set_request_id(request_id);
    start_options.set_ignore_already_started(true);
  }
  if (attribute_store) {
    if (attribute_store->empty()) return usage_error(op, "--attribute-store is empty");
    start_options.set_attribute_store(*attribute_store);
  }
  const AttributeWriteFlags& w = write_flags;
  for (const auto* given :
       {&w.strings, &w.int64s, &w.doubles, &w.bools, &w.datetimes, &w.jsons, &w.bytes_base64}) {
    if (given->empty()) continue;
    auto writes = parse_attribute_writes(write_flags);
    if (!writes.is_ok()) return usage_error(op, writes.status().message());
    for (auto& a : *writes) *start_options.add_initial_attributes() = std::move(a);
    break;
  }
  return 0;
}

int FlowCommands::Impl::check_publish(const std::string& op) {
  if (!message_texts.empty() && !input_file.empty()) {
    return usage_error(op, "give the messages with --message or --input-file, not both");
  }
  if (message_texts.empty() && input_file.empty()) {
    return usage_error(op, "nothing to publish: give --message JSON (repeatable) or --input-file");
  }
  if (!input_file.empty()) message_texts.push_back("");
  for (const std::string& m : message_texts) {  // bounded by the flags given
    auto text = read_input(m, input_file, !input_file.empty());
    if (!text.is_ok()) return usage_error(op, text.status().message());
    messages.push_back(*text);
  }
  return 0;
}

FlowCommands::FlowCommands(CLI::App& app) : impl_(std::make_unique<Impl>()) {
  impl_->add_commands(app);
}

FlowCommands::~FlowCommands() = default;

bool FlowCommands::chosen() const { return impl_->flow->parsed(); }

int FlowCommands::check() {
  Impl& m = *impl_;
  if (m.search->chosen()) return m.search->check();
  if (m.time_travel->chosen()) return m.time_travel->check();
  if (m.config_command->chosen()) return m.config_command->check();
  if (m.continue_as_new->chosen()) return m.continue_as_new->check();
  CLI::App* cmd = m.chosen_command();
  if (cmd == nullptr) return kExitUsage;
  const std::string op = cmd->get_parent() == m.attributes ? "flow attributes " + cmd->get_name()
                                                           : "flow " + cmd->get_name();
  if (int rc = m.check_output(op); rc != 0) return rc;
  if (cmd == m.start) return m.check_start(op);
  // A stop is for the run its caller saw: with the latest run by default, a
  // stop meant for a run that has since closed would end the next one.
  if (cmd == m.stop && m.run_id.empty()) {
    return usage_error(op,
                       "--run-id is required: name the run to stop exactly (dexcli flow "
                       "describe " +
                           m.flow_id + " shows the latest run's runId)");
  }
  if ((cmd == m.stop || cmd == m.publish || cmd == m.skip || cmd == m.attr_set || cmd == m.rpc) &&
      !m.yes) {
    return usage_error(op, op + " changes the run: add --yes to confirm");
  }
  if (cmd == m.attr_set) {
    auto writes = parse_attribute_writes(m.write_flags);
    if (!writes.is_ok()) return usage_error(op, writes.status().message());
    m.writes = std::move(writes).value();
    return 0;
  }
  if (cmd == m.rpc) return m.check_rpc(op);
  if (cmd == m.stop) {
    auto mode = parse_choice(m.mode_text, kStopModes);
    if (!mode) return usage_error(op, "--mode must be one of " + choice_names(kStopModes));
    m.mode = *mode;
    if (m.mode == flow::STOP_FAIL && m.reason.empty()) {
      return usage_error(op, "--mode fail needs --reason (the run's failure reason)");
    }
  }
  if (cmd == m.publish) return m.check_publish(op);
  if (cmd == m.skip && !m.skip_flow_timeout && !m.skip_start_delay) {
    if (m.step_execution_id.empty())
      return usage_error(op,
                         "name the Step execution whose Timer fires (STEP_EXECUTION_ID), or give "
                         "--flow-timeout or --start-delay");
    if (cmd->get_option("--condition-id")->count() == 0 &&
        cmd->get_option("--condition-index")->count() == 0)
      return usage_error(op,
                         "name the Timer with --condition-id or --condition-index (flow state "
                         "lists a waiting execution's conditions in order)");
  }
  if (cmd == m.wait) {
    auto d = parse_duration(m.wait_timeout_text);
    if (!d.is_ok()) return usage_error(op, "--wait-timeout: " + d.status().message());
    m.wait_timeout = *d;
  }
  if (cmd == m.watch && !m.watch_timeout_text.empty()) {
    auto d = parse_duration(m.watch_timeout_text);
    if (!d.is_ok()) return usage_error(op, "--watch-timeout: " + d.status().message());
    m.watch_timeout = *d;
  }
  return 0;
}

int FlowCommands::run(const ClientOptions& options) {
  Impl& m = *impl_;
  Client client(options);
  FlowCalls calls(client.addresses(), options.timeout, options.tls);
  if (m.search->chosen()) return m.search->run(client);
  if (m.time_travel->chosen()) return m.time_travel->run(client);
  if (m.config_command->chosen()) return m.config_command->run(client);
  if (m.continue_as_new->chosen()) return m.continue_as_new->run(client);
  CLI::App* cmd = m.chosen_command();
  if (cmd == m.attr_get) return m.run_attr_get(client);
  if (cmd == m.attr_set) return m.run_attr_set(client);
  if (cmd == m.rpc) return m.run_rpc(calls);
  if (cmd == m.inspect) return m.run_inspect(client);
  if (cmd == m.start) return m.run_start(client);
  if (cmd == m.stop) return m.run_stop(client);
  if (cmd == m.publish) return m.run_publish(client);
  if (cmd == m.skip) return m.run_skip(client);
  if (cmd == m.wait) return m.run_wait(client);
  if (cmd == m.describe) return m.run_describe(client);
  if (cmd == m.state) return m.run_state(client);
  if (cmd == m.history) return m.run_history(client);
  if (cmd == m.watch) return m.run_watch(client);
  return kExitUsage;
}

// ------------------------------------------------------------------ mutations

int FlowCommands::Impl::run_start(Client& c) {
  auto r = c.start(flow_type, flow_id, json::parse(input), start_options);
  if (!r.is_ok()) return request_error("flow start", r.status());
  return print_json(
      {{"flowId", flow_id}, {"runId", r->run_id()}, {"alreadyStarted", r->already_started()}});
}

int FlowCommands::Impl::run_stop(Client& c) {
  const std::string id = request_id.empty() ? random_hex_id() : request_id;
  if (Status s = c.stop(flow_id, mode, reason, run_id, id); !s.is_ok()) {
    return request_error("flow stop", s);
  }
  json out = {{"flowId", flow_id},
              {"stopped", true},
              {"mode", enum_value_text(*flow::StopMode_descriptor(), mode)},
              {"runId", run_id},
              {"requestId", id}};
  return print_json(out);
}

int FlowCommands::Impl::run_publish(Client& c) {
  std::vector<nlohmann::json> values;
  for (const std::string& m : messages) values.push_back(nlohmann::json::parse(m));
  const std::string id = request_id.empty() ? random_hex_id() : request_id;
  if (Status s = c.publish(flow_id, channel, values, instance_key, run_id, id); !s.is_ok()) {
    return request_error("flow publish", s);
  }
  json out = {{"flowId", flow_id}, {"channel", channel}};
  if (!instance_key.empty()) out["instance"] = instance_key;
  out["published"] = values.size();
  out["requestId"] = id;
  return print_json(out);
}

int FlowCommands::Impl::run_skip(Client& c) {
  const std::string id = request_id.empty() ? random_hex_id() : request_id;
  if (skip_flow_timeout || skip_start_delay) {
    const flow::RunTimer timer =
        skip_flow_timeout ? flow::RUN_TIMER_FLOW_TIMEOUT : flow::RUN_TIMER_START_DELAY;
    if (Status s = c.skip_run_timer(flow_id, timer, run_id, id); !s.is_ok())
      return request_error("flow skip-timer", s);
    return print_json({{"flowId", flow_id},
                       {"timer", skip_flow_timeout ? "flowTimeout" : "startDelay"},
                       {"skipped", true},
                       {"requestId", id}});
  }
  Status s = skip->get_option("--condition-id")->count() > 0
                 ? c.skip_timer(flow_id, step_execution_id, condition_id, run_id, id)
                 : c.skip_timer(flow_id, step_execution_id, condition_index, run_id, id);
  if (!s.is_ok()) return request_error("flow skip-timer", s);
  return print_json({{"flowId", flow_id},
                     {"stepExecutionId", step_execution_id},
                     {"skipped", true},
                     {"requestId", id}});
}

// ---------------------------------------------------------------------- reads

int FlowCommands::Impl::run_wait(Client& c) {
  auto r = c.wait_for_flow(flow_id, wait_timeout, run_id);
  if (!r.is_ok()) return request_error("flow wait", r.status());
  if (!r->closed()) {
    timeout_error("flow wait",
                  "run of " + flow_id + " still " +
                      enum_value_text(*flow::FlowStatus_descriptor(), r->flow().status()) +
                      " after " + wait_timeout_text);
  }
  if (output == "table") {
    std::cout << describe_table(r->flow(), now_ms());
  } else {
    print_json(proto_to_json(r->flow()));
  }
  if (!r->closed()) return kExitWaitTimedOut;
  if (expect_completed && r->flow().status() != flow::FLOW_COMPLETED) return kExitNotCompleted;
  return 0;
}

int FlowCommands::Impl::run_describe(Client& c) {
  auto r = c.describe_flow(flow_id, run_id);
  if (!r.is_ok()) return request_error("flow describe", r.status());
  if (output == "table") {
    std::cout << describe_table(*r, now_ms());
    return 0;
  }
  return print_json(proto_to_json(*r));
}

int FlowCommands::Impl::run_state(Client& c) {
  auto r = c.flow_state(flow_id, run_id);
  if (!r.is_ok()) return request_error("flow state", r.status());
  const std::vector<std::string> hints = state_hints(*r);
  if (output == "table") {
    std::cout << state_table(*r, {step_type_filter, phase_filter}, hints, now_ms());
    return 0;
  }
  json out = proto_to_json(*r);
  if (!out.contains("workers")) out["workers"] = json::array();
  if (!hints.empty()) out["hints"] = hints;
  return print_json(out);
}

Status FlowCommands::Impl::fetch_history(Client& c, const std::string& run_ref, uint64_t after,
                                         uint32_t max, const std::string& kind,
                                         std::vector<flow::HistoryEvent>& events,
                                         std::string& run) {
  bool from_start = after == 0;
  // Bounded by `max`: each page adds at least one event or ends the loop.
  while (events.size() < max) {
    auto page = c.history(flow_id, after, from_start, std::min<uint32_t>(1000, max), run_ref);
    if (!page.is_ok()) return page.status();
    run = page->run_id();
    for (const flow::HistoryEvent& e : page->events()) {
      after = e.seq();
      if (!kind.empty() && enum_value_text(*flow::HistoryKind_descriptor(), e.kind()) != kind) {
        continue;
      }
      if (events.size() < max) events.push_back(e);
    }
    from_start = false;
    if (!page->more() || page->events().empty()) break;
  }
  return Status::ok();
}

int FlowCommands::Impl::run_history(Client& c) {
  std::vector<flow::HistoryEvent> events;
  std::string run;
  if (Status s = fetch_history(c, run_id, after_seq, limit, kind_filter, events, run); !s.is_ok()) {
    return request_error("flow history", s);
  }
  if (output == "table") {
    std::cout << history_table(events, now_ms());
    return 0;
  }
  json list = json::array();
  for (const flow::HistoryEvent& e : events) list.push_back(event_json(e));
  return print_json({{"flowId", flow_id}, {"runId", run}, {"events", list}});
}

std::optional<Duration> FlowCommands::Impl::watch_left() const {
  if (!watch_timeout) return std::nullopt;
  return *watch_timeout - (SystemClock::instance().now() - watch_start);
}

int FlowCommands::Impl::run_watch(Client& c) {
  watch_start = SystemClock::instance().now();
  std::string run = run_id;  // stays on the run it first saw, even if a new one starts
  uint64_t after = after_seq;
  bool from_start = after_seq == 0;
  // Bounded by the runs that follow one another (--follow-runs; a Flow retry
  // policy's runs, the time travels asked for), each watched until it closes.
  while (true) {
    if (int rc = watch_run(c, run, after, from_start); rc != 0 || !follow_runs) return rc;
    std::string next, link;
    if (int rc = next_run(c, run, after, next, link); rc != 0) return rc;
    if (next.empty()) return 0;  // closed with no run after it
    std::cout << json_text(
                     {{"flowId", flow_id}, {"runId", run}, {"nextRunId", next}, {"link", link}})
              << std::endl;
    run = next;
    after = 0;
    from_start = true;
  }
}

int FlowCommands::Impl::watch_run(Client& c, std::string& run, uint64_t& after, bool from_start) {
  // Bounded by the run's close (or --watch-timeout): each round waits up to 30 s.
  while (true) {
    const std::optional<Duration> left = watch_left();
    if (left && *left <= Duration::zero()) {
      return timeout_error("flow watch", "run still open after " + watch_timeout_text);
    }
    const Duration slice = left ? std::min<Duration>(seconds(30), *left) : seconds(30);
    auto page = c.wait_for_history_event(flow_id, after, from_start, slice, run);
    if (!page.is_ok()) {
      if (!is_waiting_error(page.status())) return request_error("flow watch", page.status());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // no process serves yet
      continue;
    }
    if (run.empty()) run = page->run_id();
    from_start = false;
    bool closed = false;
    for (const flow::HistoryEvent& e : page->events()) {  // bounded by the page
      // Following runs, the events written with the close come too (a time
      // travel's TIME_TRAVELED).
      if (closed && !follow_runs) break;
      after = e.seq();
      print_event(flow_id, page->run_id(), e);
      closed = closed || e.kind() == flow::FLOW_CLOSED;
    }
    if (closed) return 0;
  }
}

int FlowCommands::Impl::next_run(Client& c, const std::string& run, uint64_t& after,
                                 std::string& next, std::string& link) {
  Duration pause = kFollowPollMin;
  // Bounded by the pending Flow retry's start (or --watch-timeout): each round
  // sleeps at most kFollowPollMax.
  while (true) {
    auto d = c.describe_flow(flow_id, run);
    Duration sleep = pause;
    if (d.is_ok()) {
      // A time travel names its run at once; a Flow retry's next_run_id stays
      // with retry_unix_ms until its run starts (and goes if another start
      // takes the Flow ID first).
      if (!d->traveled_to_run_id().empty() || d->retry_unix_ms() == 0) {
        if (!d->traveled_to_run_id().empty()) {
          next = d->traveled_to_run_id();
          link = "timeTravel";
        } else if (!d->next_run_id().empty()) {
          next = d->next_run_id();
          link = "nextRun";
          // A continue-as-new: the next run names this one as the run it continues.
          auto n = c.describe_flow(flow_id, next);
          if (n.is_ok() && n->continued_from_run_id() == run) link = "continueAsNew";
        }
        // Read after the description: every event of a link it shows is in.
        return print_rest(c, run, after);
      }
      const Duration until_retry = milliseconds(d->retry_unix_ms() - now_ms());
      if (until_retry > pause) {
        sleep = std::min(until_retry, kFollowPollMax);
      } else {
        pause = std::min(pause * 2, kFollowPollMax);
      }
    } else if (!is_waiting_error(d.status())) {
      return request_error("flow watch", d.status());
    }
    if (const std::optional<Duration> left = watch_left()) {
      if (*left <= Duration::zero()) {
        return timeout_error("flow watch", "run " + run + " closed, and " +
                                               (d.is_ok() ? "its Flow retry had not started"
                                                          : "no process answered") +
                                               " after " + watch_timeout_text);
      }
      sleep = std::min(sleep, *left);
    }
    std::this_thread::sleep_for(sleep);
  }
}

int FlowCommands::Impl::print_rest(Client& c, const std::string& run, uint64_t& after) {
  // Bounded by the run's history: each page moves `after` on or ends the loop.
  while (true) {
    auto page = c.history(flow_id, after, false, 1000, run);
    if (!page.is_ok()) {
      if (!is_waiting_error(page.status())) return request_error("flow watch", page.status());
      if (const std::optional<Duration> left = watch_left(); left && *left <= Duration::zero()) {
        return timeout_error("flow watch", "no process answered within " + watch_timeout_text);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // no process serves yet
      continue;
    }
    for (const flow::HistoryEvent& e : page->events()) {  // bounded by the page
      after = e.seq();
      print_event(flow_id, run, e);
    }
    if (!page->more() || page->events().empty()) return 0;
  }
}

// ---------------------------------------------------- Attributes, RPCs, inspect

namespace {

flow::FlowRef flow_ref(const std::string& flow_id, const std::string& run_id) {
  flow::FlowRef ref;
  ref.set_flow_id(flow_id);
  ref.set_run_id(run_id);
  return ref;
}

// The whole history of a run is at most this many events in `flow inspect`.
constexpr uint32_t kInspectHistoryMax = 100'000;

}  // namespace

int FlowCommands::Impl::run_attr_get(Client& c) {
  auto r = c.get_attributes(flow_id, run_id, attribute_keys);
  if (!r.is_ok()) return request_error("flow attributes get", r.status());
  if (output == "table") {
    std::cout << flow_id << " run " << r->run_id() << " ("
              << enum_value_text(*flow::FlowStatus_descriptor(), r->status()) << ")\n\n"
              << attributes_table({r->attributes().begin(), r->attributes().end()}, now_ms());
    return 0;
  }
  return print_json({{"flowId", flow_id},
                     {"runId", r->run_id()},
                     {"status", enum_value_text(*flow::FlowStatus_descriptor(), r->status())},
                     {"attributes", attributes_json(r->attributes())}});
}

int FlowCommands::Impl::run_attr_set(Client& c) {
  const std::string id = request_id.empty() ? random_hex_id() : request_id;
  if (Status s = c.set_attributes(flow_id, writes, run_id, id); !s.is_ok()) {
    return request_error("flow attributes set", s);
  }
  google::protobuf::RepeatedPtrField<flow::Attribute> written(writes.begin(), writes.end());
  json out = {{"flowId", flow_id}};
  if (!run_id.empty()) out["runId"] = run_id;
  out["written"] = attributes_json(written);
  out["requestId"] = id;
  return print_json(out);
}

int FlowCommands::Impl::run_rpc(FlowCalls& calls) {
  flow::InvokeRpcRequest request;
  *request.mutable_flow() = flow_ref(flow_id, run_id);
  request.set_name(rpc_name);
  request.mutable_input()->set_data(input);
  request.set_timeout_ms(rpc_timeout_ms);
  for (const auto& k : rpc_lock_keys) request.add_lock_keys(k);
  request.set_request_id(request_id.empty() ? random_hex_id() : request_id);
  auto r = calls.invoke_rpc(request);
  if (!r.is_ok()) return request_error("flow rpc", r.status());
  json out = {{"flowId", flow_id},
              {"runId", r->run_id()},
              {"rpc", rpc_name},
              {"requestId", request.request_id()}};
  put_output(out, r->output().data());
  return print_json(out);
}

int FlowCommands::Impl::run_inspect(Client& c) {
  const std::string op = "flow inspect";
  // Every part from the same run: the one describe names.
  auto described = c.describe_flow(flow_id, run_id);
  if (!described.is_ok()) return request_error(op, described.status());
  const std::string run = described->run_id();
  auto st = c.flow_state(flow_id, run);
  if (!st.is_ok()) return request_error(op, st.status());
  auto attrs = c.get_attributes(flow_id, run);
  if (!attrs.is_ok()) return request_error(op, attrs.status());
  std::vector<flow::HistoryEvent> events;
  std::string history_run;
  if (Status s = fetch_history(c, run, 0, kInspectHistoryMax, "", events, history_run);
      !s.is_ok()) {
    return request_error(op, s);
  }
  const std::vector<std::string> hints = state_hints(*st);
  const std::vector<SubFlowChild> children = sub_flow_children(events);
  const int64_t now = now_ms();
  if (output == "table") {
    // The state's table lists the Attributes (once).
    std::cout << describe_table(*described, now) << "\nSubFlows:\n"
              << sub_flows_table(*described, children) << "\n"
              << state_table(*st, {}, hints, now) << "\nHistory (newest first):\n"
              << history_table(events, now);
    return 0;
  }
  json state = proto_to_json(*st);
  state.erase("flow");  // the same as "flow" above
  if (!state.contains("active")) state["active"] = json::array();
  if (!state.contains("workers")) state["workers"] = json::array();
  if (!hints.empty()) state["hints"] = hints;
  json history = json::array();
  for (const flow::HistoryEvent& e : events) history.push_back(event_json(e));
  return print_json({{"flowId", flow_id},
                     {"runId", run},
                     {"flow", proto_to_json(*described)},
                     {"state", state},
                     {"attributes", attributes_json(attrs->attributes())},
                     {"subFlows", sub_flows_json(*described, children)},
                     {"history", history}});
}

}  // namespace dex::cli
