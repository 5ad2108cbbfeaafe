#include "sdk/grpc_status.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "common/grpc_code.h"
#include "common/units.h"

namespace dex::sdk_internal {

std::string_view grpc_code_name(grpc::StatusCode code) {
  return dex::grpc_code_name(static_cast<int>(code));
}

namespace {

bool contains_ci(std::string_view haystack, std::string_view needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(a) == std::tolower(b); });
  return it != haystack.end();
}

Code dex_code(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return Code::kOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return Code::kInvalidArgument;
    case grpc::StatusCode::NOT_FOUND:
      return Code::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Code::kPreconditionFailed;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
      return Code::kTransient;
    case grpc::StatusCode::CANCELLED:
      return Code::kStopped;
    default:
      return Code::kPermanent;
  }
}

}  // namespace

// gRPC's own words when no connection could be made (as opposed to a server
// that answered UNAVAILABLE, e.g. a standby).
bool is_connection_failure(std::string_view message) {
  for (std::string_view marker :
       {"failed to connect", "connection refused", "dns resolution failed", "name resolution",
        "connect failed", "socket closed", "connection reset", "no route to host",
        "network is unreachable"}) {
    if (contains_ci(message, marker)) return true;
  }
  return message.empty();
}

Status status_from_grpc(const grpc::Status& status, std::string_view address, Duration timeout) {
  if (status.ok()) return Status::ok();
  std::string_view name = grpc_code_name(status.error_code());
  const std::string& message = status.error_message();
  std::string text;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      text = is_connection_failure(message)
                 ? fmt::format("{}: the server is not reachable at {} ({})", name, address,
                               message.empty() ? "no connection" : message)
                 : fmt::format("{}: the server at {} is not serving: {}", name, address, message);
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      text = fmt::format("{}: no answer from {} within {} ({})", name, address,
                         format_duration(timeout), message);
      break;
    default:
      text = fmt::format("{}: {}", name, message.empty() ? "(no message)" : message);
  }
  return Status(dex_code(status.error_code()), std::move(text));
}

std::string_view grpc_code_of(const Status& status) {
  std::string_view message = status.message();
  size_t colon = message.find(':');
  if (colon == std::string_view::npos) return {};
  std::string_view head = message.substr(0, colon);
  if (head.empty() ||
      !std::all_of(head.begin(), head.end(), [](char c) { return std::isupper(c) || c == '_'; })) {
    return {};
  }
  return head;
}

namespace {

// The PEM files of a TlsOptions as last read, by file name: a file that
// cannot be read at a reconnect (replaced by a rotation just then) keeps its
// previous content.
std::string read_kept(const std::string& file) {
  static std::mutex mu;
  static std::map<std::string, std::string> kept;  // guarded by mu; one entry per file named
  if (file.empty()) return "";
  std::ifstream in(file, std::ios::binary);
  std::lock_guard<std::mutex> lock(mu);
  if (in.is_open()) {
    std::ostringstream text;
    text << in.rdbuf();
    kept[file] = text.str();
  }
  return kept[file];
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const TlsOptions& tls) {
  if (!tls_active(tls)) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_kept(tls.ca_file);  // empty: gRPC's default roots
  ssl.pem_cert_chain = read_kept(tls.cert_file);
  ssl.pem_private_key = read_kept(tls.key_file);
  return grpc::SslCredentials(ssl);
}

}  // namespace

Status explain_tls_failure(Status status, const std::string& address, const TlsOptions& tls) {
  if (status.is_ok()) return status;
  // Without TLS, a server that closes the connection at once may be one that
  // wants TLS.
  if (!tls_active(tls) && !contains_ci(status.message(), "socket closed")) return status;
  const std::string why = diagnose_tls(address, tls);
  if (why.empty()) return status;
  return Status(status.code(),
                fmt::format("{}; {}: {}", status.message(),
                            tls_active(tls) ? "the TLS handshake failed" : "hint", why));
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& address,
                                            Duration reconnect_backoff_initial,
                                            Duration reconnect_backoff_max, const TlsOptions& tls) {
  grpc::ChannelArguments args;
  if (tls_active(tls) && !tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  int initial_ms = static_cast<int>(std::max<int64_t>(to_ms(reconnect_backoff_initial), 10));
  int max_ms = static_cast<int>(std::max<int64_t>(to_ms(reconnect_backoff_max), initial_ms));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is left at gRPC's 20 s: despite its name
  // it is the least time a connection attempt gets for its handshake. Set to
  // the backoff (100 ms) it made every attempt to a loaded machine time out
  // ("tcp handshaker shutdown"). Callers bound their own wait for a connection
  // (ClientOptions::connect_timeout, the Worker's hello wait).
  // A connection whose peer stopped answering (a frozen process, a partition)
  // fails the calls open on it within about 13 s. Not more often than every
  // 10 s: the server counts pings closer than 5 s apart without data as abuse
  // (GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS) and hangs up with
  // too_many_pings. Only while calls are open; the SDK's own liveness checks
  // (Worker stream silence, the long polls' readiness re-checks) act sooner.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  // A value may be as long as the server's values.maxSize (64 MiB unless
  // configured, at most 512 MiB) and a task or answer may hold several. The
  // server bounds what it sends and judges what it receives (docs/api.md,
  // "Limits"), so the channel takes and sends messages of any size.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(address, channel_credentials(tls), args);
}

}  // namespace dex::sdk_internal
