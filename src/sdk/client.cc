#include "sdk/client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <ranges>
#include <thread>

#include "common/node_id.h"
#include "common/random.h"
#include "common/units.h"
#include "dex/api.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "sdk/addresses.h"
#include "sdk/credentials.h"
#include "sdk/flow.h"
#include "sdk/grpc_status.h"
#include "sdk/readiness.h"

namespace dex {

namespace {

// The pause between two rounds over every address: doubles from the initial
// to the max, each jittered to [d/2, d], never past the call's deadline.
constexpr Duration kRoundBackoffInitial = milliseconds(50);
constexpr Duration kRoundBackoffMax = seconds(1);

// One address's channel and stubs, as one attempt uses them.
struct Endpoint {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<FlowService::Stub> flows;
  std::shared_ptr<AdminService::Stub> admin;
};

Endpoint make_endpoint(const std::string& address, const TlsOptions& tls) {
  Endpoint e;
  e.address = address;
  e.channel = sdk_internal::make_channel(address, milliseconds(100), seconds(1), tls);
  e.flows = FlowService::NewStub(e.channel);
  e.admin = AdminService::NewStub(e.channel);
  return e;
}

// An address's current Endpoint. A channel whose connection failed is
// replaced by a fresh one: a long-lived channel that saw its server go away
// kept failing for seconds after a restart, where a new one connects at once
// (the Worker opens a fresh channel per stream for the same reason).
class EndpointSlot {
 public:
  EndpointSlot(std::string address, TlsOptions tls)
      : address(std::move(address)),
        tls_(std::move(tls)),
        current_(make_endpoint(this->address, tls_)) {}
  const std::string address;
  Endpoint get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  // Replaces `failed` (if still current) with a fresh channel.
  void renew(const std::shared_ptr<grpc::Channel>& failed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_.channel == failed) current_ = make_endpoint(address, tls_);
  }

 private:
  const TlsOptions tls_;
  mutable std::mutex mu_;
  Endpoint current_;  // guarded by mu_
};

std::chrono::system_clock::time_point system_deadline(TimePoint deadline) {
  Duration remaining = std::max(deadline - SystemClock::instance().now(), Duration::zero());
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(remaining);
}

// Waits until the channel is READY, TRANSIENT_FAILURE or SHUTDOWN, or `until`
// passes (then it returns the state it is stuck in: IDLE or CONNECTING).
grpc_connectivity_state wait_for_connection(grpc::Channel& channel, TimePoint until) {
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state == GRPC_CHANNEL_IDLE || state == GRPC_CHANNEL_CONNECTING) {
    if (SystemClock::instance().now() >= until) return state;
    if (!channel.WaitForStateChange(state, system_deadline(until))) return state;
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return state;
}

// "UNAVAILABLE: the server at X is not serving: ..." → "the server at X is not serving: ...".
std::string without_code(const Status& status) {
  std::string_view message = status.message();
  std::string_view code = sdk_internal::grpc_code_of(status);
  if (!code.empty() && message.size() > code.size() + 2) message.remove_prefix(code.size() + 2);
  return std::string(message);
}

}  // namespace

struct Client::Stubs {
  Status invalid = Status::ok();  // the address list is not valid: every call fails with this
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<EndpointSlot>> endpoints;
  std::atomic<size_t> preferred{0};
  // True once an address answered (preferred is then that address, not just
  // the first one by default).
  std::atomic<bool> preferred_known{false};
  // The token every call sends (sdk/credentials.h); constant after construction.
  std::unique_ptr<sdk_internal::TokenSource> token;
  std::mutex random_mu;
  Random random{std::random_device{}()};

  Duration jitter(Duration d) {
    std::lock_guard<std::mutex> lock(random_mu);
    return random.between(d / 2, d);
  }
};

Client::Client(ClientOptions options) : options_(std::move(options)), stubs_(new Stubs) {
  stubs_->addresses =
      effective_server_addresses(options_.server_addresses, options_.server_address);
  stubs_->invalid = validate_server_addresses(stubs_->addresses);
  if (stubs_->invalid.is_ok() && options_.connect_timeout <= Duration::zero()) {
    stubs_->invalid = Status::invalid_argument("ClientOptions: connect_timeout must be positive");
  }
  stubs_->token = std::make_unique<sdk_internal::TokenSource>(options_.token, options_.token_file);
  if (stubs_->invalid.is_ok()) stubs_->invalid = check_tls_options(options_.tls);
  if (!stubs_->invalid.is_ok()) return;
  for (const std::string& address : stubs_->addresses)
    stubs_->endpoints.push_back(std::make_unique<EndpointSlot>(address, options_.tls));
}

Client::~Client() = default;

const std::vector<std::string>& Client::addresses() const { return stubs_->addresses; }

std::string Client::preferred_address() const {
  if (stubs_->endpoints.empty()) return "";
  return stubs_->endpoints[stubs_->preferred.load() % stubs_->endpoints.size()]->address;
}

