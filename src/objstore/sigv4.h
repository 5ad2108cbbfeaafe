// AWS Signature Version 4 for S3 requests, hand-written: Debian packages no S3
// client library that sends the conditional headers (If-None-Match: *,
// If-Match) dex relies on, and the signer is small enough to own and to check
// against AWS's published vectors (tests/objstore/s3_sigv4_test.cc).
//
// S3 flavour of SigV4: the canonical URI is the request path URI-encoded ONCE
// ('/' kept) and never normalised (no "." / ".." / "//" folding), unlike other
// AWS services, which encode twice. The caller hands in the raw path and sends
// exactly the encoded path this module returns, so what is signed is what goes
// on the wire. Query names and values are encoded (RFC 3986 unreserved kept,
// '/' encoded) and sorted. Every request carries x-amz-content-sha256 (the hex
// SHA-256 of the payload) and x-amz-date.
//
// Pure functions; thread-safe. Secrets are inputs only: nothing here logs.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dex::sigv4 {

inline constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
// SHA-256 of the empty string: the payload hash of a request without a body.
inline constexpr std::string_view kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless temporary credentials
};

struct Scope {
  std::string region;   // "us-east-1"
  std::string service;  // "s3"
};

using Pairs = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;          // "GET", "PUT", ...
  std::string raw_path;        // unencoded, starts with '/': "/bucket/a b/c"
  Pairs query;                 // unencoded names and values, any order
  Pairs headers;               // every header to sign, any case and order; must include host
  std::string payload_sha256;  // hex; also the value of x-amz-content-sha256
};

struct Signed {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;       // hex
  std::string signed_headers;  // "host;x-amz-date"
  std::string authorization;   // the Authorization header's value
};

// RFC 3986 percent-encoding as SigV4 wants it: A-Z a-z 0-9 - . _ ~ are kept,
// every other byte is %XX (upper-case hex); '/' is kept only if `keep_slash`.
std::string uri_encode(std::string_view bytes, bool keep_slash);
// The canonical (and wire) form of a raw path: encoded once, '/' kept, not normalised.
std::string encode_path(std::string_view raw_path);
// "a=1&b=" from unencoded pairs: each side encoded, sorted by name then value.
std::string canonical_query(const Pairs& query);

std::string sha256_hex(std::string_view bytes);
std::string hmac_sha256(std::string_view key, std::string_view data);  // raw 32 bytes
std::string hex(std::string_view bytes);
// kSigning = HMAC chain over "AWS4"+secret, date (YYYYMMDD), region, service, "aws4_request".
std::string signing_key(std::string_view secret, std::string_view date, std::string_view region,
                        std::string_view service);

// "20150830T123600Z" for `when` (UTC).
std::string amz_date(std::chrono::system_clock::time_point when);

// Signs `request` at `amz_date_value` ("YYYYMMDDTHHMMSSZ"). The request's headers
// must already contain the x-amz-date (and, for S3, x-amz-content-sha256 and any
// x-amz-security-token) headers that will be sent.
Signed sign(const Request& request, const Credentials& credentials, const Scope& scope,
            std::string_view amz_date_value);

}  // namespace dex::sigv4
