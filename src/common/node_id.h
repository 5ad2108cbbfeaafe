// Node IDs as settings, flags and requests give them. In common: the server's
// settings, the CLI and the SDK's step down all check them the same way.
#pragma once

#include <string_view>

#include "common/status.h"

namespace dex {

// Node IDs become object keys: 1–64 of [A-Za-z0-9._-], not starting with '.'.
Status validate_node_id(std::string_view node_id);

}  // namespace dex