namespace {

// One attempt of a call on one endpoint: fills the caller's response on OK.
using Attempt = std::function<grpc::Status(Endpoint&, grpc::ClientContext&, TimePoint deadline)>;

// Whether a call may be sent to another address after it may have reached a
// process (src/sdk/README.md, "Several addresses").
enum class Repeat {
  // Safe to repeat: UNAVAILABLE moves on to the next address.
  kSafe,
  // Not to be repeated (StepDown): the search moves on only when no connection
  // was made, so nothing was sent; any answer, UNAVAILABLE included, ends it.
  kOnlyIfNotSent,
};

// How one call searches: its admin credential ("authorization: Bearer"; empty:
// the client's token),
// whether it may be repeated, when its deadline started counting (default:
// now), and where to note the address it was sent to (left empty when it was
// sent nowhere).
struct CallPolicy {
  std::string credential;
  Repeat repeat = Repeat::kSafe;
  std::optional<TimePoint> started;
  std::string* sent_to = nullptr;
};

void set_preferred(Client::Stubs& stubs, size_t i) {
  stubs.preferred = i;
  stubs.preferred_known = true;
}

// The search for the active process (src/sdk/README.md, "Several addresses"):
// starting at the preferred address, each address in turn; UNAVAILABLE or no
// connection moves on to the next, any other answer ends the call (and makes
// its address the preferred one). Between full rounds a short backoff; the
// whole within `timeout`. When no process could even be reached, the call
// keeps trying for kUnreachableGrace only: nothing listens, and waiting longer
// would not help the caller more than its own retry would.
//
// Repeat::kOnlyIfNotSent narrows the move-on to "no connection was made": an
// address whose channel is not READY after the connect wait is skipped without
// sending anything, and the first call actually sent ends the search whatever
// it answers. There is then only one round.
// How long a call keeps trying when no address could even be reached.
constexpr Duration kUnreachableGrace = milliseconds(1500);

// What is said of an address the search skipped because it did not answer
// the readiness probe while another did. `cut_short`: the call's deadline
// ended the probe after that long, before kReadinessProbeTimeout. Then the
// silence says little: what the address answered earlier in this call (kept
// in `before`) is the better report, and without one the report says how
// short the wait was rather than calling the process frozen.
Status skipped_after_probe(const Status& before, const std::string& address,
                           std::optional<Duration> cut_short) {
  if (!cut_short) {
    return Status::transient(fmt::format(
        "UNAVAILABLE: the server at {} did not answer a health check within {} (a frozen "
        "or cut-off process); not tried",
        address, format_duration(sdk_internal::kReadinessProbeTimeout)));
  }
  if (!before.is_ok()) return before;
  return Status::transient(fmt::format(
      "UNAVAILABLE: the server at {} did not answer a health check in the {} left before the "
      "deadline; not tried",
      address, format_duration(*cut_short)));
}

Status call_any(Client::Stubs& stubs, const ClientOptions& options, Duration timeout,
                const Attempt& attempt, const CallPolicy& policy = {}) {
  if (!stubs.invalid.is_ok()) return stubs.invalid;
  std::string credential = policy.credential;  // an admin call's own credential
  if (credential.empty()) {
    auto token = stubs.token->get();
    if (!token.is_ok()) return token.status();
    credential = std::move(token).value();
  }
  const size_t n = stubs.endpoints.size();
  const TimePoint start = policy.started.value_or(SystemClock::instance().now());
  const Repeat repeat = policy.repeat;
  const TimePoint deadline = start + timeout;
  const size_t first = stubs.preferred.load() % n;
  std::vector<Status> said(n, Status::ok());  // the last answer of each address
  Duration backoff = kRoundBackoffInitial;

  auto exhausted = [&]() -> Status {
    Duration elapsed = SystemClock::instance().now() - start;
    if (std::all_of(said.begin(), said.end(), [](const Status& x) { return x.is_ok(); })) {
      return Status(
          Code::kDeadlineExceeded,
          fmt::format("DEADLINE_EXCEEDED: the deadline ({}) passed before {} could be called",
                      format_duration(timeout), join_addresses(stubs.addresses)));
    }
    std::vector<std::string> parts;
    const Status* only = nullptr;
    for (size_t k = 0; k < n; ++k) {
      size_t i = (first + k) % n;
      if (said[i].is_ok()) {
        parts.push_back(fmt::format("{}: not tried (no time left)", stubs.endpoints[i]->address));
      } else {
        // A failed TLS handshake looks like any failed connection to gRPC.
        if (sdk_internal::is_connection_failure(said[i].message()) ||
            said[i].message().find("not reachable") != std::string::npos) {
          said[i] =
              sdk_internal::explain_tls_failure(said[i], stubs.endpoints[i]->address, options.tls);
        }
        parts.push_back(without_code(said[i]));
        only = &said[i];
      }
    }
    if (n == 1 && only != nullptr) {
      // One address: its own words, as before address lists existed.
      return Status(only->code(), elapsed >= timeout
                                      ? fmt::format("{} (kept trying for {})", only->message(),
                                                    format_duration(timeout))
                                      : only->message());
    }
    std::string where =
        n == 1 ? stubs.endpoints[0]->address : fmt::format("any of {} addresses", n);
    std::string text =
        fmt::format("UNAVAILABLE: no active dex process at {} ({})", where,
                    elapsed >= timeout ? fmt::format("kept trying for {}", format_duration(timeout))
                                       : std::string("none could be reached"));
    for (const std::string& part : parts) text += "; " + part;
    return Status::transient(std::move(text));
  };

  for (size_t round = 0;; ++round) {
    bool reached_a_process = false;
    // Which address to start at, and which to skip: with several addresses,
    // when the one that answered last is not known or just failed, ask them
    // all at once. Those SERVING go first; one that does not answer at all (a
    // frozen process accepts connections and then says nothing) is skipped
    // while another answers, instead of holding the call. Every answer is
    // awaited (1 s at most), so that of two SERVING (one about to find out it
    // lost its lease) the same goes first each round, and the other is tried
    // in that round too. Not for a call that is never repeated: it keeps its
    // single round as it was.
    std::vector<size_t> order;
    for (size_t k = 0; k < n; ++k) order.push_back((first + k) % n);
    if (n > 1 && repeat == Repeat::kSafe && (round > 0 || !stubs.preferred_known.load())) {
      TimePoint now = SystemClock::instance().now();
      if (now >= deadline) return exhausted();
      std::vector<std::shared_ptr<grpc::Channel>> channels;
      for (auto& e : stubs.endpoints) channels.push_back(e->get().channel);
      // The call's deadline may cut the probe short: an address silent then
      // was given less than kReadinessProbeTimeout, so it is not called frozen.
      const TimePoint probe_until = std::min(deadline, now + sdk_internal::kReadinessProbeTimeout);
      const bool cut_short = probe_until < now + sdk_internal::kReadinessProbeTimeout;
      auto readiness = sdk_internal::probe_readiness(channels, "", probe_until,
                                                     /*until_first_serving=*/false);
      order = sdk_internal::search_order(readiness, first);
      for (size_t i = 0; i < n; ++i) {
        if (std::find(order.begin(), order.end(), i) != order.end()) continue;
        reached_a_process = true;  // another address answered the probe
        said[i] = skipped_after_probe(said[i], stubs.endpoints[i]->address,
                                      cut_short ? std::optional(probe_until - now) : std::nullopt);
      }
    }
    for (size_t i : order) {
      Endpoint endpoint = stubs.endpoints[i]->get();
      TimePoint now = SystemClock::instance().now();
      if (now >= deadline) return exhausted();
      // Connect first, bounded: an address where nothing answers (a host that
      // is gone, a process that is frozen) costs at most connect_timeout, and
      // nothing has been sent to it.
      grpc_connectivity_state state =
          wait_for_connection(*endpoint.channel, std::min(deadline, now + options.connect_timeout));
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN)
        stubs.endpoints[i]->renew(endpoint.channel);  // the next attempt connects afresh
      if (state == GRPC_CHANNEL_IDLE || state == GRPC_CHANNEL_CONNECTING) {
        said[i] = Status::transient(fmt::format(
            "UNAVAILABLE: the server is not reachable at {} (no connection within {})",
            endpoint.address, format_duration(std::min(options.connect_timeout, deadline - now))));
        continue;
      }
      if (repeat == Repeat::kOnlyIfNotSent && state != GRPC_CHANNEL_READY) {
        // TRANSIENT_FAILURE or SHUTDOWN: the connection failed. Not even
        // trying the call here is what makes "nothing was sent" certain: the
        // channel could turn READY between this check and the call.
        said[i] = Status::transient(fmt::format(
            "UNAVAILABLE: the server is not reachable at {} (the connection failed; nothing "
            "was sent)",
            endpoint.address));
        continue;
      }
      // READY, or TRANSIENT_FAILURE: then the call fails at once with gRPC's
      // reason and sends nothing.
      grpc::ClientContext context;
      context.set_deadline(system_deadline(deadline));
      if (!credential.empty()) context.AddMetadata("authorization", "Bearer " + credential);
      if (policy.sent_to != nullptr) *policy.sent_to = endpoint.address;
      grpc::Status status = attempt(endpoint, context, deadline);
      if (status.ok()) {
        set_preferred(stubs, i);
        return Status::ok();
      }
      Status mapped = sdk_internal::status_from_grpc(status, endpoint.address, timeout);
      // The outcome of a call past its deadline is unknown: not a transient
      // failure to retry blindly (only UNAVAILABLE is repeated, below).
      if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
        mapped = Status(Code::kDeadlineExceeded, mapped.message());
      if (repeat == Repeat::kOnlyIfNotSent) {
        // The call may have reached a process that acted (an UNAVAILABLE can
        // come from a process that stopped under it, or a connection lost
        // after the request went out): never sent elsewhere.
        if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
            status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
          set_preferred(stubs, i);
        }
        return mapped;
      }
      // CANCELLED here is the server's doing (this context is never cancelled):
      // a process replacing its listener at a role change ends the calls still
      // open on it. Like UNAVAILABLE, the call is safe to send again.
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
          status.error_code() != grpc::StatusCode::CANCELLED) {
        // An answer (or DEADLINE_EXCEEDED: the outcome is unknown and the
        // deadline is spent): it ends the search.
        if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
          set_preferred(stubs, i);
        } else {
          // The next call asks every address first rather than wait on this
          // one again: it may be frozen.
          stubs.preferred_known = false;
        }
        return mapped;
      }
      if (!sdk_internal::is_connection_failure(status.error_message())) {
        reached_a_process = true;
      } else {
        stubs.endpoints[i]->renew(endpoint.channel);
      }
      said[i] = std::move(mapped);
    }
    TimePoint now = SystemClock::instance().now();
    // Nothing listens anywhere: keep trying only briefly, which covers a
    // server replacing its listener at a role change or a quick restart, and
    // still fails fast on a wrong address.
    if (!reached_a_process && now - start >= kUnreachableGrace) return exhausted();
    if (now >= deadline) return exhausted();
    std::this_thread::sleep_for(std::min(stubs.jitter(backoff), deadline - now));
    backoff = std::min(backoff * 2, kRoundBackoffMax);
  }
}

