#include "objstore/s3_store.h"

#include <curl/curl.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <fmt/format.h>

namespace dex {
namespace {

constexpr size_t kIdleHandlesMax = 16;
constexpr std::string_view kService = "s3";

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    assert(rc == CURLE_OK);
    (void)rc;
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// A header value safe to send: one line of printable ASCII.
bool header_safe(std::string_view v) {
  return std::all_of(v.begin(), v.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

// S3's bucket naming rules (general purpose buckets): what AWS and MinIO refuse
// is refused here, before any request, naming the rule. Empty: valid.
std::string bucket_name_problem(std::string_view b) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (b.size() < 3 || b.size() > 63) return "it must have 3 to 63 characters";
  if (!std::all_of(b.begin(), b.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; })) {
    return "only lowercase letters, digits, '-' and '.' are allowed";
  }
  if (!alnum(b.front()) || !alnum(b.back())) return "it must begin and end with a letter or digit";
  if (b.find("..") != std::string_view::npos) return "it must not contain two adjacent periods";
  if (std::all_of(b.begin(), b.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; }) &&
      std::count(b.begin(), b.end(), '.') == 3) {
    return "it must not look like an IP address";
  }
  if (b.starts_with("xn--") || b.starts_with("sthree-")) {
    return "it must not start with 'xn--' or 'sthree-' (reserved by S3)";
  }
  if (b.ends_with("-s3alias") || b.ends_with("--ol-s3")) {
    return "it must not end with '-s3alias' or '--ol-s3' (reserved by S3)";
  }
  return {};
}

// A list prefix or start-after: printable ASCII without spaces, like keys, but
// possibly empty or ending in '/'.
bool valid_key_fragment(std::string_view s) {
  return s.size() <= 1024 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x21 && c <= 0x7e; });
}

struct Upload {
  std::string_view body;
  size_t offset = 0;
};

size_t read_body(char* buffer, size_t size, size_t count, void* user) {
  auto* upload = static_cast<Upload*>(user);
  const size_t n = std::min(size * count, upload->body.size() - upload->offset);
  std::copy_n(upload->body.data() + upload->offset, n, buffer);
  upload->offset += n;
  return n;
}

int seek_body(void* user, curl_off_t offset, int origin) {
  auto* upload = static_cast<Upload*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > upload->body.size()) {
    return CURL_SEEKFUNC_FAIL;
  }
  upload->offset = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

}  // namespace

struct S3ObjectStore::Response {
  long status = 0;
  std::string body;
  std::string etag;
  size_t bytes_max = 0;
  bool too_large = false;
};

namespace {

size_t write_body(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<S3ObjectStore::Response*>(user);
  const size_t n = size * count;
  if (response->body.size() + n > response->bytes_max) {
    response->too_large = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  response->body.append(data, n);
  return n;
}

size_t write_header(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<S3ObjectStore::Response*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    response->etag.clear();  // a new response (after 100 Continue, say)
  } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    if (iequals(trim(line.substr(0, colon)), "ETag")) {
      response->etag = std::string(trim(line.substr(colon + 1)));
    }
  }
  return size * count;
}

}  // namespace

// ---- credentials ----

StatusOr<sigv4::Credentials> s3_credentials_from_environment() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  sigv4::Credentials c{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"),
                       env("AWS_SESSION_TOKEN")};
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return Status::permanent(
        "S3 credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set");
  }
  return c;
}

StatusOr<sigv4::Credentials> s3_credentials_from_file(const std::filesystem::path& path,
                                                      std::string_view profile) {
  std::ifstream in(path);
  if (!in) return Status::permanent(fmt::format("S3 credentials: cannot read {}", path.string()));
  constexpr size_t kLinesMax = 100'000;
  sigv4::Credentials c;
  bool in_profile = false, seen_profile = false;
  std::string line;
  for (size_t n = 0; n < kLinesMax && std::getline(in, line); ++n) {
    const std::string_view l = trim(line);
    if (l.empty() || l.front() == '#' || l.front() == ';') continue;
    if (l.front() == '[' && l.back() == ']') {
      in_profile = trim(l.substr(1, l.size() - 2)) == profile;
      seen_profile = seen_profile || in_profile;
      continue;
    }
    const size_t eq = l.find('=');
    if (!in_profile || eq == std::string_view::npos) continue;
    const std::string_view name = trim(l.substr(0, eq));
    const std::string value(trim(l.substr(eq + 1)));
    if (name == "aws_access_key_id") c.access_key_id = value;
    if (name == "aws_secret_access_key") c.secret_access_key = value;
    if (name == "aws_session_token") c.session_token = value;
  }
  if (!seen_profile) {
    return Status::permanent(
        fmt::format("S3 credentials: no [{}] profile in {}", profile, path.string()));
  }
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return Status::permanent(
        fmt::format("S3 credentials: profile [{}] in {} lacks aws_access_key_id or "
                    "aws_secret_access_key",
                    profile, path.string()));
  }
  return c;
}

