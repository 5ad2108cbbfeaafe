#include "objstore/sigv4.h"

#include "common/digest.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <time.h>

#include <algorithm>
#include <cassert>
#include <map>

#include <fmt/format.h>

namespace dex::sigv4 {
namespace {

bool is_unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// A header value as SigV4 canonicalises it: leading and trailing whitespace
// removed, each run of inner spaces/tabs folded to one space.
std::string trim_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  bool pending_space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string uri_encode(std::string_view bytes, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(bytes.size() * 3);
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_unreserved(c) || (keep_slash && c == '/')) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

std::string encode_path(std::string_view raw_path) {
  if (raw_path.empty()) return "/";
  return uri_encode(raw_path, /*keep_slash=*/true);
}

std::string canonical_query(const Pairs& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) {
    encoded.emplace_back(uri_encode(name, false), uri_encode(value, false));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += name;
    out.push_back('=');
    out += value;
  }
  return out;
}

std::string hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) { return dex::sha256_hex(bytes); }

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const unsigned char* result =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest, &length);
  assert(result != nullptr && length == 32);
  (void)result;
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::string signing_key(std::string_view secret, std::string_view date, std::string_view region,
                        std::string_view service) {
  const std::string k_date = hmac_sha256(fmt::format("AWS4{}", secret), date);
  const std::string k_region = hmac_sha256(k_date, region);
  const std::string k_service = hmac_sha256(k_region, service);
  return hmac_sha256(k_service, "aws4_request");
}

std::string amz_date(std::chrono::system_clock::time_point when) {
  const time_t t = std::chrono::system_clock::to_time_t(when);
  struct tm utc {};
  gmtime_r(&t, &utc);
  char buf[32];
  const size_t n = strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &utc);
  assert(n == 16);
  return std::string(buf, n);
}

Signed sign(const Request& request, const Credentials& credentials, const Scope& scope,
            std::string_view amz_date_value) {
  assert(amz_date_value.size() == 16 && amz_date_value[8] == 'T' && amz_date_value[15] == 'Z');
  // Lower-cased names, sorted; repeated names join their values with ','.
  std::map<std::string, std::string> headers;
  for (const auto& [name, value] : request.headers) {
    auto [it, inserted] = headers.try_emplace(lower(name), trim_value(value));
    if (!inserted) it->second += "," + trim_value(value);
  }
  assert(headers.count("host") == 1 && "SigV4 always signs the Host header");
  Signed out;
  std::string canonical_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += fmt::format("{}:{}\n", name, value);
    if (!out.signed_headers.empty()) out.signed_headers.push_back(';');
    out.signed_headers += name;
  }
  out.canonical_request =
      fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method, encode_path(request.raw_path),
                  canonical_query(request.query), canonical_headers, out.signed_headers,
                  request.payload_sha256);
  const std::string_view date = amz_date_value.substr(0, 8);
  const std::string credential_scope =
      fmt::format("{}/{}/{}/aws4_request", date, scope.region, scope.service);
  out.string_to_sign = fmt::format("{}\n{}\n{}\n{}", kAlgorithm, amz_date_value, credential_scope,
                                   sha256_hex(out.canonical_request));
  const std::string key =
      signing_key(credentials.secret_access_key, date, scope.region, scope.service);
  out.signature = hex(hmac_sha256(key, out.string_to_sign));
  out.authorization =
      fmt::format("{} Credential={}/{}, SignedHeaders={}, Signature={}", kAlgorithm,
                  credentials.access_key_id, credential_scope, out.signed_headers, out.signature);
  return out;
}

}  // namespace dex::sigv4
