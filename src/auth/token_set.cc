#include "auth/token_set.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>

#include "common/digest.h"

namespace dex::auth {

std::vector<std::string> parse_token_file(std::string_view text) {
  std::vector<std::string> tokens;
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  size_t start = 0;
  while (start <= text.size()) {  // bounded: each round moves past one line
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    const size_t first = line.find_first_not_of(kSpace);
    if (first != std::string_view::npos) {
      const size_t last = line.find_last_not_of(kSpace);
      tokens.emplace_back(line.substr(first, last - first + 1));
    }
    start = end + 1;
  }
  return tokens;
}

std::optional<std::string> normalize_sha256(std::string_view text) {
  if (text.size() != 64) return std::nullopt;
  std::string out(text);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // The sizes are not secret (every digest is 64 hex digits).
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void TokenSet::add(Role role, std::string digest_hex) {
  entries_.push_back({role, std::move(digest_hex)});
}

TokenMatch TokenSet::match(std::string_view token) const {
  TokenMatch out;
  const std::string digest = sha256_hex(token);
  for (const Entry& entry : entries_) {
    // Every entry is compared; a match only adds its role to the set.
    const bool equal = constant_time_equal(entry.digest_hex, digest);
    RoleSet role;
    role.add(entry.role);
    if (equal) out.roles.add(role);
    ++out.compared;
  }
  return out;
}

size_t TokenSet::count(Role role) const {
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(),
                                           [&](const Entry& e) { return e.role == role; }));
}

}  // namespace dex::auth
