#include "web/http_status.h"

#include <nlohmann/json.hpp>

#include "common/grpc_code.h"

namespace dex::web {

int http_status_for(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED:
      return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

std::string_view grpc_code_name(grpc::StatusCode code) {
  return dex::grpc_code_name(static_cast<int>(code));
}

std::string error_body(std::string_view code_name, std::string_view message) {
  nlohmann::json body = {{"code", code_name}, {"message", message}};
  // Invalid UTF-8 in a server's text is replaced rather than thrown on.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string error_body(grpc::StatusCode code, std::string_view message) {
  return error_body(grpc_code_name(code), message);
}

}  // namespace dex::web