// A unary call: a fresh response per attempt, moved out on success.
template <typename Response, typename Call>
StatusOr<Response> unary(Client::Stubs& stubs, const ClientOptions& options, Duration timeout,
                         Call&& call, const CallPolicy& policy = {}) {
  Response response;
  Status s = call_any(
      stubs, options, timeout,
      [&](Endpoint& e, grpc::ClientContext& context, TimePoint deadline) {
        Response r;
        grpc::Status status = call(e, &context, deadline, &r);
        if (status.ok()) response = std::move(r);
        return status;
      },
      policy);
  if (!s.is_ok()) return s;
  return response;
}

// With several addresses and none known to answer yet, looks for the active
// process by its gRPC readiness (health name "", a read that changes nothing)
// and makes it the preferred address, so that a call that is never sent twice
// goes to it first rather than to a standby whose refusal would end the call.
// Only a hint: with no address SERVING (or no health service) the order stays
// as it was; with several SERVING, the first in the current order. Every
// address is asked at once; the whole costs at most connect_timeout, and ends
// at `until`.
void prefer_a_ready_address(Client::Stubs& stubs, const ClientOptions& options, TimePoint until) {
  if (stubs.endpoints.size() < 2 || stubs.preferred_known.load()) return;
  const size_t n = stubs.endpoints.size();
  const size_t first = stubs.preferred.load() % n;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (auto& e : stubs.endpoints) channels.push_back(e->get().channel);
  auto readiness = sdk_internal::probe_readiness(
      channels, "", std::min(until, SystemClock::instance().now() + options.connect_timeout),
      /*until_first_serving=*/false);
  for (size_t k = 0; k < n; ++k) {
    if (readiness[(first + k) % n] == sdk_internal::Readiness::kServing) {
      stubs.preferred = (first + k) % n;
      return;
    }
  }
}

}  // namespace