// ---- the store ----

StatusOr<std::unique_ptr<S3ObjectStore>> S3ObjectStore::open(S3Options options) {
  if (std::string why = bucket_name_problem(options.bucket); !why.empty()) {
    return Status::permanent(
        fmt::format("S3 bucket '{}' is not a valid bucket name: {}", options.bucket, why));
  }
  if (options.region.empty() || !valid_key_fragment(options.region)) {
    return Status::permanent(fmt::format("S3 region '{}' is not valid", options.region));
  }
  std::string_view prefix = options.prefix;
  while (!prefix.empty() && prefix.front() == '/') prefix.remove_prefix(1);
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  if (!prefix.empty()) {
    if (auto s = validate_key(prefix); !s.is_ok()) {
      return Status::permanent(fmt::format("S3 prefix: {}", s.message()));
    }
  }
  options.prefix = std::string(prefix);
  if (options.endpoint.empty()) {
    options.endpoint = fmt::format("https://s3.{}.amazonaws.com", options.region);
  }
  Endpoint endpoint;
  std::string_view rest = options.endpoint;
  if (rest.starts_with("http://")) {
    endpoint.scheme = "http";
    rest.remove_prefix(7);
  } else if (rest.starts_with("https://")) {
    endpoint.scheme = "https";
    rest.remove_prefix(8);
  } else {
    return Status::permanent(
        fmt::format("S3 endpoint '{}': must start with http:// or https://", options.endpoint));
  }
  if (rest.ends_with("/")) rest.remove_suffix(1);
  if (rest.empty() || !valid_key_fragment(rest) || rest.find('/') != std::string_view::npos ||
      rest.find('@') != std::string_view::npos || rest.find('?') != std::string_view::npos) {
    return Status::permanent(fmt::format(
        "S3 endpoint '{}': expected scheme://host[:port] without a path", options.endpoint));
  }
  endpoint.authority = std::string(rest);
  if (options.credentials.access_key_id.empty() || options.credentials.secret_access_key.empty()) {
    return Status::permanent("S3 credentials: access key id and secret access key are required");
  }
  if (!header_safe(options.credentials.access_key_id) ||
      !header_safe(options.credentials.session_token)) {
    return Status::permanent("S3 credentials: access key id or session token is not header-safe");
  }
  if (options.request_timeout <= Duration::zero() || options.connect_timeout <= Duration::zero()) {
    return Status::permanent("S3 timeouts must be positive");
  }
  global_init();
  return std::unique_ptr<S3ObjectStore>(new S3ObjectStore(std::move(options), std::move(endpoint)));
}

S3ObjectStore::S3ObjectStore(S3Options options, Endpoint endpoint)
    : options_(std::move(options)),
      endpoint_(std::move(endpoint)),
      describe_(fmt::format("s3://{}/{} at {}://{}", options_.bucket, options_.prefix,
                            endpoint_.scheme, endpoint_.authority)) {}

