// SHA-256 for dex's own uses: content addresses of snapshot files, admin token
// digests, S3 payload hashes (OpenSSL's EVP; nothing hand-written).
#pragma once

#include <string>
#include <string_view>

namespace dex {

// The SHA-256 of `bytes` as 64 lower-case hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace dex
