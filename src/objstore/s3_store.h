// ObjectStore over S3 or an S3-compatible server (MinIO; moto in tests): the
// backend of `serve`. libcurl for HTTP(S), the hand-written SigV4 signer
// (sigv4.h), and s3_response.h to read and classify answers.
//
// Mapping (object_store.h states the semantics; S3 provides them natively):
//  - get      → GET object; the ETag comes from the response header.
//  - put      → PUT object with If-None-Match: * (kCreate), If-Match: <etag>
//               (kReplace) or no condition (kOverwrite). The payload's SHA-256 is
//               signed (x-amz-content-sha256), so the server checks the body.
//               A kReplace with an ETag that cannot match (empty, or not one
//               header-safe line) fails PreconditionFailed without a request.
//  - remove   → DELETE object (idempotent; there is no conditional delete).
//  - list     → ListObjectsV2 with prefix, start-after and max-keys (≤ 1000);
//               callers page with start_after (list_all).
// Keys live under the configured prefix: key "a/b" with prefix "node-1" is the
// S3 object "node-1/a/b"; list() returns keys without the prefix.
//
// Addressing: path-style (endpoint/bucket/key, what MinIO and moto use) or
// virtual-host (bucket.endpoint-host/key, AWS's default). The request path is
// encoded once and sent exactly as signed (curl told not to normalise it).
//
// Timeouts: RequestOptions::timeout (or S3Options::request_timeout when zero)
// bounds the whole request; on expiry the call answers Transient and the write
// may still land. Classification of every answer: s3_response.h.
//
// Credentials come from S3Options (filled from the environment or a file with
// the helpers below) and are never logged: describe() and every error message
// name only bucket, prefix and endpoint.
//
// Thread-safe: each request uses its own curl easy handle, taken from a small
// pool of idle handles (so connections are reused) and returned after.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "objstore/object_store.h"
#include "objstore/s3_response.h"
#include "objstore/sigv4.h"

namespace dex {

enum class S3Addressing { kPath, kVirtualHost };

struct S3Options {
  std::string bucket;
  std::string prefix;    // "" or a valid key; stored without leading/trailing '/'
  std::string endpoint;  // "http://127.0.0.1:9000", "https://s3.eu-west-1.amazonaws.com";
                         // empty: https://s3.<region>.amazonaws.com
  std::string region = "us-east-1";
  S3Addressing addressing = S3Addressing::kPath;
  sigv4::Credentials credentials;
  Duration request_timeout = seconds(30);  // when RequestOptions::timeout is zero
  Duration connect_timeout = seconds(5);   // capped by the request's timeout
  size_t response_bytes_max = size_t{1} << 30;
  std::string ca_file;  // PEM bundle for https; empty: the system's
};

// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and (optional) AWS_SESSION_TOKEN.
// Permanent if either of the first two is unset or empty.
StatusOr<sigv4::Credentials> s3_credentials_from_environment();

// An AWS shared-credentials file (INI: "[profile]" sections with
// aws_access_key_id, aws_secret_access_key, aws_session_token). Permanent if the
// file or the profile or a key is missing. Messages never include values.
StatusOr<sigv4::Credentials> s3_credentials_from_file(const std::filesystem::path& path,
                                                      std::string_view profile = "default");

class S3ObjectStore final : public ObjectStore {
 public:
  // Validates the options (no network). Permanent on a bad bucket, prefix,
  // endpoint or missing credentials.
  static StatusOr<std::unique_ptr<S3ObjectStore>> open(S3Options options);
  ~S3ObjectStore() override;

  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<std::string> put(std::string_view key, std::string_view body,
                            const PutCondition& condition,
                            const RequestOptions& options = {}) override;
  Status remove(std::string_view key, const RequestOptions& options = {}) override;
  StatusOr<ListResult> list(std::string_view prefix, std::string_view start_after = {},
                            size_t max_keys = kListKeysMax,
                            const RequestOptions& options = {}) override;
  // "s3://bucket/prefix at http://127.0.0.1:9000": never credentials.
  std::string describe() const override;

  // PUT Bucket (with a LocationConstraint outside us-east-1). Ok if the bucket
  // exists and is ours. For setup and tests.
  Status create_bucket(const RequestOptions& options = {});

  // The URL a request for `key` goes to (tests check addressing with it).
  std::string url_of(std::string_view key) const;
  // The S3 object key of `key`: prefix + "/" + key.
  std::string object_key(std::string_view key) const;

  struct Response;  // one HTTP answer; defined in s3_store.cc (public for curl's callbacks)

 private:
  struct Endpoint {
    std::string scheme;     // "http" or "https"
    std::string authority;  // "host" or "host:port"
  };
  struct Target {
    std::string host;      // the Host header
    std::string raw_path;  // unencoded
  };

  S3ObjectStore(S3Options options, Endpoint endpoint);

  // `object_key` empty: the bucket itself.
  Target target_of(std::string_view object_key) const;
  // Sends one signed request. Ok if a response arrived (whatever its status).
  Status perform(const s3::Call& call, std::string_view method, std::string_view object_key,
                 const sigv4::Pairs& query, const sigv4::Pairs& extra_headers,
                 std::string_view body, const RequestOptions& options, Response& response);

  void* acquire_handle();
  void release_handle(void* handle, bool reusable);

  const S3Options options_;     // constant after construction
  const Endpoint endpoint_;     // constant after construction
  const std::string describe_;  // constant after construction

  std::mutex mu_;
  std::vector<void*> idle_handles_;  // CURL*; protected by mu_
};

}  // namespace dex
