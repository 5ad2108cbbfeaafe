#include "cli/flow_errors.h"

#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/proto_json.h"
#include "sdk/grpc_status.h"

namespace dex::cli {

using json = nlohmann::ordered_json;

int usage_error(const std::string& operation, const std::string& message) {
  json e = {{"kind", "usage"}, {"operation", operation}, {"message", message}};
  std::cerr << json_text(json{{"error", e}}) << "\n";
  return kExitUsage;
}

int request_error(const std::string& operation, const Status& status) {
  std::string message = status.message();
  const std::string code(sdk_internal::grpc_code_of(status));
  if (!code.empty() && message.rfind(code + ": ", 0) == 0) message.erase(0, code.size() + 2);
  json e = {{"kind", "request"}, {"operation", operation}, {"message", message}};
  if (!code.empty()) e["grpcCode"] = code;
  std::cerr << json_text(json{{"error", e}}) << "\n";
  return kExitFailed;
}

int timeout_error(const std::string& operation, const std::string& message) {
  json e = {{"kind", "timeout"}, {"operation", operation}, {"message", message}};
  std::cerr << json_text(json{{"error", e}}) << "\n";
  return kExitWaitTimedOut;
}

}  // namespace dex::cli
