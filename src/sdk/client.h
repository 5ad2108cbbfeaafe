// A thin typed client for the dex Flow API, dex.FlowService
// (proto/dex/flow_api.proto), and dex.AdminService (proto/dex/api.proto).
// Every call has a deadline and returns a Status whose message starts with
// the gRPC code name, e.g.
//   "UNAVAILABLE: the server is not reachable at 127.0.0.1:8801 (...)"
//   "NOT_FOUND: no Flow with ID 'f-1'"
// so that callers can print it as it is. Thread-safe.
//
// Several addresses (the active process of a node and its standbys, in any
// order): a call goes to the address that answered last, and on UNAVAILABLE
// or no connection to the next one, round after round with a short backoff,
// within the call's deadline. Any other answer ends the search. Every call
// but step_down is safe to repeat (start and publish carry a request ID), so
// a call that may have reached an engine that then stopped is not done
// twice; a DEADLINE_EXCEEDED (Code::kDeadlineExceeded: the outcome is
// unknown, so not kTransient) is not tried elsewhere. step_down is sent
// to another address only when no connection to the first was made. Before
// the first call, after a DEADLINE_EXCEEDED and before every further round,
// all addresses' gRPC health is asked at once (1 s at most): the SERVING one
// goes first, and one that does not answer at all (a frozen process) is
// skipped while another does. The long polls (wait_for_flow,
// wait_for_history_event, wait_for_step) re-check their process's health
// every second and move on when it stops answering or serving.
// src/sdk/README.md has the rules.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include "common/clock.h"
#include "common/status.h"
#include "sdk/attribute.h"
#include "sdk/search.h"
#include "sdk/start_options.h"
#include "sdk/tls_options.h"

#include "dex/api.pb.h"
#include "dex/flow_api.pb.h"

namespace dex {

struct ClientOptions {
  // The addresses (host:port) of the processes of one dex node: the active one
  // and its standbys, in any order. Empty: {server_address}.
  std::vector<std::string> server_addresses;
  // The single-address convenience, used when server_addresses is empty.
  std::string server_address = "127.0.0.1:8801";
  // Deadline of each call (a long poll: its wait plus this), the search for
  // the active process included.
  Duration timeout = seconds(30);
  // How long one attempt waits for a connection to an address before the
  // next address is tried (nothing has been sent then). Must be > 0.
  Duration connect_timeout = seconds(2);
  // Sent as "authorization: Bearer <token>" on every call (docs/api.md,
  // "Access"). Empty: token_file's first line (read again when the file
  // changes), else $DEX_TOKEN, else the file $DEX_TOKEN_FILE names, else none.
  // A file that cannot be read makes every call fail with InvalidArgument
  // naming it.
  std::string token;
  std::string token_file;
  // Sent as "authorization: Bearer <token>" on AdminService calls instead
  // of the token when set.
  std::string admin_credential;
  // TLS to every address (sdk/tls_options.h); off by default. Files that
  // cannot be used make every call fail with InvalidArgument naming them; a
  // failed handshake's error says why (a wrong CA, an expired certificate, a
  // name the certificate does not hold).
  TlsOptions tls;
};

// A node epoch as the API writes it (DescribeResponse.node_epoch,
// StepDownRequest.expected_node_epoch): a decimal number from 1 to 2^64-1
// without leading zeros. InvalidArgument naming the text otherwise.
Status validate_node_epoch(std::string_view epoch);

// Client::start's options (timeout, start delay, retry policy, request ID, ID
// reuse policy, typed initial Attributes): sdk/start_options.h.

struct InvokeRpcOptions {
  // How long the server waits for the handler's result to be committed.
  // Zero: the server's default (10 s); at most 60 s.
  Duration timeout = Duration::zero();
  // Empty: a fresh one per call, the same for every repeat of the call on
  // another process. A retry with the request ID of an RPC whose result was
  // committed answers that output again, without running the handler.
  std::string request_id;
  std::string run_id;  // empty: the current run
  // This call's own lock keys, held besides the RPC declaration's (at most 16
  // in all) from queueing until the RPC ends: e.g. the account it touches, so
  // calls on one account run one at a time while calls on others do not wait.
  std::vector<std::string> lock_keys = {};
};

// Options that are not valid (a bad or repeated address, see addresses.h)
// make every call fail with InvalidArgument naming what is wrong.
class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The active process: node ID, node epoch (decimal), holder process ID.
  StatusOr<DescribeResponse> describe();
  // Asks the active process to step down (docs/api.md, "Step down"): it
  // drains, releases the lease and waits for another process to take over or
  // for its hold-off to pass. The precondition names the process to step
  // down: a process whose node ID or node epoch differs (or a standby)
  // answers FAILED_PRECONDITION and changes nothing. `expected_node_epoch` is
  // decimal text as describe() returns it. `timeout` zero: options().timeout;
  // the call can last the attempt drain plus the hold-off, so give it minutes.
  //
  // Never repeated: the call goes to another address only when no connection
  // to this one was made (nothing was sent). Any answer ends it; UNAVAILABLE,
  // DEADLINE_EXCEEDED and CANCELLED leave the outcome unknown, and the only
  // safe retry is with the same expectations. With several addresses and no
  // call answered yet, the address whose gRPC readiness is SERVING is tried
  // first. A bad node ID or epoch is InvalidArgument, and nothing is sent.
  //
  // `sent_to`, when given, is set to the address the request went out to, and
  // left empty when it went nowhere (bad arguments, or no connection to any
  // address): only then is a failure known to have changed nothing.
  StatusOr<StepDownResponse> step_down(const std::string& expected_node_id,
                                       const std::string& expected_node_epoch,
                                       Duration timeout = Duration::zero(),
                                       std::string* sent_to = nullptr);

