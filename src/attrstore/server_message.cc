#include "attrstore/server_message.h"

#include <algorithm>

namespace dex::attrstore {
namespace {

constexpr size_t kMessageMax = 300;

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A quote that opens a quoted part; an apostrophe inside a word ("Can't") does not.
bool opens_quote(std::string_view text, size_t i) {
  const char c = text[i];
  if (c == '\'') {
    return !(i > 0 && is_alpha(text[i - 1]) && i + 1 < text.size() && is_alpha(text[i + 1]));
  }
  return c == '"' || c == '`';
}

bool known(std::string_view text, const std::vector<std::string>& names) {
  return std::find(names.begin(), names.end(), text) != names.end();
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// "invalid byte sequence for encoding "UTF8": 0xe9 0x20": bytes of a value.
std::string without_hex_bytes(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "0x") == 0 && i + 2 < text.size() && is_hex(text[i + 2])) {
      out += "0x..";
      for (i += 2; i + 1 < text.size() && is_hex(text[i + 1]); ++i) {
      }
      continue;
    }
    out += text[i];
  }
  return out;
}

}  // namespace

std::string sanitize_server_message(std::string_view message, const std::vector<std::string>& names,
                                    std::string_view secret) {
  std::string text(message);
  if (!secret.empty()) {
    for (size_t pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos)) {
      text.replace(pos, secret.size(), "***");
    }
  }
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() < kMessageMax; ++i) {
    const char c = text[i];
    if (c == '\n' || c == '\r' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
      continue;
    }
    if (!opens_quote(text, i)) {
      out += c;
      continue;
    }
    const size_t close = text.find(c, i + 1);
    if (close == std::string::npos) {  // an unbalanced quote: drop the rest
      out += c;
      out += "...";
      break;
    }
    std::string_view inner = std::string_view(text).substr(i + 1, close - i - 1);
    out += c;
    out += known(inner, names) ? std::string(inner) : "...";
    out += c;
    i = close;
  }
  out = without_hex_bytes(out);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() > kMessageMax) out.resize(kMessageMax);
  return out;
}

}  // namespace dex::attrstore
