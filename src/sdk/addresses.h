// Server address lists: a dex node runs as one active process plus standbys,
// each listening on its own address, and clients are given all of them
// ("host1:8801,host2:8801"). These functions check such lists before anything
// is sent, naming the bad entry.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dex {

// One address: "host:port", host a DNS name, an IPv4 address or an IPv6
// address in brackets ("[::1]:8801"), port 1..65535. InvalidArgument naming
// the address and what is wrong otherwise.
Status validate_server_address(std::string_view address);

// At least one address, each valid, none listed twice.
Status validate_server_addresses(const std::vector<std::string>& addresses);

// Splits a comma-separated list ("host1:8801,host2:8801"; spaces around an
// entry are ignored) and validates it as above; an empty entry is refused
// with its position.
StatusOr<std::vector<std::string>> parse_server_addresses(std::string_view list);

// `addresses` if not empty, otherwise {single}: the options of Client and
// Worker take a list and keep a single-address field for convenience.
std::vector<std::string> effective_server_addresses(const std::vector<std::string>& addresses,
                                                    const std::string& single);

// "a, b and c" style: the addresses joined with ", ".
std::string join_addresses(const std::vector<std::string>& addresses);

}  // namespace dex