  // ------------------------------------------------ dex Flows (dex.FlowService)
  // docs/api.md, "Flows". Values are JSON (sent as Payloads of JSON text).
  // A call may be repeated on another process (UNAVAILABLE moves on to the
  // next address) only when a repeat cannot change anything twice: the reads
  // and long polls, and the writes that carry a request ID the run remembers
  // (docs/api.md, "Repeated calls"). start sets one (unless the options carry
  // one) and ignore_already_started, so a repeat answers the run the first
  // attempt started; stop, publish, skip_timer, set_attributes and invoke_rpc
  // send one, fresh per call and the same on each of its repeats, unless the
  // caller gives it (`request_id`: give the same one to retry a call whose
  // outcome is unknown).

  // Starts a run of `flow_type` with ID `flow_id`; the start Step's input is `input`.
  StatusOr<flow::StartFlowResponse> start(const std::string& flow_type, const std::string& flow_id,
                                          const nlohmann::json& input,
                                          flow::StartOptions options = {});
  // With dex::StartOptions (typed initial Attributes, the retry policy, ...).
  StatusOr<flow::StartFlowResponse> start(const std::string& flow_type, const std::string& flow_id,
                                          const nlohmann::json& input,
                                          const StartOptions& options) {
    return start(flow_type, flow_id, input, options.proto);
  }
  // Starts a run and waits for it to close, in one call (StartFlow with
  // wait_timeout_ms) instead of start then wait_for_flow: the answer holds the
  // run_id, already_started, and as wait_for_flow with that run ID answers,
  // `closed` (false: `timeout` passed first; wait_for_flow with run_id goes
  // on) and the run's description `flow` (its status and outputs). It follows
  // continue-as-new, not Flow retries (the answer's next_run_id names one). A
  // timeout past the server's limit of one wait (60 s) goes on with
  // wait_for_flow. Repeated as start is: with a request ID and
  // ignore_already_started (the default) an UNAVAILABLE, also during the
  // wait, sends the same start to the next address, which answers the run the
  // first try started (already_started) and waits for it. `timeout` must be
  // > 0 (INVALID_ARGUMENT otherwise; nothing is sent).
  StatusOr<flow::StartFlowResponse> start_and_wait(const std::string& flow_type,
                                                   const std::string& flow_id,
                                                   const nlohmann::json& input, Duration timeout,
                                                   flow::StartOptions options = {});
  StatusOr<flow::StartFlowResponse> start_and_wait(const std::string& flow_type,
                                                   const std::string& flow_id,
                                                   const nlohmann::json& input, Duration timeout,
                                                   const StartOptions& options) {
    return start_and_wait(flow_type, flow_id, input, timeout, options.proto);
  }
  Status stop(const std::string& flow_id, flow::StopMode mode = flow::STOP_CANCEL,
              const std::string& reason = "", const std::string& run_id = "",
              const std::string& request_id = "");
  // Appends `messages` in order to a Channel (or a ChannelMap's instance).
  // `request_id` (default: a fresh one) makes a repeat of the call append
  // nothing: give the same one to retry a publish whose outcome is unknown.
  Status publish(const std::string& flow_id, const std::string& channel,
                 const std::vector<nlohmann::json>& messages, const std::string& instance_key = "",
                 const std::string& run_id = "", const std::string& request_id = "");
  Status skip_timer(const std::string& flow_id, const std::string& step_execution_id,
                    uint32_t condition_index, const std::string& run_id = "",
                    const std::string& request_id = "");
  Status skip_timer(const std::string& flow_id, const std::string& step_execution_id,
                    const std::string& condition_id, const std::string& run_id = "",
                    const std::string& request_id = "");
  // Fires the run's own Timer now: its flow timeout (the timeout policy
  // applies) or its start delay (the start Step is created).
  Status skip_run_timer(const std::string& flow_id, flow::RunTimer timer,
                        const std::string& run_id = "", const std::string& request_id = "");
  // Time travel (docs/time-travel.md): a new run of `flow_id` from `point` of
  // its latest run `run_id` (named exactly), with the state as it was there
  // and the Flow type's latest declaration; the old run, if it runs, ends
  // TERMINATED with `reason`. A repeat with the same request ID (default: a
  // fresh one per call) answers the run the first try made (already_done).
  // `dry_run`: the answer holds the run as it would start; nothing changes.
  StatusOr<flow::TimeTravelResponse> time_travel(
      const std::string& flow_id, const std::string& run_id, const flow::TimeTravelPoint& point,
      const std::string& reason = "", bool dry_run = false, const std::string& request_id = "");
  // Continue-as-new (docs/flow-rules.md): the run `run_id` (the Flow ID's
  // latest, named exactly) goes on as a new run holding its state, at once if
  // no attempt of it runs (new_run_id), else when none does. A repeat with
  // the same request ID (default: a fresh one per call) changes nothing.
  StatusOr<flow::TriggerContinueAsNewResponse> continue_as_new(const std::string& flow_id,
                                                               const std::string& run_id,
                                                               const std::string& reason = "",
                                                               const std::string& request_id = "");
  // FlowConfig (docs/flow-rules.md): the running run `run_id` (named
  // exactly) takes each field `config` sets; each of `clear_fields` (FlowConfig
  // field names) goes back to its declaration's value. Answers the run's
  // effective config after. A repeat with the same request ID (default: a
  // fresh one per call) changes nothing.
  StatusOr<flow::UpdateFlowConfigResponse> update_flow_config(
      const std::string& flow_id, const std::string& run_id, const flow::FlowConfig& config,
      const std::vector<std::string>& clear_fields = {}, const std::string& request_id = "");
  StatusOr<flow::FlowDescription> describe_flow(const std::string& flow_id,
                                                const std::string& run_id = "");
  StatusOr<flow::GetFlowStateResponse> flow_state(const std::string& flow_id,
                                                  const std::string& run_id = "");
  // Events with seq > after_seq (from the first when from_start).
  StatusOr<flow::GetHistoryEventsResponse> history(const std::string& flow_id, uint64_t after_seq,
                                                   bool from_start, uint32_t page_size = 0,
                                                   const std::string& run_id = "");
  StatusOr<flow::GetHistoryEventsResponse> wait_for_history_event(const std::string& flow_id,
                                                                  uint64_t after_seq,
                                                                  bool from_start, Duration timeout,
                                                                  const std::string& run_id = "");
  // Waits until the run closes or `timeout` passes (closed = false), through
  // server restarts and failovers: while no process serves (UNAVAILABLE), it
  // asks again every 200 ms until `timeout`.
  StatusOr<flow::WaitForFlowResponse> wait_for_flow(const std::string& flow_id, Duration timeout,
                                                    const std::string& run_id = "");
  StatusOr<flow::WaitForStepCompletionResponse> wait_for_step(const std::string& flow_id,
                                                              const std::string& step_execution_id,
                                                              Duration timeout,
                                                              const std::string& run_id = "");