Status validate_node_epoch(std::string_view epoch) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(epoch.data(), epoch.data() + epoch.size(), value);
  if (epoch.empty() || error != std::errc() || end != epoch.data() + epoch.size() || value == 0 ||
      std::to_string(value) != epoch) {
    return Status::invalid_argument(
        fmt::format("invalid node epoch '{}': a node epoch is a decimal number from 1 to "
                    "18446744073709551615 without leading zeros",
                    epoch));
  }
  return Status::ok();
}

// Not repeated: see the header and src/sdk/README.md ("Step down").
StatusOr<StepDownResponse> Client::step_down(const std::string& expected_node_id,
                                             const std::string& expected_node_epoch,
                                             Duration timeout, std::string* sent_to) {
  if (sent_to != nullptr) sent_to->clear();
  if (!stubs_->invalid.is_ok()) return stubs_->invalid;
  if (Status s = validate_node_id(expected_node_id); !s.is_ok()) {
    return Status::invalid_argument("step down: the expected node ID: " + s.message());
  }
  if (Status s = validate_node_epoch(expected_node_epoch); !s.is_ok()) {
    return Status::invalid_argument("step down: the expected node epoch: " + s.message());
  }
  if (timeout <= Duration::zero()) timeout = options_.timeout;
  const TimePoint start = SystemClock::instance().now();
  prefer_a_ready_address(*stubs_, options_, start + timeout);
  StepDownRequest request;
  request.set_expected_node_id(expected_node_id);
  request.set_expected_node_epoch(expected_node_epoch);
  return unary<StepDownResponse>(
      *stubs_, options_, timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, StepDownResponse* r) {
        return e.admin->StepDown(c, request, r);
      },
      CallPolicy{options_.admin_credential, Repeat::kOnlyIfNotSent, start, sent_to});
}

StatusOr<DescribeResponse> Client::describe() {
  DescribeRequest request;
  return unary<DescribeResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, DescribeResponse* r) {
        return e.admin->Describe(c, request, r);
      },
      CallPolicy{options_.admin_credential, Repeat::kSafe, std::nullopt, nullptr});
}

// ------------------------------------------------------------ dex Flows

namespace {

flow::FlowRef flow_ref(const std::string& flow_id, const std::string& run_id) {
  flow::FlowRef ref;
  ref.set_flow_id(flow_id);
  ref.set_run_id(run_id);
  return ref;
}

// Every write the search may repeat carries a request ID (docs/api.md,
// "Repeated calls"): the caller's, or a fresh one kept across the repeats.
std::string request_id_or_fresh(const std::string& given) {
  return given.empty() ? random_hex_id() : given;
}

flow::Payload json_payload(const nlohmann::json& value) {
  flow::Payload p;
  if (!value.is_null()) p.set_data(value.dump());
  return p;
}

// A wait asks the server for at most this long per call (its limit is 60 s).
constexpr Duration kWaitSliceMax = seconds(50);
// While no process serves, a wait asks again this often.
constexpr Duration kWaitRetryInterval = milliseconds(200);

// A wait outlives a restart or a failover: while no process serves it (the
// node has no active process for a moment), it asks again until `end`.
bool keep_waiting(const Status& status, TimePoint end) {
  if (sdk_internal::grpc_code_of(status) != "UNAVAILABLE") return false;
  if (SystemClock::instance().now() + kWaitRetryInterval >= end) return false;
  std::this_thread::sleep_for(kWaitRetryInterval);
  return true;
}

// A start's request, and whether it may be repeated: the caller's options,
// with a fresh request ID and ignore_already_started unless they carry one.
flow::StartFlowRequest start_request(const std::string& flow_type, const std::string& flow_id,
                                     const nlohmann::json& input, flow::StartOptions options,
                                     Repeat* repeat) {
  flow::StartFlowRequest request;
  request.set_flow_type(flow_type);
  request.set_flow_id(flow_id);
  *request.mutable_input() = json_payload(input);
  // A repeat of this call on another process answers the run it started.
  if (options.request_id().empty()) {
    options.set_request_id(random_hex_id());
    options.set_ignore_already_started(true);
  }
  // Only ignore_already_started makes the server answer a repeat with the run
  // the first try started; without it a repeat could start a second run (the
  // first closed meanwhile) or, with TERMINATE_IF_RUNNING, end the first.
  *repeat = options.ignore_already_started() ? Repeat::kSafe : Repeat::kOnlyIfNotSent;
  *request.mutable_options() = std::move(options);
  return request;
}

}  // namespace

