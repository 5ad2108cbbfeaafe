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
// twice; a DEADLINE_EXCEEDED is not tried elsewhere. step_down is sent
// to another address only when no connection to the first was made. Before
// the first call, after a DEADLINE_EXCEEDED and before every further round,
// all addresses' gRPC health is asked at once (1 s at most): the SERVING one
// goes first, and one that does not answer at all (a frozen process) is
// skipped while another does. The long polls (wait_for_flow,
// wait_for_history_event, wait_for_step) re-check their process's health
// every second and move on when it stops answering or serving.
// src/sdk/README.md has the rules.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include "common/clock.h"
#include "common/status.h"

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
  // Sent as "authorization: Bearer <token>" on AdminService calls when set.
  std::string admin_credential;
};

// A node epoch as the API writes it (DescribeResponse.node_epoch,
// StepDownRequest.expected_node_epoch): a decimal number from 1 to 2^64-1
// without leading zeros. InvalidArgument naming the text otherwise.
Status validate_node_epoch(std::string_view epoch);

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
  // Every call may be repeated on another process: start sets a request ID
  // (unless the options carry one) and ignore_already_started, so a repeat
  // answers the run the first attempt started; publish sends a request ID
  // the run remembers; the others change nothing twice or only read.

  // Starts a run of `flow_type` with ID `flow_id`; the start Step's input is `input`.
  StatusOr<flow::StartFlowResponse> start(const std::string& flow_type, const std::string& flow_id,
                                          const nlohmann::json& input,
                                          flow::StartOptions options = {});
  Status stop(const std::string& flow_id, flow::StopMode mode = flow::STOP_CANCEL,
              const std::string& reason = "", const std::string& run_id = "");
  // Appends `messages` in order to a Channel (or a ChannelMap's instance).
  // `request_id` (default: a fresh one) makes a repeat of the call append
  // nothing: give the same one to retry a publish whose outcome is unknown.
  Status publish(const std::string& flow_id, const std::string& channel,
                 const std::vector<nlohmann::json>& messages, const std::string& instance_key = "",
                 const std::string& run_id = "", const std::string& request_id = "");
  Status skip_timer(const std::string& flow_id, const std::string& step_execution_id,
                    uint32_t condition_index, const std::string& run_id = "");
  Status skip_timer(const std::string& flow_id, const std::string& step_execution_id,
                    const std::string& condition_id, const std::string& run_id = "");
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
