// Database messages made safe for logs and errors: servers quote values in
// their messages ('invalid input syntax for type integer: "x"', "Duplicate
// entry 'x' for key"), and a client library may echo its connection string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dex::attrstore {

// `message` on one line, with every '...', "..." and `...` part that is not
// one of `names` (tables, schemas, columns: not secret) replaced by "...",
// every occurrence of a non-empty `secret` replaced by ***, byte dumps
// ("0xe9") cut to "0x..", at most 300 characters.
std::string sanitize_server_message(std::string_view message, const std::vector<std::string>& names,
                                    std::string_view secret);

}  // namespace dex::attrstore
