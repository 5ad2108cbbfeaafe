// Internal to the SDK and dexcli: gRPC statuses as dex Statuses whose message
// starts with the gRPC code name, and the channel settings every dex client uses.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "sdk/tls_options.h"

namespace dex::sdk_internal {

// "UNAVAILABLE", "NOT_FOUND", ...
std::string_view grpc_code_name(grpc::StatusCode code);

// Maps a failed call to a Status: INVALID_ARGUMENT/OUT_OF_RANGE → InvalidArgument,
// NOT_FOUND → NotFound, ALREADY_EXISTS/FAILED_PRECONDITION → PreconditionFailed,
// UNAVAILABLE/DEADLINE_EXCEEDED/RESOURCE_EXHAUSTED/ABORTED → Transient,
// CANCELLED → Stopped, anything else → Permanent. The message is
// "<CODE>: <what happened>", naming `address` when the server is not reachable
// and `timeout` when the deadline passed.
Status status_from_grpc(const grpc::Status& status, std::string_view address, Duration timeout);

// True when an UNAVAILABLE `message` is gRPC's own words for a connection that
// could not be made or was lost (as opposed to a process that answered
// UNAVAILABLE, e.g. a standby).
bool is_connection_failure(std::string_view message);

// The gRPC code name at the start of a message made by status_from_grpc, or "".
std::string_view grpc_code_of(const Status& status);

// A fresh channel to `address` with its own connection state (no subchannel
// shared with other channels) and reconnect backoff bounded by the arguments,
// so that a restarted server is found as soon as the caller retries.
// With `tls` active (sdk/tls_options.h), the channel uses TLS with its files
// as read at this call (a client certificate rotated on disk is used by the
// next channel; a file that cannot be read now keeps what was read last) and
// checks the server's certificate against tls.server_name when set.
std::shared_ptr<grpc::Channel> make_channel(const std::string& address,
                                            Duration reconnect_backoff_initial,
                                            Duration reconnect_backoff_max,
                                            const TlsOptions& tls = {});

// `status` (a failure to reach `address`) with, when `tls` is active, why
// the TLS connection fails (diagnose_tls) appended: gRPC reports a failed
// handshake as a bare UNAVAILABLE. Without TLS, a connection the server
// closed ("Socket closed") gets a hint when the server speaks TLS.
// Unchanged otherwise.
Status explain_tls_failure(Status status, const std::string& address, const TlsOptions& tls);

}  // namespace dex::sdk_internal