StatusOr<flow::StartFlowResponse> Client::start(const std::string& flow_type,
                                                const std::string& flow_id,
                                                const nlohmann::json& input,
                                                flow::StartOptions options) {
  Repeat repeat;
  const flow::StartFlowRequest request =
      start_request(flow_type, flow_id, input, std::move(options), &repeat);
  return unary<flow::StartFlowResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::StartFlowResponse* r) {
        return e.flows->StartFlow(c, request, r);
      },
      CallPolicy{"", repeat, std::nullopt, nullptr});
}

StatusOr<flow::StartFlowResponse> Client::start_and_wait(const std::string& flow_type,
                                                         const std::string& flow_id,
                                                         const nlohmann::json& input,
                                                         Duration timeout,
                                                         flow::StartOptions options) {
  if (timeout <= Duration::zero())
    return Status::invalid_argument("INVALID_ARGUMENT: start_and_wait: the timeout must be > 0");
  const TimePoint end = SystemClock::instance().now() + timeout;
  const Duration slice = std::min(timeout, kWaitSliceMax);
  Repeat repeat;
  const flow::StartFlowRequest request =
      start_request(flow_type, flow_id, input, std::move(options), &repeat);
  // A long poll: its deadline covers the wait, and the process's readiness
  // is watched meanwhile so that a frozen or demoted one is left for the next
  // address. A repeat there (same request ID, ignore_already_started) answers
  // the run the first try started and waits for it, for what is left.
  auto started = unary<flow::StartFlowResponse>(
      *stubs_, options_, slice + options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::StartFlowResponse* r) {
        flow::StartFlowRequest attempt = request;
        const Duration left =
            std::clamp<Duration>(end - SystemClock::instance().now(), milliseconds(1), slice);
        attempt.set_wait_timeout_ms(std::max<int64_t>(1, to_ms(left)));
        sdk_internal::ReadinessWatch watch(e.channel, "", c);
        grpc::Status status = e.flows->StartFlow(c, attempt, r);
        if (std::string why = watch.fired(); !why.empty() && !status.ok())
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "during the wait " + why);
        return status;
      },
      CallPolicy{"", repeat, std::nullopt, nullptr});
  if (!started.is_ok() || started->closed() || SystemClock::instance().now() >= end) return started;
  // Longer than the server waits in one call: the rest on the run itself.
  auto waited = wait_for_flow(flow_id, end - SystemClock::instance().now(), started->run_id());
  if (!waited.is_ok()) return waited.status();
  started->set_closed(waited->closed());
  *started->mutable_flow() = std::move(*waited->mutable_flow());
  return started;
}

Status Client::stop(const std::string& flow_id, flow::StopMode mode, const std::string& reason,
                    const std::string& run_id, const std::string& request_id) {
  flow::StopFlowRequest request;
  request.set_flow_id(flow_id);
  request.set_run_id(run_id);
  request.set_mode(mode);
  request.set_reason(reason);
  // A repeat elsewhere answers OK instead of "already CANCELED".
  request.set_request_id(request_id_or_fresh(request_id));
  return unary<flow::StopFlowResponse>(
             *stubs_, options_, options_.timeout,
             [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::StopFlowResponse* r) {
               return e.flows->StopFlow(c, request, r);
             })
      .status();
}

StatusOr<flow::TimeTravelResponse> Client::time_travel(const std::string& flow_id,
                                                       const std::string& run_id,
                                                       const flow::TimeTravelPoint& point,
                                                       const std::string& reason, bool dry_run,
                                                       const std::string& request_id) {
  flow::TimeTravelRequest request;
  request.mutable_flow()->set_flow_id(flow_id);
  request.mutable_flow()->set_run_id(run_id);
  *request.mutable_point() = point;
  request.set_reason(reason);
  request.set_dry_run(dry_run);
  // A repeat elsewhere answers the run the first try made.
  request.set_request_id(request_id_or_fresh(request_id));
  return unary<flow::TimeTravelResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::TimeTravelResponse* r) {
        return e.flows->TimeTravel(c, request, r);
      });
}

StatusOr<flow::TriggerContinueAsNewResponse> Client::continue_as_new(
    const std::string& flow_id, const std::string& run_id, const std::string& reason,
    const std::string& request_id) {
  flow::TriggerContinueAsNewRequest request;
  request.mutable_flow()->set_flow_id(flow_id);
  request.mutable_flow()->set_run_id(run_id);
  request.set_reason(reason);
  request.set_request_id(request_id_or_fresh(request_id));
  return unary<flow::TriggerContinueAsNewResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::TriggerContinueAsNewResponse* r) {
        return e.flows->TriggerContinueAsNew(c, request, r);
      });
}

StatusOr<flow::UpdateFlowConfigResponse> Client::update_flow_config(
    const std::string& flow_id, const std::string& run_id, const flow::FlowConfig& config,
    const std::vector<std::string>& clear_fields, const std::string& request_id) {
  flow::UpdateFlowConfigRequest request;
  request.mutable_flow()->set_flow_id(flow_id);
  request.mutable_flow()->set_run_id(run_id);
  *request.mutable_config() = config;
  for (const auto& f : clear_fields) request.add_clear_fields(f);
  request.set_request_id(request_id_or_fresh(request_id));
  return unary<flow::UpdateFlowConfigResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::UpdateFlowConfigResponse* r) {
        return e.flows->UpdateFlowConfig(c, request, r);
      });
}

