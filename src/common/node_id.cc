#include "common/node_id.h"

#include <fmt/format.h>

namespace dex {

Status validate_node_id(std::string_view node_id) {
  if (node_id.empty() || node_id.size() > 64) {
    return Status::invalid_argument(
        fmt::format("invalid nodeId '{}': it must have 1 to 64 characters", node_id));
  }
  if (node_id.front() == '.') {
    return Status::invalid_argument(
        fmt::format("invalid nodeId '{}': it must not start with '.'", node_id));
  }
  for (char c : node_id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return Status::invalid_argument(fmt::format(
          "invalid nodeId '{}': only letters, digits, '.', '_' and '-' are allowed", node_id));
    }
  }
  return Status::ok();
}

}  // namespace dex