  // ------------------------------------------------ Attributes and RPCs
  // The run's Attributes (the latest run when run_id is empty, also after it
  // closed): `keys` only, or every one. Read them typed with
  // Attribute::get(response) / AttributeMap::get(response, instance) / all(response).
  StatusOr<flow::GetAttributesResponse> get_attributes(const std::string& flow_id,
                                                       const std::string& run_id = "",
                                                       const std::vector<std::string>& keys = {});
  // Applies `writes` (Attribute::write / deletion, AttributeMap::write /
  // deletion) in order, all or none, to a RUNNING run. A repeat with the same
  // request ID (default: a fresh one per call) changes nothing, so a retry
  // after a lost answer never puts these values back over a later write.
  Status set_attributes(const std::string& flow_id, const std::vector<flow::Attribute>& writes,
                        const std::string& run_id = "", const std::string& request_id = "");
  // Waits until the Attribute (an AttributeMap's instance) equals `value` (a
  // string, int64, double, bool or datetime; otherwise InvalidArgument and
  // nothing is sent), the run closes or `timeout` passes (matched = false).
  // Like wait_for_flow, it keeps waiting through a restart or a failover.
  StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(
      const std::string& flow_id, const std::string& key, const flow::AttributeValue& value,
      Duration timeout, const std::string& instance_key = "", const std::string& run_id = "");
  template <typename T>
  StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(const std::string& flow_id,
                                                              const Attribute<T>& attribute,
                                                              const T& value, Duration timeout,
                                                              const std::string& run_id = "") {
    return wait_for_attribute(flow_id, attribute.key(), attribute_value(value), timeout, "",
                              run_id);
  }
  template <typename T>
  StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(const std::string& flow_id,
                                                              const AttributeMap<T>& map,
                                                              const std::string& instance_key,
                                                              const T& value, Duration timeout,
                                                              const std::string& run_id = "") {
    return wait_for_attribute(flow_id, map.key(), attribute_value(value), timeout, instance_key,
                              run_id);
  }