Status Client::publish(const std::string& flow_id, const std::string& channel,
                       const std::vector<nlohmann::json>& messages, const std::string& instance_key,
                       const std::string& run_id, const std::string& request_id) {
  flow::PublishToChannelRequest request;
  request.set_flow_id(flow_id);
  request.set_run_id(run_id);
  request.set_channel(channel);
  request.set_instance_key(instance_key);
  // A repeat elsewhere (a retry after a failover) appends nothing twice.
  request.set_request_id(request_id_or_fresh(request_id));
  for (const auto& m : messages) *request.add_messages() = json_payload(m);
  return unary<flow::PublishToChannelResponse>(*stubs_, options_, options_.timeout,
                                               [&](Endpoint& e, grpc::ClientContext* c, TimePoint,
                                                   flow::PublishToChannelResponse* r) {
                                                 return e.flows->PublishToChannel(c, request, r);
                                               })
      .status();
}

Status Client::skip_timer(const std::string& flow_id, const std::string& step_execution_id,
                          uint32_t condition_index, const std::string& run_id,
                          const std::string& request_id) {
  flow::SkipTimerRequest request;
  *request.mutable_flow() = flow_ref(flow_id, run_id);
  request.set_step_execution_id(step_execution_id);
  request.set_condition_index(condition_index);
  request.set_request_id(request_id_or_fresh(request_id));
  return unary<flow::SkipTimerResponse>(
             *stubs_, options_, options_.timeout,
             [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::SkipTimerResponse* r) {
               return e.flows->SkipTimer(c, request, r);
             })
      .status();
}

Status Client::skip_timer(const std::string& flow_id, const std::string& step_execution_id,
                          const std::string& condition_id, const std::string& run_id,
                          const std::string& request_id) {
  flow::SkipTimerRequest request;
  *request.mutable_flow() = flow_ref(flow_id, run_id);
  request.set_step_execution_id(step_execution_id);
  request.set_condition_id(condition_id);
  request.set_request_id(request_id_or_fresh(request_id));
  return unary<flow::SkipTimerResponse>(
             *stubs_, options_, options_.timeout,
             [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::SkipTimerResponse* r) {
               return e.flows->SkipTimer(c, request, r);
             })
      .status();
}

Status Client::skip_run_timer(const std::string& flow_id, flow::RunTimer timer,
                              const std::string& run_id, const std::string& request_id) {
  flow::SkipTimerRequest request;
  *request.mutable_flow() = flow_ref(flow_id, run_id);
  request.set_run_timer(timer);
  request.set_request_id(request_id_or_fresh(request_id));
  return unary<flow::SkipTimerResponse>(
             *stubs_, options_, options_.timeout,
             [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::SkipTimerResponse* r) {
               return e.flows->SkipTimer(c, request, r);
             })
      .status();
}

StatusOr<flow::FlowDescription> Client::describe_flow(const std::string& flow_id,
                                                      const std::string& run_id) {
  const flow::FlowRef request = flow_ref(flow_id, run_id);
  return unary<flow::FlowDescription>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::FlowDescription* r) {
        return e.flows->DescribeFlow(c, request, r);
      });
}

StatusOr<flow::GetFlowStateResponse> Client::flow_state(const std::string& flow_id,
                                                        const std::string& run_id) {
  const flow::FlowRef request = flow_ref(flow_id, run_id);
  return unary<flow::GetFlowStateResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::GetFlowStateResponse* r) {
        return e.flows->GetFlowState(c, request, r);
      });
}

StatusOr<flow::GetHistoryEventsResponse> Client::history(const std::string& flow_id,
                                                         uint64_t after_seq, bool from_start,
                                                         uint32_t page_size,
                                                         const std::string& run_id) {
  flow::GetHistoryEventsRequest request;
  *request.mutable_flow() = flow_ref(flow_id, run_id);
  request.set_after_seq(after_seq);
  request.set_from_start(from_start);
  request.set_page_size(page_size);
  return unary<flow::GetHistoryEventsResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::GetHistoryEventsResponse* r) {
        return e.flows->GetHistoryEvents(c, request, r);
      });
}

// One long poll of at most kWaitSliceMax. A long poll sends nothing while it
// waits: if the process freezes or stops being the active one, only a check
// from the side notices (its readiness, health name "", which every process
// reports), and the call then moves on to the process that took over.
template <typename Response, typename Call>
StatusOr<Response> long_poll(Client::Stubs& stubs, const ClientOptions& options, Duration wait,
                             Call&& call) {
  return unary<Response>(stubs, options, wait + options.timeout,
                         [&](Endpoint& e, grpc::ClientContext* c, TimePoint, Response* r) {
                           sdk_internal::ReadinessWatch watch(e.channel, "", c);
                           grpc::Status status = call(e, c, r);
                           if (std::string why = watch.fired(); !why.empty() && !status.ok())
                             return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                 "during the wait " + why);
                           return status;
                         });
}

