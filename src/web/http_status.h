// The HTTP face of a gRPC status (docs/dex-web.md, "The JSON gateway"): which
// HTTP status a gRPC code answers, the code's name, and the error body
// {"code": "<gRPC code name>", "message": "<text>"} every failure carries.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/support/status.h>

namespace dex::web {

// 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404
// NOT_FOUND, 409 ALREADY_EXISTS / FAILED_PRECONDITION / ABORTED, 429
// RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED, 500 otherwise
// (OK answers 200).
int http_status_for(grpc::StatusCode code);

// "INVALID_ARGUMENT", ... as gRPC names the codes; "UNKNOWN" for a value
// outside them.
std::string_view grpc_code_name(grpc::StatusCode code);

// {"code": ..., "message": ...} as JSON text.
std::string error_body(grpc::StatusCode code, std::string_view message);
std::string error_body(std::string_view code_name, std::string_view message);

}  // namespace dex::web
