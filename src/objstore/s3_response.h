// What an S3 response means: a small, bounded XML reader for the few S3
// documents dex reads (Error, ListBucketResult) and the classification of every
// outcome into dex's status codes. Separate from the HTTP client so that it is
// unit-tested on canned responses (tests/objstore/s3_response_test.cc).
//
// The XML reader is hand-written on purpose: libxml2 is not a dependency, and
// S3's documents use a handful of plain elements (no DTDs, no namespaces
// prefixes, no mixed content). It handles the prolog, comments, processing
// instructions, CDATA, attributes (skipped), the five predefined entities and
// numeric character references; it refuses DOCTYPE, and bounds input size,
// nesting depth and element count.
//
// Classification (docs: issue 4, "S3 backend"):
//  - 412, or an Error code PreconditionFailed            → PreconditionFailed
//  - 404 NoSuchKey on a put with If-Match (kReplace)      → PreconditionFailed
//  - 404 on get (NoSuchKey)                               → NotFound
//  - 404 NoSuchKey on delete                              → ok (DELETE is idempotent)
//  - NoSuchBucket (any status), 403, other 4xx            → Permanent
//  - 409 (ConditionalRequestConflict, OperationAborted),
//    5xx, 429, SlowDown, RequestTimeout                   → Transient
//  - an <Error> document in the body of a 2xx (not of a GET, whose body is the
//    object): classified by its code, unknown codes → Transient
//  - transport failures: timeouts, refused/reset connections, truncated
//    transfers, DNS → Transient; TLS certificate and URL errors → Permanent.
// Every message names the operation, the key, the HTTP status and S3's error
// code, and the store (describe(): bucket, prefix, endpoint; never credentials).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "objstore/object_store.h"

namespace dex::s3 {

struct XmlElement {
  std::string name;  // local name: a "p:" namespace prefix is dropped
  std::string text;  // the element's own character data, entities decoded
  std::vector<XmlElement> children;

  // The first child called `child_name`, or nullptr.
  const XmlElement* child(std::string_view child_name) const;
  // The text of the first child called `child_name`, or "".
  std::string child_text(std::string_view child_name) const;
};

struct XmlLimits {
  size_t bytes_max = 64u << 20;
  size_t depth_max = 32;
  size_t elements_max = 200'000;
};

// The document's root element, or Corruption naming what is wrong and where.
StatusOr<XmlElement> parse_xml(std::string_view document, const XmlLimits& limits = {});

struct S3Error {
  std::string code;     // "NoSuchKey"; empty if the body had no <Error>
  std::string message;  // S3's human-readable message
};

// The <Error> document in `body`, if it is one; otherwise an empty S3Error.
S3Error parse_error(std::string_view body);

enum class Operation { kGet, kPut, kDelete, kList, kCreateBucket };
std::string_view operation_name(Operation op);

// One request, for classification and messages.
struct Call {
  Operation op = Operation::kGet;
  PutMode put_mode = PutMode::kOverwrite;  // for kPut
  std::string_view key;                    // the caller's key (or list prefix)
  std::string_view store;                  // describe() of the store
};

// The status of a response that arrived: ok for a success without an error
// document (the caller then reads the body), otherwise classified as above.
Status classify_response(const Call& call, long http_status, std::string_view body);

// The status of a transfer that failed before a whole response arrived.
// `curl_code` is a CURLcode; `detail` curl's error buffer.
Status classify_transport(const Call& call, int curl_code, std::string_view detail,
                          long timeout_ms);

struct ListPage {
  std::vector<std::string> keys;      // full object keys, as S3 returned them
  std::vector<ListedObject> objects;  // one per key: LastModified (-1 when absent or not
                                      // ISO 8601 UTC) and Size (0 when absent)
  bool truncated = false;
};

// "2026-01-01T00:00:00.000Z" (S3's LastModified; the fraction optional) as
// Unix ms; nullopt for anything else.
std::optional<int64_t> parse_iso8601_utc_ms(std::string_view text);

// A ListObjectsV2 result (<ListBucketResult>). Corruption if the document is not one.
StatusOr<ListPage> parse_list_result(std::string_view body);

}  // namespace dex::s3