StatusOr<flow::GetHistoryEventsResponse> Client::wait_for_history_event(const std::string& flow_id,
                                                                        uint64_t after_seq,
                                                                        bool from_start,
                                                                        Duration timeout,
                                                                        const std::string& run_id) {
  flow::WaitForHistoryEventRequest request;
  *request.mutable_flow() = flow_ref(flow_id, run_id);
  request.set_after_seq(after_seq);
  request.set_from_start(from_start);
  const Duration slice = std::clamp<Duration>(timeout, milliseconds(1), kWaitSliceMax);
  request.set_timeout_ms(to_ms(slice));
  return long_poll<flow::GetHistoryEventsResponse>(
      *stubs_, options_, slice,
      [&](Endpoint& e, grpc::ClientContext* c, flow::GetHistoryEventsResponse* r) {
        return e.flows->WaitForHistoryEvent(c, request, r);
      });
}

StatusOr<flow::WaitForFlowResponse> Client::wait_for_flow(const std::string& flow_id,
                                                          Duration timeout,
                                                          const std::string& run_id) {
  const TimePoint end = SystemClock::instance().now() + timeout;
  // Bounded by `timeout`: each round asks for what is left of it (at most
  // kWaitSliceMax); UNAVAILABLE is asked again (keep_waiting), any other error
  // ends the wait.
  while (true) {
    const Duration left = std::max<Duration>(end - SystemClock::instance().now(), milliseconds(1));
    const Duration slice = std::min(left, kWaitSliceMax);
    flow::WaitForFlowRequest request;
    *request.mutable_flow() = flow_ref(flow_id, run_id);
    request.set_timeout_ms(std::max<int64_t>(1, to_ms(slice)));
    auto out = long_poll<flow::WaitForFlowResponse>(
        *stubs_, options_, slice,
        [&](Endpoint& e, grpc::ClientContext* c, flow::WaitForFlowResponse* r) {
          return e.flows->WaitForFlow(c, request, r);
        });
    if (out.is_ok() && (out->closed() || SystemClock::instance().now() >= end)) return out;
    if (!out.is_ok() && !keep_waiting(out.status(), end)) return out;
  }
}

StatusOr<flow::WaitForStepCompletionResponse> Client::wait_for_step(
    const std::string& flow_id, const std::string& step_execution_id, Duration timeout,
    const std::string& run_id) {
  const TimePoint end = SystemClock::instance().now() + timeout;
  // Bounded by `timeout`, as wait_for_flow.
  while (true) {
    const Duration left = std::max<Duration>(end - SystemClock::instance().now(), milliseconds(1));
    const Duration slice = std::min(left, kWaitSliceMax);
    flow::WaitForStepCompletionRequest request;
    *request.mutable_flow() = flow_ref(flow_id, run_id);
    request.set_step_execution_id(step_execution_id);
    request.set_timeout_ms(std::max<int64_t>(1, to_ms(slice)));
    auto out = long_poll<flow::WaitForStepCompletionResponse>(
        *stubs_, options_, slice,
        [&](Endpoint& e, grpc::ClientContext* c, flow::WaitForStepCompletionResponse* r) {
          return e.flows->WaitForStepCompletion(c, request, r);
        });
    if (out.is_ok() && (out->completed() || SystemClock::instance().now() >= end)) return out;
    if (!out.is_ok() && !keep_waiting(out.status(), end)) return out;
  }
}

}  // namespace dex

// ------------------------------------------------------------ Attributes and RPCs

namespace dex {

StatusOr<flow::GetAttributesResponse> Client::get_attributes(const std::string& flow_id,
                                                             const std::string& run_id,
                                                             const std::vector<std::string>& keys) {
  flow::GetAttributesRequest request;
  *request.mutable_flow() = flow_ref(flow_id, run_id);
  for (const auto& k : keys) request.add_keys(k);
  return unary<flow::GetAttributesResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::GetAttributesResponse* r) {
        return e.flows->GetAttributes(c, request, r);
      });
}

Status Client::set_attributes(const std::string& flow_id,
                              const std::vector<flow::Attribute>& writes, const std::string& run_id,
                              const std::string& request_id) {
  flow::SetAttributesRequest request;
  *request.mutable_flow() = flow_ref(flow_id, run_id);
  for (const auto& w : writes) *request.add_writes() = w;
  // Without it a repeat after a lost answer would undo a Step's later write.
  request.set_request_id(request_id_or_fresh(request_id));
  return unary<flow::SetAttributesResponse>(
             *stubs_, options_, options_.timeout,
             [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::SetAttributesResponse* r) {
               return e.flows->SetAttributes(c, request, r);
             })
      .status();
}

StatusOr<flow::WaitForAttributeResponse> Client::wait_for_attribute(
    const std::string& flow_id, const std::string& key, const flow::AttributeValue& value,
    Duration timeout, const std::string& instance_key, const std::string& run_id) {
  switch (value.value_case()) {
    case flow::AttributeValue::kStringValue:
    case flow::AttributeValue::kInt64Value:
    case flow::AttributeValue::kDoubleValue:
    case flow::AttributeValue::kBoolValue:
    case flow::AttributeValue::kDatetimeUnixMs:
      break;
    default:
      return Status::invalid_argument(
          "INVALID_ARGUMENT: wait_for_attribute '" + key +
          "': the value to wait for must be a string, int64, double, bool or datetime");
  }
  const TimePoint end = SystemClock::instance().now() + timeout;
  // Bounded by `timeout`, as wait_for_flow; a closed run ends the wait.
  while (true) {
    const Duration left = std::max<Duration>(end - SystemClock::instance().now(), milliseconds(1));
    const Duration slice = std::min(left, kWaitSliceMax);
    flow::WaitForAttributeRequest request;
    *request.mutable_flow() = flow_ref(flow_id, run_id);
    request.set_key(key);
    request.set_instance_key(instance_key);
    *request.mutable_value() = value;
    request.set_timeout_ms(std::max<int64_t>(1, to_ms(slice)));
    auto out = long_poll<flow::WaitForAttributeResponse>(
        *stubs_, options_, slice,
        [&](Endpoint& e, grpc::ClientContext* c, flow::WaitForAttributeResponse* r) {
          return e.flows->WaitForAttribute(c, request, r);
        });
    const bool closed = out.is_ok() && out->status() != flow::FLOW_RUNNING &&
                        out->status() != flow::FLOW_STATUS_UNSPECIFIED;
    if (out.is_ok() && (out->matched() || closed || SystemClock::instance().now() >= end))
      return out;
    if (!out.is_ok() && !keep_waiting(out.status(), end)) return out;
  }
}