S3ObjectStore::~S3ObjectStore() {
  for (void* h : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

std::string S3ObjectStore::describe() const { return describe_; }

std::string S3ObjectStore::object_key(std::string_view key) const {
  return options_.prefix.empty() ? std::string(key) : fmt::format("{}/{}", options_.prefix, key);
}

S3ObjectStore::Target S3ObjectStore::target_of(std::string_view object_key) const {
  if (options_.addressing == S3Addressing::kVirtualHost) {
    return Target{fmt::format("{}.{}", options_.bucket, endpoint_.authority),
                  fmt::format("/{}", object_key)};
  }
  return Target{endpoint_.authority, object_key.empty()
                                         ? fmt::format("/{}", options_.bucket)
                                         : fmt::format("/{}/{}", options_.bucket, object_key)};
}

std::string S3ObjectStore::url_of(std::string_view key) const {
  const Target t = target_of(key.empty() ? std::string() : object_key(key));
  return fmt::format("{}://{}{}", endpoint_.scheme, t.host, sigv4::encode_path(t.raw_path));
}

void* S3ObjectStore::acquire_handle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_handles_.empty()) {
      void* h = idle_handles_.back();
      idle_handles_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void S3ObjectStore::release_handle(void* handle, bool reusable) {
  auto* h = static_cast<CURL*>(handle);
  if (reusable) {
    curl_easy_reset(h);  // keeps the live connection for the next request
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_handles_.size() < kIdleHandlesMax) {
      idle_handles_.push_back(h);
      return;
    }
  }
  curl_easy_cleanup(h);
}

Status S3ObjectStore::perform(const s3::Call& call, std::string_view method,
                              std::string_view object_key, const sigv4::Pairs& query,
                              const sigv4::Pairs& extra_headers, std::string_view body,
                              const RequestOptions& options, Response& response) {
  const Duration timeout =
      options.timeout > Duration::zero() ? options.timeout : options_.request_timeout;
  const long timeout_ms = std::max<long>(1, static_cast<long>(to_ms(timeout)));
  const long connect_ms =
      std::min(timeout_ms, std::max<long>(1, static_cast<long>(to_ms(options_.connect_timeout))));

  const Target target = target_of(object_key);
  const std::string payload_sha256 = sigv4::sha256_hex(body);
  const std::string date = sigv4::amz_date(std::chrono::system_clock::now());
  sigv4::Request request{
      std::string(method),
      target.raw_path,
      query,
      {{"host", target.host}, {"x-amz-content-sha256", payload_sha256}, {"x-amz-date", date}},
      payload_sha256};
  if (!options_.credentials.session_token.empty()) {
    request.headers.push_back({"x-amz-security-token", options_.credentials.session_token});
  }
  for (const auto& h : extra_headers) request.headers.push_back(h);
  const sigv4::Signed signed_request = sigv4::sign(
      request, options_.credentials, sigv4::Scope{options_.region, std::string(kService)}, date);

  std::string url =
      fmt::format("{}://{}{}", endpoint_.scheme, target.host, sigv4::encode_path(target.raw_path));
  if (!query.empty()) url += "?" + sigv4::canonical_query(query);

  curl_slist* headers = nullptr;
  auto add_header = [&](std::string_view name, std::string_view value) {
    curl_slist* grown = curl_slist_append(headers, fmt::format("{}: {}", name, value).c_str());
    if (grown != nullptr) headers = grown;
  };
  for (const auto& [name, value] : request.headers) add_header(name, value);
  add_header("Authorization", signed_request.authorization);
  headers = curl_slist_append(headers, "Expect:");        // no 100-continue round trip
  headers = curl_slist_append(headers, "Content-Type:");  // none for uploads
  headers = curl_slist_append(headers, "Accept:");

  CURL* h = static_cast<CURL*>(acquire_handle());
  if (h == nullptr) {
    curl_slist_free_all(headers);
    return Status::transient(fmt::format("s3 {} '{}' ({}): curl_easy_init failed",
                                         s3::operation_name(call.op), call.key, call.store));
  }
  char error_buffer[CURL_ERROR_SIZE] = {0};
  Upload upload{body, 0};
  response.bytes_max = options_.response_bytes_max;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);  // the path is sent exactly as signed
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, write_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &response);
  if (!options_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(h, CURLOPT_READDATA, &upload);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_body);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &upload);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size()));
  } else if (method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else {
    assert(body.empty() && "only PUT carries a body");
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, std::string(method).c_str());
  }
  const CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  release_handle(h, rc == CURLE_OK);
  curl_slist_free_all(headers);
  if (response.too_large) {
    return Status::permanent(fmt::format("s3 {} '{}' ({}): response larger than {} bytes",
                                         s3::operation_name(call.op), call.key, call.store,
                                         options_.response_bytes_max));
  }
  if (rc != CURLE_OK) return s3::classify_transport(call, rc, error_buffer, timeout_ms);
  return Status::ok();
}

StatusOr<ObjectData> S3ObjectStore::get(std::string_view key, const RequestOptions& options) {
  if (auto s = validate_key(key); !s.is_ok()) return s;
  const s3::Call call{s3::Operation::kGet, PutMode::kOverwrite, key, describe_};
  Response response;
  if (auto s = perform(call, "GET", object_key(key), {}, {}, {}, options, response); !s.is_ok()) {
    return s;
  }
  if (auto s = s3::classify_response(call, response.status, response.body); !s.is_ok()) return s;
  if (response.status != 200 || response.etag.empty()) {
    return Status::permanent(fmt::format("s3 get '{}' ({}): HTTP {} {}", key, describe_,
                                         response.status,
                                         response.etag.empty() ? "without an ETag" : ""));
  }
  return ObjectData{std::move(response.body), std::move(response.etag)};
}

