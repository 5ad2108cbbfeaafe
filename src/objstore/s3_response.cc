#include "objstore/s3_response.h"

#include <curl/curl.h>

#include <cstdint>

#include <fmt/format.h>

namespace dex::s3 {

const XmlElement* XmlElement::child(std::string_view child_name) const {
  for (const auto& c : children) {
    if (c.name == child_name) return &c;
  }
  return nullptr;
}

std::string XmlElement::child_text(std::string_view child_name) const {
  const XmlElement* c = child(child_name);
  return c ? c->text : std::string();
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// A recursive-descent reader over one document. Recursion depth is bounded by
// limits.depth_max, work by the input size, memory by elements_max.
class XmlReader {
 public:
  XmlReader(std::string_view doc, const XmlLimits& limits) : doc_(doc), limits_(limits) {}

  StatusOr<XmlElement> document() {
    if (doc_.size() > limits_.bytes_max) {
      return fail(fmt::format("document of {} bytes, at most {}", doc_.size(), limits_.bytes_max));
    }
    if (doc_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // UTF-8 byte order mark
    if (auto s = skip_misc(); !s.is_ok()) return s;
    if (pos_ >= doc_.size() || doc_[pos_] != '<') return fail("no root element");
    XmlElement root;
    if (auto s = element(root, 1); !s.is_ok()) return s;
    if (auto s = skip_misc(); !s.is_ok()) return s;
    if (pos_ != doc_.size()) return fail("content after the root element");
    return root;
  }

 private:
  Status fail(std::string_view what) const {
    return Status::corruption(fmt::format("malformed XML at byte {}: {}", pos_, what));
  }
  bool starts(std::string_view s) const { return doc_.substr(pos_, s.size()) == s; }
  void skip_spaces() {
    while (pos_ < doc_.size() && is_space(doc_[pos_])) ++pos_;
  }
  // Skips past `terminator`; fails if it never comes.
  Status skip_past(std::string_view terminator, std::string_view what) {
    const size_t end = doc_.find(terminator, pos_);
    if (end == std::string_view::npos) return fail(fmt::format("unterminated {}", what));
    pos_ = end + terminator.size();
    return Status::ok();
  }
  // Whitespace, comments and processing instructions (the prolog and epilog).
  Status skip_misc() {
    for (;;) {
      skip_spaces();
      if (starts("<?")) {
        if (auto s = skip_past("?>", "processing instruction"); !s.is_ok()) return s;
      } else if (starts("<!--")) {
        if (auto s = skip_past("-->", "comment"); !s.is_ok()) return s;
      } else if (starts("<!")) {
        return fail("DOCTYPE and declarations are not supported");
      } else {
        return Status::ok();
      }
    }
  }
  std::string_view name() {
    const size_t start = pos_;
    while (pos_ < doc_.size() && !is_space(doc_[pos_]) && doc_[pos_] != '>' && doc_[pos_] != '/' &&
           doc_[pos_] != '<' && doc_[pos_] != '=') {
      ++pos_;
    }
    return doc_.substr(start, pos_ - start);
  }
  static std::string_view local(std::string_view qualified) {
    const size_t colon = qualified.find(':');
    return colon == std::string_view::npos ? qualified : qualified.substr(colon + 1);
  }
  // Decodes character data up to the next '<' into `out`.
  Status text(std::string& out) {
    while (pos_ < doc_.size() && doc_[pos_] != '<') {
      const char c = doc_[pos_];
      if (c != '&') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      const size_t semi = doc_.find(';', pos_);
      if (semi == std::string_view::npos || semi - pos_ > 12) return fail("bad entity reference");
      const std::string_view entity = doc_.substr(pos_ + 1, semi - pos_ - 1);
      if (entity == "lt") {
        out.push_back('<');
      } else if (entity == "gt") {
        out.push_back('>');
      } else if (entity == "amp") {
        out.push_back('&');
      } else if (entity == "quot") {
        out.push_back('"');
      } else if (entity == "apos") {
        out.push_back('\'');
      } else if (entity.size() >= 2 && entity[0] == '#') {
        const bool hex = entity[1] == 'x' || entity[1] == 'X';
        const std::string_view digits = entity.substr(hex ? 2 : 1);
        if (digits.empty()) return fail("empty character reference");
        uint32_t cp = 0;
        for (char d : digits) {
          uint32_t v;
          if (d >= '0' && d <= '9') {
            v = static_cast<uint32_t>(d - '0');
          } else if (hex && d >= 'a' && d <= 'f') {
            v = static_cast<uint32_t>(d - 'a' + 10);
          } else if (hex && d >= 'A' && d <= 'F') {
            v = static_cast<uint32_t>(d - 'A' + 10);
          } else {
            return fail("bad character reference");
          }
          cp = cp * (hex ? 16 : 10) + v;
          if (cp > 0x10ffff) return fail("character reference out of range");
        }
        append_utf8(out, cp);
      } else {
        return fail(fmt::format("unknown entity '&{};'", entity));
      }
      pos_ = semi + 1;
    }
    return Status::ok();
  }
  // Reads the element that starts at pos_ ('<') into `out`.
  Status element(XmlElement& out, size_t depth) {
    if (depth > limits_.depth_max)
      return fail(fmt::format("nested deeper than {}", limits_.depth_max));
    if (++elements_ > limits_.elements_max) {
      return fail(fmt::format("more than {} elements", limits_.elements_max));
    }
    ++pos_;  // '<'
    const std::string_view qualified = name();
    if (qualified.empty()) return fail("element without a name");
    out.name = std::string(local(qualified));
    // Attributes are skipped (S3 sends only xmlns), minding quoted values.
    for (;;) {
      if (pos_ >= doc_.size()) return fail("unterminated start tag");
      const char c = doc_[pos_];
      if (c == '"' || c == '\'') {
        const size_t close = doc_.find(c, pos_ + 1);
        if (close == std::string_view::npos) return fail("unterminated attribute value");
        pos_ = close + 1;
      } else if (c == '>') {
        ++pos_;
        break;
      } else if (c == '/' && starts("/>")) {
        pos_ += 2;
        return Status::ok();
      } else if (c == '<') {
        return fail("'<' inside a start tag");
      } else {
        ++pos_;
      }
    }
    // Content: text, comments, CDATA, child elements, then the end tag.
    for (;;) {
      if (auto s = text(out.text); !s.is_ok()) return s;
      if (pos_ >= doc_.size()) return fail(fmt::format("unterminated element <{}>", out.name));
      if (starts("</")) {
        pos_ += 2;
        const std::string_view end_name = name();
        if (end_name != qualified) {
          return fail(fmt::format("</{}> closes <{}>", end_name, qualified));
        }
        skip_spaces();
        if (pos_ >= doc_.size() || doc_[pos_] != '>') return fail("unterminated end tag");
        ++pos_;
        return Status::ok();
      }
      if (starts("<!--")) {
        if (auto s = skip_past("-->", "comment"); !s.is_ok()) return s;
      } else if (starts("<![CDATA[")) {
        pos_ += 9;
        const size_t end = doc_.find("]]>", pos_);
        if (end == std::string_view::npos) return fail("unterminated CDATA section");
        out.text.append(doc_.substr(pos_, end - pos_));
        pos_ = end + 3;
      } else if (starts("<?")) {
        if (auto s = skip_past("?>", "processing instruction"); !s.is_ok()) return s;
      } else if (starts("<!")) {
        return fail("declaration inside an element");
      } else {
        out.children.emplace_back();
        if (auto s = element(out.children.back(), depth + 1); !s.is_ok()) return s;
      }
    }
  }

  const std::string_view doc_;
  const XmlLimits limits_;
  size_t pos_ = 0;
  size_t elements_ = 0;
};

// A body worth quoting in a message: short and printable.
std::string snippet(std::string_view body) {
  constexpr size_t kSnippetBytesMax = 200;
  std::string out;
  for (char c : body.substr(0, kSnippetBytesMax)) {
    out.push_back(c >= 0x20 && c < 0x7f ? c : ' ');
  }
  if (body.size() > kSnippetBytesMax) out += "...";
  return out;
}

bool is_success(long http_status) { return http_status >= 200 && http_status < 300; }

// True if `body` is (after any prolog) an <Error> document: cheap check before parsing.
bool looks_like_error(std::string_view body) {
  constexpr size_t kPrologBytesMax = 512;
  const size_t at = body.substr(0, kPrologBytesMax).find("<Error");
  return at != std::string_view::npos;
}

}  // namespace

StatusOr<XmlElement> parse_xml(std::string_view document, const XmlLimits& limits) {
  return XmlReader(document, limits).document();
}

S3Error parse_error(std::string_view body) {
  if (!looks_like_error(body)) return {};
  auto root = parse_xml(body);
  if (!root.is_ok() || root->name != "Error") return {};
  return S3Error{root->child_text("Code"), root->child_text("Message")};
}

std::string_view operation_name(Operation op) {
  switch (op) {
    case Operation::kGet:
      return "get";
    case Operation::kPut:
      return "put";
    case Operation::kDelete:
      return "delete";
    case Operation::kList:
      return "list";
    case Operation::kCreateBucket:
      return "create bucket";
  }
  return "?";
}

Status classify_response(const Call& call, long http_status, std::string_view body) {
  // A GET's 2xx body is the object itself, never an error document.
  if (is_success(http_status) && (call.op == Operation::kGet || !looks_like_error(body))) {
    return Status::ok();
  }
  const S3Error error = parse_error(body);
  std::string what = fmt::format("s3 {} '{}' ({}): HTTP {}", operation_name(call.op), call.key,
                                 call.store, http_status);
  if (!error.code.empty()) {
    what += " " + error.code;
    if (!error.message.empty()) what += ": " + error.message;
  } else if (!body.empty() && !is_success(http_status)) {
    what += ": " + snippet(body);
  }
  if (is_success(http_status)) {
    if (error.code.empty()) return Status::ok();  // "<Error" in some other document
    what += " (error document in a success response)";
  }
  const std::string& code = error.code;

  // By S3 error code first: it is more precise than the status.
  if (code == "NoSuchBucket") return Status::permanent(std::move(what));
  if (code == "PreconditionFailed") return Status::precondition_failed(std::move(what));
  if (code == "NoSuchKey") {
    if (call.op == Operation::kGet) return Status::not_found(std::move(what));
    if (call.op == Operation::kPut && call.put_mode == PutMode::kReplace) {
      return Status::precondition_failed(std::move(what));
    }
    if (call.op == Operation::kDelete) return Status::ok();
    return Status::permanent(std::move(what));
  }
  if (code == "BucketAlreadyOwnedByYou" && call.op == Operation::kCreateBucket) return Status::ok();
  if (code == "ConditionalRequestConflict") {
    // S3 answers it (409) when a conditional write races another write of the key still in
    // progress: not a refusal, since which one wins is not known yet. Asking again gets the real
    // answer (success, or 412 if the other landed), so it is retried like any transient error.
    what += " (a conflicting write of the key is in progress)";
    return Status::transient(std::move(what));
  }
  if (code == "SlowDown" || code == "ServiceUnavailable" || code == "InternalError" ||
      code == "RequestTimeout" || code == "OperationAborted" ||
      code == "XMinioServerNotInitialized" || code == "XMinioReadQuorum" ||
      code == "XMinioWriteQuorum") {
    return Status::transient(std::move(what));
  }

  // Then by HTTP status.
  if (http_status == 412) return Status::precondition_failed(std::move(what));
  if (http_status == 404) {
    if (call.op == Operation::kGet && code.empty()) return Status::not_found(std::move(what));
    if (call.op == Operation::kPut && call.put_mode == PutMode::kReplace && code.empty()) {
      return Status::precondition_failed(std::move(what));
    }
    if (call.op == Operation::kDelete && code.empty()) return Status::ok();
    return Status::permanent(std::move(what));
  }
  if (http_status == 409) {
    if (call.op == Operation::kCreateBucket) return Status::permanent(std::move(what));
    return Status::transient(std::move(what));
  }
  if (http_status == 429 || http_status == 408 || http_status >= 500) {
    return Status::transient(std::move(what));
  }
  if (is_success(http_status)) return Status::transient(std::move(what));  // unknown code in a 200
  return Status::permanent(std::move(what));  // 403, 400, 405, 3xx, ...
}

Status classify_transport(const Call& call, int curl_code, std::string_view detail,
                          long timeout_ms) {
  const auto code = static_cast<CURLcode>(curl_code);
  std::string what = fmt::format("s3 {} '{}' ({}): curl error {} ({}){}{}", operation_name(call.op),
                                 call.key, call.store, curl_code, curl_easy_strerror(code),
                                 detail.empty() ? "" : ": ", detail);
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      what += fmt::format("; timed out after {} ms, a write may still land", timeout_ms);
      return Status::transient(std::move(what));
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_AGAIN:
    case CURLE_OUT_OF_MEMORY:
      return Status::transient(std::move(what));
    default:
      // URL, protocol, TLS certificate and option errors: retrying will not help.
      return Status::permanent(std::move(what));
  }
}

namespace {

// A whole unsigned decimal of at most 18 digits.
std::optional<uint64_t> parse_decimal(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// Days from 1970-01-01 to the civil date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

}  // namespace

std::optional<int64_t> parse_iso8601_utc_ms(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fff...]Z
  if (text.size() < 20 || text.back() != 'Z' || text[4] != '-' || text[7] != '-' ||
      text[10] != 'T' || text[13] != ':' || text[16] != ':')
    return std::nullopt;
  auto field = [&](size_t at, size_t n) { return parse_decimal(text.substr(at, n)); };
  const auto y = field(0, 4), mo = field(5, 2), d = field(8, 2), h = field(11, 2),
             mi = field(14, 2), sec = field(17, 2);
  if (!y || !mo || !d || !h || !mi || !sec || *mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 ||
      *mi > 59 || *sec > 60)
    return std::nullopt;
  int64_t ms = 0;
  const std::string_view rest = text.substr(19, text.size() - 20);
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2) return std::nullopt;
    const auto frac = parse_decimal(rest.substr(1, std::min<size_t>(3, rest.size() - 1)));
    if (!frac || !parse_decimal(rest.substr(1))) return std::nullopt;
    ms = static_cast<int64_t>(*frac);
    for (size_t n = rest.size() - 1; n < 3; ++n) ms *= 10;  // ".5" is 500 ms
  }
  const int64_t days = days_from_civil(static_cast<int64_t>(*y), static_cast<int64_t>(*mo),
                                       static_cast<int64_t>(*d));
  return ((days * 24 + static_cast<int64_t>(*h)) * 60 + static_cast<int64_t>(*mi)) * 60'000 +
         static_cast<int64_t>(*sec) * 1000 + ms;
}

StatusOr<ListPage> parse_list_result(std::string_view body) {
  auto root = parse_xml(body);
  if (!root.is_ok()) return root.status();
  if (root->name != "ListBucketResult") {
    return Status::corruption(fmt::format("expected <ListBucketResult>, got <{}>", root->name));
  }
  ListPage page;
  for (const auto& c : root->children) {
    if (c.name != "Contents") continue;
    const XmlElement* key = c.child("Key");
    if (key == nullptr) return Status::corruption("<Contents> without <Key>");
    page.keys.push_back(key->text);
    ListedObject object;
    if (auto at = parse_iso8601_utc_ms(c.child_text("LastModified"))) object.modified_unix_ms = *at;
    if (auto size = parse_decimal(c.child_text("Size"))) object.size_bytes = *size;
    page.objects.push_back(object);
  }
  const std::string truncated = root->child_text("IsTruncated");
  if (truncated != "true" && truncated != "false") {
    return Status::corruption(fmt::format("<IsTruncated> is '{}'", snippet(truncated)));
  }
  page.truncated = truncated == "true";
  return page;
}

}  // namespace dex::s3