StatusOr<nlohmann::json> Client::invoke_rpc(const std::string& flow_id, const std::string& name,
                                            const nlohmann::json& input,
                                            const InvokeRpcOptions& options) {
  flow::InvokeRpcRequest request;
  *request.mutable_flow() = flow_ref(flow_id, options.run_id);
  request.set_name(name);
  *request.mutable_input() = json_payload(input);
  request.set_timeout_ms(to_ms(options.timeout));
  for (const auto& k : options.lock_keys) request.add_lock_keys(k);
  // The same on every repeat of this call: a committed RPC is not run twice.
  request.set_request_id(request_id_or_fresh(options.request_id));
  // The server answers within the RPC's timeout (10 s by default): the call's
  // deadline is that plus the usual one.
  const Duration wait = options.timeout > Duration::zero() ? options.timeout : seconds(10);
  auto out = long_poll<flow::InvokeRpcResponse>(
      *stubs_, options_, wait,
      [&](Endpoint& e, grpc::ClientContext* c, flow::InvokeRpcResponse* r) {
        return e.flows->InvokeRpc(c, request, r);
      });
  if (!out.is_ok() && sdk_internal::grpc_code_of(out.status()) == "DEADLINE_EXCEEDED") {
    return Status(out.status().code(),
                  fmt::format("DEADLINE_EXCEEDED: RPC '{}' of Flow '{}' gave no result within {} "
                              "(its outcome is unknown; a retry with request ID '{}' answers it "
                              "if it was committed): {}",
                              name, flow_id, format_duration(wait), request.request_id(),
                              without_code(out.status())));
  }
  if (!out.is_ok()) return out.status();
  try {
    return from_payload(out->output());
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid_argument("INVALID_ARGUMENT: the output of RPC '" + name +
                                    "' is not JSON: " + e.what());
  }
}

}  // namespace dex

// ------------------------------------------------------------ Finding Flows

namespace dex {

StatusOr<flow::SearchFlowsResponse> Client::search_flows(const std::string& query,
                                                         const SearchOptions& options) {
  flow::SearchFlowsRequest request;
  request.set_query(query);
  request.set_page_size(options.page_size);
  request.set_page_token(options.page_token);
  for (const auto& f : options.fields) request.add_fields(f);
  // A read: safe to repeat on another process.
  return unary<flow::SearchFlowsResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::SearchFlowsResponse* r) {
        return e.flows->SearchFlows(c, request, r);
      });
}

StatusOr<flow::ListSearchKeysResponse> Client::list_search_keys() {
  const flow::ListSearchKeysRequest request;
  return unary<flow::ListSearchKeysResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::ListSearchKeysResponse* r) {
        return e.flows->ListSearchKeys(c, request, r);
      });
}

StatusOr<flow::ListSearchValuesResponse> Client::list_search_values(const std::string& key,
                                                                    const std::string& prefix,
                                                                    int32_t limit) {
  flow::ListSearchValuesRequest request;
  request.set_key(key);
  request.set_prefix(prefix);
  request.set_limit(limit);
  return unary<flow::ListSearchValuesResponse>(
      *stubs_, options_, options_.timeout,
      [&](Endpoint& e, grpc::ClientContext* c, TimePoint, flow::ListSearchValuesResponse* r) {
        return e.flows->ListSearchValues(c, request, r);
      });
}

Status Client::for_each_flow(const std::string& query,
                             const std::function<bool(const flow::FlowSearchRow&)>& visit,
                             SearchOptions options) {
  // Bounded by the query's runs: each page moves the cursor on (SearchPages).
  for (const auto& page : search_pages(query, std::move(options))) {
    if (!page.is_ok()) return page.status();
    for (const auto& row : page->rows()) {
      if (!visit(row)) return Status::ok();
    }
  }
  return Status::ok();
}

// ------------------------------------------------------------ SearchPages
// Here rather than in search.cc: the pages are fetched through the Client,
// and search.h, which client.h includes, must not need client.h back.
static_assert(std::ranges::input_range<SearchPages>);

SearchPages::SearchPages(Client& client, std::string query, SearchOptions options)
    : client_(&client), query_(std::move(query)), options_(std::move(options)) {}

SearchPages::iterator SearchPages::begin() {
  if (!started_) {
    started_ = true;
    current_ = next();
  }
  return iterator(this);
}

std::optional<SearchPages::Page> SearchPages::next() {
  if (done_) return std::nullopt;
  Page page = client_->search_flows(query_, options_);
  ++fetched_;
  if (!page.is_ok()) {
    done_ = true;
    return page;
  }
  const std::string& token = page->next_page_token();
  // A token that does not move on would repeat the same page for ever: a
  // server's bug, but the loop stays bounded.
  if (token.empty() || token == options_.page_token) done_ = true;
  options_.page_token = token;
  return page;
}

}  // namespace dex