StatusOr<std::string> S3ObjectStore::put(std::string_view key, std::string_view body,
                                         const PutCondition& condition,
                                         const RequestOptions& options) {
  if (auto s = validate_key(key); !s.is_ok()) return s;
  const s3::Call call{s3::Operation::kPut, condition.mode, key, describe_};
  sigv4::Pairs headers;
  switch (condition.mode) {
    case PutMode::kCreate:
      headers.push_back({"If-None-Match", "*"});
      break;
    case PutMode::kReplace:
      // An empty or multi-line ETag matches no object; sending it would drop
      // the header (curl) or split it, turning the put unconditional.
      if (condition.etag.empty() || !header_safe(condition.etag)) {
        return Status::precondition_failed(
            fmt::format("s3 put '{}' ({}): ETag '{}' cannot match any object", key, describe_,
                        header_safe(condition.etag) ? condition.etag : "<not printable>"));
      }
      headers.push_back({"If-Match", condition.etag});
      break;
    case PutMode::kOverwrite:
      break;
  }
  Response response;
  if (auto s = perform(call, "PUT", object_key(key), {}, headers, body, options, response);
      !s.is_ok()) {
    return s;
  }
  if (auto s = s3::classify_response(call, response.status, response.body); !s.is_ok()) return s;
  if (response.etag.empty()) {
    return Status::permanent(
        fmt::format("s3 put '{}' ({}): HTTP {} without an ETag", key, describe_, response.status));
  }
  return std::move(response.etag);
}

Status S3ObjectStore::remove(std::string_view key, const RequestOptions& options) {
  if (auto s = validate_key(key); !s.is_ok()) return s;
  const s3::Call call{s3::Operation::kDelete, PutMode::kOverwrite, key, describe_};
  Response response;
  if (auto s = perform(call, "DELETE", object_key(key), {}, {}, {}, options, response);
      !s.is_ok()) {
    return s;
  }
  return s3::classify_response(call, response.status, response.body);
}

StatusOr<ListResult> S3ObjectStore::list(std::string_view prefix, std::string_view start_after,
                                         size_t max_keys, const RequestOptions& options) {
  const s3::Call call{s3::Operation::kList, PutMode::kOverwrite, prefix, describe_};
  if (!valid_key_fragment(prefix) || !valid_key_fragment(start_after)) {
    return Status::permanent(
        fmt::format("s3 list '{}' after '{}' ({}): prefix and start_after must be printable ASCII",
                    prefix, start_after, describe_));
  }
  // S3 answers at most 1000 keys; max_keys 0 asks for one to learn whether any follow.
  const size_t ask = std::clamp<size_t>(max_keys, 1, kListKeysMax);
  const std::string base = options_.prefix.empty() ? std::string() : options_.prefix + "/";
  sigv4::Pairs query = {{"list-type", "2"},
                        {"max-keys", std::to_string(ask)},
                        {"prefix", base + std::string(prefix)}};
  if (!start_after.empty()) query.push_back({"start-after", base + std::string(start_after)});
  Response response;
  if (auto s = perform(call, "GET", "", query, {}, {}, options, response); !s.is_ok()) return s;
  if (auto s = s3::classify_response(call, response.status, response.body); !s.is_ok()) return s;
  auto page = s3::parse_list_result(response.body);
  if (!page.is_ok()) {
    // A cut or garbled answer: asking again may get a whole one.
    return Status::transient(fmt::format("s3 list '{}' ({}): HTTP {}: {}", prefix, describe_,
                                         response.status, page.status().message()));
  }
  ListResult result;
  result.truncated = page->truncated;
  for (auto& full : page->keys) {
    if (!full.starts_with(base)) {
      return Status::permanent(fmt::format("s3 list '{}' ({}): key '{}' is outside the prefix",
                                           prefix, describe_, full));
    }
    result.keys.push_back(full.substr(base.size()));
  }
  result.objects = std::move(page->objects);
  if (max_keys == 0) {
    result.truncated = !result.keys.empty() || result.truncated;
    result.keys.clear();
    result.objects.clear();
  }
  if (result.keys.size() > max_keys) {
    return Status::permanent(fmt::format("s3 list '{}' ({}): {} keys for max-keys {}", prefix,
                                         describe_, result.keys.size(), max_keys));
  }
  return result;
}

Status S3ObjectStore::create_bucket(const RequestOptions& options) {
  const s3::Call call{s3::Operation::kCreateBucket, PutMode::kOverwrite, options_.bucket,
                      describe_};
  std::string body;
  if (options_.region != "us-east-1") {
    body = fmt::format(
        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<LocationConstraint>{}</LocationConstraint></CreateBucketConfiguration>",
        options_.region);
  }
  Response response;
  if (auto s = perform(call, "PUT", "", {}, {}, body, options, response); !s.is_ok()) return s;
  return s3::classify_response(call, response.status, response.body);
}

}  // namespace dex
