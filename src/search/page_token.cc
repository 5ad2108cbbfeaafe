#include "search/page_token.h"

#include <cstdint>

namespace dex::search {

namespace {

constexpr char kVersion = '1';
constexpr char kHex[] = "0123456789abcdef";

// FNV-1a: ties a token to its query text; not a secret (a token only says
// where a page ends).
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ULL;
  for (char c : s) {  // bounded by the query's length
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string encode_page_token(std::string_view sort_key, std::string_view query) {
  std::string raw;
  const uint64_t h = fnv1a(query);
  for (int i = 7; i >= 0; --i) raw.push_back(static_cast<char>((h >> (8 * i)) & 0xff));
  raw.append(sort_key);
  std::string out(1, kVersion);
  for (char c : raw) {  // bounded by the sort key's length
    out.push_back(kHex[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kHex[static_cast<uint8_t>(c) & 0xf]);
  }
  return out;
}

StatusOr<std::string> decode_page_token(std::string_view token, std::string_view query) {
  const auto bad = [](const std::string& why) {
    return Status::invalid_argument("page_token: " + why);
  };
  if (token.size() < 1 + 2 * 9 || token[0] != kVersion || token.size() % 2 != 1)
    return bad("not a page token of this server");
  std::string raw;
  for (size_t i = 1; i + 1 < token.size(); i += 2) {  // bounded by the token's length
    const int hi = nibble(token[i]), lo = nibble(token[i + 1]);
    if (hi < 0 || lo < 0) return bad("not a page token of this server");
    raw.push_back(static_cast<char>(hi << 4 | lo));
  }
  uint64_t h = 0;
  for (size_t i = 0; i < 8; ++i) h = h << 8 | static_cast<uint8_t>(raw[i]);
  if (h != fnv1a(query)) return bad("it was given for another query");
  return raw.substr(8);
}

}  // namespace dex::search
