// Accepted tokens, kept as SHA-256 digests by role, and the match of a
// presented token against all of them in constant time. Pure: the files are
// read by token_store.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/access_rules.h"

namespace dex::auth {

// A token file's tokens: one per line, surrounding whitespace trimmed, empty
// lines skipped (a file of one token is the common case; two lines let a
// rotation accept the old and the new token for a while).
std::vector<std::string> parse_token_file(std::string_view text);

// A configured digest (auth.tokens.<role>.sha256): 64 hex digits, either
// case; the lower-case form, or nullopt when it is not one.
std::optional<std::string> normalize_sha256(std::string_view text);

// Equal bytes, in time that depends on the sizes only (CRYPTO_memcmp).
bool constant_time_equal(std::string_view a, std::string_view b);

struct TokenMatch {
  RoleSet roles;        // every role whose list holds the token; empty: no match
  size_t compared = 0;  // how many digests were compared: always all of them
};

class TokenSet {
 public:
  // `digest_hex`: a normalize_sha256 result.
  void add(Role role, std::string digest_hex);
  // The token's SHA-256 compared with every accepted digest, with no early
  // exit, so that the time taken says nothing about which digest (or how much
  // of one) matched. The token is never kept or logged.
  TokenMatch match(std::string_view token) const;
  bool empty() const { return entries_.empty(); }
  size_t count(Role role) const;

 private:
  struct Entry {
    Role role;
    std::string digest_hex;
  };
  std::vector<Entry> entries_;
};

}  // namespace dex::auth
