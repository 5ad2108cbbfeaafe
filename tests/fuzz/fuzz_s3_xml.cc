// S3 response bodies (src/objstore/s3_response.h): the hand-written XML reader,
// <Error> documents, ListBucketResult pages and the classification of a
// response, on whatever body a server (or something in between) sends. Each
// answers a value or Corruption, never an exception, and within its limits.
// A document the reader accepts is written back out by a tiny serializer here
// and must read back to the same tree.
//
// Input: selector byte (operation, put mode, HTTP status) | response body.
#include <array>

#include "fuzz_targets.h"
#include "fuzz_util.h"
#include "objstore/s3_response.h"

namespace dex::fuzz {
namespace {

using s3::XmlElement;

// Names that read back as themselves: the reader keeps the part after the first
// ':', and a name starting with '!' or '?' is a declaration or an instruction.
bool plain_names(const XmlElement& e) {
  if (e.name.empty() || e.name.front() == '!' || e.name.front() == '?' ||
      e.name.find(':') != std::string::npos) {
    return false;
  }
  for (const auto& c : e.children) {
    if (!plain_names(c)) return false;
  }
  return true;
}

// The element's text first, then its children: the reader concatenates an
// element's character data, so this reads back to the same tree.
void write_xml(const XmlElement& e, std::string& out) {
  out += '<' + e.name + '>';
  for (char c : e.text) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  for (const auto& c : e.children) write_xml(c, out);
  out += "</" + e.name + '>';
}

bool same_tree(const XmlElement& a, const XmlElement& b) {
  if (a.name != b.name || a.text != b.text || a.children.size() != b.children.size()) return false;
  for (size_t i = 0; i < a.children.size(); ++i) {
    if (!same_tree(a.children[i], b.children[i])) return false;
  }
  return true;
}

void measure(const XmlElement& e, size_t depth, size_t& elements, size_t& depth_max) {
  ++elements;
  depth_max = std::max(depth_max, depth);
  for (const auto& c : e.children) measure(c, depth + 1, elements, depth_max);
}

constexpr std::array<long, 16> kStatuses = {200, 204, 206, 301, 400, 403, 404, 405,
                                            408, 409, 412, 429, 500, 503, 0,   999};

}  // namespace

int s3_xml(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const std::string_view body = as_view(data + 1, size - 1);

  auto root = s3::parse_xml(body);
  if (!root.is_ok()) {
    FUZZ_CHECK(root.status().is_corruption(), "{}", root.status().to_string());
  } else {
    size_t elements = 0, depth = 0;
    measure(root.value(), 1, elements, depth);
    const s3::XmlLimits defaults;
    FUZZ_CHECK(elements <= defaults.elements_max && depth <= defaults.depth_max,
               "{} elements, depth {}", elements, depth);
    if (plain_names(root.value())) {
      std::string written;
      write_xml(root.value(), written);
      auto reread = s3::parse_xml(written);
      FUZZ_CHECK(reread.is_ok(), "the written document does not read: {}",
                 reread.status().to_string());
      FUZZ_CHECK(same_tree(reread.value(), root.value()), "the written document reads differently");
    }
  }

  // Tight limits: refused with Corruption, or the same tree as without them.
  const s3::XmlLimits tight{body.size() / 2 + 16, 3, 8};
  auto small = s3::parse_xml(body, tight);
  if (small.is_ok()) {
    FUZZ_CHECK(root.is_ok() && same_tree(small.value(), root.value()),
               "tight limits accept what the defaults refuse");
    size_t elements = 0, depth = 0;
    measure(small.value(), 1, elements, depth);
    FUZZ_CHECK(elements <= tight.elements_max && depth <= tight.depth_max,
               "over the tight limits: {} elements, depth {}", elements, depth);
  } else {
    FUZZ_CHECK(small.status().is_corruption(), "{}", small.status().to_string());
  }

  const s3::S3Error error = s3::parse_error(body);
  if (!error.code.empty()) {
    FUZZ_CHECK(root.is_ok() && root->name == "Error" && root->child_text("Code") == error.code,
               "an error code '{}' from a document that is not an <Error>", error.code);
  }

  auto page = s3::parse_list_result(body);
  if (page.is_ok()) {
    FUZZ_CHECK(root.is_ok() && root->name == "ListBucketResult", "a list page from <{}>",
               root.is_ok() ? root->name : "?");
    size_t contents = 0;
    for (const auto& c : root->children) contents += c.name == "Contents" ? 1 : 0;
    FUZZ_CHECK(page->keys.size() == contents, "{} keys from {} <Contents>", page->keys.size(),
               contents);
  } else {
    FUZZ_CHECK(page.status().is_corruption(), "{}", page.status().to_string());
  }

  s3::Call call;
  call.op = static_cast<s3::Operation>(selector % 5);
  call.put_mode = (selector & 8) != 0 ? PutMode::kReplace : PutMode::kCreate;
  call.key = "nodes/n1/lease";
  call.store = "s3://bucket/prefix at http://127.0.0.1:9000";
  const long http_status = kStatuses[selector >> 4];
  const Status s = s3::classify_response(call, http_status, body);
  const bool success = http_status >= 200 && http_status < 300;
  if (success && call.op == s3::Operation::kGet) {
    FUZZ_CHECK(s.is_ok(), "a GET's 2xx body classified as {}", s.to_string());
  }
  if (success && error.code.empty()) {
    FUZZ_CHECK(s.is_ok(), "a 2xx without an error code classified as {}", s.to_string());
  }
  if (!s.is_ok()) {
    FUZZ_CHECK(s.message().find(std::string(s3::operation_name(call.op))) != std::string::npos &&
                   s.message().find(call.key) != std::string::npos,
               "the message does not name the operation and key: {}", s.message());
  }
  // Only codes curl has (0..63 are all defined): the code comes from curl, not
  // from the bytes, and a CURLcode outside the enum is UB in the caller.
  const Status t = s3::classify_transport(call, selector & 0x3f, body.substr(0, 64), 1000);
  FUZZ_CHECK(t.is_transient() || t.is_permanent(), "{}", t.to_string());
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(s3_xml)
