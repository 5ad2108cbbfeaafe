// Keyset page tokens: the sort key of a page's last row, tied to its query,
// so that the next page starts right after that row however runs change.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace dex::search {

std::string encode_page_token(std::string_view sort_key, std::string_view query);
// The sort key; INVALID_ARGUMENT for a token that is malformed or was given
// by another query.
StatusOr<std::string> decode_page_token(std::string_view token, std::string_view query);

}  // namespace dex::search