  // Runs the Flow's RPC `name` on a Worker and answers its output once its
  // result (output, Attribute writes, publishes, new Steps) is committed.
  // Errors: INVALID_ARGUMENT (an RPC the Flow does not declare, a bad lock key),
  // FAILED_PRECONDITION (the run is closed, or the handler failed: its
  // message), DEADLINE_EXCEEDED (no result within the timeout), UNAVAILABLE
  // (no active process, or it changed before the result was committed:
  // nothing of it was). Repeated on another process with the same request ID
  // like every call: a committed RPC answers its output again, one that was
  // not committed runs again (make the handler's outside effects idempotent).
  StatusOr<nlohmann::json> invoke_rpc(const std::string& flow_id, const std::string& name,
                                      const nlohmann::json& input,
                                      const InvokeRpcOptions& options = {});
  // Typed: the input converts with to_json, the output with from_json (an
  // output that does not convert to Out is InvalidArgument naming the RPC).
  //   StatusOr<Quote> q = client.invoke_rpc<Quote>("f-1", "quote", QuoteRequest{...});
  template <typename Out, typename In>
  StatusOr<Out> invoke_rpc(const std::string& flow_id, const std::string& name, const In& input,
                           const InvokeRpcOptions& options = {}) {
    StatusOr<nlohmann::json> out = invoke_rpc(flow_id, name, nlohmann::json(input), options);
    if (!out.is_ok()) return out.status();
    try {
      return out->template get<Out>();
    } catch (const nlohmann::json::exception& e) {
      return Status::invalid_argument("INVALID_ARGUMENT: the output of RPC '" + name +
                                      "' does not convert: " + e.what());
    }
  }

  // ------------------------------------------------ Finding Flows (SearchFlows)
  // docs/search.md has the query language and the index types; docs/api.md,
  // "Finding Flows", the call.

  // One page of the runs `query` selects (empty: every run; default order
  // StartTime DESC): the rows (IDs, type, status, times, parent, and the
  // values of the index keys the query names or options.fields asks for; read
  // them typed with Attribute::get(row)), next_page_token ("" on the last
  // page) and applied_slot (the log slot the answer reflects: every write
  // acknowledged before the call is in it). A bad query, page size, token or
  // field is INVALID_ARGUMENT naming it ("query: at position 14: ..."). A
  // read: repeated on another address on UNAVAILABLE.
  StatusOr<flow::SearchFlowsResponse> search_flows(const std::string& query,
                                                   const SearchOptions& options = {});
  // Every page of `query`, from options.page_token on, each fetched when the
  // loop reaches it (search.h).
  SearchPages search_pages(std::string query, SearchOptions options = {}) {
    return SearchPages(*this, std::move(query), std::move(options));
  }
  // Calls `visit` with every row of every page in order until it returns
  // false; the first failed call ends it with that call's status.
  Status for_each_flow(const std::string& query,
                       const std::function<bool(const flow::FlowSearchRow&)>& visit,
                       SearchOptions options = {});
  // Query completion (docs/search.md, "Completing a query"): what a query can
  // name (the system fields, then the index keys in use with their types and
  // declaring Flow types), and distinct values of a KEYWORD or KEYWORD_ARRAY
  // field starting with `prefix` (limit 0: 20, at most 100; INVALID_ARGUMENT
  // for an unknown key or another index type). Reads: repeated on another
  // address on UNAVAILABLE.
  StatusOr<flow::ListSearchKeysResponse> list_search_keys();
  StatusOr<flow::ListSearchValuesResponse> list_search_values(const std::string& key,
                                                              const std::string& prefix = "",
                                                              int32_t limit = 0);

  const ClientOptions& options() const { return options_; }
  // The addresses calls go to, in the order given.
  const std::vector<std::string>& addresses() const;
  // The address that answered the last call (the next call starts there).
  std::string preferred_address() const;

  struct Stubs;  // internal: channels, stubs, the preferred address

 private:
  ClientOptions options_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace dex
