// The names of gRPC's status codes ("UNAVAILABLE", ...), as gRPC's own spec
// numbers them (0 OK ... 16 UNAUTHENTICATED). One table for every part that
// prints a code: the SDK and dexcli, and dex-web's JSON gateway. It takes the
// number, so that this component does not depend on gRPC.
#pragma once

#include <string_view>

namespace dex {

// "UNKNOWN" for a number outside 0..16.
std::string_view grpc_code_name(int code);

}  // namespace dex
